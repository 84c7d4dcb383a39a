//! Replays the `model` fuzz target's kept inputs on the stable toolchain, through the checks
//! the target runs (`fuzz/checks/model.rs`): every input that once failed
//! (`fuzz/regressions/model`) and the kept corpus (`fuzz/corpus/model`).

#[path = "../../../fuzz/checks/model.rs"]
mod checks;

use std::path::{Path, PathBuf};

fn inputs(dir: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz").join(dir);
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|d| d.filter_map(|e| e.ok()).map(|e| e.path()).filter(|p| p.is_file()).collect())
        .unwrap_or_default();
    v.sort();
    v
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
