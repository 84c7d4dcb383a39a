//! Parallel binding on the real runtime: several workers per queue, operations as tasks, and API
//! faults, over the in-memory API server. Every claim must end Bound to its own volume, no volume
//! bound twice, no provisioned directory orphaned.

use pv_core::operations::Mode;
use pv_core::{Config, Controller, SystemClock};
use pv_sim::{invariants, workload, MemApi};
use pv_store::{FaultSpec, Store, UidMode};
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

async fn converge(workers: usize, faults: Option<&str>, seed: u64) {
    let root = tempfile::tempdir().unwrap();
    let store = Arc::new(Store::builder().uids(UidMode::Deterministic).build());
    let mut objects: Vec<_> = workload::static_pairs(300).collect();
    // Claims bigger than any static volume force provisioning; fewer volumes than claims of
    // some sizes make workers race for the same volumes.
    for mut o in workload::provisioning(100) {
        if o.resource.kind == "PersistentVolumeClaim" {
            o.value["metadata"]["namespace"] = "prov".into();
        }
        objects.push(o);
    }
    for o in objects {
        store.load(o.resource.plural, o.value).unwrap();
    }
    if let Some(f) = faults {
        store.set_faults(Some((FaultSpec::parse(f).unwrap(), seed)));
    }
    let api = Arc::new(MemApi::new(store.clone()));
    let config = Config {
        operations: Mode::Spawn,
        resync_period: Duration::from_millis(500),
        create_provisioned_pv_interval: Duration::from_millis(50),
        ..Default::default()
    };
    let controller =
        Controller::new(api, pv_plugins::registry(Some(root.path().to_path_buf())), SystemClock::new(), config);
    let _informers = pv_local::start(&store, &controller);
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let runner = tokio::spawn(pv_core::runtime::run(controller.clone(), workers, async {
        let _ = stop_rx.await;
    }));
    // Under these fault rates (four writes in ten fail) a provisioning can fail nine times in a
    // row and back off for minutes, as upstream's exponential backoff (500 ms doubling to 2 min
    // 2 s) would. So no fixed deadline: the run fails when claims are unbound while the
    // controller has nothing running and nothing waiting out a backoff, for 20 resync periods
    // (stuck, not slow), or after 20 minutes.
    let (stuck_after, give_up) = (Duration::from_secs(10), Duration::from_secs(20 * 60));
    let started = tokio::time::Instant::now();
    let mut idle_since: Option<tokio::time::Instant> = None;
    let ops = controller.operations().clone();
    loop {
        let claims = pv_sim::invariants::listed(&store, "persistentvolumeclaims");
        let unbound: Vec<&serde_json::Value> = claims.iter().filter(|c| c["status"]["phase"] != "Bound").collect();
        if unbound.is_empty() {
            break;
        }
        let waiting = !ops.running().is_empty() || ops.latest_backoff_expiry().is_some();
        idle_since = if waiting { None } else { Some(idle_since.unwrap_or_else(tokio::time::Instant::now)) };
        if idle_since.is_some_and(|t| t.elapsed() >= stuck_after) || started.elapsed() >= give_up {
            let pvs = pv_sim::invariants::listed(&store, "persistentvolumes");
            let about: Vec<String> = unbound
                .iter()
                .take(5)
                .map(|c| {
                    let uid = c["metadata"]["uid"].as_str().unwrap_or("");
                    let volumes: Vec<String> = pvs
                        .iter()
                        .filter(|p| p["spec"]["claimRef"]["uid"] == uid)
                        .map(|p| format!("{} {}", p["metadata"]["name"], p["status"]["phase"]))
                        .collect();
                    format!("{}\n  volumes pointing at it: {volumes:?}", serde_json::to_string(c).unwrap())
                })
                .collect();
            let now = pv_core::Clock::now_ms(&**controller.clock());
            panic!(
                "{} claims not Bound after {:?} (seed {seed}); the first:\n{}\noperations running: {:?}; \
                 the last backoff ends in {:?} ms; {} requests refused while backing off; claim queue {:?}; \
                 volume queue {:?}",
                unbound.len(),
                started.elapsed(),
                about.join("\n"),
                ops.running(),
                ops.latest_backoff_expiry().map(|t| t.saturating_sub(now)),
                ops.backoff_skips(),
                controller.claim_queue.metrics(),
                controller.volume_queue.metrics()
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Let in-flight syncs settle, then stop and check.
    tokio::time::sleep(Duration::from_millis(300)).await;
    store.set_faults(None);
    let _ = stop_tx.send(());
    let _ = runner.await;
    let errs = invariants::check(&store, Some(root.path()), &BTreeSet::new());
    assert!(errs.is_empty(), "invariants violated: {errs:#?}");
    let pvs = pv_sim::invariants::listed(&store, "persistentvolumes");
    // A provisioned volume for a claim that bound elsewhere is deleted eventually; two Bound
    // volumes for one claim are never allowed.
    let mut bound: HashMap<String, Vec<String>> = HashMap::new();
    for p in pvs.iter().filter(|p| p["status"]["phase"] == "Bound") {
        if let Some(uid) = p["spec"]["claimRef"]["uid"].as_str() {
            bound.entry(uid.to_string()).or_default().push(p["metadata"]["name"].as_str().unwrap().to_string());
        }
    }
    for (uid, volumes) in &bound {
        assert!(volumes.len() == 1, "claim {uid} owns two Bound volumes: {volumes:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_workers_bind_every_claim_exactly_once() {
    converge(4, None, 0).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_workers_bind_every_claim_exactly_once_under_api_faults() {
    for seed in 1..=2 {
        converge(4, Some("conflict=0.2,error=0.1,timeout=0.05,lost-response=0.05"), seed).await;
    }
}
