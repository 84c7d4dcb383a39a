//! What is shipped agrees with itself without any tool to run: the Helm chart, the krew manifest
//! and the image tags carry Cargo.toml's version, and the image of `scripts/build-image.sh`
//! (crane) has the Dockerfile's entrypoint, command, user and port. The tools' own checks
//! (`helm lint`, krew's validation, the image unpacked and run) are in scripts/e2e-helm.sh,
//! scripts/e2e-krew.sh and scripts/e2e-image.sh.

fn read(path: &str) -> String {
    std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(path)).expect(path)
}

/// The value of the first line `KEY VALUE` (after trimming `prefix`) in `text`, quotes removed.
fn field<'a>(text: &'a str, prefix: &str) -> &'a str {
    text.lines()
        .find_map(|l| l.strip_prefix(prefix))
        .unwrap_or_else(|| panic!("no line starting with {prefix:?}"))
        .trim()
        .trim_matches('"')
}

fn cargo_version() -> String {
    field(&read("Cargo.toml"), "version = ").to_string()
}

#[test]
fn the_chart_and_the_krew_manifest_carry_the_controllers_version() {
    let version = cargo_version();
    let chart = read("deploy/chart/Chart.yaml");
    assert_eq!(field(&chart, "appVersion:"), version, "Chart.yaml appVersion");
    assert_eq!(field(&chart, "version:"), version, "Chart.yaml version");
    let krew = read("deploy/krew/pv-explain.yaml");
    assert_eq!(field(&krew, "  version:"), format!("v{version}"), "krew spec.version");
    let kustomization = read("deploy/kustomization.yaml");
    assert_eq!(field(&kustomization, "    newTag:"), format!("v{version}"), "kustomization image tag");
}

#[test]
fn the_daemonless_image_has_the_dockerfiles_entrypoint_command_user_and_port() {
    let dockerfile = read("Dockerfile");
    let final_stage = &dockerfile[dockerfile.rfind("\nFROM ").expect("a FROM line")..];
    let script = read("scripts/build-image.sh");
    let instruction = |name: &str| field(final_stage, &format!("{name} ")).to_string();
    let entrypoint = instruction("ENTRYPOINT");
    assert_eq!(entrypoint, r#"["/pv-controller"]"#);
    assert!(script.contains("--entrypoint /pv-controller "), "build-image.sh sets another entrypoint");
    let user = instruction("USER");
    assert!(script.contains(&format!("--user {user} ")), "build-image.sh does not set user {user}");
    let cmd: Vec<String> = serde_json::from_str(&instruction("CMD")).expect("CMD as JSON");
    assert!(script.contains(&format!("--cmd {} ", cmd.join(","))), "build-image.sh does not set cmd {cmd:?}");
    let port = instruction("EXPOSE");
    assert!(script.contains(&format!("--exposed-ports {port}/tcp")), "build-image.sh does not expose {port}");
}

#[test]
fn the_image_and_the_krew_archive_ship_the_static_dist_build() {
    let script = read("scripts/build-dist.sh");
    assert!(script.contains("--profile dist"), "build-dist.sh does not build the dist profile");
    assert!(script.contains("+crt-static") && script.contains("x86_64-unknown-linux-musl"));
    for packer in ["scripts/build-image.sh", "scripts/build-krew.sh"] {
        assert!(read(packer).contains("scripts/build-dist.sh"), "{packer} does not ship build-dist.sh's binary");
    }
}
