//! `bench --simulate`: the workload in the in-process simulated API server, timed by a watch on the store.

use super::*;

/// A field of /proc/self/status in bytes (Linux only; `None` elsewhere).
pub(super) fn proc_status_bytes(field: &str) -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with(field) && l[field.len()..].starts_with(':'))?;
    let kb: u64 = line[field.len() + 1..].trim().trim_end_matches("kB").trim().parse().ok()?;
    Some(kb * 1024)
}

/// The name of a claim its store watch event shows Bound, decoding only the two fields read.
fn bound_name(o: &pv_store::Object) -> Option<String> {
    #[derive(serde::Deserialize, Default)]
    #[serde(default)]
    struct Named {
        name: String,
    }
    #[derive(serde::Deserialize, Default)]
    #[serde(default)]
    struct Phase {
        phase: String,
    }
    #[derive(serde::Deserialize)]
    struct Claim {
        #[serde(default)]
        metadata: Named,
        #[serde(default)]
        status: Phase,
    }
    let c: Claim = o.decode().ok()?;
    (c.status.phase == "Bound").then_some(c.metadata.name)
}

/// The in-process run: the workload on the simulated API server, per-claim Bound times taken
/// from a watch on the store read by a second thread (the driver itself is unchanged).
pub(super) fn simulate(w: &Workload) -> anyhow::Result<(Report, Option<String>)> {
    let base_rss = proc_status_bytes("VmRSS");
    let t0 = Instant::now();
    let objects: Box<dyn Iterator<Item = pv_sim::InputObject>> = match w {
        Workload::Pairs(n) => Box::new(pv_sim::workload::static_pairs(*n)),
        Workload::Claims { n, class } => {
            let class = class.clone();
            Box::new(pv_sim::workload::provisioning(*n).map(move |mut o| {
                if o.resource.kind == "StorageClass" {
                    o.value["metadata"]["name"] = json!(class);
                } else {
                    o.value["spec"]["storageClassName"] = json!(class);
                }
                o
            }))
        }
    };
    let object_count = w.objects();
    let root = tempfile::tempdir()?;
    let mut sim = pv_sim::Simulation::streamed(
        objects,
        pv_sim::driver::default_start(),
        pv_plugins::registry(Some(root.path().into())),
        Default::default(),
    )
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
    // Every claim exists at the start: each was created at 0.
    let claims = bound.into_values().map(|to_bound| ClaimTime { created: Duration::ZERO, to_bound }).collect();
    fill_latencies(&mut r, claims);
    let failure = (r.bound < r.n).then(|| format!("only {} of {} claims became Bound", r.bound, r.n));
    Ok((r, failure))
}

/// Reads store watch events until told to stop, then drains what is left; returns, per claim,
/// when it was first seen Bound. It polls every millisecond rather than awaiting each event:
/// an awaited channel makes every store write wake this thread (a system call on the
/// simulation's thread for each of its writes), and the instrument would cost the run it times.
fn observe_store(
    mut watch: pv_store::Watcher,
    mut stop: tokio::sync::oneshot::Receiver<()>,
    start: Instant,
) -> anyhow::Result<HashMap<String, Duration>> {
    let mut bound = HashMap::new();
    loop {
        let stopping = !matches!(stop.try_recv(), Err(tokio::sync::oneshot::error::TryRecvError::Empty));
        loop {
            match watch.try_recv() {
                Ok(ev) => {
                    if let Some(name) = bound_name(&ev.object) {
                        bound.entry(name).or_insert_with(|| start.elapsed());
                    }
                }
                Err(tokio::sync::mpsc::error::TryRecvError::Empty) => break,
                Err(tokio::sync::mpsc::error::TryRecvError::Disconnected) => return Ok(bound),
            }
        }
        if stopping {
            return Ok(bound);
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}
