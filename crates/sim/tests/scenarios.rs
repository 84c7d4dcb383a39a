//! Runs every fixture under `tests/scenarios/` (at the repository root): once as written, then
//! with injected API faults for several seeds, which must converge to the same objects.

use pv_sim::scenario::{check, normalized_objects, run, run_with, Scenario};
use pv_sim::SimulationOptions;
use pv_store::FaultSpec;
use std::path::PathBuf;

const FAULTS: &str = "conflict=0.2,error=0.1,timeout=0.05,lost-response=0.05,watch-drop=0.05,watch-gone=0.3,stale=0.2";

fn fixtures() -> Vec<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/scenarios");
    let mut v: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("tests/scenarios exists")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    v.sort();
    v
}

fn seeds() -> Vec<u64> {
    let n: u64 = std::env::var("PV_FAULT_SEEDS").ok().and_then(|s| s.parse().ok()).unwrap_or(3);
    (1..=n).collect()
}

#[test]
fn every_scenario_converges_to_its_expected_state_with_and_without_faults() {
    let files = fixtures();
    assert!(!files.is_empty(), "no scenario fixtures found");
    let only = std::env::var("SCENARIO").ok();
    let mut failures = Vec::new();
    let mut ran = 0;
    let mut faults = [0u64; 4];
    for f in &files {
        let fname = f.file_name().unwrap().to_string_lossy().to_string();
        if only.as_ref().is_some_and(|o| !fname.contains(o.as_str())) {
            continue;
        }
        let text = std::fs::read_to_string(f).unwrap();
        let s: Scenario = match serde_saphyr::from_str(&text) {
            Ok(s) => s,
            Err(e) => {
                failures.push(format!("{fname}: bad fixture: {e}"));
                continue;
            }
        };
        ran += 1;
        let root = tempfile::tempdir().unwrap();
        let base = match (run(&s, root.path(), None), &s.expect.error) {
            (Err(e), Some(want)) if e.contains(want.as_str()) => continue,
            (Err(e), Some(want)) => {
                failures.push(format!("{fname} ({}): error {e:?} does not contain {want:?}", s.name));
                continue;
            }
            (Ok(_), Some(want)) => {
                failures.push(format!("{fname} ({}): expected an error containing {want:?}", s.name));
                continue;
            }
            (Err(e), None) => {
                failures.push(format!("{fname} ({}): run failed: {e}", s.name));
                continue;
            }
            (Ok(o), None) => o,
        };
        for e in check(&s, &base, root.path()) {
            failures.push(format!("{fname} ({}): {e}", s.name));
        }
        // Watch events that overtake the responses of the controller's own writes (as over a
        // network) must change neither the outcome nor what the caches hold.
        let eroot = tempfile::tempdir().unwrap();
        let opts = SimulationOptions { watch_before_response: true, ..Default::default() };
        match run_with(&s, eroot.path(), opts) {
            Err(e) => failures.push(format!("{fname} ({}): with watch events first, run failed: {e}", s.name)),
            Ok(o) => {
                for e in check(&s, &o, eroot.path()) {
                    failures.push(format!("{fname} ({}): with watch events first: {e}", s.name));
                }
            }
        }
        if s.no_faults {
            continue;
        }
        let want = normalized_objects(&base);
        for seed in seeds() {
            let froot = tempfile::tempdir().unwrap();
            let spec = FaultSpec::parse(FAULTS).unwrap();
            // Each fixture gets its own fault sequence, reproducible from its name and the seed.
            let mixed =
                fname.bytes().fold(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15), |h, b| h.rotate_left(5) ^ b as u64);
            match run(&s, froot.path(), Some((spec, mixed))) {
                Err(e) => failures.push(format!("{fname} ({}): with faults (seed {seed}) run failed: {e}", s.name)),
                Ok(o) => {
                    for (t, f) in faults.iter_mut().zip(o.faults) {
                        *t += f;
                    }
                    // Host paths differ per run; compare with the root replaced.
                    let a = serde_json::to_string(&normalized_objects(&o)).unwrap().replace(
                        &std::fs::canonicalize(froot.path()).unwrap().to_string_lossy().to_string(),
                        "${ROOT}",
                    );
                    let b = serde_json::to_string(&want)
                        .unwrap()
                        .replace(&std::fs::canonicalize(root.path()).unwrap().to_string_lossy().to_string(), "${ROOT}");
                    if a != b {
                        failures.push(format!("{fname} ({}): with faults (seed {seed}) the objects differ\n  without: {b}\n  with:    {a}", s.name));
                    }
                    let dirs = |p: &std::path::Path| -> Vec<String> {
                        let mut v: Vec<String> = std::fs::read_dir(p)
                            .map(|it| {
                                it.filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
                                    .collect()
                            })
                            .unwrap_or_default();
                        v.sort();
                        v
                    };
                    if dirs(root.path()) != dirs(froot.path()) {
                        failures.push(format!(
                            "{fname} ({}): with faults (seed {seed}) host-path directories differ: {:?} vs {:?}",
                            s.name,
                            dirs(root.path()),
                            dirs(froot.path())
                        ));
                    }
                }
            }
        }
    }
    println!(
        "{ran} scenarios run; faults injected: {} conflicts, {} errors, {} timeouts, {} lost responses",
        faults[0], faults[1], faults[2], faults[3]
    );
    if !failures.is_empty() {
        panic!("{} scenario failure(s):\n\n{}", failures.len(), failures.join("\n\n"));
    }
}
