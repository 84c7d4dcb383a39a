//! The simulation's tests that use the libtest harness, one module per file beside this one
//! (`cargo test -p pv-sim --release --test sim MODULE::`). `scenarios` and `crash` have mains
//! of their own.

mod collector_counts;
mod concurrent;
mod events_bounded;
mod fuzz_input;
mod operation_metrics;
mod properties;
mod protection;
mod regressions;
mod settled;
mod soak_deletes;
mod steps_reported;
mod sweep;
mod write_race;

/// With `autotests = false` (Cargo.toml), a file added under tests/ runs only when it is a module
/// above or a `[[test]]` of its own: none may be left out.
#[test]
fn every_test_file_is_built() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let this = std::fs::read_to_string(dir.join("tests/sim.rs")).unwrap();
    let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
    let mut files: Vec<String> = std::fs::read_dir(dir.join("tests"))
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.strip_suffix(".rs").map(str::to_string))
        .collect();
    files.sort();
    assert!(files.len() > 3, "tests/ holds {files:?}");
    for f in files {
        let module = this.lines().any(|l| l == format!("mod {f};"));
        let target = manifest.lines().any(|l| l == format!("name = \"{f}\""));
        assert!(module || target, "tests/{f}.rs is neither a module of tests/sim.rs nor a [[test]] in Cargo.toml");
    }
}
