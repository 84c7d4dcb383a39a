//! `pv-controller explain` as a user runs it: the built binary, its exit codes, its `error:` line,
//! and the kubectl plugin shim.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/explain").join(name)
}

fn explain(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_pv-controller"))
        .arg("explain")
        .args(args)
        .env_remove("KUBECONFIG")
        .output()
        .expect("binary runs")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn existing_claim_exits_zero_with_json_on_stdout() {
    let f = fixture("match.yaml");
    let out = explain(&["pvc", "default/data", "-f", f.to_str().unwrap(), "-o", "json"]);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
    assert_eq!(v["bestMatch"], "pv-fit");
    assert_eq!(v["next"], "bind");
}

#[test]
fn namespace_flag_and_bare_name_work_like_kubectl() {
    let f = fixture("match.yaml");
    let out = explain(&["pvc", "data", "-n", "default", "--file", f.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(stdout.contains("VOLUME"), "{stdout}");
    assert!(!stdout.contains('\x1b'), "no colour when not a terminal: {stdout}");
    for line in stdout.lines() {
        assert!(line.chars().count() <= 100, "line over 100 columns: {line:?}");
    }
}

#[test]
fn missing_claim_exits_one_with_an_error_line() {
    let f = fixture("match.yaml");
    let out = explain(&["pvc", "default/nope", "-f", f.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(stderr.starts_with("error: "), "{stderr}");
    assert!(stderr.contains("default/nope") && stderr.contains("not found"), "{stderr}");
    assert!(out.stdout.is_empty());
}

#[test]
fn bad_input_and_bad_names_are_user_errors() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.yaml");
    std::fs::write(&bad, "apiVersion: v1\nkind: Deployment\nmetadata: {name: d}\n").unwrap();
    let out = explain(&["pvc", "default/data", "-f", bad.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("document 1"), "{}", text(&out.stderr));

    let f = fixture("match.yaml");
    let out = explain(&["pvc", "a/b/c", "-f", f.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).starts_with("error: "));

    let out = explain(&["pv", "x", "-f", f.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "unknown kind is a usage error");
}

#[test]
fn unreachable_cluster_is_a_user_error() {
    let dir = tempfile::tempdir().unwrap();
    let kc = dir.path().join("kubeconfig");
    // Port 1 on loopback: nothing listens there, so the connection is refused at once.
    std::fs::write(
        &kc,
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: \"http://127.0.0.1:1\"}\n\
         users:\n- name: u\n  user: {token: t}\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\n\
         current-context: x\n",
    )
    .unwrap();
    let out = explain(&["pvc", "default/data", "--kubeconfig", kc.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "stderr: {}", text(&out.stderr));
    assert!(text(&out.stderr).starts_with("error: "));
}

#[test]
#[cfg(unix)]
fn kubectl_plugin_shim_runs_explain() {
    let shim = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/kubectl-pv_explain");
    let f = fixture("match.yaml");
    let out = Command::new("sh")
        .arg(&shim)
        .args(["pvc", "default/data", "-f", f.to_str().unwrap(), "-o", "json"])
        .env("PV_CONTROLLER", env!("CARGO_BIN_EXE_pv-controller"))
        .output()
        .expect("shim runs");
    assert_eq!(out.status.code(), Some(0), "stderr: {}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["claim"], "default/data");
}
