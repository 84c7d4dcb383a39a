//! `pv-controller bench` as an operator runs it: the built binary, in-process (`--simulate`) and
//! against `up`, its table, its JSON, its exit codes and its `error:` line.

use std::process::{Command, Output};
use std::time::{Duration, Instant};

use crate::util::{text, Up, BIN};

fn bench(args: &[&str]) -> Output {
    Command::new(BIN).arg("bench").args(args).env_remove("KUBECONFIG").output().expect("binary runs")
}

#[test]
fn simulate_pairs_prints_the_table() {
    let out = bench(&["--simulate", "--pairs", "200"]);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", text(&out.stderr));
    let stdout = text(&out.stdout);
    for want in ["200 static PV/PVC pairs", "bound               200 / 200", "time to Bound p50", "time to Bound p99"] {
        assert!(stdout.contains(want), "{want:?} missing in\n{stdout}");
    }
    for want in ["binds/s", "peak RSS", "wall time"] {
        assert!(stdout.contains(want), "{want:?} missing in\n{stdout}");
    }
}

#[test]
fn simulate_provisioning_as_json() {
    let out = bench(&["--simulate", "--claims", "50", "--class", "gold", "-o", "json"]);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
    assert_eq!(v["mode"], "simulate");
    assert_eq!(v["workload"], "claims");
    assert_eq!(v["n"], 50);
    assert_eq!(v["bound"], 50);
    assert!(v["bindsPerSecond"].as_f64().unwrap() > 0.0);
    assert!(v["peakRssBytes"].as_u64().unwrap() > 0);
}

#[test]
fn bad_flags_are_user_errors() {
    for args in [&["--simulate"][..], &["--pairs", "1", "--claims", "1"], &["--claims", "3"]] {
        let out = bench(args);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        let stderr = text(&out.stderr);
        assert!(stderr.starts_with("error: ") && stderr.lines().count() == 1, "{args:?}: {stderr}");
    }
}

#[test]
fn missing_kubeconfig_is_a_user_error() {
    let out = bench(&["--pairs", "1", "--kubeconfig", "/nonexistent/kubeconfig"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("/nonexistent/kubeconfig"), "{}", text(&out.stderr));
}

#[test]
fn against_up_binds_and_cleans_up() {
    let dir = tempfile::tempdir().expect("tempdir");
    let up = Up::start(dir.path(), &["--listen", "127.0.0.1:0"]);
    let kubeconfig = up.kubeconfig.clone();
    let t = Instant::now();
    let out = bench(&[
        "--kubeconfig",
        &kubeconfig,
        "--pairs",
        "20",
        "--namespace",
        "bench-test",
        "--timeout",
        "60s",
        "-o",
        "json",
    ]);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", text(&out.stderr));
    assert!(t.elapsed() < Duration::from_secs(60));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
    assert_eq!(v["mode"], "api");
    assert_eq!(v["bound"], 20);
    assert!(v["p99Ms"].as_f64().unwrap() >= v["p50Ms"].as_f64().unwrap());
    let run = v["run"].as_str().unwrap().to_string();
    let (claims, volumes) = count_labelled(&kubeconfig, &format!("bench.pv-controller.io/run={run}"));
    assert_eq!((claims, volumes), (0, 0), "the run's claims and PVs are deleted");

    // A class that does not exist, or binds on first consumer: refused before anything is made.
    create_class(&kubeconfig, "wait", "kubernetes.io/host-path", "WaitForFirstConsumer");
    for (class, why) in [("none", "does not exist"), ("wait", "volumeBindingMode WaitForFirstConsumer")] {
        let t = Instant::now();
        let out = bench(&["--kubeconfig", &kubeconfig, "--claims", "1", "--class", class, "--timeout", "10m"]);
        assert_eq!(out.status.code(), Some(1), "class {class}");
        let stderr = text(&out.stderr);
        assert!(stderr.starts_with("error: --class ") && stderr.contains(why), "{stderr}");
        assert!(t.elapsed() < Duration::from_secs(600), "failed early, not after the timeout");
        assert!(out.stdout.is_empty(), "{}", text(&out.stdout));
    }

    // A claim that cannot bind (an external provisioner nobody runs): the table is still
    // printed, with the time the run lasted, then the error.
    create_class(&kubeconfig, "elsewhere", "example.com/nobody", "Immediate");
    let out =
        bench(&["--kubeconfig", &kubeconfig, "--claims", "1", "--class", "elsewhere", "--timeout", "2s", "-o", "json"]);
    assert_eq!(out.status.code(), Some(1), "a claim nobody provisions never binds");
    assert!(text(&out.stderr).contains("0 of 1 bound"), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
    assert_eq!(v["bound"], 0);
    assert!(v["wallSeconds"].as_f64().unwrap() >= 2.0, "wall time is the time until giving up: {v}");
    assert!(v["note"].as_str().unwrap().contains("the claim's create request"), "claim wording: {v}");

    // Provisioned claims: bound, then cleaned up with the Events the controller recorded.
    create_class(&kubeconfig, "local", "kubernetes.io/host-path", "Immediate");
    let out = bench(&[
        "--kubeconfig",
        &kubeconfig,
        "--claims",
        "5",
        "--class",
        "local",
        "--namespace",
        "bench-test",
        "-o",
        "json",
    ]);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
    assert_eq!(v["bound"], 5);
    let run = v["run"].as_str().unwrap().to_string();
    assert_eq!(events_about(&kubeconfig, &run), Vec::<String>::new(), "the run's Events are deleted");
    drop(up);
}

/// Creates a StorageClass through the kubeconfig.
fn create_class(kubeconfig: &str, name: &str, provisioner: &str, mode: &str) {
    use k8s_openapi::api::storage::v1::StorageClass;
    use kube::api::{Api, PostParams};
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let kc = kube::config::Kubeconfig::read_from(kubeconfig).unwrap();
        let config = kube::Config::from_custom_kubeconfig(kc, &Default::default()).await.unwrap();
        let client = kube::Client::try_from(config).unwrap();
        let sc: StorageClass = serde_json::from_value(serde_json::json!({
            "metadata": {"name": name}, "provisioner": provisioner, "volumeBindingMode": mode,
            "reclaimPolicy": "Delete"}))
        .unwrap();
        Api::<StorageClass>::all(client).create(&PostParams::default(), &sc).await.unwrap();
    })
}

/// Events (any namespace) about objects or provisioned volumes of the run `run`, as `ns/name`.
fn events_about(kubeconfig: &str, run: &str) -> Vec<String> {
    use k8s_openapi::api::core::v1::Event;
    use kube::api::Api;
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let kc = kube::config::Kubeconfig::read_from(kubeconfig).unwrap();
        let config = kube::Config::from_custom_kubeconfig(kc, &Default::default()).await.unwrap();
        let client = kube::Client::try_from(config).unwrap();
        let events = Api::<Event>::all(client).list(&Default::default()).await.unwrap();
        events
            .items
            .iter()
            .filter(|e| {
                let name = e.involved_object.name.as_deref().unwrap_or("");
                let msg = e.message.as_deref().unwrap_or("");
                name.starts_with(run) || msg.contains(run) || name.starts_with("pvc-")
            })
            .map(|e| {
                format!(
                    "{}/{}",
                    e.metadata.namespace.as_deref().unwrap_or(""),
                    e.metadata.name.as_deref().unwrap_or("")
                )
            })
            .collect()
    })
}

/// Claims and PVs carrying `selector`, listed through the kubeconfig.
fn count_labelled(kubeconfig: &str, selector: &str) -> (usize, usize) {
    use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
    use kube::api::{Api, ListParams};
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let kc = kube::config::Kubeconfig::read_from(kubeconfig).unwrap();
        let config = kube::Config::from_custom_kubeconfig(kc, &Default::default()).await.unwrap();
        let client = kube::Client::try_from(config).unwrap();
        let lp = ListParams::default().labels(selector);
        let claims: Api<PersistentVolumeClaim> = Api::all(client.clone());
        let pvs: Api<PersistentVolume> = Api::all(client);
        (claims.list(&lp).await.unwrap().items.len(), pvs.list(&lp).await.unwrap().items.len())
    })
}
