//! `pv-controller explain` as a user runs it: the built binary, its exit codes, its `error:` line,
//! and the kubectl plugin shim.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::util::{text, BIN};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/explain").join(name)
}

fn explain(args: &[&str]) -> Output {
    Command::new(BIN).arg("explain").args(args).env_remove("KUBECONFIG").output().expect("binary runs")
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
fn yaml_output_holds_the_same_fields_as_json() {
    let f = fixture("match.yaml");
    let json = explain(&["pvc", "default/data", "-f", f.to_str().unwrap(), "-o", "json"]);
    let yaml = explain(&["pvc", "default/data", "-f", f.to_str().unwrap(), "-o", "yaml"]);
    assert_eq!(yaml.status.code(), Some(0), "stderr: {}", text(&yaml.stderr));
    let y = text(&yaml.stdout);
    assert!(y.lines().any(|l| l == "bestMatch: pv-fit"), "{y}");
    let from_yaml: serde_json::Value = serde_saphyr::from_str(&y).expect("YAML on stdout");
    let from_json: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(from_yaml, from_json);
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
    std::fs::write(&bad, "apiVersion: v1\nkind: PersistentVolumeClaims\nmetadata: {name: d}\n").unwrap();
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
    let stderr = text(&out.stderr);
    assert!(stderr.starts_with("error: "));
    assert!(stderr.contains("http://127.0.0.1:1") && stderr.contains("connection refused"), "{stderr}");
    assert!(!stderr.contains("ServiceError"), "{stderr}");
}

#[test]
fn a_missing_kubeconfig_is_named_once_without_extra_quotes() {
    let out = explain(&["pvc", "default/data", "--kubeconfig", "/nonexistent/kubeconfig"]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(stderr.contains("/nonexistent/kubeconfig: No such file or directory"), "{stderr}");
    assert!(!stderr.contains("'\""), "the path is not quoted twice: {stderr}");
}

#[test]
fn the_readme_example_explains_what_the_controller_would_do() {
    // examples/cluster.yaml gives its PVs no phase, as a user writes them: the controller first
    // makes them Available, then binds data/small to pv-5g (simulate does exactly that).
    let f = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/cluster.yaml");
    let out = explain(&["pvc", "data/small", "-f", f.to_str().unwrap(), "-o", "json"]);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
    assert_eq!(v["next"], "bind", "{v:#}");
    assert_eq!(v["bestMatch"], "pv-5g", "{v:#}");
    let message = v["message"].as_str().unwrap();
    assert!(message.contains("pv-5g") && message.contains("Available"), "{message}");
    let out = explain(&["pvc", "data/small", "-f", f.to_str().unwrap()]);
    let stdout = text(&out.stdout);
    assert!(stdout.contains("Next: bind"), "{stdout}");
    assert!(!stdout.contains("not yet Available"), "{stdout}");

    let sim = Command::new(BIN).args(["simulate", "-f", f.to_str().unwrap()]).output().expect("binary runs");
    let list: serde_json::Value = serde_json::from_slice(&sim.stdout).expect("JSON");
    let small = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["kind"] == "PersistentVolumeClaim" && o["metadata"]["name"] == "small")
        .unwrap();
    assert_eq!(small["spec"]["volumeName"], "pv-5g", "simulate agrees");
}

#[test]
fn events_and_other_kinds_are_skipped_with_a_note_and_an_empty_file_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/cluster.yaml")).unwrap();
    let f = dir.path().join("dump.yaml");
    std::fs::write(
        &f,
        format!(
            "{cluster}---\napiVersion: v1\nkind: Event\nmetadata: {{name: e1, namespace: data}}\n\
             involvedObject: {{kind: PersistentVolumeClaim, name: small, namespace: data}}\nreason: X\n\
             ---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: c1, namespace: data}}\n"
        ),
    )
    .unwrap();
    let out = explain(&["pvc", "data/small", "-f", f.to_str().unwrap(), "-o", "json"]);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", text(&out.stderr));
    // Events are read (an external provisioner's answers); a ConfigMap is not.
    assert!(
        text(&out.stderr).contains("ignored 1 object of kinds that do not affect the controller (1 ConfigMap)"),
        "{}",
        text(&out.stderr)
    );
    let empty = dir.path().join("empty.yaml");
    std::fs::write(&empty, "").unwrap();
    let out = explain(&["pvc", "data/small", "-f", empty.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("the input is empty"), "{}", text(&out.stderr));
}

#[test]
fn explain_help_points_only_at_files_in_the_repository() {
    let out = Command::new(BIN).args(["explain", "--help"]).output().unwrap();
    let help = text(&out.stdout);
    assert!(!help.contains("INTERFACES"), "{help}");
}

#[test]
#[cfg(unix)]
fn kubectl_plugin_shim_runs_explain() {
    let shim = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/kubectl-pv_explain");
    let f = fixture("match.yaml");
    let out = Command::new("sh")
        .arg(&shim)
        .args(["pvc", "default/data", "-f", f.to_str().unwrap(), "-o", "json"])
        .env("PV_CONTROLLER", BIN)
        .output()
        .expect("shim runs");
    assert_eq!(out.status.code(), Some(0), "stderr: {}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["claim"], "default/data");
}

#[test]
fn the_table_folds_volumes_claimed_by_others_into_counts_unless_all() {
    let f = fixture("many-claimed.yaml");
    let out = explain(&["pvc", "default/data", "-f", f.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", text(&out.stderr));
    let t = text(&out.stdout);
    assert!(t.contains("Volumes: 41 (1 accessModes, 40 claimedByOther)"), "{t}");
    assert!(t.contains("40 more not listed (40 claimedByOther); --all lists every volume"), "{t}");
    assert!(!t.contains("pv-00"), "{t}");
    let all = text(&explain(&["pvc", "default/data", "-f", f.to_str().unwrap(), "--all"]).stdout);
    assert_eq!((0..40).filter(|i| all.contains(&format!("pv-{i:02} "))).count(), 40, "{all}");
    assert!(!all.contains("more not listed"), "{all}");
    let json: serde_json::Value =
        serde_json::from_slice(&explain(&["pvc", "default/data", "-f", f.to_str().unwrap(), "-o", "json"]).stdout)
            .unwrap();
    assert_eq!(json["summary"], serde_json::json!({"accessModes": 1, "claimedByOther": 40}));
    assert_eq!(json["candidates"].as_array().unwrap().len(), 41, "JSON lists every volume");
}

#[test]
fn a_dump_with_the_provisioners_objects_gives_its_verdict() {
    for (name, verdict) in [("external-not-installed.yaml", "notInstalled"), ("external-failing.yaml", "failing")] {
        let f = fixture(name);
        let out = explain(&["pvc", "default/data", "-f", f.to_str().unwrap(), "-o", "json"]);
        assert_eq!(out.status.code(), Some(0), "stderr: {}", text(&out.stderr));
        assert!(out.stderr.is_empty(), "CSIDriver, Lease and Event are read, not ignored: {}", text(&out.stderr));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["next"], "wait-external-provisioner");
        assert_eq!(v["provisioner"]["name"], "io.kubernetes.storage.mock");
        assert_eq!(v["provisioner"]["verdict"], verdict, "{name}: {v:#}");
    }
}

/// `explain pod` reads the same objects live as from a dump of them, and says the same: each pod
/// fixture is applied to `up` (without controllers, so nothing changes under the comparison),
/// dumped with `kubectl get ... -A -o yaml` as the README says, and explained both ways.
#[test]
fn explain_pod_says_the_same_live_and_from_a_dump() {
    live_and_dump_agree("tests/explain/pod", &["pod", "default/app"]);
}

/// The same for `explain pvc` and every claim fixture.
#[test]
fn explain_pvc_says_the_same_live_and_from_a_dump() {
    live_and_dump_agree("tests/explain", &["pvc", "default/data"]);
}

fn live_and_dump_agree(fixtures: &str, what: &[&str]) {
    if !crate::util::kubectl_available() {
        eprintln!("skip: kubectl not installed");
        return;
    }
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(fixtures);
    let mut fixtures: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    fixtures.sort();
    assert!(fixtures.len() > 10, "pod fixtures: {}", fixtures.len());
    let ages = |s: &str| {
        // Ages move on between the two reads.
        let mut out = String::new();
        for w in s.split(' ') {
            let is_age = w.len() > 1 && w.ends_with('s') && w[..w.len() - 1].chars().all(|c| c.is_ascii_digit());
            out.push_str(if is_age { "Ns" } else { w });
            out.push(' ');
        }
        out
    };
    let mut compared = 0;
    for f in fixtures {
        let tmp = tempfile::tempdir().unwrap();
        let up = crate::util::Up::start(
            tmp.path(),
            &["--listen", "127.0.0.1:0", "--metrics-addr", "127.0.0.1:0", "--no-controller"],
        );
        let kubectl =
            |args: &[&str]| Command::new("kubectl").args(["--kubeconfig", &up.kubeconfig]).args(args).output().unwrap();
        // The namespaces the fixture's objects live in, as a cluster would have them.
        let text_of = std::fs::read_to_string(&f).unwrap();
        let mut namespaces: Vec<&str> = text_of
            .split("namespace: ")
            .skip(1)
            .filter_map(|r| r.split(|c: char| !(c.is_ascii_alphanumeric() || c == '-')).next())
            .filter(|n| !n.is_empty() && !["default", "kube-system"].contains(n))
            .collect();
        namespaces.sort();
        namespaces.dedup();
        for ns in namespaces {
            let created = kubectl(&["create", "namespace", ns]);
            assert!(created.status.success(), "{}: {}", f.display(), text(&created.stderr));
        }
        // Every real cluster holds Leases (its kubelets' in kube-node-lease), so a dump of one
        // with the README's command holds some. A dump without any past-binder object cannot
        // tell "none" from "not dumped", and `explain -f` then says `unknown` (README).
        let lease =
            "apiVersion: coordination.k8s.io/v1\nkind: Lease\nmetadata: {name: node-0, namespace: kube-node-lease}\n\
                     spec: {holderIdentity: node-0, leaseDurationSeconds: 40}\n";
        let lease_file = tmp.path().join("lease.yaml");
        std::fs::write(&lease_file, lease).unwrap();
        for args in [&["create", "namespace", "kube-node-lease"][..], &["create", "-f", lease_file.to_str().unwrap()]] {
            let out = kubectl(args);
            assert!(out.status.success(), "{}: {}", f.display(), text(&out.stderr));
        }
        let applied = kubectl(&["apply", "-f", f.to_str().unwrap()]);
        assert!(applied.status.success(), "{}: {}", f.display(), text(&applied.stderr));
        let dump = kubectl(&[
            "get",
            "pv,pvc,sc,pods,nodes,csidrivers,csinodes,volumeattachments,csistoragecapacities,leases,events",
            "-A",
            "-o",
            "yaml",
        ]);
        assert!(dump.status.success(), "{}: {}", f.display(), text(&dump.stderr));
        let file = tmp.path().join("dump.yaml");
        std::fs::write(&file, &dump.stdout).unwrap();
        let live = explain(&[what, &["--kubeconfig", &up.kubeconfig, "-o", "json"]].concat());
        let from_file = explain(&[what, &["-f", file.to_str().unwrap(), "-o", "json"]].concat());
        assert_eq!(live.status.code(), Some(0), "{}: {}", f.display(), text(&live.stderr));
        assert_eq!(from_file.status.code(), Some(0), "{}: {}", f.display(), text(&from_file.stderr));
        assert_eq!(text(&live.stderr), "", "{}: live read notes", f.display());
        assert_eq!(ages(&text(&live.stdout)), ages(&text(&from_file.stdout)), "{}", f.display());
        compared += 1;
    }
    assert!(compared > 10);
}
