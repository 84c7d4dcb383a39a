//! Crash recovery, one test per scenario fixture: stop the controller after each possible number of write
//! requests (0, 1, 2, ... up to what a clean run makes), start a fresh controller on the same API
//! state, and require the same converged objects, no orphaned directory, no double binding, and
//! no volume deleted or recycled while a claim still used it.

mod common;

use pv_sim::invariants::{self, GuardPlugin};
use pv_sim::scenario::{load_fixture, normalized_objects, outcome, prepare, setup_names};
use pv_sim::Simulation;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Crash points checked over the whole run.
static CRASH_POINTS: AtomicU64 = AtomicU64::new(0);

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

/// One fixture: every crash point after which the restarted controller did not converge to the
/// clean run's objects, or broke an invariant the clean run keeps.
fn crash_points(f: &Path, rt: &tokio::runtime::Runtime) -> Result<(usize, Vec<String>), String> {
    let s = load_fixture(f)?;
    if s.expect.error.is_some() {
        return Ok((0, Vec::new()));
    }
    let mut failures = Vec::new();
    // The clean run: how many writes, and where it ends.
    let root = tempfile::tempdir().unwrap();
    let objects = prepare(&s, root.path())?;
    let (store, clock) = Simulation::load(objects).map_err(|e| e.to_string())?;
    let (plugins, _) = registry(root.path(), &store);
    let mut clean = Simulation::with_store(store, clock, plugins, s.options());
    rt.block_on(clean.run()).map_err(|e| format!("the clean run failed: {e}"))?;
    let want = normalized(&clean, root.path());
    // Inputs that start broken in a way upstream leaves alone keep those violations; only
    // violations the clean run does not have count against a crash.
    let baseline = invariants::check(clean.store(), Some(root.path()), &setup_names(&s));
    let writes = clean.hooks().write_attempts.load(Ordering::SeqCst);

    for n in 0..writes {
        let root = tempfile::tempdir().unwrap();
        let objects = prepare(&s, root.path())?;
        let (store, clock) = Simulation::load(objects).map_err(|e| e.to_string())?;
        let (plugins, v1) = registry(root.path(), &store);
        let mut first = Simulation::with_store(store.clone(), clock.clone(), plugins, s.options());
        first.hooks().crash_after(n);
        rt.block_on(first.run()).map_err(|e| format!("crash after {n} writes: the first run failed: {e}"))?;
        drop(first);
        let (plugins, v2) = registry(root.path(), &store);
        let mut second = Simulation::with_store(store.clone(), clock, plugins, s.options());
        if let Err(e) = rt.block_on(second.run()) {
            failures.push(format!("crash after {n} writes: restart did not converge: {e}"));
            continue;
        }
        let got = normalized(&second, root.path());
        if got != want {
            failures.push(format!("crash after {n} writes converged elsewhere\n  clean:   {want}\n  crashed: {got}"));
        }
        for v in invariants::check(&store, Some(root.path()), &setup_names(&s)) {
            if baseline.contains(&v) {
                continue;
            }
            failures.push(format!("crash after {n} writes: {v}"));
        }
        for v in v1.lock().unwrap().iter().chain(v2.lock().unwrap().iter()) {
            failures.push(format!("crash after {n} writes: {v}"));
        }
    }
    Ok((writes as usize, failures))
}

fn main() {
    common::run_per_fixture(
        |f| {
            let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
            let (points, failures) = crash_points(f, &rt)?;
            CRASH_POINTS.fetch_add(points as u64, Ordering::Relaxed);
            if failures.is_empty() {
                Ok(())
            } else {
                Err(format!("{} failure(s):\n\n{}", failures.len(), failures.join("\n\n")))
            }
        },
        || println!("{} crash points checked", CRASH_POINTS.load(Ordering::Relaxed)),
    )
}
