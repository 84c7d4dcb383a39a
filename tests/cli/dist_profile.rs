//! The shipped binary is built with the `dist` profile: stripped, thin LTO, one codegen unit,
//! while `release` keeps debug information for profiling. The Docker image must use it.

fn read(path: &str) -> String {
    std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(path)).expect(path)
}

/// The `[profile.NAME]` table of Cargo.toml as `key = value` lines.
fn profile(manifest: &str, name: &str) -> Vec<String> {
    let header = format!("[profile.{name}]");
    manifest
        .lines()
        .skip_while(|l| l.trim() != header)
        .skip(1)
        .take_while(|l| !l.trim_start().starts_with('['))
        .map(|l| l.split('#').next().unwrap_or("").trim().replace(' ', ""))
        .filter(|l| !l.is_empty())
        .collect()
}

#[test]
fn the_dist_profile_strips_and_optimises_and_release_keeps_debug_info() {
    let manifest = read("Cargo.toml");
    let dist = profile(&manifest, "dist");
    for want in ["inherits=\"release\"", "debug=0", "strip=true", "lto=\"thin\"", "codegen-units=1"] {
        assert!(dist.iter().any(|l| l == want), "[profile.dist] lacks {want}: {dist:?}");
    }
    let release = profile(&manifest, "release");
    assert!(release.iter().any(|l| l.starts_with("debug=") && l != "debug=0"), "release keeps debug info: {release:?}");
}

#[test]
fn the_docker_image_ships_the_dist_build() {
    let dockerfile = read("Dockerfile");
    assert!(dockerfile.contains("cargo build --profile dist"), "{dockerfile}");
    assert!(dockerfile.contains("target/dist/pv-controller"), "{dockerfile}");
}

#[test]
fn the_docker_image_builds_with_the_declared_rust_version() {
    let manifest = read("Cargo.toml");
    let declared = manifest
        .lines()
        .find_map(|l| l.strip_prefix("rust-version = \""))
        .and_then(|r| r.split('"').next())
        .expect("rust-version in Cargo.toml");
    let dockerfile = read("Dockerfile");
    let image = dockerfile.lines().find(|l| l.starts_with("FROM rust:")).expect("a rust build image");
    assert!(image.starts_with(&format!("FROM rust:{declared}-")), "{image} pins Rust {declared}");
}
