//! `pv-controller up` as a newcomer starts it: host names in `--listen`, the controller's
//! `/metrics`, `/healthz` and `/readyz` on `--metrics-addr`, what it logs, and start-up
//! failures that leave nothing behind.

use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::util::{kubectl_available, Up, BIN};

fn http_get(addr: &str, path: &str) -> (u16, String) {
    let mut s = std::net::TcpStream::connect(addr).expect("metrics endpoint accepts");
    write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let status = text.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    (status, text.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default())
}

#[test]
fn up_accepts_host_names_serves_metrics_and_logs_what_the_controller_does() {
    let dir = tempfile::tempdir().unwrap();
    let up = Up::start(dir.path(), &["--listen", "localhost:0", "--metrics-addr", "localhost:0"]);
    let line = up.wait_log("metrics line", |l| l.starts_with("metrics: http://"));
    let addr = line.trim_start_matches("metrics: http://").split('/').next().unwrap().to_string();
    assert_eq!(http_get(&addr, "/healthz").0, 200);
    let start = Instant::now();
    while http_get(&addr, "/readyz").0 != 200 {
        assert!(start.elapsed() < Duration::from_secs(30), "/readyz never 200");
        std::thread::sleep(Duration::from_millis(50));
    }
    let (status, body) = http_get(&addr, "/metrics");
    assert_eq!(status, 200);
    assert!(body.contains("# TYPE pv_collector_total_pv_count"), "{body}");
    assert!(std::fs::read_to_string(&up.kubeconfig).unwrap().contains("server: https://127.0.0.1:"));

    if !kubectl_available() {
        eprintln!("skip: kubectl not installed, the logging check needs it");
        return;
    }
    let pv = "apiVersion: v1\nkind: PersistentVolume\nmetadata: {name: pv-1}\nspec: {capacity: {storage: 1Gi}, accessModes: [ReadWriteOnce], storageClassName: \"\", nfs: {server: s, path: /x}}\n";
    let mut k = Command::new("kubectl")
        .args(["--kubeconfig", &up.kubeconfig, "apply", "-f", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    k.stdin.take().unwrap().write_all(pv.as_bytes()).unwrap();
    assert!(k.wait().unwrap().success());
    // At the default level `up` says what the controller changed.
    let line = up.wait_log("an info line about pv-1", |l| l.contains("INFO") && l.contains("pv-1"));
    assert!(line.contains("Available"), "{line}");
}

/// `up` is a server: it turns transparent huge pages off for itself (see `long_running` in
/// main.rs), which the kernel reports in /proc/PID/status.
#[test]
fn up_runs_without_transparent_huge_pages() {
    let dir = tempfile::tempdir().unwrap();
    let up = Up::start(dir.path(), &["--listen", "127.0.0.1:0"]);
    let status = std::fs::read_to_string(format!("/proc/{}/status", up.pid())).unwrap_or_default();
    let Some(line) = status.lines().find(|l| l.starts_with("THP_enabled:")) else {
        eprintln!("skip: this kernel does not report THP_enabled in /proc/PID/status");
        return;
    };
    assert_eq!(line.split_whitespace().nth(1), Some("0"), "{line}");
}

#[test]
fn a_failed_start_leaves_no_data_directory_and_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let data = dir.path().join("fresh");
    let out = Command::new(BIN).args(["up", "--listen", &addr, "--data-dir"]).arg(&data).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.starts_with("error: --listen ") && stderr.contains(&addr), "{stderr}");
    assert!(!data.exists(), "no half-made data directory is left behind");

    let file = dir.path().join("a-file");
    std::fs::write(&file, "x").unwrap();
    let out = Command::new(BIN).args(["up", "--listen", "127.0.0.1:0", "--data-dir"]).arg(&file).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("not a directory") && stderr.contains("a-file"), "{stderr}");

    let out = Command::new(BIN).args(["up", "--listen", "nonsense", "--data-dir"]).arg(&data).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("HOST:PORT"));
    drop(taken);
}

/// `--controllers` as kube-controller-manager reads it: an unknown name stops the start with
/// KCM's message naming the flag and the name, before anything is written; it cannot be given
/// with `--no-controller`.
#[test]
fn controllers_refuses_unknown_names_and_no_controller_beside_it() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("fresh");
    let out = Command::new(BIN)
        .args(["up", "--listen", "127.0.0.1:0", "--controllers", "*,-bogus", "--data-dir"])
        .arg(&data)
        .output()
        .unwrap();
    crate::util::assert_user_error(
        &out,
        &["--controllers", "\"bogus\" is not in the list of known controllers", "persistentvolume-binder-controller"],
    );
    assert!(!data.exists(), "nothing is written before the flags are read");
    let out = Command::new(BIN)
        .args(["up", "--no-controller", "--controllers", "*", "--data-dir"])
        .arg(&data)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--no-controller"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Runs kubectl against `up`, requiring success; returns stdout.
fn kubectl(up: &Up, args: &[&str], stdin: &str) -> String {
    let mut k = Command::new("kubectl")
        .args(["--kubeconfig", &up.kubeconfig])
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    k.stdin.take().unwrap().write_all(stdin.as_bytes()).unwrap();
    let out = k.wait_with_output().unwrap();
    assert!(out.status.success(), "kubectl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

const CLAIM: &str = "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: data, namespace: default}\nspec: {accessModes: [ReadWriteOnce], storageClassName: \"\", resources: {requests: {storage: 1Gi}}}\n";
const VOLUME: &str = "apiVersion: v1\nkind: PersistentVolume\nmetadata: {name: pv-1}\nspec: {capacity: {storage: 1Gi}, accessModes: [ReadWriteOnce], storageClassName: \"\", nfs: {server: s, path: /x}}\n";

/// Polls `kubectl get` until its output is `want` (bounded).
fn wait_get(up: &Up, args: &[&str], want: &str) {
    let start = Instant::now();
    loop {
        let got = kubectl(up, args, "");
        if got == want {
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "kubectl get {args:?}: {got:?}, want {want:?}\n{}",
            up.log()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Without the binder the protection controllers still run: a volume is not bound (nothing
/// binds), and a deleted claim goes once no pod uses it.
#[test]
fn controllers_without_the_binder_keeps_protection() {
    if !kubectl_available() {
        eprintln!("skip: kubectl not installed");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let up = Up::start(
        dir.path(),
        &[
            "--listen",
            "127.0.0.1:0",
            "--metrics-addr",
            "127.0.0.1:0",
            "--controllers",
            "*,-persistentvolume-binder-controller",
        ],
    );
    kubectl(&up, &["apply", "-f", "-"], &format!("{VOLUME}---\n{CLAIM}"));
    kubectl(&up, &["delete", "pvc", "data", "--wait=false"], "");
    wait_get(&up, &["get", "pvc", "--ignore-not-found", "-o", "name"], "");
    let phase = kubectl(&up, &["get", "pv", "pv-1", "-o", "jsonpath={.status.phase}"], "");
    assert_eq!(phase, "Pending", "no binder ran");
    assert!(!up.log().contains("metrics: http://"), "/metrics is the binder's:\n{}", up.log());
}

/// `--no-controller` serves the API alone, as the differential scripts compare it with a bare
/// kube-apiserver: a deleted claim keeps its finalizer, and `up` says so when it starts.
#[test]
fn no_controller_runs_no_protection_and_says_so() {
    if !kubectl_available() {
        eprintln!("skip: kubectl not installed");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let up = Up::start(dir.path(), &["--listen", "127.0.0.1:0", "--no-controller"]);
    kubectl(&up, &["apply", "-f", "-"], CLAIM);
    kubectl(&up, &["delete", "pvc", "data", "--wait=false"], "");
    let left = kubectl(&up, &["get", "pvc", "data", "-o", "jsonpath={.metadata.finalizers}"], "");
    assert_eq!(left, r#"["kubernetes.io/pvc-protection"]"#);
    up.wait_log("the no-controller note", |l| {
        l.contains("no controller runs") && l.contains("*,-persistentvolume-binder-controller")
    });
}
