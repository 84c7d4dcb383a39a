//! kube-apiserver's OpenAPI v3 documents, one file per served group version in `src/openapi/`
//! (`scripts/gen-openapi.py` writes them), listed for the API server by their file names:
//! `api_v1.json`, `apis_<group with dots as underscores>_<version>.json`. A new group's
//! document is picked up by writing its file.

use std::fmt::Write;
use std::path::Path;

fn main() {
    let dir = Path::new("src/openapi");
    println!("cargo:rerun-if-changed={}", dir.display());
    let mut stems: Vec<String> = std::fs::read_dir(dir)
        .expect("src/openapi is readable")
        .map(|e| e.expect("src/openapi is readable").path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .filter_map(|p| p.file_stem().and_then(|s| s.to_str()).map(str::to_string))
        .filter(|s| s.starts_with("api"))
        .collect();
    stems.sort();
    let mut out = String::from(
        "/// The OpenAPI v3 documents by file name (without `.json`).\nconst OPENAPI_V3_FILES: &[(&str, &str)] = &[\n",
    );
    for s in &stems {
        writeln!(out, "    ({s:?}, include_str!(concat!(env!(\"CARGO_MANIFEST_DIR\"), \"/src/openapi/{s}.json\"))),")
            .unwrap();
    }
    out.push_str("];\n");
    let path = Path::new(&std::env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("openapi_files.rs");
    std::fs::write(path, out).expect("OUT_DIR is writable");
}
