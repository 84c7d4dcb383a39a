//! The bench's report: latency percentiles, the text and JSON forms.

use super::*;

/// The figures of one run.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// `api` or `simulate`.
    pub mode: String,
    /// `pairs` or `claims`.
    pub workload: String,
    /// Human description of the workload.
    pub description: String,
    /// Claims created.
    pub n: usize,
    /// Claims seen Bound.
    pub bound: usize,
    /// Run id (the value of the run label); empty in simulate mode.
    pub run: String,
    /// API mode: first create request to last claim Bound. Simulate: load plus run to quiescence.
    pub wall_seconds: f64,
    /// API mode: time to send every create request.
    pub create_seconds: Option<f64>,
    /// Simulate: time to build the workload and load it into the store.
    pub load_seconds: Option<f64>,
    /// Median time to Bound, milliseconds.
    pub p50_ms: Option<f64>,
    /// 99th percentile time to Bound, milliseconds.
    pub p99_ms: Option<f64>,
    /// Slowest time to Bound, milliseconds.
    pub max_ms: Option<f64>,
    /// Claims bound per second of wall time.
    pub binds_per_second: f64,
    /// Simulate: peak resident set of the process (VmHWM), bytes.
    pub peak_rss_bytes: Option<u64>,
    /// Simulate: (peak RSS - RSS before the workload) / objects (PVs, claims, classes).
    pub rss_bytes_per_object: Option<f64>,
    /// API mode: time to delete what the run created (absent with --keep).
    pub cleanup_seconds: Option<f64>,
    /// How to read the latency figures.
    pub note: Option<String>,
    /// Every claim seen Bound, in creation order: what `--plot` and `--plot-data` draw.
    #[serde(skip)]
    pub claims: Vec<ClaimTime>,
}

/// One claim seen Bound: when its creation was requested and how long it then took to be Bound.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClaimTime {
    /// Since the run's start (for a pair, to the later of its two create requests).
    pub created: Duration,
    /// Time to Bound.
    pub to_bound: Duration,
}

/// Nearest-rank percentile of sorted durations (`p` in 0..=100).
pub fn percentile(sorted: &[Duration], p: f64) -> Option<Duration> {
    if sorted.is_empty() {
        return None;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted.get(rank.clamp(1, sorted.len()) - 1).copied()
}

/// Fills the latency fields from the claims seen Bound, and keeps them in creation order.
pub fn fill_latencies(r: &mut Report, mut claims: Vec<ClaimTime>) {
    claims.sort_by_key(|c| c.created);
    let mut latencies: Vec<Duration> = claims.iter().map(|c| c.to_bound).collect();
    latencies.sort();
    let ms = |d: Option<Duration>| d.map(|d| d.as_secs_f64() * 1e3);
    r.bound = latencies.len();
    r.p50_ms = ms(percentile(&latencies, 50.0));
    r.p99_ms = ms(percentile(&latencies, 99.0));
    r.max_ms = ms(latencies.last().copied());
    r.claims = claims;
}

pub(super) fn human_ms(ms: Option<f64>) -> String {
    match ms {
        None => "-".into(),
        Some(v) if v >= 10_000.0 => format!("{:.1} s", v / 1e3),
        Some(v) if v >= 1_000.0 => format!("{:.2} s", v / 1e3),
        Some(v) if v >= 10.0 => format!("{v:.0} ms"),
        Some(v) => format!("{v:.2} ms"),
    }
}

pub(super) fn human_bytes(b: f64) -> String {
    if b >= 1024.0 * 1024.0 {
        format!("{:.1} MiB", b / (1024.0 * 1024.0))
    } else if b >= 1024.0 {
        format!("{:.2} KiB", b / 1024.0)
    } else {
        format!("{b:.0} B")
    }
}

/// The table printed by default.
pub fn format_text(r: &Report) -> String {
    let mut rows: Vec<(&str, String)> = vec![
        ("N (claims)", r.n.to_string()),
        ("bound", format!("{} / {}", r.bound, r.n)),
        ("wall time", format!("{:.3} s", r.wall_seconds)),
    ];
    if let Some(s) = r.load_seconds {
        rows.push(("  of which load", format!("{s:.3} s")));
    }
    if let Some(s) = r.create_seconds {
        rows.push(("  creates sent in", format!("{s:.3} s")));
    }
    rows.push(("time to Bound p50", human_ms(r.p50_ms)));
    rows.push(("time to Bound p99", human_ms(r.p99_ms)));
    rows.push(("time to Bound max", human_ms(r.max_ms)));
    rows.push(("binds/s", format!("{:.1}", r.binds_per_second)));
    if let Some(b) = r.peak_rss_bytes {
        rows.push(("peak RSS", human_bytes(b as f64)));
    }
    if let Some(b) = r.rss_bytes_per_object {
        rows.push(("RSS per object", human_bytes(b)));
    }
    if let Some(s) = r.cleanup_seconds {
        rows.push(("cleanup", format!("{s:.3} s")));
    }
    let mut out = format!("bench ({}): {}", r.mode, r.description);
    if !r.run.is_empty() {
        out.push_str(&format!(", run {}={}", RUN_LABEL, r.run));
    }
    out.push('\n');
    for (k, v) in rows {
        out.push_str(&format!("  {k:<19} {v}\n"));
    }
    if let Some(n) = &r.note {
        out.push_str(&format!("  note: {n}\n"));
    }
    out
}

/// How to read the latency figures of a run against a server.
pub fn latency_note(w: &Workload) -> &'static str {
    match w {
        Workload::Pairs(_) => {
            "time to Bound: from just before the later create request of a pair to the watch showing Bound"
        }
        Workload::Claims { .. } => {
            "time to Bound: from just before the claim's create request to the watch showing it Bound (provisioning included)"
        }
    }
}

/// One progress line: what has been created and bound so far, and the rate since the start.
pub fn progress_line(created: usize, bound: usize, n: usize, elapsed: Duration) -> String {
    let rate = bound as f64 / elapsed.as_secs_f64().max(1e-9);
    format!("created {created}/{n} claims, bound {bound}/{n}, {rate:.1} binds/s, {:.0} s", elapsed.as_secs_f64())
}
