//! The stand-ins' loop over a store, step by step: a pod with a WaitForFirstConsumer claim is
//! placed, its claim given the node; once the claim is Bound (this test plays the provisioner
//! and the binder) the pod is bound to the node and its volume attached; once attached, the
//! Node lists it; once the pod is gone, the attachment goes. `scripts/e2e-csi.sh` runs the same
//! against the real sidecars and compares it with kube-scheduler and KCM.

use pv_standins::{run, StandIns};
use pv_store::Store;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;

async fn until(what: &str, mut f: impl FnMut() -> bool) {
    for _ in 0..200 {
        if f() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("timed out waiting for {what}");
}

fn get(store: &Store, resource: &str, ns: &str, name: &str) -> Option<Value> {
    store.get(resource, ns, name).ok().map(|o| o.value())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_is_placed_its_volume_attached_and_detached_when_it_goes() {
    let store = Arc::new(Store::new());
    let objects = [
        ("namespaces", json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}})),
        (
            "nodes",
            json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-a",
            "labels": {"kubernetes.io/hostname": "node-a"},
            "annotations": {"volumes.kubernetes.io/controller-managed-attach-detach": "true"}},
            "spec": {"taints": [{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}]}}),
        ),
        (
            "csidrivers",
            json!({"apiVersion": "storage.k8s.io/v1", "kind": "CSIDriver", "metadata": {"name": "csi.example.com"}, "spec": {}}),
        ),
        (
            "csinodes",
            json!({"apiVersion": "storage.k8s.io/v1", "kind": "CSINode", "metadata": {"name": "node-a"},
            "spec": {"drivers": [{"name": "csi.example.com", "nodeID": "node-a"}]}}),
        ),
        (
            "storageclasses",
            json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "wait"},
            "provisioner": "csi.example.com", "volumeBindingMode": "WaitForFirstConsumer"}),
        ),
        (
            "persistentvolumeclaims",
            json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": "data", "namespace": "default"},
            "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "wait", "resources": {"requests": {"storage": "1Gi"}}}}),
        ),
        (
            "pods",
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "app", "namespace": "default"},
            "spec": {"containers": [{"name": "c", "image": "pause"}],
                     "volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": "data"}}]}}),
        ),
    ];
    for (resource, obj) in objects {
        store.create(resource, obj).unwrap();
    }
    let (stop_tx, mut stop_rx) = tokio::sync::watch::channel(false);
    let task = tokio::spawn(run(store.clone(), StandIns { scheduler: true, attach_detach: true }, async move {
        let _ = stop_rx.wait_for(|s| *s).await;
    }));

    // Not Ready: nothing fits (the taint), the pod gets FailedScheduling.
    let events = |reason: &str| {
        let (items, _) = store.list("events", &Default::default()).unwrap();
        items.iter().filter(|e| e.value()["reason"] == reason).count()
    };
    until("FailedScheduling", || events("FailedScheduling") == 1).await;
    // Ready: the taint goes, the claim gets the node.
    let mut node = get(&store, "nodes", "", "node-a").unwrap();
    node["status"] = json!({"conditions": [{"type": "Ready", "status": "True"}]});
    store.update("nodes", node, true).unwrap();
    until("selected-node", || {
        get(&store, "persistentvolumeclaims", "default", "data").unwrap()["metadata"]["annotations"]
            ["volume.kubernetes.io/selected-node"]
            == "node-a"
    })
    .await;
    assert!(get(&store, "nodes", "", "node-a").unwrap()["spec"].get("taints").is_none());
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(get(&store, "pods", "default", "app").unwrap()["spec"].get("nodeName").is_none(), "bound before its claim");

    // The provisioner and the binder: a volume, the claim Bound to it.
    let claim = get(&store, "persistentvolumeclaims", "default", "data").unwrap();
    store
        .create("persistentvolumes", json!({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "pv-1"},
            "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "storageClassName": "wait",
                     "csi": {"driver": "csi.example.com", "volumeHandle": "vol-1"},
                     "claimRef": {"kind": "PersistentVolumeClaim", "namespace": "default", "name": "data", "uid": claim["metadata"]["uid"]}}}))
        .unwrap();
    let mut pv = get(&store, "persistentvolumes", "", "pv-1").unwrap();
    pv["status"] = json!({"phase": "Bound"});
    store.update("persistentvolumes", pv, true).unwrap();
    let mut claim = claim;
    claim["spec"]["volumeName"] = json!("pv-1");
    claim["metadata"]["annotations"]["pv.kubernetes.io/bind-completed"] = json!("yes");
    let claim = store.update("persistentvolumeclaims", claim, false).unwrap();
    let mut claim = (*claim).clone();
    claim["status"] = json!({"phase": "Bound"});
    store.update("persistentvolumeclaims", claim, true).unwrap();

    // The pod goes to the node, its volume gets KCM's VolumeAttachment.
    until("the pod's binding", || get(&store, "pods", "default", "app").unwrap()["spec"]["nodeName"] == "node-a").await;
    let va = pv_standins::attach::attachment_name("vol-1", "csi.example.com", "node-a");
    until("the VolumeAttachment", || get(&store, "volumeattachments", "", &va).is_some()).await;
    let spec = &get(&store, "volumeattachments", "", &va).unwrap()["spec"];
    assert_eq!(
        spec,
        &json!({"attacher": "csi.example.com", "nodeName": "node-a", "source": {"persistentVolumeName": "pv-1"}})
    );
    assert_eq!(events("Scheduled"), 1);

    // csi-attacher's answer: the Node lists it, the pod is told.
    let mut v = get(&store, "volumeattachments", "", &va).unwrap();
    v["status"] = json!({"attached": true});
    store.update("volumeattachments", v, true).unwrap();
    until("volumesAttached", || {
        get(&store, "nodes", "", "node-a").unwrap()["status"]["volumesAttached"]
            == json!([{"name": "kubernetes.io/csi/csi.example.com^vol-1", "devicePath": ""}])
    })
    .await;
    until("SuccessfulAttachVolume", || events("SuccessfulAttachVolume") == 1).await;

    // The pod goes: off the Node's status, the VolumeAttachment deleted.
    store.delete("pods", "default", "app", None, None).unwrap();
    until("the detach", || get(&store, "volumeattachments", "", &va).is_none()).await;
    assert!(get(&store, "nodes", "", "node-a").unwrap()["status"].get("volumesAttached").is_none());
    assert_eq!(events("FailedScheduling"), 1, "one event for one reason");

    stop_tx.send(true).unwrap();
    task.await.unwrap();
}
