//! The crates' layers: no source file of the controller's core or model reaches back to a file
//! that reaches it (`scripts/import-circles.py`), and the store's and the API server's circles
//! only shrink.

use std::path::Path;
use std::process::Command;

fn circles(args: &[&str], dir: &Path) -> (bool, String) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let o = Command::new("python3")
        .arg(root.join("scripts/import-circles.py"))
        .args(args)
        .current_dir(dir)
        .output()
        .expect("python3 runs scripts/import-circles.py");
    (o.status.success(), format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr)))
}

#[test]
fn the_core_and_the_model_have_no_import_circle_and_the_others_do_not_grow() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    // The store's and the API server's largest circles as they are now: they may only shrink.
    let limits = ["crates/core=0", "crates/model=0", "crates/sim=0", "crates/store=3", "crates/apiserver=0"];
    let (ok, out) = circles(&limits, root);
    assert!(ok, "{out}");
    let core = out.lines().find(|l| l.starts_with("crates/core: ")).unwrap_or_default();
    assert!(core.ends_with("largest circle 0 files"), "{out}");
}

#[test]
fn a_file_that_reaches_back_to_what_uses_it_is_a_circle() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("c/src");
    std::fs::create_dir_all(src.join("inner")).unwrap();
    std::fs::write(src.join("lib.rs"), "pub mod a;\npub mod b;\npub mod inner;\npub use a::A;\n").unwrap();
    std::fs::write(src.join("a.rs"), "use crate::b::B;\npub struct A;\n").unwrap();
    std::fs::write(src.join("b.rs"), "pub struct B;\nfn f() { let _ = crate::inner::leaf::x(); }\n").unwrap();
    std::fs::write(src.join("inner/mod.rs"), "pub mod leaf;\n").unwrap();
    std::fs::write(src.join("inner/leaf.rs"), "pub fn x() -> crate::A { crate::A }\n").unwrap();
    let (ok, out) = circles(&["c=0"], dir.path());
    assert!(!ok, "a → b → inner/leaf → a (through lib's re-export) is a circle:\n{out}");
    assert!(out.contains("largest circle 3 files") && out.contains("a.rs b.rs inner/leaf.rs"), "{out}");
    // Take the way back out: no circle, and a test module's uses do not count.
    std::fs::write(src.join("inner/leaf.rs"), "pub fn x() {}\n#[cfg(test)]\nmod t { use crate::a::A; }\n").unwrap();
    let (ok, out) = circles(&["c=0"], dir.path());
    assert!(ok, "{out}");
}
