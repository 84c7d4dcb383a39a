//! Replays the `model` fuzz target's kept inputs on the stable toolchain, through the checks
//! the target runs (`fuzz/checks/model.rs`): every input that once failed
//! (`fuzz/regressions/model`) and the kept corpus (`fuzz/corpus/model`); then a short run of
//! that corpus mutated at random through the same checks (`fuzz/checks/mutate.rs`;
//! a fixed number of inputs by default, else `PV_FUZZ_SECONDS` long or `PV_FUZZ_RUNS` inputs; seed 1 unless
//! `PV_FUZZ_SEED` says otherwise).

#[path = "../../../fuzz/checks/model.rs"]
mod checks;
#[path = "../../../fuzz/checks/mutate.rs"]
mod mutate;

use std::path::{Path, PathBuf};

fn inputs(dir: &str) -> Vec<PathBuf> {
    mutate::inputs(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz").join(dir))
}

fn replay(files: &[PathBuf]) {
    let failed: Vec<String> = files
        .iter()
        .filter_map(|f| {
            let data = std::fs::read(f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
            std::panic::catch_unwind(|| checks::model(&data)).err().map(|_| f.display().to_string())
        })
        .collect();
    assert!(failed.is_empty(), "{} of {} inputs fail: {failed:#?}", failed.len(), files.len());
}

#[test]
fn model_regressions_and_kept_corpus_pass() {
    let corpus = inputs("corpus/model");
    assert!(!corpus.is_empty(), "no model corpus");
    replay(&inputs("regressions/model"));
    replay(&corpus);
}

#[test]
fn mutated_model_corpus_passes() {
    // A fixed number of inputs (a few seconds' worth) unless the environment says otherwise: the
    // same inputs on any machine, every one of them checked.
    let budget = mutate::budget(mutate::Budget::Runs(5_000_000));
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/model");
    let failed = Path::new(env!("CARGO_TARGET_TMPDIR")).join("fuzz-failures");
    let execs = mutate::run("model", &corpus, checks::model, budget, &failed);
    match budget {
        mutate::Budget::Runs(n) => assert_eq!(execs, n, "model: not every input ran"),
        mutate::Budget::Time(t) => assert!(execs > 0, "model: no input ran within {t:?}"),
    }
}
