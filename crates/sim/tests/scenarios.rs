//! Runs every fixture under `tests/scenarios/` (at the repository root), one test per file
//! (`cargo test -p pv-sim --test scenarios NAME` runs the fixtures whose name contains NAME):
//! once as written, once with watch events overtaking the responses to the controller's own
//! writes, then with injected API faults for several seeds (`PV_FAULT_SEEDS`, default 3), which
//! must converge to the same objects and host-path directories. A missing fixture directory, an
//! empty one, or a fixture that cannot be read fails the run.

mod common;

use pv_sim::scenario::{check, load_fixture, normalized_objects, run, run_with};
use pv_sim::SimulationOptions;
use pv_store::FaultSpec;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

const FAULTS: &str = "conflict=0.2,error=0.1,timeout=0.05,lost-response=0.05,watch-drop=0.05,watch-gone=0.3,stale=0.2";

/// Faults injected over the whole run: conflicts, errors, timeouts, lost responses.
static FAULTS_INJECTED: [AtomicU64; 4] = [AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0)];

fn seeds() -> Vec<u64> {
    let n: u64 = std::env::var("PV_FAULT_SEEDS").ok().and_then(|s| s.parse().ok()).unwrap_or(3);
    (1..=n).collect()
}

/// The top-level entries of a host-path root, sorted.
fn dirs(p: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(p)
        .map(|it| it.filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned())).collect())
        .unwrap_or_default();
    v.sort();
    v
}

/// The objects of an outcome as JSON, with the run's host-path root spelled `${ROOT}`.
fn normalized_json(o: &pv_sim::scenario::Outcome, root: &Path) -> String {
    let root = std::fs::canonicalize(root).unwrap().to_string_lossy().into_owned();
    serde_json::to_string(&normalized_objects(o)).unwrap().replace(&root, "${ROOT}")
}

/// One fixture: every failure it shows, or none.
fn scenario(f: &Path) -> Vec<String> {
    let s = match load_fixture(f) {
        Ok(s) => s,
        Err(e) => return vec![e],
    };
    let mut failures = Vec::new();
    let root = tempfile::tempdir().unwrap();
    let base = match (run(&s, root.path(), None), &s.expect.error) {
        (Err(e), Some(want)) if e.contains(want.as_str()) => return failures,
        (Err(e), Some(want)) => return vec![format!("{}: error {e:?} does not contain {want:?}", s.name)],
        (Ok(_), Some(want)) => return vec![format!("{}: expected an error containing {want:?}", s.name)],
        (Err(e), None) => return vec![format!("{}: run failed: {e}", s.name)],
        (Ok(o), None) => o,
    };
    for e in check(&s, &base, root.path()) {
        failures.push(format!("{}: {e}", s.name));
    }
    // Watch events that overtake the responses of the controller's own writes (as over a
    // network) must change neither the outcome nor what the caches hold.
    let eroot = tempfile::tempdir().unwrap();
    let opts = SimulationOptions { watch_before_response: true, ..Default::default() };
    match run_with(&s, eroot.path(), opts) {
        Err(e) => failures.push(format!("{}: with watch events first, run failed: {e}", s.name)),
        Ok(o) => {
            for e in check(&s, &o, eroot.path()) {
                failures.push(format!("{}: with watch events first: {e}", s.name));
            }
        }
    }
    if s.no_faults {
        return failures;
    }
    let want = normalized_json(&base, root.path());
    let fname = f.file_name().unwrap().to_string_lossy();
    for seed in seeds() {
        let froot = tempfile::tempdir().unwrap();
        let spec = FaultSpec::parse(FAULTS).unwrap();
        // Each fixture gets its own fault sequence, reproducible from its name and the seed.
        let mixed = fname.bytes().fold(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15), |h, b| h.rotate_left(5) ^ b as u64);
        match run(&s, froot.path(), Some((spec, mixed))) {
            Err(e) => failures.push(format!("{}: with faults (seed {seed}) run failed: {e}", s.name)),
            Ok(o) => {
                for (t, n) in FAULTS_INJECTED.iter().zip(o.faults) {
                    t.fetch_add(n, Ordering::Relaxed);
                }
                let got = normalized_json(&o, froot.path());
                if got != want {
                    failures.push(format!(
                        "{}: with faults (seed {seed}) the objects differ\n  without: {want}\n  with:    {got}",
                        s.name
                    ));
                }
                if dirs(root.path()) != dirs(froot.path()) {
                    failures.push(format!(
                        "{}: with faults (seed {seed}) host-path directories differ: {:?} vs {:?}",
                        s.name,
                        dirs(root.path()),
                        dirs(froot.path())
                    ));
                }
            }
        }
    }
    failures
}

fn main() {
    common::run_per_fixture(
        |f| {
            let failures = scenario(f);
            if failures.is_empty() {
                Ok(())
            } else {
                Err(failures.join("\n\n"))
            }
        },
        || {
            let f: Vec<u64> = FAULTS_INJECTED.iter().map(|a| a.load(Ordering::Relaxed)).collect();
            println!(
                "faults injected: {} conflicts, {} errors, {} timeouts, {} lost responses",
                f[0], f[1], f[2], f[3]
            );
        },
    )
}
