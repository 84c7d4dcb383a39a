//! Times the simulation of N static pairs: `cargo run --release -p pv-sim --example scale -- 100000`.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;
fn main() {
    let n: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(10_000);
    let t0 = std::time::Instant::now();
    let objects = pv_sim::workload::static_pairs(n);
    let start = pv_sim::driver::default_start();
    let mut sim = pv_sim::Simulation::streamed(objects, start, pv_plugins::registry(None), Default::default()).unwrap();
    let t1 = std::time::Instant::now();
    let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    rt.block_on(sim.run()).unwrap();
    let t2 = std::time::Instant::now();
    println!("n={n} load={:?} run={:?} steps={} rounds={}", t1 - t0, t2 - t1, sim.steps, sim.rounds);
    std::mem::forget(sim);
}
