//! Generated workloads for benchmarks: N static PV/PVC pairs, or N claims of a provisioning
//! class. Built directly as objects (no YAML round trip), deterministic for a given N.

use crate::input::InputObject;
use pv_store::ResourceType;
use serde_json::{json, Value};

fn obj(kind: &str, value: Value) -> InputObject {
    InputObject { resource: ResourceType::by_kind(kind).expect("known kind"), value, document: 0 }
}

/// `n` Available PVs of 1..10 Gi and `n` Pending claims asking for the same sizes, so every claim
/// has exactly one best match. Made one object at a time: a simulation loads each as it comes.
pub fn static_pairs(n: usize) -> impl Iterator<Item = InputObject> {
    (0..n).flat_map(|i| {
        let size = format!("{}Gi", 1 + i % 10);
        [
            obj(
                "PersistentVolume",
                json!({"apiVersion": "v1", "kind": "PersistentVolume",
                       "metadata": {"name": format!("bench-pv-{i:07}")},
                       "spec": {"capacity": {"storage": size}, "accessModes": ["ReadWriteOnce"], "storageClassName": "",
                                "nfs": {"server": "bench", "path": format!("/e/{i}")}},
                       "status": {"phase": "Available"}}),
            ),
            obj(
                "PersistentVolumeClaim",
                json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                       "metadata": {"name": format!("bench-pvc-{i:07}"), "namespace": "default"},
                       "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "", "resources": {"requests": {"storage": size}}},
                       "status": {"phase": "Pending"}}),
            ),
        ]
    })
}

/// A host-path StorageClass `bench` and `n` claims of it, made one at a time.
pub fn provisioning(n: usize) -> impl Iterator<Item = InputObject> {
    let class = obj(
        "StorageClass",
        json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "bench"},
               "provisioner": "kubernetes.io/host-path", "reclaimPolicy": "Delete", "volumeBindingMode": "Immediate"}),
    );
    std::iter::once(class).chain((0..n).map(|i| {
        obj(
            "PersistentVolumeClaim",
            json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                   "metadata": {"name": format!("bench-pvc-{i:07}"), "namespace": "default"},
                   "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "bench", "resources": {"requests": {"storage": "1Gi"}}},
                   "status": {"phase": "Pending"}}),
        )
    }))
}
