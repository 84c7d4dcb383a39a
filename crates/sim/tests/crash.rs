//! Crash recovery: for every scenario, stop the controller after each possible number of write
//! requests (0, 1, 2, ... up to what a clean run makes), start a fresh controller on the same API
//! state, and require the same converged objects, no orphaned directory, no double binding, and
//! no volume deleted or recycled while a claim still used it.

use pv_sim::invariants::{self, GuardPlugin};
use pv_sim::scenario::{fixture_files, load_fixture, normalized_objects, outcome, prepare, setup_names};
use pv_sim::{Simulation, SimulationOptions};
use std::sync::atomic::Ordering;
use std::sync::Arc;

fn registry(
    root: &std::path::Path,
    store: &Arc<pv_store::Store>,
) -> (pv_core::PluginRegistry, Arc<std::sync::Mutex<Vec<String>>>) {
    let guard = GuardPlugin::new(Arc::new(pv_plugins::HostPathPlugin::new(root.to_path_buf())), store.clone());
    let violations = guard.violations.clone();
    let mut r = pv_core::PluginRegistry::new();
    r.register(Arc::new(guard));
    (r, violations)
}

fn normalized(sim: &Simulation, root: &std::path::Path) -> String {
    let root = std::fs::canonicalize(root).unwrap().to_string_lossy().into_owned();
    serde_json::to_string(&normalized_objects(&outcome(sim))).unwrap().replace(&root, "${ROOT}")
}

#[test]
fn a_controller_killed_between_any_two_writes_converges_after_restart() {
    let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    let mut failures = Vec::new();
    let mut cases = 0;
    for f in fixture_files() {
        let fname = f.file_name().unwrap().to_string_lossy().into_owned();
        let Ok(s) = load_fixture(&f) else { continue };
        if s.expect.error.is_some() {
            continue;
        }
        // The clean run: how many writes, and where it ends.
        let root = tempfile::tempdir().unwrap();
        let Ok(objects) = prepare(&s, root.path()) else { continue };
        let (store, clock) = Simulation::load(objects).unwrap();
        let (plugins, _) = registry(root.path(), &store);
        let mut clean = Simulation::with_store(store, clock, plugins, SimulationOptions::default());
        rt.block_on(clean.run()).unwrap();
        let want = normalized(&clean, root.path());
        // Inputs that start broken in a way upstream leaves alone keep those violations; only
        // violations the clean run does not have count against a crash.
        let baseline = invariants::check(clean.store(), Some(root.path()), &setup_names(&s));
        let writes = clean.api().write_attempts.load(Ordering::SeqCst);

        for n in 0..writes {
            cases += 1;
            let root = tempfile::tempdir().unwrap();
            let objects = prepare(&s, root.path()).unwrap();
            let (store, clock) = Simulation::load(objects).unwrap();
            let (plugins, v1) = registry(root.path(), &store);
            let mut first = Simulation::with_store(store.clone(), clock.clone(), plugins, SimulationOptions::default());
            first.api().crash_after(n);
            rt.block_on(first.run()).unwrap();
            drop(first);
            let (plugins, v2) = registry(root.path(), &store);
            let mut second = Simulation::with_store(store.clone(), clock, plugins, SimulationOptions::default());
            if let Err(e) = rt.block_on(second.run()) {
                failures.push(format!("{fname}: crash after {n} writes: restart did not converge: {e}"));
                continue;
            }
            let got = normalized(&second, root.path());
            if got != want {
                failures.push(format!(
                    "{fname}: crash after {n} writes converged elsewhere\n  clean:   {want}\n  crashed: {got}"
                ));
            }
            for v in invariants::check(&store, Some(root.path()), &setup_names(&s)) {
                if baseline.contains(&v) {
                    continue;
                }
                failures.push(format!("{fname}: crash after {n} writes: {v}"));
            }
            for v in v1.lock().unwrap().iter().chain(v2.lock().unwrap().iter()) {
                failures.push(format!("{fname}: crash after {n} writes: {v}"));
            }
        }
    }
    println!("{cases} crash points checked");
    assert!(failures.is_empty(), "{} failure(s):\n\n{}", failures.len(), failures.join("\n\n"));
}
