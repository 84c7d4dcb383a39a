//! The pv- and pvc-protection controllers over a store with kube-apiserver's admission, as `up`
//! runs them: the store puts the finalizers on, deletes only mark, and the controllers take the
//! finalizers off once a claim has no scheduled pod and a volume is no longer Bound.

use pv_core::Protection;
use pv_local::{self as local, MemApi};
use pv_store::{Admission, Store};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;

fn exists(store: &Store, resource: &str, ns: &str, name: &str) -> bool {
    store.get(resource, ns, name).is_ok()
}

/// Waits (bounded, so a broken controller fails instead of hanging) until `done` holds.
async fn until(what: &str, mut done: impl FnMut() -> bool) {
    for _ in 0..500 {
        if done() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("{what}: not after 5 s");
}

fn claim(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name, "namespace": "default"},
           "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "", "resources": {"requests": {"storage": "1Gi"}}}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deletes_complete_once_nothing_uses_the_object() {
    let store = Arc::new(Store::builder().admission(Admission::kube_apiserver()).build());
    store.create("namespaces", json!({"metadata": {"name": "default"}})).unwrap();
    let protection = Protection::new(
        Arc::new(MemApi::new(store.clone())),
        pv_core::SystemClock::new(),
        pv_core::protection::Scope::ALL,
    );
    let _informers = local::start_protection(&store, &protection);
    let (stop_tx, mut stop_rx) = tokio::sync::watch::channel(false);
    let task = tokio::spawn(protection.run(async move {
        let _ = stop_rx.wait_for(|s| *s).await;
    }));

    let c = store.create("persistentvolumeclaims", claim("data")).unwrap();
    assert_eq!(c["metadata"]["finalizers"], json!(["kubernetes.io/pvc-protection"]));
    store.create("persistentvolumeclaims", claim("unused")).unwrap();
    store
        .create(
            "pods",
            json!({"metadata": {"name": "app", "namespace": "default"}, "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "busybox"}],
                   "volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": "data"}}]}}),
        )
        .unwrap();
    store.delete("persistentvolumeclaims", "default", "data", None, None).unwrap();
    store.delete("persistentvolumeclaims", "default", "unused", None, None).unwrap();
    until("the unused claim is gone", || !exists(&store, "persistentvolumeclaims", "default", "unused")).await;
    assert!(exists(&store, "persistentvolumeclaims", "default", "data"), "a claim a scheduled pod uses is kept");
    store.delete("pods", "default", "app", None, None).unwrap();
    until("the claim is gone once its pod is", || !exists(&store, "persistentvolumeclaims", "default", "data")).await;

    let pv = json!({"metadata": {"name": "pv1"}, "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                    "hostPath": {"path": "/tmp/pv1"}}});
    let created = store.create("persistentvolumes", pv).unwrap();
    assert_eq!(created["metadata"]["finalizers"], json!(["kubernetes.io/pv-protection"]));
    let mut bound = (*created).clone();
    bound["status"]["phase"] = json!("Bound");
    store.update("persistentvolumes", bound, true).unwrap();
    store.delete("persistentvolumes", "", "pv1", None, None).unwrap();
    let mut released = store.get("persistentvolumes", "", "pv1").unwrap().value();
    assert!(released["metadata"]["deletionTimestamp"].is_string(), "a Bound volume is only marked");
    released["status"]["phase"] = json!("Released");
    store.update("persistentvolumes", released, true).unwrap();
    until("the volume is gone once it is not Bound", || !exists(&store, "persistentvolumes", "", "pv1")).await;

    let _ = stop_tx.send(true);
    task.await.unwrap();
}
