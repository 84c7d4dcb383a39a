//! What the controller's caches hold per object: binds N static pairs in simulation, then feeds
//! the bound objects (as informers would) into a fresh controller and counts the bytes its
//! caches keep, by allocator accounting. `cargo run --release -p pv-sim --example cache_memory -- 100000`.
use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};
use std::alloc::System;
use std::sync::Arc;

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

fn live(r: &Region<'_, System>) -> isize {
    let c = r.change();
    // A realloc is already counted in bytes_allocated or bytes_deallocated by its difference.
    c.bytes_allocated as isize - c.bytes_deallocated as isize
}

fn main() {
    let n: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(10_000);
    let objects = pv_sim::workload::static_pairs(n);
    let start = pv_sim::driver::default_start();
    let mut sim = pv_sim::Simulation::streamed(objects, start, pv_plugins::registry(None), Default::default()).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    rt.block_on(sim.run()).unwrap();
    let store = sim.store().clone();
    let api = Arc::new(pv_local::MemApi::new(store.clone()));
    let mut bytes = Vec::new();
    for kind in ["persistentvolumes", "persistentvolumeclaims"] {
        let (items, _) = store.list(kind, &Default::default()).unwrap();
        bytes.push((kind, items.iter().map(pv_store::Object::len).sum::<usize>() / items.len()));
    }
    let region = Region::new(GLOBAL);
    let controller = pv_core::Controller::new(
        api,
        pv_plugins::registry(None),
        pv_core::SystemClock::new(),
        pv_core::Config::default(),
    );
    let mut after_kind = Vec::new();
    for kind in ["persistentvolumes", "persistentvolumeclaims"] {
        let (items, _) = store.list(kind, &Default::default()).unwrap();
        let start = live(&region);
        for o in &items {
            pv_local::deliver(&controller, kind, pv_store::WatchEventType::Added, o);
        }
        drop(items);
        after_kind.push((kind, (live(&region) - start) as f64 / n as f64));
    }
    // Every Added event queued its key; a synced controller works them off. Count the caches
    // once the queues are empty, as a running controller's steady state.
    let queued = live(&region);
    controller.volume_queue.discard();
    controller.claim_queue.discard();
    let total = live(&region) as f64;
    println!(
        "{n} bound pairs: the controller's caches hold {:.0} bytes per object ({:.1} MiB for {} objects)",
        total / (2 * n) as f64,
        total / 1048576.0,
        2 * n
    );
    for ((kind, per), (_, json)) in after_kind.iter().zip(&bytes) {
        println!("  {kind}: {per:.0} bytes each with its queued key (the object as JSON: {json} bytes)");
    }
    println!("  the two queues, full: {:.0} bytes per key", (queued as f64 - total) / (2 * n) as f64);
    std::mem::forget(controller);
    std::mem::forget(sim);
}
