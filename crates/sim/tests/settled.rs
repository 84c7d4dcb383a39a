//! A bound pair whose syncs found nothing to do is passed over by the periodic resync until the
//! volume or its claim changes; anything else (here: a claim that cannot bind) is synced at
//! every resync, as upstream does.

use pv_core::{Config, Controller, SystemClock};
use pv_sim::{invariants, workload};
use pv_store::{Store, UidMode};
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;

async fn until(what: &str, f: impl Fn() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while !f() {
        assert!(tokio::time::Instant::now() < deadline, "timed out waiting for: {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// What a resync would enqueue now: (volumes, claims), sorted.
fn resynced(controller: &Controller) -> (Vec<String>, Vec<String>) {
    let w = controller.caches().unsettled();
    let mut volumes = w.volumes;
    let mut claims: Vec<String> = w.claims.iter().map(|k| k.to_string()).collect();
    volumes.sort();
    claims.sort();
    (volumes, claims)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bound_pairs_leave_the_resync_until_either_side_changes() {
    let store = Arc::new(Store::builder().uids(UidMode::Deterministic).build());
    for o in workload::static_pairs(3) {
        store.load(o.resource.plural, o.value).unwrap();
    }
    // A claim no volume fits: it stays Pending and is synced at every resync.
    store
        .load(
            "persistentvolumeclaims",
            json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                   "metadata": {"name": "huge", "namespace": "default"},
                   "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "",
                            "resources": {"requests": {"storage": "1Pi"}}}}),
        )
        .unwrap();
    let api = Arc::new(pv_sim::MemApi::new(store.clone()));
    let config = Config { resync_period: Duration::from_secs(3600), ..Default::default() };
    let controller = Controller::new(api, pv_plugins::registry(None), SystemClock::new(), config);
    let informers = pv_local::start(&store, &controller);
    controller.resync();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let runner = tokio::spawn(pv_core::runtime::run(controller.clone(), 2, async {
        let _ = stop_rx.await;
    }));
    let bound = || invariants::listed(&store, "persistentvolumes").iter().all(|o| o["status"]["phase"] == "Bound");
    until("every pair bound", bound).await;
    // A claim's last write (its phase) unsettles its volume, whose sync finds nothing to do at
    // the next resync and settles it; each claim settled at its own last sync. The stuck claim
    // never settles.
    let settled = || {
        controller.resync();
        resynced(&controller) == (vec![], vec!["default/huge".to_string()])
    };
    until("the pairs settled", settled).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(settled(), "resyncs leave them settled: {:?}", resynced(&controller));

    // A new version of one claim unsettles its pair: both sides are resynced, the others not.
    let mut claim = store.get("persistentvolumeclaims", "default", "bench-pvc-0000001").unwrap().value();
    claim["metadata"]["labels"] = json!({"touched": "yes"});
    store.update("persistentvolumeclaims", claim, false).unwrap();
    let touched =
        |labels: Option<&std::collections::BTreeMap<String, String>>| labels.is_some_and(|l| l.contains_key("touched"));
    until("the new version is cached", || {
        controller.caches().claim("default/bench-pvc-0000001").is_some_and(|c| touched(c.metadata.labels.as_ref()))
    })
    .await;
    // Its own sync (woken by the watch) settles the claim again; the volume waits for a resync.
    until("the claim settled again", || {
        resynced(&controller) == (vec!["bench-pv-0000001".to_string()], vec!["default/huge".to_string()])
    })
    .await;
    until("the pair settled again", settled).await;

    // A new version of a volume unsettles its claim too.
    let mut volume = store.get("persistentvolumes", "", "bench-pv-0000002").unwrap().value();
    volume["metadata"]["labels"] = json!({"touched": "yes"});
    store.update("persistentvolumes", volume, false).unwrap();
    until("the new version is cached", || {
        controller.caches().volume("bench-pv-0000002").is_some_and(|v| touched(v.metadata.labels.as_ref()))
    })
    .await;
    until("the volume settled again, its claim waiting for a resync", || {
        resynced(&controller) == (vec![], vec!["default/bench-pvc-0000002".to_string(), "default/huge".to_string()])
    })
    .await;
    until("the pair settled again", settled).await;
    let _ = stop_tx.send(());
    let _ = runner.await;
    drop(informers);
}
