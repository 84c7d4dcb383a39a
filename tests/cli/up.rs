//! `pv-controller up` as a newcomer starts it: host names in `--listen`, the controller's
//! `/metrics`, `/healthz` and `/readyz` on `--metrics-addr`, what it logs, and start-up
//! failures that leave nothing behind.

use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::util::{Up, BIN};

fn http_get(addr: &str, path: &str) -> (u16, String) {
    let mut s = std::net::TcpStream::connect(addr).expect("metrics endpoint accepts");
    write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let status = text.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    (status, text.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default())
}

fn kubectl_available() -> bool {
    Command::new("kubectl").arg("version").arg("--client").output().is_ok_and(|o| o.status.success())
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
