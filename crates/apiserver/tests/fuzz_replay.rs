//! Replays the fuzz targets' kept inputs on the stable toolchain, through the same checks the
//! targets run (`fuzz/checks/api.rs`): every input that once failed (`fuzz/regressions/write`,
//! `fuzz/regressions/read`) and the kept corpus (`fuzz/corpus/write`, `fuzz/corpus/read`);
//! then a short run of that corpus mutated at random through the same checks
//! (`fuzz/checks/mutate.rs`; a fixed number of inputs by default, else `PV_FUZZ_SECONDS` long or `PV_FUZZ_RUNS` inputs; seed 1 unless
//! `PV_FUZZ_SEED` says otherwise).

#[path = "../../../fuzz/checks/api.rs"]
mod checks;
#[path = "../../../fuzz/checks/mutate.rs"]
mod mutate;

use mutate::inputs;
use std::path::{Path, PathBuf};

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz")
}

/// Runs `check` on every input, then fails naming each one that failed.
fn replay(files: &[PathBuf], check: fn(&[u8])) {
    let failed: Vec<String> = files
        .iter()
        .filter_map(|f| {
            let data = std::fs::read(f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
            std::panic::catch_unwind(|| check(&data)).err().map(|_| f.display().to_string())
        })
        .collect();
    assert!(failed.is_empty(), "{} of {} inputs fail: {failed:#?}", failed.len(), files.len());
}

#[test]
fn regressions_found_by_fuzzing_stay_fixed() {
    let dir = fuzz_dir().join("regressions");
    let all: usize = ["write", "read", "model"].iter().map(|t| inputs(&dir.join(t)).len()).sum();
    assert!(all > 0, "no regression inputs under {}", dir.display());
    let mut subdirs: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    subdirs.sort();
    for s in &subdirs {
        assert!(["write", "read", "model"].contains(&s.as_str()), "{}: not a fuzz target", dir.join(s).display());
    }
    replay(&inputs(&dir.join("write")), checks::write);
    replay(&inputs(&dir.join("read")), checks::read);
}

#[test]
fn kept_write_corpus_passes() {
    let files = inputs(&fuzz_dir().join("corpus/write"));
    assert!(!files.is_empty(), "no write corpus");
    replay(&files, checks::write);
}

#[test]
fn kept_read_corpus_passes() {
    let files = inputs(&fuzz_dir().join("corpus/read"));
    assert!(!files.is_empty(), "no read corpus");
    replay(&files, checks::read);
}

/// `runs` mutated inputs (a few seconds' worth on two cores) unless the environment says
/// otherwise: the same inputs on any machine, every one of them checked.
fn mutated(target: &str, check: fn(&[u8]), runs: u64) {
    let budget = mutate::budget(mutate::Budget::Runs(runs));
    let failed = Path::new(env!("CARGO_TARGET_TMPDIR")).join("fuzz-failures");
    let execs = mutate::run(target, &fuzz_dir().join("corpus").join(target), check, budget, &failed);
    match budget {
        mutate::Budget::Runs(n) => assert_eq!(execs, n, "{target}: not every input ran"),
        mutate::Budget::Time(t) => assert!(execs > 0, "{target}: no input ran within {t:?}"),
    }
}

#[test]
fn mutated_write_corpus_passes() {
    mutated("write", checks::write, 20_000);
}

#[test]
fn mutated_read_corpus_passes() {
    mutated("read", checks::read, 300_000);
}
