//! The lists of served kinds, made from the files of `src/registry/`: every file there but
//! `mod.rs` and `strategy.rs` is one kind, with its `RESOURCE` and its `Strategy`. Adding a kind
//! is adding its file (and the `mod` line Rust needs); the lists follow.

use std::fmt::Write;
use std::path::Path;

fn main() {
    let dir = Path::new("src/registry");
    println!("cargo:rerun-if-changed={}", dir.display());
    let mut kinds: Vec<String> = std::fs::read_dir(dir)
        .expect("src/registry is readable")
        .map(|e| e.expect("src/registry is readable").path())
        .filter(|p| p.extension().is_some_and(|e| e == "rs"))
        .filter_map(|p| p.file_stem().and_then(|s| s.to_str()).map(str::to_string))
        .filter(|k| k != "mod" && k != "strategy")
        .collect();
    kinds.sort();
    let mut out = String::new();
    out.push_str("/// Every resource type the store serves, one per file of `registry/` (its `RESOURCE`).\n");
    out.push_str("/// `events.k8s.io/v1` Events share the `events` storage.\n");
    out.push_str("pub const RESOURCE_TYPES: &[ResourceType] = &[\n");
    for k in &kinds {
        writeln!(out, "    {k}::RESOURCE,").unwrap();
    }
    out.push_str("];\n\n/// Every kind's strategy, in the order of [`RESOURCE_TYPES`].\n");
    out.push_str("pub(crate) const STRATEGIES: &[&dyn Strategy] = &[\n");
    for k in &kinds {
        writeln!(out, "    &{k}::Strategy,").unwrap();
    }
    out.push_str("];\n");
    let path = Path::new(&std::env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("kinds.rs");
    std::fs::write(path, out).expect("OUT_DIR is writable");
}
