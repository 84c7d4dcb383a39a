//! Decoding a watch event of a bound volume as a real API server sends it, `managedFields`
//! included: whole (kube-rs's typed decode, what `run` did before) against [`Lean`], which reads
//! past `managedFields` keeping only who wrote the binder's fields.
//!
//! The event is the shape kube-apiserver sends for a volume bound by `run`: three field managers
//! (the creator, `pv-controller` on the object, `pv-controller` on its status).

use criterion::{criterion_group, criterion_main, Criterion};
use k8s_openapi::api::core::v1::PersistentVolume;
use kube::api::WatchEvent;
use pv_kube::lean::Lean;
use serde_json::json;
use std::hint::black_box;
use std::time::Duration;

fn event() -> Vec<u8> {
    let pv = json!({
        "kind": "PersistentVolume", "apiVersion": "v1",
        "metadata": {
            "name": "bench-pv-004217", "uid": "6f1c4c9e-2b51-4d3a-9a0e-5d8e0f3c7a21",
            "resourceVersion": "184467", "creationTimestamp": "2026-11-27T07:14:31Z",
            "labels": {"pv-bench": "run-1"},
            "annotations": {"pv.kubernetes.io/bound-by-controller": "yes"},
            "finalizers": ["kubernetes.io/pv-protection"],
            "managedFields": [
                {"manager": "pv-bench", "operation": "Update", "apiVersion": "v1", "time": "2026-11-27T07:14:31Z",
                 "fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": {"f:labels": {".": {}, "f:pv-bench": {}}},
                 "f:spec": {"f:accessModes": {}, "f:capacity": {".": {}, "f:storage": {}},
                 "f:hostPath": {".": {}, "f:path": {}, "f:type": {}},
                 "f:persistentVolumeReclaimPolicy": {}, "f:storageClassName": {}, "f:volumeMode": {}}}},
                {"manager": "pv-controller", "operation": "Update", "apiVersion": "v1", "time": "2026-11-27T07:14:33Z",
                 "fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": {"f:annotations": {".": {},
                 "f:pv.kubernetes.io/bound-by-controller": {}}}, "f:spec": {"f:claimRef": {".": {}, "f:apiVersion": {},
                 "f:kind": {}, "f:name": {}, "f:namespace": {}, "f:resourceVersion": {}, "f:uid": {}}}}},
                {"manager": "pv-controller", "operation": "Update", "apiVersion": "v1", "time": "2026-11-27T07:14:33Z",
                 "fieldsType": "FieldsV1", "fieldsV1": {"f:status": {"f:lastPhaseTransitionTime": {}, "f:phase": {}}},
                 "subresource": "status"}
            ]
        },
        "spec": {
            "capacity": {"storage": "1Gi"}, "hostPath": {"path": "/tmp/pv-bench/004217", "type": ""},
            "accessModes": ["ReadWriteOnce"],
            "claimRef": {"kind": "PersistentVolumeClaim", "namespace": "default", "name": "bench-pvc-004217",
                         "uid": "0b7e52a4-55c8-4f0e-8f86-2f3c5b4e9d10", "apiVersion": "v1", "resourceVersion": "184431"},
            "persistentVolumeReclaimPolicy": "Retain", "storageClassName": "pv-bench", "volumeMode": "Filesystem"
        },
        "status": {"phase": "Bound", "lastPhaseTransitionTime": "2026-11-27T07:14:33Z"}
    });
    serde_json::to_vec(&json!({"type": "MODIFIED", "object": pv})).unwrap()
}

fn decode(c: &mut Criterion) {
    let text = event();
    let mut g = c.benchmark_group("watch event of a bound volume");
    g.measurement_time(Duration::from_secs(3));
    g.bench_function("whole", |b| {
        b.iter(|| serde_json::from_slice::<WatchEvent<PersistentVolume>>(black_box(&text)).unwrap())
    });
    g.bench_function("lean", |b| {
        b.iter(|| serde_json::from_slice::<WatchEvent<Lean<PersistentVolume>>>(black_box(&text)).unwrap())
    });
    g.finish();
}

criterion_group!(benches, decode);
criterion_main!(benches);
