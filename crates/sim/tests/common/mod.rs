//! What the per-fixture test binaries share: one test (a libtest trial) per scenario fixture.

use libtest_mimic::{Arguments, Failed, Trial};
use pv_sim::scenario::{fixture_files, fixture_name};
use std::path::Path;

/// Runs `test` on every fixture under `tests/scenarios/`, each as a test named after its file
/// (so `cargo test --test BINARY NAME` filters them), then `summary`, and exits with libtest's
/// code. A missing or empty fixture directory fails the run.
pub fn run_per_fixture(test: fn(&Path) -> Result<(), String>, summary: impl FnOnce()) -> ! {
    let args = Arguments::from_args();
    let files = match fixture_files() {
        Ok(f) => f,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(101);
        }
    };
    let trials =
        files.into_iter().map(|f| Trial::test(fixture_name(&f), move || test(&f).map_err(Failed::from))).collect();
    let conclusion = libtest_mimic::run(&args, trials);
    summary();
    conclusion.exit()
}
