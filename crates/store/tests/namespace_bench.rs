//! By hand: what a write costs in a terminating namespace that still holds many objects.
//!
//! `PV_NS_BENCH_OBJECTS=20000 cargo test --release -p pv-store --test namespace_bench -- --ignored --nocapture`
//!
//! The namespace holds N leases, each with a finalizer; it is deleted (every lease marked),
//! then each lease's finalizer is lifted one write at a time, as finalizer owners do. Printed:
//! the time per write followed by a sweep of the namespace (what the API server used to do
//! after each write), and the time per write with the finisher thread sweeping instead.
//! `PV_NS_BENCH_WRITES=W` times only the first W writes of the first (for a slow sweep).

use pv_store::{NamespaceFinisher, Store};
use serde_json::json;
use std::sync::Arc;
use std::time::{Duration, Instant};

fn objects() -> usize {
    std::env::var("PV_NS_BENCH_OBJECTS").ok().and_then(|v| v.parse().ok()).unwrap_or(20_000)
}

/// How many of the leases to release one by one and time (`PV_NS_BENCH_WRITES`; all by
/// default); the rest are released afterwards, untimed.
fn timed(n: usize) -> usize {
    std::env::var("PV_NS_BENCH_WRITES").ok().and_then(|v| v.parse().ok()).unwrap_or(n).min(n)
}

/// A store with a terminating namespace `b` holding `n` marked leases.
fn terminating(n: usize) -> Arc<Store> {
    let s = Arc::new(Store::new());
    s.create("namespaces", json!({"metadata": {"name": "b"}})).unwrap();
    for i in 0..n {
        let l = json!({"metadata": {"name": format!("l{i}"), "namespace": "b", "finalizers": ["example.com/hold"]},
                       "spec": {}});
        s.create("leases", l).unwrap();
    }
    s.delete("namespaces", "", "b", None, None).unwrap();
    s
}

fn release(s: &Store, i: usize) {
    let mut l = s.get("leases", "b", &format!("l{i}")).unwrap().value();
    l["metadata"]["finalizers"] = json!([]);
    s.update("leases", l, false).unwrap();
}

fn report(what: &str, mut times: Vec<Duration>) {
    times.sort();
    let total: Duration = times.iter().sum();
    let pick = |q: f64| times[((times.len() as f64 * q) as usize).min(times.len() - 1)];
    println!(
        "{what}: {} writes, mean {:.3} ms, p50 {:.3} ms, p99 {:.3} ms, max {:.3} ms",
        times.len(),
        total.as_secs_f64() * 1e3 / times.len() as f64,
        pick(0.5).as_secs_f64() * 1e3,
        pick(0.99).as_secs_f64() * 1e3,
        times.last().unwrap().as_secs_f64() * 1e3
    );
}

#[test]
#[ignore]
fn a_write_then_a_sweep_per_write() {
    let n = objects();
    let s = terminating(n);
    let t = Instant::now();
    s.sweep_namespace("b").unwrap();
    println!("first sweep (marks {n} leases): {:.1} ms", t.elapsed().as_secs_f64() * 1e3);
    let mut times = Vec::with_capacity(n);
    for i in 0..timed(n) {
        let t = Instant::now();
        release(&s, i);
        s.sweep_namespace("b").unwrap();
        times.push(t.elapsed());
    }
    report("write + sweep", times);
    for i in timed(n)..n {
        release(&s, i);
    }
    s.sweep_namespace("b").unwrap();
    assert!(s.get("namespaces", "", "b").is_err());
}

#[test]
#[ignore]
fn writes_with_the_finisher_sweeping() {
    let n = objects();
    let s = terminating(n);
    let _finisher = NamespaceFinisher::start(s.clone());
    let mut times = Vec::with_capacity(n);
    for i in 0..n {
        let t = Instant::now();
        release(&s, i);
        times.push(t.elapsed());
    }
    report("write, finisher running", times);
    let t = Instant::now();
    while s.get("namespaces", "", "b").is_ok() {
        std::thread::sleep(Duration::from_millis(1));
    }
    println!("namespace gone {:.1} ms after the last write", t.elapsed().as_secs_f64() * 1e3);
}
