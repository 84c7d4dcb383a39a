//! Replays the `model` fuzz target's corpus and every input it ever found on stable Rust
//! (`fuzz/checks/model.rs`: quantities print and parse back to themselves, label selectors are
//! validated and matched without panicking) over `fuzz/corpus/model/` and
//! `fuzz/regressions/model/`.

#[path = "../../../fuzz/checks/model.rs"]
mod checks;

use std::path::PathBuf;

#[test]
fn every_kept_quantity_and_selector_input_holds() {
    let fuzz = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz");
    let mut n = 0;
    for dir in ["corpus", "regressions"] {
        let Ok(entries) = std::fs::read_dir(fuzz.join(dir).join("model")) else { continue };
        for f in entries.flatten().map(|e| e.path()) {
            let data = std::fs::read(&f).unwrap();
            if let Err(e) = std::panic::catch_unwind(|| checks::model(&data)) {
                let msg = e.downcast_ref::<String>().cloned().or(e.downcast_ref::<&str>().map(|s| s.to_string()));
                panic!("{}: {}", f.display(), msg.unwrap_or_default());
            }
            n += 1;
        }
    }
    assert!(n > 0, "no corpus for model");
}
