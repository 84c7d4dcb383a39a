//! Generated workloads for benchmarks: N static PV/PVC pairs, or N claims of a provisioning
//! class. Built directly as objects (no YAML round trip), deterministic for a given N.

use crate::input::InputObject;
use pv_store::ResourceType;
use serde_json::{json, Value};

fn obj(kind: &str, value: Value) -> InputObject {
    InputObject { resource: ResourceType::by_kind(kind).expect("known kind"), value, document: 0 }
}

/// `n` Available PVs of 1..10 Gi and `n` Pending claims asking for the same sizes, so every claim
/// has exactly one best match.
pub fn static_pairs(n: usize) -> Vec<InputObject> {
    let mut v = Vec::with_capacity(2 * n);
    for i in 0..n {
        let size = format!("{}Gi", 1 + i % 10);
        v.push(obj(
            "PersistentVolume",
            json!({"apiVersion": "v1", "kind": "PersistentVolume",
                   "metadata": {"name": format!("bench-pv-{i:07}")},
                   "spec": {"capacity": {"storage": size}, "accessModes": ["ReadWriteOnce"], "storageClassName": "",
                            "nfs": {"server": "bench", "path": format!("/e/{i}")}},
                   "status": {"phase": "Available"}}),
        ));
        v.push(obj(
            "PersistentVolumeClaim",
            json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                   "metadata": {"name": format!("bench-pvc-{i:07}"), "namespace": "default"},
                   "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "", "resources": {"requests": {"storage": size}}},
                   "status": {"phase": "Pending"}}),
        ));
    }
    v
}

/// A host-path StorageClass `bench` and `n` claims of it.
pub fn provisioning(n: usize) -> Vec<InputObject> {
    let mut v = vec![obj(
        "StorageClass",
        json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "bench"},
               "provisioner": "kubernetes.io/host-path", "reclaimPolicy": "Delete", "volumeBindingMode": "Immediate"}),
    )];
    for i in 0..n {
        v.push(obj(
            "PersistentVolumeClaim",
            json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                   "metadata": {"name": format!("bench-pvc-{i:07}"), "namespace": "default"},
                   "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "bench", "resources": {"requests": {"storage": "1Gi"}}},
                   "status": {"phase": "Pending"}}),
        ));
    }
    v
}
