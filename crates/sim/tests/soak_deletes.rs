//! Soak: many claims of a host-path class with the Delete policy are provisioned, bound, then
//! deleted, on the in-process path `up` runs (store watches feeding the controller, parallel
//! workers on the multi-threaded runtime). Afterwards the controller's caches and its
//! `pv_collector_*` counts must equal the API server's objects: a volume the controller deleted
//! itself (object deleted, then its finalizer removed) must not stay cached.

use pv_core::{Config, Controller, SystemClock};
use pv_sim::{invariants, MemApi};
use pv_store::Store;
use serde_json::json;
use std::sync::Arc;
use std::time::{Duration, Instant};

fn count(store: &Store, resource: &str, f: impl Fn(&serde_json::Value) -> bool) -> usize {
    store.list(resource, &Default::default()).unwrap().0.iter().filter(|o| f(&o.value())).count()
}

async fn wait(what: &str, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < Duration::from_secs(120), "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn provisioned_claims_created_and_deleted_leave_caches_equal_to_the_api() {
    let n: usize = std::env::var("PV_SOAK_CLAIMS").ok().and_then(|s| s.parse().ok()).unwrap_or(200);
    let rounds = 3;
    let root = tempfile::tempdir().unwrap();
    let store = Arc::new(Store::new());
    let api = Arc::new(MemApi::new(store.clone()));
    let config = Config { resync_period: Duration::from_secs(3600), ..Config::default() };
    let controller =
        Controller::new(api, pv_plugins::registry(Some(root.path().to_path_buf())), SystemClock::new(), config);
    store
        .create(
            "storageclasses",
            json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "local"},
                   "provisioner": "kubernetes.io/host-path", "reclaimPolicy": "Delete"}),
        )
        .unwrap();
    let informers = pv_local::start(&store, &controller);
    let (stop_tx, mut stop_rx) = tokio::sync::watch::channel(false);
    let runner = tokio::spawn(pv_core::runtime::run(controller.clone(), 8, async move {
        let _ = stop_rx.wait_for(|s| *s).await;
    }));
    // One claim is kept bound throughout, so the counts are checked against something non-zero.
    let claim = |name: &str| {
        json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
               "metadata": {"name": name, "namespace": "soak"},
               "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "local",
                        "resources": {"requests": {"storage": "1Gi"}}}})
    };
    store.create("persistentvolumeclaims", claim("keep")).unwrap();
    for round in 0..rounds {
        for i in 0..n {
            store.create("persistentvolumeclaims", claim(&format!("c{round}-{i}"))).unwrap();
        }
        wait("every claim Bound", || {
            count(&store, "persistentvolumeclaims", |o| o["status"]["phase"] == "Bound") == n + 1
        })
        .await;
        for i in 0..n {
            store.delete("persistentvolumeclaims", "soak", &format!("c{round}-{i}"), None, None).unwrap();
        }
        wait("the deleted claims' volumes gone", || count(&store, "persistentvolumes", |_| true) == 1).await;
    }
    // Let the last watch events and syncs land, then compare.
    wait("the caches to settle", || controller.volume_queue.is_empty() && controller.claim_queue.is_empty()).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let errs = invariants::caches(&store, &controller, &[]);
    assert!(errs.is_empty(), "after {rounds} rounds of {n} claims:\n{}", errs.join("\n"));
    assert_eq!(controller.caches().volume_names().len(), 1);
    let _ = stop_tx.send(true);
    runner.await.unwrap();
    drop(informers);
}
