//! `pv-controller bench`: a load generator that measures how fast claims become Bound.
//!
//! Why it exists: upstream's controller took minutes to bind 10,000 static pairs
//! (kubernetes/kubernetes#133352) and plateaus near 30 claims/s (#140721). Claims about doing
//! better must be checkable by any operator, on their own cluster or on `up`, with one command.
//! So this command does what a user would do — create volumes and claims through the API — and
//! measures what a user would see: per claim, the time from the create request to the moment a
//! watch shows `status.phase: Bound`.
//!
//! Two modes share one workload and one report:
//! - against an API server (`--kubeconfig`/`--context`, the same client setup as `run`): objects
//!   are created with bounded concurrency (`--concurrency`, default 32) and an optional rate
//!   (`--rate`, objects/s over PVs and claims together), each carrying a unique run label so that
//!   the watch, the cleanup and concurrent runs never touch anything else; claims are created
//!   once every PV is Available (else a claim may take a larger volume and leave the last claim
//!   of that size with none, as upstream would too); a claim's time to
//!   Bound counts from just before the later of its pair's two create requests is sent (the
//!   claim's, unless `--claims-first` creates the PVs last), so latency includes that request;
//! - `--simulate`: the same workload loaded into the in-process simulated API server
//!   (`pv_sim::Simulation`, virtual clock, no I/O), to measure the controller alone; it also
//!   reports the peak RSS of the process. Every claim exists when the run starts, so a claim's
//!   time-to-Bound there is the wall time since the start at which a watch on the store saw it
//!   Bound.
//!
//! Cleanup deletes claims first, then the PVs the bench created (static PVs have the Retain
//! policy: deleting their claims only releases them). For `--claims`, provisioned volumes whose
//! class retains them are deleted too. The namespace is left in place: deleting it would make an
//! immediate re-run wait for its termination.

use super::user;
use clap::Args;
use futures_util::StreamExt;
use k8s_openapi::api::core::v1::{
    Event as CoreEvent, Namespace, ObjectReference, PersistentVolume, PersistentVolumeClaim,
};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{Api, DeleteParams, PostParams};
use kube::runtime::watcher::{self, watcher, Event};
use kube::runtime::WatchStreamExt;
use kube::Client;
use pv_kube::connect::{self, ClientOptions};
use serde::Serialize;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::future::Future;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

/// Label put on every object a run creates; its value is the run id.
pub const RUN_LABEL: &str = "bench.pv-controller.io/run";

/// Timeout of the preflight check and of the initial watch list.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(15);

/// Output format.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// A table for people.
    Text,
    /// One JSON object.
    Json,
}

/// Flags of `bench`.
#[derive(Args, Debug)]
pub struct BenchArgs {
    /// Kubeconfig file (default: KUBECONFIG, then ~/.kube/config, then in-cluster).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// Kubeconfig context to use (default: the current context).
    #[arg(long)]
    pub context: Option<String>,
    /// Kubeconfig cluster to use (default: the context's).
    #[arg(long)]
    pub cluster: Option<String>,
    /// Kubeconfig user to use (default: the context's).
    #[arg(long)]
    pub user: Option<String>,
    /// N static pairs: PVs with distinct NFS paths and class "", and claims of matching size.
    #[arg(long, value_name = "N")]
    pub pairs: Option<usize>,
    /// N claims of the provisioning class given by --class.
    #[arg(long, value_name = "N")]
    pub claims: Option<usize>,
    /// StorageClass of the --claims workload (with --simulate: default `bench`, host-path).
    #[arg(long, value_name = "NAME")]
    pub class: Option<String>,
    /// Objects created per second, PVs and claims together (0: as fast as possible).
    #[arg(long, default_value_t = 0.0)]
    pub rate: f64,
    /// Create requests in flight at once.
    #[arg(long, default_value_t = 32)]
    pub concurrency: usize,
    /// Namespace of the claims (created if missing, never deleted).
    #[arg(long, default_value = "pv-bench")]
    pub namespace: String,
    /// Output format.
    #[arg(short, long, value_enum, default_value = "text")]
    pub output: Format,
    /// With --pairs: create the claims first, then the PVs (time to Bound then counts from the
    /// PV's create request: a volume that appears after its claim).
    #[arg(long)]
    pub claims_first: bool,
    /// Leave the created objects in place.
    #[arg(long)]
    pub keep: bool,
    /// Run the workload in-process on the simulated API server instead of against a server.
    #[arg(long)]
    pub simulate: bool,
    /// With --pairs: bind each pair itself with the four writes a controller makes per bind (PV
    /// claimRef, PV status, claim volumeName, claim status) and no decision at all, so that the
    /// run measures the API server's ceiling for binding. No controller may run meanwhile.
    #[arg(long)]
    pub bind_itself: bool,
    /// Give up waiting for claims to become Bound after this long (e.g. 90s, 15m).
    #[arg(long, default_value = "15m", value_parser = super::run::parse_duration)]
    pub timeout: Duration,
}

/// What to create.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Workload {
    /// N static PV/PVC pairs.
    Pairs(usize),
    /// N claims of a provisioning class.
    Claims {
        /// Number of claims.
        n: usize,
        /// Their StorageClass.
        class: String,
    },
}

impl Workload {
    /// Checks the flags and picks the workload; the error is the message for the user.
    pub fn from_args(a: &BenchArgs) -> Result<Self, String> {
        if !(a.rate.is_finite() && a.rate >= 0.0) {
            return Err(format!("--rate {}: must be a number of objects per second, 0 or more", a.rate));
        }
        if a.concurrency == 0 {
            return Err("--concurrency: must be at least 1".into());
        }
        if !is_dns_label(&a.namespace) {
            return Err(format!(
                "--namespace {:?}: not a valid namespace name (lowercase letters, digits and '-', at most 63)",
                a.namespace
            ));
        }
        if a.claims_first && (a.simulate || a.pairs.is_none()) {
            return Err("--claims-first applies to --pairs against a server only".into());
        }
        if a.bind_itself && (a.simulate || a.pairs.is_none() || a.claims_first) {
            return Err("--bind-itself applies to --pairs against a server, PVs first".into());
        }
        if a.simulate && (a.kubeconfig.is_some() || a.context.is_some()) {
            return Err("--simulate runs in-process: --kubeconfig and --context do not apply".into());
        }
        let w = match (a.pairs, a.claims) {
            (Some(_), Some(_)) => return Err("give either --pairs N or --claims N, not both".into()),
            (None, None) => return Err("give --pairs N (static pairs) or --claims N --class NAME".into()),
            (Some(n), None) => {
                if a.class.is_some() {
                    return Err("--class applies to --claims only (static pairs use class \"\")".into());
                }
                Workload::Pairs(n)
            }
            (None, Some(n)) => match (&a.class, a.simulate) {
                (Some(c), _) if c.is_empty() => {
                    return Err("--class: must name a provisioning StorageClass; use --pairs for class \"\"".into())
                }
                (Some(c), _) => Workload::Claims { n, class: c.clone() },
                (None, true) => Workload::Claims { n, class: "bench".into() },
                (None, false) => return Err("--claims needs --class NAME (a StorageClass that provisions)".into()),
            },
        };
        if w.claims() == 0 {
            return Err("the number of objects must be at least 1".into());
        }
        Ok(w)
    }

    /// Number of claims.
    pub fn claims(&self) -> usize {
        match self {
            Workload::Pairs(n) | Workload::Claims { n, .. } => *n,
        }
    }

    fn describe(&self) -> String {
        match self {
            Workload::Pairs(n) => format!("{n} static PV/PVC pairs"),
            Workload::Claims { n, class } => format!("{n} claims of class {class}"),
        }
    }

    fn kind(&self) -> &'static str {
        match self {
            Workload::Pairs(_) => "pairs",
            Workload::Claims { .. } => "claims",
        }
    }
}

fn is_dns_label(s: &str) -> bool {
    let ok = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    !s.is_empty()
        && s.len() <= 63
        && s.chars().all(|c| ok(c) || c == '-')
        && s.chars().next().is_some_and(ok)
        && s.chars().last().is_some_and(ok)
}

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
}

/// Nearest-rank percentile of sorted durations (`p` in 0..=100).
pub fn percentile(sorted: &[Duration], p: f64) -> Option<Duration> {
    if sorted.is_empty() {
        return None;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted.get(rank.clamp(1, sorted.len()) - 1).copied()
}

/// Fills the latency fields from per-claim times to Bound.
pub fn fill_latencies(r: &mut Report, mut latencies: Vec<Duration>) {
    latencies.sort();
    let ms = |d: Option<Duration>| d.map(|d| d.as_secs_f64() * 1e3);
    r.bound = latencies.len();
    r.p50_ms = ms(percentile(&latencies, 50.0));
    r.p99_ms = ms(percentile(&latencies, 99.0));
    r.max_ms = ms(latencies.last().copied());
}

fn human_ms(ms: Option<f64>) -> String {
    match ms {
        None => "-".into(),
        Some(v) if v >= 10_000.0 => format!("{:.1} s", v / 1e3),
        Some(v) if v >= 1_000.0 => format!("{:.2} s", v / 1e3),
        Some(v) if v >= 10.0 => format!("{v:.0} ms"),
        Some(v) => format!("{v:.2} ms"),
    }
}

fn human_bytes(b: f64) -> String {
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

/// Runs `bench`.
pub fn run(a: BenchArgs) -> anyhow::Result<ExitCode> {
    super::init_logging("error,kube_client=off", false);
    let workload = Workload::from_args(&a).map_err(user)?;
    let (report, failure) = if a.simulate {
        simulate(&workload)?
    } else {
        let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
        rt.block_on(against_server(&a, &workload))?
    };
    match a.output {
        Format::Text => print!("{}", format_text(&report)),
        Format::Json => println!("{}", serde_json::to_string_pretty(&report)?),
    }
    match failure {
        Some(f) => Err(user(f)),
        None => Ok(ExitCode::SUCCESS),
    }
}

/// A field of /proc/self/status in bytes (Linux only; `None` elsewhere).
fn proc_status_bytes(field: &str) -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with(field) && l[field.len()..].starts_with(':'))?;
    let kb: u64 = line[field.len() + 1..].trim().trim_end_matches("kB").trim().parse().ok()?;
    Some(kb * 1024)
}

fn is_bound(v: &Value) -> bool {
    v["status"]["phase"].as_str() == Some("Bound")
}

/// The in-process run: the workload on the simulated API server, per-claim Bound times taken
/// from a watch on the store read by a second thread (the driver itself is unchanged).
fn simulate(w: &Workload) -> anyhow::Result<(Report, Option<String>)> {
    let base_rss = proc_status_bytes("VmRSS");
    let t0 = Instant::now();
    let objects = match w {
        Workload::Pairs(n) => pv_sim::workload::static_pairs(*n),
        Workload::Claims { n, class } => {
            let mut objects = pv_sim::workload::provisioning(*n);
            for o in objects.iter_mut() {
                if o.resource.kind == "StorageClass" {
                    o.value["metadata"]["name"] = json!(class);
                } else {
                    o.value["spec"]["storageClassName"] = json!(class);
                }
            }
            objects
        }
    };
    let object_count = objects.len();
    let root = tempfile::tempdir()?;
    let mut sim = pv_sim::Simulation::new(objects, pv_plugins::registry(Some(root.path().into())), Default::default())
        .map_err(|e| anyhow::anyhow!("loading the workload: {e}"))?;
    let watch = sim.store().watch("persistentvolumeclaims", None, None)?;
    let load = t0.elapsed();
    let start = Instant::now();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let observer = std::thread::spawn(move || observe_store(watch, stop_rx, start));
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let outcome = rt.block_on(sim.run());
    let ran = start.elapsed();
    let _ = stop_tx.send(());
    let bound = observer.join().map_err(|_| anyhow::anyhow!("the watch thread failed"))??;
    let peak = proc_status_bytes("VmHWM");
    // The process ends soon: skip tearing down every cached object.
    std::mem::forget(sim);
    outcome.map_err(|e| user(e.to_string()))?;
    let wall = load + ran;
    let mut r = Report {
        mode: "simulate".into(),
        workload: w.kind().into(),
        description: w.describe(),
        n: w.claims(),
        wall_seconds: wall.as_secs_f64(),
        load_seconds: Some(load.as_secs_f64()),
        binds_per_second: bound.len() as f64 / wall.as_secs_f64().max(1e-9),
        peak_rss_bytes: peak,
        rss_bytes_per_object: peak.map(|p| p.saturating_sub(base_rss.unwrap_or(0)) as f64 / object_count as f64),
        note: Some("all claims exist when the run starts: time to Bound is the wall time since the start".into()),
        ..Default::default()
    };
    fill_latencies(&mut r, bound.into_values().collect());
    let failure = (r.bound < r.n).then(|| format!("only {} of {} claims became Bound", r.bound, r.n));
    Ok((r, failure))
}

/// Reads store watch events until told to stop, then drains what is left; returns, per claim,
/// when it was first seen Bound.
fn observe_store(
    mut watch: pv_store::Watcher,
    stop: tokio::sync::oneshot::Receiver<()>,
    start: Instant,
) -> anyhow::Result<HashMap<String, Duration>> {
    let rt = tokio::runtime::Builder::new_current_thread().build()?;
    Ok(rt.block_on(async move {
        let mut bound = HashMap::new();
        let mut note = |v: &Value| {
            if is_bound(v) {
                if let Some(name) = v["metadata"]["name"].as_str() {
                    bound.entry(name.to_string()).or_insert_with(|| start.elapsed());
                }
            }
        };
        tokio::pin!(stop);
        loop {
            tokio::select! {
                ev = watch.recv() => match ev {
                    Some(ev) => note(&ev.object),
                    None => break,
                },
                _ = &mut stop => {
                    while let Ok(ev) = watch.try_recv() {
                        note(&ev.object);
                    }
                    break;
                }
            }
        }
        bound
    }))
}

/// Hands out creation slots at `rate` per second (0: no pacing), shared by PVs and claims.
struct Pacer {
    start: Instant,
    rate: f64,
    next: AtomicU64,
}

impl Pacer {
    async fn wait(&self) {
        if self.rate > 0.0 {
            let slot = self.next.fetch_add(1, Ordering::Relaxed);
            tokio::time::sleep_until((self.start + Duration::from_secs_f64(slot as f64 / self.rate)).into()).await;
        }
    }
}

/// What the claim watch has seen.
#[derive(Default)]
struct Seen {
    bound: HashMap<String, Instant>,
    volumes: HashMap<String, String>,
    /// Claims whose Bound state only the backstop list saw.
    late: usize,
}

/// Waits until the controller has marked all `n` PVs of the run Available. Why: the controller
/// (like upstream) only matches Available volumes, so a claim created while a volume of its exact
/// size is still Pending takes the next larger one, and the last claim of the largest size is then
/// left with none: the workload would not be bindable.
async fn wait_available(api: &Api<PersistentVolume>, run: &str, n: usize, timeout: Duration) -> Result<(), String> {
    // A watch, not a polled list: listing every PV of the run ten times a second would load the
    // server being measured.
    let config = watcher::Config::default().labels(&format!("{RUN_LABEL}={run}"));
    let mut available = std::collections::HashSet::new();
    let wait = async {
        let stream = watcher(api.clone(), config).default_backoff();
        futures_util::pin_mut!(stream);
        while let Some(ev) = stream.next().await {
            match ev {
                Ok(Event::Apply(pv)) | Ok(Event::InitApply(pv)) => {
                    let name = pv.metadata.name.clone().unwrap_or_default();
                    if pv.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Available") {
                        available.insert(name);
                    } else {
                        available.remove(&name);
                    }
                }
                Ok(Event::Delete(pv)) => {
                    available.remove(pv.metadata.name.as_deref().unwrap_or_default());
                }
                Ok(Event::Init) => available.clear(),
                Ok(Event::InitDone) => {}
                Err(e) => tracing::warn!(error = %e, "volume watch failed, retrying"),
            }
            if available.len() >= n {
                return;
            }
        }
    };
    match tokio::time::timeout(timeout, wait).await {
        Ok(()) => Ok(()),
        Err(_) => Err(format!("only {} of {n} PVs became Available within {timeout:?}", available.len())),
    }
}

/// A backstop for the watch: every few seconds, lists the run's claims and records Bound ones the
/// watch has not reported (a watch that silently missed an event would otherwise make the bench
/// wait for its whole timeout). Returns once every claim is known Bound.
async fn poll_bound(api: &Api<PersistentVolumeClaim>, run: &str, seen: Arc<Mutex<Seen>>, n: usize) {
    let lp = kube::api::ListParams::default().labels(&format!("{RUN_LABEL}={run}"));
    loop {
        tokio::time::sleep(Duration::from_secs(3)).await;
        if seen.lock().unwrap_or_else(|p| p.into_inner()).bound.len() >= n {
            return;
        }
        let Ok(list) = api.list(&lp).await else { continue };
        let now = Instant::now();
        let mut s = seen.lock().unwrap_or_else(|p| p.into_inner());
        for c in list.items {
            if c.status.as_ref().and_then(|st| st.phase.as_deref()) == Some("Bound") {
                let name = c.metadata.name.clone().unwrap_or_default();
                if let std::collections::hash_map::Entry::Vacant(e) = s.bound.entry(name.clone()) {
                    e.insert(now);
                    s.late += 1;
                    if let Some(v) = c.spec.and_then(|sp| sp.volume_name) {
                        s.volumes.insert(name, v);
                    }
                }
            }
        }
        if s.bound.len() >= n {
            return;
        }
    }
}

fn run_id() -> String {
    let ms = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis()).unwrap_or(0);
    format!("b{:x}{:x}", ms & 0xff_ffff_ffff, std::process::id() & 0xfff)
}

fn pv_name(run: &str, i: usize) -> String {
    format!("{run}-pv-{i:06}")
}

fn pvc_name(run: &str, i: usize) -> String {
    format!("{run}-pvc-{i:06}")
}

fn size(i: usize) -> String {
    format!("{}Gi", 1 + i % 10)
}

/// The i-th static PV of a run: distinct NFS path, class "", Retain (the default for static PVs).
pub fn pv_object(run: &str, i: usize) -> Result<PersistentVolume, serde_json::Error> {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "PersistentVolume",
        "metadata": {"name": pv_name(run, i), "labels": {RUN_LABEL: run}},
        "spec": {"capacity": {"storage": size(i)}, "accessModes": ["ReadWriteOnce"], "storageClassName": "",
                 "persistentVolumeReclaimPolicy": "Retain",
                 "nfs": {"server": "bench.invalid", "path": format!("/pv-bench/{run}/{i}")}}
    }))
}

/// The i-th claim of a run: for pairs, the size of the i-th PV and class ""; else 1Gi of `class`.
pub fn pvc_object(run: &str, i: usize, w: &Workload) -> Result<PersistentVolumeClaim, serde_json::Error> {
    let (class, size) = match w {
        Workload::Pairs(_) => ("", size(i)),
        Workload::Claims { class, .. } => (class.as_str(), "1Gi".to_string()),
    };
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": pvc_name(run, i), "labels": {RUN_LABEL: run}},
        "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": class,
                 "resources": {"requests": {"storage": size}}}
    }))
}

/// Whether a failed request is worth repeating (overload, server error, transport).
fn transient(e: &kube::Error) -> bool {
    match e {
        kube::Error::Api(s) => matches!(s.code, 429 | 500 | 502 | 503 | 504),
        _ => true,
    }
}

fn is_code(e: &kube::Error, code: u16) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == code)
}

/// Creates an object, retrying transient failures; a 409 after a retry means an earlier attempt
/// was applied and its answer lost.
async fn create_with_retry<K>(api: Api<K>, obj: K, what: String) -> Result<K, String>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + Serialize + std::fmt::Debug,
{
    let mut delay = Duration::from_millis(100);
    let mut attempt = 0;
    loop {
        match api.create(&PostParams::default(), &obj).await {
            Ok(created) => return Ok(created),
            Err(e) if attempt > 0 && is_code(&e, 409) => {
                let name = obj.meta().name.clone().unwrap_or_default();
                return api.get(&name).await.map_err(|e| format!("reading {what} after a lost answer: {e}"));
            }
            Err(e) if attempt < 5 && transient(&e) => {
                tokio::time::sleep(delay).await;
                delay *= 2;
                attempt += 1;
            }
            Err(e) => return Err(format!("creating {what}: {e}")),
        }
    }
}

/// Binds a fresh pair the way a controller does, with its four writes and nothing else: the
/// PV's `claimRef`, the PV's phase, the claim's `volumeName` and the claim's status (upstream's
/// bindVolumeToClaim, updateVolumePhase, bindClaimToVolume, updateClaimStatus).
async fn bind_pair(
    pvs: Api<PersistentVolume>,
    claims: Api<PersistentVolumeClaim>,
    mut pv: PersistentVolume,
    mut pvc: PersistentVolumeClaim,
) -> Result<(), String> {
    let pp = PostParams::default();
    let (pv_name, pvc_name) =
        (pv.metadata.name.clone().unwrap_or_default(), pvc.metadata.name.clone().unwrap_or_default());
    let write = |what: &str, e: kube::Error| format!("binding {pvc_name} to {pv_name}: {what}: {e}");
    let yes = || "yes".to_string();
    let spec = pv.spec.get_or_insert_with(Default::default);
    spec.claim_ref = Some(ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("PersistentVolumeClaim".into()),
        namespace: pvc.metadata.namespace.clone(),
        name: Some(pvc_name.clone()),
        uid: pvc.metadata.uid.clone(),
        resource_version: pvc.metadata.resource_version.clone(),
        ..Default::default()
    });
    pv.metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert("pv.kubernetes.io/bound-by-controller".into(), yes());
    let mut pv = pvs.replace(&pv_name, &pp, &pv).await.map_err(|e| write("PV claimRef", e))?;
    pv.status.get_or_insert_with(Default::default).phase = Some("Bound".into());
    let pv = pvs.replace_status(&pv_name, &pp, &pv).await.map_err(|e| write("PV status", e))?;

    pvc.spec.get_or_insert_with(Default::default).volume_name = Some(pv_name.clone());
    let annotations = pvc.metadata.annotations.get_or_insert_with(Default::default);
    annotations.insert("pv.kubernetes.io/bind-completed".into(), yes());
    annotations.insert("pv.kubernetes.io/bound-by-controller".into(), yes());
    let mut pvc = claims.replace(&pvc_name, &pp, &pvc).await.map_err(|e| write("claim volumeName", e))?;
    let pv_spec = pv.spec.unwrap_or_default();
    let status = pvc.status.get_or_insert_with(Default::default);
    status.phase = Some("Bound".into());
    status.access_modes = pv_spec.access_modes;
    status.capacity = pv_spec.capacity;
    claims.replace_status(&pvc_name, &pp, &pvc).await.map_err(|e| write("claim status", e))?;
    Ok(())
}

/// Runs `make(i)` for i in 0..n, at most `concurrency` at once, paced by `pacer`; stops at the
/// first error.
async fn for_each_bounded<F, Fut>(n: usize, concurrency: usize, pacer: Option<&Pacer>, make: F) -> Result<(), String>
where
    F: Fn(usize) -> Fut,
    Fut: Future<Output = Result<(), String>> + Send + 'static,
{
    let sem = Arc::new(Semaphore::new(concurrency));
    let mut set = JoinSet::new();
    let check = |r: Result<Result<(), String>, tokio::task::JoinError>| match r {
        Ok(r) => r,
        Err(e) => Err(format!("request task failed: {e}")),
    };
    for i in 0..n {
        if let Some(p) = pacer {
            p.wait().await;
        }
        let permit = sem.clone().acquire_owned().await.map_err(|e| e.to_string())?;
        let fut = make(i);
        set.spawn(async move {
            let r = fut.await;
            drop(permit);
            r
        });
        while let Some(r) = set.try_join_next() {
            check(r)?;
        }
    }
    while let Some(r) = set.join_next().await {
        check(r)?;
    }
    Ok(())
}

/// Why claims of this class can never become Bound without more than the controller, if so: a
/// class that does not exist, binds on first consumer (nothing schedules the bench's claims),
/// or names no provisioner.
pub fn class_cannot_bind(class: &str, found: Option<&StorageClass>) -> Option<String> {
    let Some(c) = found else {
        return Some(format!("--class {class}: StorageClass {class:?} does not exist"));
    };
    if c.volume_binding_mode.as_deref() == Some("WaitForFirstConsumer") {
        return Some(format!(
            "--class {class}: StorageClass {class:?} has volumeBindingMode WaitForFirstConsumer: its claims stay \
             Pending until a pod that uses them is scheduled, and the bench creates no pods; use a class with \
             volumeBindingMode Immediate"
        ));
    }
    if c.provisioner == "kubernetes.io/no-provisioner" {
        return Some(format!(
            "--class {class}: StorageClass {class:?} has provisioner {}: nothing provisions its claims; use \
             --pairs for static volumes",
            c.provisioner
        ));
    }
    None
}

/// Fails before anything is created when the `--claims` class cannot bind them.
async fn check_class(client: &Client, class: &str) -> anyhow::Result<()> {
    let api: Api<StorageClass> = Api::all(client.clone());
    let found = api.get_opt(class).await.map_err(|e| user(format!("reading StorageClass {class}: {e}")))?;
    match class_cannot_bind(class, found.as_ref()) {
        Some(why) => Err(user(why)),
        None => Ok(()),
    }
}

async fn ensure_namespace(client: &Client, name: &str) -> anyhow::Result<()> {
    let api: Api<Namespace> = Api::all(client.clone());
    if api.get_opt(name).await.map_err(|e| user(format!("reading namespace {name}: {e}")))?.is_some() {
        return Ok(());
    }
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": name}}))?;
    match api.create(&PostParams::default(), &ns).await {
        Ok(_) => Ok(()),
        Err(e) if is_code(&e, 409) => Ok(()),
        Err(e) => Err(user(format!("creating namespace {name}: {e}"))),
    }
}

/// Watches the run's claims, noting when each is first Bound; signals once the initial list is
/// done, so that no Bound transition can be missed.
fn spawn_claim_watch(
    api: Api<PersistentVolumeClaim>,
    run: &str,
    seen: Arc<Mutex<Seen>>,
    count: tokio::sync::watch::Sender<usize>,
) -> (tokio::task::JoinHandle<()>, tokio::sync::oneshot::Receiver<()>) {
    let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
    let config = watcher::Config::default().labels(&format!("{RUN_LABEL}={run}"));
    let task = tokio::spawn(async move {
        let mut ready = Some(ready_tx);
        let stream = watcher(api, config).default_backoff();
        futures_util::pin_mut!(stream);
        while let Some(ev) = stream.next().await {
            match ev {
                Ok(Event::Apply(c)) | Ok(Event::InitApply(c)) => {
                    let now = Instant::now();
                    if c.status.as_ref().and_then(|s| s.phase.as_deref()) != Some("Bound") {
                        continue;
                    }
                    let name = c.metadata.name.clone().unwrap_or_default();
                    let mut s = seen.lock().unwrap_or_else(|p| p.into_inner());
                    if let Some(v) = c.spec.as_ref().and_then(|s| s.volume_name.clone()) {
                        s.volumes.insert(name.clone(), v);
                    }
                    if let std::collections::hash_map::Entry::Vacant(e) = s.bound.entry(name) {
                        e.insert(now);
                        let n = s.bound.len();
                        drop(s);
                        let _ = count.send(n);
                    }
                }
                Ok(Event::InitDone) => {
                    if let Some(tx) = ready.take() {
                        let _ = tx.send(());
                    }
                }
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "claim watch failed, retrying"),
            }
        }
    });
    (task, ready_rx)
}

/// The run against an API server. Returns the report and, when not every claim became Bound or
/// cleanup failed, the error to exit with after printing it.
async fn against_server(a: &BenchArgs, w: &Workload) -> anyhow::Result<(Report, Option<String>)> {
    let opts = ClientOptions {
        kubeconfig: a.kubeconfig.clone(),
        context: a.context.clone(),
        cluster: a.cluster.clone(),
        user: a.user.clone(),
    };
    let config = connect::load_config(&opts).await.map_err(|e| user(e.to_string()))?;
    let url = config.cluster_url.to_string();
    let client = connect::client(config).map_err(|e| user(e.to_string()))?;
    connect::preflight(&client, &url, REQUEST_TIMEOUT).await.map_err(|e| user(e.to_string()))?;
    if let Workload::Claims { class, .. } = w {
        check_class(&client, class).await?;
    }
    ensure_namespace(&client, &a.namespace).await?;

    let run = run_id();
    let n = w.claims();
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), &a.namespace);
    let pvs: Api<PersistentVolume> = Api::all(client.clone());
    let seen = Arc::new(Mutex::new(Seen::default()));
    let (count_tx, mut count_rx) = tokio::sync::watch::channel(0usize);
    let (watch_task, ready) = spawn_claim_watch(claims.clone(), &run, seen.clone(), count_tx);
    if tokio::time::timeout(REQUEST_TIMEOUT, ready).await.map_or(true, |r| r.is_err()) {
        watch_task.abort();
        return Err(user(format!("{url}: the claim watch did not start within {REQUEST_TIMEOUT:?}")));
    }

    let pacer = Pacer { start: Instant::now(), rate: a.rate, next: AtomicU64::new(0) };
    let start = pacer.start;
    let created: Arc<Mutex<Vec<Option<Instant>>>> = Arc::new(Mutex::new(vec![None; n]));
    let pv_created: Arc<Mutex<Vec<Option<Instant>>>> = Arc::new(Mutex::new(vec![None; n]));
    // With --bind-itself: the created PVs, for the bench's own binding writes.
    let pv_objects: Arc<Mutex<Vec<Option<PersistentVolume>>>> =
        Arc::new(Mutex::new(if a.bind_itself { vec![None; n] } else { Vec::new() }));
    let create_pvs = || {
        for_each_bounded(n, a.concurrency, Some(&pacer), |i| {
            let (api, obj, created, objects) =
                (pvs.clone(), pv_object(&run, i), pv_created.clone(), pv_objects.clone());
            async move {
                created.lock().unwrap_or_else(|p| p.into_inner())[i] = Some(Instant::now());
                let pv = create_with_retry(api, obj.map_err(|e| e.to_string())?, format!("PV {i}")).await?;
                if let Some(slot) = objects.lock().unwrap_or_else(|p| p.into_inner()).get_mut(i) {
                    *slot = Some(pv);
                }
                Ok(())
            }
        })
    };
    let create_claims = || {
        for_each_bounded(n, a.concurrency, Some(&pacer), |i| {
            let (api, obj, created) = (claims.clone(), pvc_object(&run, i, w), created.clone());
            let pv = pv_objects.lock().unwrap_or_else(|p| p.into_inner()).get_mut(i).and_then(Option::take);
            let pv_api = pvs.clone();
            async move {
                created.lock().unwrap_or_else(|p| p.into_inner())[i] = Some(Instant::now());
                let pvc = create_with_retry(api.clone(), obj.map_err(|e| e.to_string())?, format!("claim {i}")).await?;
                match pv {
                    Some(pv) => bind_pair(pv_api, api, pv, pvc).await,
                    None => Ok(()),
                }
            }
        })
    };
    let progress = (std::io::IsTerminal::is_terminal(&std::io::stderr())).then(|| {
        let (created, bound) = (created.clone(), count_rx.clone());
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_secs(1)).await;
                let c = created.lock().unwrap_or_else(|p| p.into_inner()).iter().filter(|c| c.is_some()).count();
                eprint!("\r\x1b[K{}", progress_line(c, *bound.borrow(), n, start.elapsed()));
            }
        })
    });
    let result = match (w, a.claims_first) {
        (Workload::Claims { .. }, _) => create_claims().await,
        (Workload::Pairs(_), false) => match create_pvs().await {
            // No controller makes the PVs Available when the bench binds them itself.
            Ok(()) if a.bind_itself => create_claims().await,
            Ok(()) => match wait_available(&pvs, &run, n, a.timeout).await {
                Ok(()) => create_claims().await,
                e => e,
            },
            e => e,
        },
        (Workload::Pairs(_), true) => match create_claims().await {
            Ok(()) => create_pvs().await,
            e => e,
        },
    };
    let create_time = start.elapsed();
    let mut failure = result.err();
    if failure.is_none() {
        let done = count_rx.wait_for(|c| *c >= n);
        let backstop = poll_bound(&claims, &run, seen.clone(), n);
        let either = async {
            tokio::select! {
                _ = done => {}
                _ = backstop => {}
            }
        };
        if tokio::time::timeout(a.timeout.saturating_sub(start.elapsed()), either).await.is_err() {
            failure = Some(format!("not every claim became Bound within {:?}", a.timeout));
        }
    }
    let gave_up = Instant::now();
    watch_task.abort();
    if let Some(p) = progress {
        p.abort();
        eprint!("\r\x1b[K");
    }
    let late = seen.lock().unwrap_or_else(|p| p.into_inner()).late;

    let (bound, volumes) = {
        let s = seen.lock().unwrap_or_else(|p| p.into_inner());
        (s.bound.clone(), s.volumes.clone())
    };
    let created = created.lock().unwrap_or_else(|p| p.into_inner()).clone();
    let pv_created = pv_created.lock().unwrap_or_else(|p| p.into_inner()).clone();
    // Creates run in index order, so everything created lies below the last index seen.
    let pvs_created = pv_created.iter().rposition(Option::is_some).map_or(0, |i| i + 1);
    let mut latencies = Vec::with_capacity(bound.len());
    let mut last = start;
    for (i, c) in created.iter().enumerate() {
        if let (Some(c), Some(b)) = (c, bound.get(&pvc_name(&run, i))) {
            let from = pv_created.get(i).copied().flatten().map_or(*c, |p| p.max(*c));
            latencies.push(b.saturating_duration_since(from));
            last = last.max(*b);
        }
    }
    // A run that gave up lasted until it gave up, not until its last bind.
    let wall = if failure.is_some() {
        gave_up.saturating_duration_since(start)
    } else {
        last.saturating_duration_since(start)
    };
    let mut r = Report {
        mode: "api".into(),
        workload: w.kind().into(),
        description: format!(
            "{} in namespace {} at {url}{}",
            w.describe(),
            a.namespace,
            if a.bind_itself { ", bound by the bench itself (four writes per pair)" } else { "" }
        ),
        n,
        run: run.clone(),
        wall_seconds: wall.as_secs_f64(),
        create_seconds: Some(create_time.as_secs_f64()),
        note: Some(latency_note(w).into()),
        ..Default::default()
    };
    fill_latencies(&mut r, latencies);
    r.binds_per_second = r.bound as f64 / wall.as_secs_f64().max(1e-9);
    if late > 0 {
        r.note = Some(format!(
            "{late} claims were seen Bound by the periodic list, not the watch: their time is an upper bound"
        ));
    }
    if failure.is_some() && r.bound < n {
        let f = failure.take().unwrap_or_default();
        failure = Some(format!("{f} ({} of {n} bound)", r.bound));
    }

    if !a.keep {
        let t = Instant::now();
        let created_claims = created.iter().rposition(Option::is_some).map_or(0, |i| i + 1);
        if let Err(e) = cleanup(&claims, &pvs, &run, a.concurrency, created_claims, pvs_created, w, &volumes).await {
            failure.get_or_insert(format!("cleanup of run {RUN_LABEL}={run}: {e}"));
        }
        r.cleanup_seconds = Some(t.elapsed().as_secs_f64());
    }
    Ok((r, failure))
}

/// Deletes the run's claims, then its PVs: the static ones it created, and for provisioned
/// claims the volumes whose Retain policy would keep them.
#[allow(clippy::too_many_arguments)]
async fn cleanup(
    claims: &Api<PersistentVolumeClaim>,
    pvs: &Api<PersistentVolume>,
    run: &str,
    concurrency: usize,
    n_claims: usize,
    n_pvs: usize,
    w: &Workload,
    volumes: &HashMap<String, String>,
) -> Result<(), String> {
    async fn delete<K>(api: Api<K>, name: String) -> Result<(), String>
    where
        K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
    {
        let mut delay = Duration::from_millis(100);
        for attempt in 0.. {
            match api.delete(&name, &DeleteParams::default()).await {
                Ok(_) => return Ok(()),
                Err(e) if is_code(&e, 404) => return Ok(()),
                Err(e) if attempt < 5 && transient(&e) => {
                    tokio::time::sleep(delay).await;
                    delay *= 2;
                }
                Err(e) => return Err(format!("deleting {name}: {e}")),
            }
        }
        Ok(())
    }
    for_each_bounded(n_claims, concurrency, None, |i| delete(claims.clone(), pvc_name(run, i))).await?;
    if let Workload::Pairs(_) = w {
        for_each_bounded(n_pvs, concurrency, None, |i| delete(pvs.clone(), pv_name(run, i))).await?;
        wait_gone(claims, pvs, run).await?;
        return delete_events(claims, run, volumes, concurrency).await;
    }
    let names: Vec<String> = volumes.values().cloned().collect();
    for_each_bounded(names.len(), concurrency, None, |i| {
        let (api, name) = (pvs.clone(), names[i].clone());
        async move {
            let retained = match api.get_opt(&name).await {
                Ok(Some(pv)) => pv.spec.and_then(|s| s.persistent_volume_reclaim_policy).as_deref() == Some("Retain"),
                Ok(None) => false,
                Err(e) => return Err(format!("reading PV {name}: {e}")),
            };
            if retained {
                delete(api, name).await
            } else {
                Ok(())
            }
        }
    })
    .await?;
    wait_gone(claims, pvs, run).await?;
    delete_events(claims, run, volumes, concurrency).await
}

/// Waits until no claim or volume of the run is left: a delete only marks an object that a
/// finalizer holds (the pvc- and pv-protection controllers release them once nothing uses them,
/// and a volume's reclaim takes as long as the controller's client allows: upstream's releases
/// about 20 writes a second). The wait lasts as long as objects keep going, and gives up only
/// when none has gone for a minute.
async fn wait_gone(claims: &Api<PersistentVolumeClaim>, pvs: &Api<PersistentVolume>, run: &str) -> Result<(), String> {
    const STALL: Duration = Duration::from_secs(60);
    let lp = kube::api::ListParams::default().labels(&format!("{RUN_LABEL}={run}"));
    let mut left = usize::MAX;
    let mut deadline = Instant::now() + STALL;
    loop {
        let c = claims.list_metadata(&lp).await.map_err(|e| format!("listing the run's claims: {e}"))?.items.len();
        let v = pvs.list_metadata(&lp).await.map_err(|e| format!("listing the run's PVs: {e}"))?.items.len();
        if c + v == 0 {
            return Ok(());
        }
        if c + v < left {
            left = c + v;
            deadline = Instant::now() + STALL;
        } else if Instant::now() >= deadline {
            return Err(format!(
                "{c} claims and {v} PVs of the run are still there, and none has gone for {}s (finalizers hold them)",
                STALL.as_secs()
            ));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Deletes the Events the controller recorded about the run's objects: its claims' (in the run's
/// namespace) and its volumes' (Events about cluster-scoped objects live in `default`). Objects
/// are recognised by name (the run id prefixes every name the bench gives) and by the volumes
/// the run's claims were bound to.
async fn delete_events(
    claims: &Api<PersistentVolumeClaim>,
    run: &str,
    volumes: &HashMap<String, String>,
    concurrency: usize,
) -> Result<(), String> {
    let client = claims.clone().into_client();
    let namespace = claims.namespace().unwrap_or("default").to_string();
    let prefix = format!("{run}-");
    let ours = |e: &CoreEvent| {
        let name = e.involved_object.name.as_deref().unwrap_or("");
        name.starts_with(&prefix) || volumes.values().any(|v| v == name)
    };
    let mut doomed: Vec<(String, String)> = Vec::new();
    let mut spaces = vec![namespace.clone()];
    if namespace != "default" {
        spaces.push("default".into());
    }
    for ns in spaces {
        let api: Api<CoreEvent> = Api::namespaced(client.clone(), &ns);
        let list = api.list(&Default::default()).await.map_err(|e| format!("listing events in {ns}: {e}"))?;
        for e in list.items.iter().filter(|e| ours(e)) {
            doomed.push((ns.clone(), e.metadata.name.clone().unwrap_or_default()));
        }
    }
    for_each_bounded(doomed.len(), concurrency, None, |i| {
        let (ns, name) = doomed[i].clone();
        let api: Api<CoreEvent> = Api::namespaced(client.clone(), &ns);
        async move {
            match api.delete(&name, &DeleteParams::default()).await {
                Ok(_) => Ok(()),
                Err(e) if is_code(&e, 404) => Ok(()),
                Err(e) => Err(format!("deleting event {ns}/{name}: {e}")),
            }
        }
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        a: BenchArgs,
    }

    fn parse(args: &[&str]) -> Result<Workload, String> {
        let cli =
            Cli::try_parse_from(std::iter::once("bench").chain(args.iter().copied())).map_err(|e| e.to_string())?;
        Workload::from_args(&cli.a)
    }

    #[test]
    fn workloads_from_flags() {
        assert_eq!(parse(&["--pairs", "10"]), Ok(Workload::Pairs(10)));
        assert_eq!(parse(&["--claims", "5", "--class", "fast"]), Ok(Workload::Claims { n: 5, class: "fast".into() }));
        assert_eq!(parse(&["--simulate", "--claims", "5"]), Ok(Workload::Claims { n: 5, class: "bench".into() }));
        assert_eq!(parse(&["--simulate", "--pairs", "200", "-o", "json", "--rate", "50"]), Ok(Workload::Pairs(200)));
    }

    #[test]
    fn bad_flags_say_which() {
        let err = |args: &[&str]| parse(args).unwrap_err();
        assert!(err(&[]).contains("--pairs N"));
        assert!(err(&["--pairs", "1", "--claims", "1"]).contains("not both"));
        assert!(err(&["--claims", "3"]).contains("--class"));
        assert!(err(&["--pairs", "3", "--class", "x"]).contains("--claims only"));
        assert!(err(&["--pairs", "0"]).contains("at least 1"));
        assert!(err(&["--pairs", "1", "--rate=-1"]).contains("--rate"));
        assert!(err(&["--pairs", "1", "--concurrency", "0"]).contains("--concurrency"));
        assert!(err(&["--pairs", "1", "--namespace", "Bad_NS"]).contains("--namespace"));
        assert!(err(&["--simulate", "--pairs", "1", "--kubeconfig", "k"]).contains("in-process"));
        assert!(err(&["--pairs", "x"]).contains("invalid value"));
        assert!(err(&["--claims", "1", "--class", "c", "--claims-first"]).contains("--pairs"));
        assert!(err(&["--claims", "1", "--class", "c", "--bind-itself"]).contains("--bind-itself"));
        assert!(err(&["--simulate", "--pairs", "1", "--bind-itself"]).contains("--bind-itself"));
        assert!(err(&["--pairs", "1", "--claims-first", "--bind-itself"]).contains("PVs first"));
        assert!(parse(&["--pairs", "1", "--bind-itself"]).is_ok());
    }

    #[test]
    fn percentiles_are_nearest_rank() {
        let d: Vec<Duration> = (1..=100).map(Duration::from_millis).collect();
        assert_eq!(percentile(&d, 50.0), Some(Duration::from_millis(50)));
        assert_eq!(percentile(&d, 99.0), Some(Duration::from_millis(99)));
        assert_eq!(percentile(&d, 100.0), Some(Duration::from_millis(100)));
        assert_eq!(percentile(&d[..1], 99.0), Some(Duration::from_millis(1)));
        assert_eq!(percentile(&[], 50.0), None);
    }

    fn sample() -> Report {
        let mut r = Report {
            mode: "api".into(),
            workload: "pairs".into(),
            description: "3 static PV/PVC pairs".into(),
            n: 3,
            run: "b1".into(),
            wall_seconds: 1.5,
            create_seconds: Some(0.25),
            binds_per_second: 2.0,
            ..Default::default()
        };
        fill_latencies(&mut r, vec![Duration::from_millis(30), Duration::from_millis(10), Duration::from_millis(20)]);
        r
    }

    #[test]
    fn text_table_has_every_figure() {
        let t = format_text(&sample());
        for want in ["bound               3 / 3", "wall time           1.500 s", "p50   20 ms", "p99   30 ms"] {
            assert!(t.contains(want), "{want:?} missing in\n{t}");
        }
        assert!(t.contains("binds/s             2.0"), "{t}");
        assert!(t.starts_with("bench (api): 3 static PV/PVC pairs, run bench.pv-controller.io/run=b1\n"), "{t}");
        assert!(!t.contains("peak RSS"));
    }

    #[test]
    fn json_uses_camel_case_fields() {
        let v = serde_json::to_value(sample()).unwrap();
        assert_eq!(v["n"], 3);
        assert_eq!(v["bound"], 3);
        assert_eq!(v["p50Ms"], 20.0);
        assert_eq!(v["maxMs"], 30.0);
        assert_eq!(v["bindsPerSecond"], 2.0);
        assert!(v["peakRssBytes"].is_null());
    }

    #[test]
    fn human_units() {
        assert_eq!(human_ms(Some(1.234)), "1.23 ms");
        assert_eq!(human_ms(Some(453_000.0)), "453.0 s");
        assert_eq!(human_ms(Some(2_500.0)), "2.50 s");
        assert_eq!(human_bytes(1536.0), "1.50 KiB");
        assert_eq!(human_bytes(3.0 * 1024.0 * 1024.0), "3.0 MiB");
    }

    #[test]
    fn objects_are_valid_and_labelled() {
        let pv = pv_object("b1", 12).unwrap();
        assert_eq!(pv.metadata.name.as_deref(), Some("b1-pv-000012"));
        assert_eq!(pv.metadata.labels.unwrap()[RUN_LABEL], "b1");
        let spec = pv.spec.unwrap();
        assert_eq!(spec.persistent_volume_reclaim_policy.as_deref(), Some("Retain"));
        assert_eq!(spec.nfs.unwrap().path, "/pv-bench/b1/12");
        let c = pvc_object("b1", 12, &Workload::Pairs(20)).unwrap();
        let cs = c.spec.unwrap();
        assert_eq!(cs.storage_class_name.as_deref(), Some(""));
        assert_eq!(cs.resources.unwrap().requests.unwrap()["storage"].0, "3Gi");
        let c = pvc_object("b1", 0, &Workload::Claims { n: 1, class: "fast".into() }).unwrap();
        assert_eq!(c.spec.unwrap().storage_class_name.as_deref(), Some("fast"));
        assert!(is_dns_label(&run_id()));
    }

    #[test]
    fn proc_status_is_read_in_bytes() {
        if cfg!(target_os = "linux") {
            let hwm = proc_status_bytes("VmHWM").unwrap();
            assert!(hwm > 0 && hwm.is_multiple_of(1024));
        }
    }
}
