//! Replays the fuzz corpus and every input the fuzzers ever found on stable Rust: the checks of
//! `fuzz/checks/api.rs` (a refusal is a `Status` and writes nothing; an accepted object is
//! readable, valid and encodable; selectors and paths never panic) over `fuzz/corpus/TARGET/`
//! and `fuzz/regressions/TARGET/`. `cargo +nightly fuzz run TARGET` (in `fuzz/`) searches for
//! more.

#[path = "../../../fuzz/checks/api.rs"]
mod checks;

use std::path::PathBuf;

/// Runs `check` on every file under the target's corpus and regressions; returns how many.
fn replay(target: &str, check: fn(&[u8])) -> usize {
    let fuzz = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz");
    let mut n = 0;
    for dir in ["corpus", "regressions"] {
        let Ok(entries) = std::fs::read_dir(fuzz.join(dir).join(target)) else { continue };
        let mut files: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
        files.sort();
        for f in files {
            let data = std::fs::read(&f).unwrap();
            if let Err(e) = std::panic::catch_unwind(|| check(&data)) {
                let msg = e.downcast_ref::<String>().cloned().or(e.downcast_ref::<&str>().map(|s| s.to_string()));
                panic!("{}: {}", f.display(), msg.unwrap_or_default());
            }
            n += 1;
        }
    }
    n
}

#[test]
fn every_kept_write_input_is_refused_with_a_status_or_stored_whole() {
    assert!(replay("write", checks::write) > 0, "no corpus for write");
}

#[test]
fn every_kept_selector_input_parses_or_is_refused_with_a_status() {
    assert!(replay("selectors", checks::selectors) > 0, "no corpus for selectors");
}

#[test]
fn every_kept_path_input_is_answered_or_refused_with_a_status() {
    assert!(replay("path", checks::path) > 0, "no corpus for path");
}
