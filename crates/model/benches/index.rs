//! Micro-benchmarks of the volume index against the scan it replaces.
//!
//! Why: upstream finds a claim's volume by scanning every volume of every access-mode set, which
//! makes binding N claims O(N²) and is what took 10,000 static pairs minutes to bind
//! (kubernetes/kubernetes#133352). `VolumeIndex::find_best_match` must return the same volume
//! (a property test in `index.rs` holds them equal) at a cost that barely grows with the number of
//! volumes. These benches show both at 1k, 10k and 100k volumes, plus what keeping the index up to
//! date costs per volume update (`apply`) and per removal and re-insertion (`delete` + `apply`).
//!
//! The volumes are a mix: sizes 1–100 Gi, three access-mode sets (RWO; RWO+ROX; RWX) and two
//! classes; claims cycle through 64 requests that all have a match. Measurement time is kept short
//! so that `cargo bench -p pv-model` finishes in a few minutes.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use pv_model::k8s::{PersistentVolume, PersistentVolumeClaim};
use pv_model::matching::best_match_by_scan;
use pv_model::VolumeIndex;
use serde_json::json;
use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

const SIZES: [usize; 3] = [1_000, 10_000, 100_000];
const MODE_SETS: [&[&str]; 3] = [&["ReadWriteOnce"], &["ReadWriteOnce", "ReadOnlyMany"], &["ReadWriteMany"]];
const CLASSES: [&str; 2] = ["fast", "slow"];

/// A small deterministic generator (no dependency, same volumes on every run).
fn mix(i: usize) -> usize {
    let mut x = (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    x ^= x >> 31;
    x = x.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    (x ^ (x >> 29)) as usize
}

fn volume(i: usize) -> PersistentVolume {
    let r = mix(i);
    serde_json::from_value(json!({
        "metadata": {"name": format!("pv-{i:07}")},
        "spec": {"capacity": {"storage": format!("{}Gi", 1 + r % 100)},
                 "accessModes": MODE_SETS[(r / 100) % 3],
                 "storageClassName": CLASSES[(r / 300) % 2],
                 "nfs": {"server": "bench", "path": format!("/e/{i}")}},
        "status": {"phase": "Available"}
    }))
    .expect("valid volume")
}

fn claim(i: usize) -> PersistentVolumeClaim {
    let r = mix(i + 1_000_003);
    let mode = ["ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany"][r % 3];
    serde_json::from_value(json!({
        "metadata": {"name": format!("pvc-{i}"), "namespace": "default"},
        "spec": {"accessModes": [mode],
                 "storageClassName": CLASSES[(r / 3) % 2],
                 "resources": {"requests": {"storage": format!("{}Gi", 1 + (r / 6) % 90)}}}
    }))
    .expect("valid claim")
}

fn find_best_match(c: &mut Criterion) {
    let claims: Vec<PersistentVolumeClaim> = (0..64).map(claim).collect();
    let mut g = c.benchmark_group("find_best_match");
    g.measurement_time(Duration::from_secs(3)).warm_up_time(Duration::from_secs(1)).sample_size(20);
    for n in SIZES {
        let volumes: Vec<PersistentVolume> = (0..n).map(volume).collect();
        let mut index = VolumeIndex::new();
        for v in &volumes {
            index.apply(Arc::new(v.clone()));
        }
        let mut k = 0;
        g.bench_with_input(BenchmarkId::new("index", n), &n, |b, _| {
            b.iter(|| {
                k = (k + 1) % claims.len();
                black_box(index.find_best_match(&claims[k], false, &|_| false))
            })
        });
        g.bench_with_input(BenchmarkId::new("scan", n), &n, |b, _| {
            b.iter(|| {
                k = (k + 1) % claims.len();
                black_box(best_match_by_scan(&claims[k], volumes.iter(), false).map(|v| v.metadata.name.clone()))
            })
        });
    }
    g.finish();
}

fn index_updates(c: &mut Criterion) {
    let mut g = c.benchmark_group("index_update");
    g.measurement_time(Duration::from_secs(3)).warm_up_time(Duration::from_secs(1)).sample_size(20);
    for n in SIZES {
        let volumes: Vec<Arc<PersistentVolume>> = (0..n).map(|i| Arc::new(volume(i))).collect();
        let mut index = VolumeIndex::new();
        for v in &volumes {
            index.apply(v.clone());
        }
        let mut k = 0;
        g.bench_with_input(BenchmarkId::new("apply", n), &n, |b, _| {
            b.iter(|| {
                k = (k + 7919) % n;
                index.apply(volumes[k].clone())
            })
        });
        g.bench_with_input(BenchmarkId::new("delete+apply", n), &n, |b, _| {
            b.iter(|| {
                k = (k + 7919) % n;
                let name = volumes[k].metadata.name.as_deref().unwrap_or_default();
                black_box(index.delete(name));
                index.apply(volumes[k].clone())
            })
        });
    }
    g.finish();
}

criterion_group!(benches, find_best_match, index_updates);
criterion_main!(benches);
