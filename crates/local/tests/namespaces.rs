//! A terminating namespace finishes when an in-process write lets its last object go: the
//! controller attached through `MemApi` lifting the `kubernetes.io/pvc-protection` finalizer
//! is a store write no HTTP handler sees.

use pv_core::ClusterApi;
use pv_local::MemApi;
use pv_store::{Admission, NamespaceFinisher, Store};
use serde_json::json;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Waits (up to 20 s) until `done` holds.
fn eventually(what: &str, done: impl Fn() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < Duration::from_secs(20), "never: {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_namespace_finishes_when_the_controller_lifts_the_last_claims_finalizer() {
    let store = Arc::new(Store::builder().admission(Admission::kube_apiserver()).build());
    let _finisher = NamespaceFinisher::start(store.clone());
    let api = MemApi::new(store.clone());
    store.create("namespaces", json!({"metadata": {"name": "demo"}})).unwrap();
    let claim = json!({"metadata": {"name": "data", "namespace": "demo"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}});
    let created = store.create("persistentvolumeclaims", claim).unwrap();
    assert_eq!(created["metadata"]["finalizers"], json!(["kubernetes.io/pvc-protection"]));

    store.delete("namespaces", "", "demo", None, None).unwrap();
    // The finisher marks the claim; its finalizer holds it, and it holds the namespace.
    eventually("the claim marked for deletion", || {
        store
            .get("persistentvolumeclaims", "demo", "data")
            .is_ok_and(|c| c.value()["metadata"]["deletionTimestamp"].is_string())
    });
    assert!(store.get("namespaces", "", "demo").is_ok());

    let mut c = api.get_claim("demo", "data").await.unwrap();
    c.metadata.finalizers = None;
    api.update_claim(&c).await.unwrap();
    eventually("the namespace gone", || store.get("namespaces", "", "demo").is_err());
    assert_eq!(store.get("persistentvolumeclaims", "demo", "data").unwrap_err().code(), 404);
}
