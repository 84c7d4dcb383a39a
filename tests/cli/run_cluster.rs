//! `pv-controller run` as a separate process against the embedded API server over HTTPS:
//! binding, `/metrics`, leader election between two replicas, failover after `kill -9`, and
//! recovery when the API server restarts underneath a running controller.
//!
//! Each test gets its own data directory, API server port and metrics ports; controller logs go
//! to files in that directory and are printed when an expectation fails.

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use kube::api::PostParams;
use kube::{Api, Client};
use pv_apiserver::{Server, ServerConfig, ServerHandle};
use std::future::Future;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::util::BIN;

/// The API server with kube-controller-manager's pv- and pvc-protection controllers beside it,
/// as in a cluster: the store's admission gives volumes and claims their protection finalizers,
/// and these controllers release them.
struct Cluster {
    server: ServerHandle,
    protection: tokio::task::JoinHandle<()>,
    _informers: pv_local::LocalInformers,
}

impl std::ops::Deref for Cluster {
    type Target = ServerHandle;
    fn deref(&self) -> &ServerHandle {
        &self.server
    }
}

impl Cluster {
    /// Stops the protection controllers, then the server: nothing holds the store afterwards.
    async fn shutdown(self) -> std::io::Result<()> {
        let Cluster { server, protection, _informers } = self;
        drop(_informers);
        protection.abort();
        let _ = protection.await;
        server.shutdown().await
    }
}

async fn start_server(dir: &Path, listen: SocketAddr) -> Cluster {
    let server = Server::start(ServerConfig::new(dir.join("api"), listen)).await.expect("API server starts");
    let store = server.store();
    let protection = pv_core::protection::Protection::new(
        std::sync::Arc::new(pv_local::MemApi::new(store.clone())),
        pv_core::SystemClock::new(),
        pv_core::protection::Scope::ALL,
    );
    let informers = pv_local::start_protection(&store, &protection);
    let protection = tokio::spawn(protection.run(std::future::pending()));
    Cluster { server, protection, _informers: informers }
}

async fn client(kubeconfig: &Path) -> Client {
    let opts = pv_kube::connect::ClientOptions { kubeconfig: Some(kubeconfig.to_path_buf()), ..Default::default() };
    let config = pv_kube::connect::load_config(&opts).await.expect("config");
    pv_kube::connect::client(config, &opts).expect("client")
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).expect("a free port")
}

/// A `pv-controller run` child process, killed on drop.
struct Replica {
    child: Child,
    metrics: SocketAddr,
    log: PathBuf,
}

impl Replica {
    fn start(dir: &Path, name: &str, kubeconfig: &Path, extra: &[&str]) -> Replica {
        let metrics: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
        let log = dir.join(format!("{name}.log"));
        let out = std::fs::File::create(&log).expect("log file");
        let child = Command::new(BIN)
            .arg("run")
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .arg("--metrics-addr")
            .arg(metrics.to_string())
            .args(["--resync-period", "2s", "--workers", "2"])
            .args(extra)
            .env_remove("RUST_LOG")
            .stdout(Stdio::null())
            .stderr(out)
            .spawn()
            .expect("pv-controller starts");
        Replica { child, metrics, log }
    }

    fn logs(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    async fn metrics(&self) -> String {
        http_get(self.metrics, "/metrics").await.map(|(_, body)| body).unwrap_or_default()
    }

    async fn metric(&self, series: &str) -> Option<f64> {
        metric_value(&self.metrics().await, series)
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A bare-bones HTTP/1.0 GET: (status, body).
async fn http_get(addr: SocketAddr, path: &str) -> Option<(u16, String)> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::time::timeout(Duration::from_secs(2), tokio::net::TcpStream::connect(addr)).await.ok()?.ok()?;
    let req = format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n");
    s.write_all(req.as_bytes()).await.ok()?;
    let mut buf = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut buf)).await.ok()?.ok()?;
    let text = String::from_utf8_lossy(&buf).to_string();
    let status = text.split(' ').nth(1)?.parse().ok()?;
    let body = text.split_once("\r\n\r\n")?.1.to_string();
    Some((status, body))
}

/// The value of one exact series (`name{labels}`) in a text exposition.
fn metric_value(text: &str, series: &str) -> Option<f64> {
    text.lines().find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.trim().parse().ok())
}

async fn eventually<F, Fut>(what: &str, timeout: Duration, mut check: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let start = Instant::now();
    while start.elapsed() < timeout {
        if check().await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    eprintln!("timed out after {timeout:?} waiting for {what}");
    false
}

fn pv(name: &str) -> PersistentVolume {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": name},
        "spec": {
            "capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": "manual",
            "hostPath": {"path": format!("/tmp/{name}")}
        }
    }))
    .unwrap()
}

fn pvc(name: &str) -> PersistentVolumeClaim {
    pvc_of_class(name, "manual")
}

fn pvc_of_class(name: &str, class: &str) -> PersistentVolumeClaim {
    pvc_requesting(name, class, "1Gi")
}

fn pvc_requesting(name: &str, class: &str, storage: &str) -> PersistentVolumeClaim {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": class,
            "resources": {"requests": {"storage": storage}}
        }
    }))
    .unwrap()
}

/// The API server with a host-path StorageClass `local` (reclaim policy Delete) and a replica
/// that provisions its volumes under the test's directory.
async fn start_with_local_class(dir: &Path) -> (Cluster, Client, Replica) {
    use k8s_openapi::api::storage::v1::StorageClass;
    let server = start_server(dir, "127.0.0.1:0".parse().unwrap()).await;
    let c = client(server.kubeconfig_path()).await;
    let class: StorageClass = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "local"}, "provisioner": "kubernetes.io/host-path", "reclaimPolicy": "Delete"}))
    .unwrap();
    Api::<StorageClass>::all(c.clone()).create(&PostParams::default(), &class).await.unwrap();
    let root = dir.join("volumes");
    let r = Replica::start(dir, "a", server.kubeconfig_path(), &["--hostpath-root", root.to_str().unwrap()]);
    (server, c, r)
}

async fn create_pair(c: &Client, volume: &str, claim: &str) {
    let pp = PostParams::default();
    Api::<PersistentVolume>::all(c.clone()).create(&pp, &pv(volume)).await.expect("create PV");
    Api::<PersistentVolumeClaim>::namespaced(c.clone(), "default").create(&pp, &pvc(claim)).await.expect("create PVC");
}

async fn claim_bound_to(c: &Client, claim: &str) -> Option<String> {
    let api = Api::<PersistentVolumeClaim>::namespaced(c.clone(), "default");
    let cl = api.get(claim).await.ok()?;
    let phase = cl.status.as_ref()?.phase.as_deref()?;
    (phase == "Bound").then(|| cl.spec?.volume_name).flatten()
}

async fn wait_bound(c: &Client, claim: &str, volume: &str, timeout: Duration) -> bool {
    eventually(&format!("{claim} bound to {volume}"), timeout, || async {
        claim_bound_to(c, claim).await.as_deref() == Some(volume)
    })
    .await
}

async fn lease_holder(c: &Client) -> Option<String> {
    let api = Api::<Lease>::namespaced(c.clone(), "kube-system");
    api.get("pv-controller").await.ok()?.spec?.holder_identity
}

const FAST_ELECTION: &[&str] = &[
    "--leader-elect",
    "--leader-elect-lease-duration",
    "3s",
    "--leader-elect-renew-deadline",
    "2s",
    "--leader-elect-retry-period",
    "500ms",
];

const LEADER: &str = "leader_election_master_status{name=\"pv-controller\"}";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_binds_a_claim_over_http_and_metrics_count_the_objects() {
    let dir = tempfile::tempdir().unwrap();
    let server = start_server(dir.path(), "127.0.0.1:0".parse().unwrap()).await;
    let c = client(server.kubeconfig_path()).await;
    create_pair(&c, "pv-1", "claim-1").await;
    let r = Replica::start(dir.path(), "a", server.kubeconfig_path(), &[]);

    let bound = wait_bound(&c, "claim-1", "pv-1", Duration::from_secs(30)).await;
    assert!(bound, "controller log:\n{}", r.logs());
    let ready = eventually("/readyz", Duration::from_secs(5), || async {
        http_get(r.metrics, "/readyz").await.map(|(s, _)| s) == Some(200)
    })
    .await;
    assert!(ready);
    // Each check on its own line, as kube-controller-manager lists them (no leader election here).
    let verbose = http_get(r.metrics, "/readyz?verbose").await;
    assert_eq!(verbose, Some((200, "[+]ping ok\n[+]informer-sync ok\nreadyz check passed\n".to_string())));
    let m = r.metrics().await;
    let expect = [
        ("pv_collector_bound_pv_count{storage_class=\"manual\"}", 1.0),
        (
            "pv_collector_bound_pvc_count{namespace=\"default\",storage_class=\"manual\",volume_attributes_class=\"\"}",
            1.0,
        ),
        ("pv_collector_total_pv_count{plugin_name=\"kubernetes.io/host-path\",volume_mode=\"Filesystem\"}", 1.0),
        ("retroactive_storageclass_total", 0.0),
        ("workqueue_depth{name=\"claims\"}", 0.0),
    ];
    for (series, want) in expect {
        assert_eq!(metric_value(&m, series), Some(want), "{series} in\n{m}");
    }
    for name in [
        "pv_collector_unbound_pv_count",
        "pv_collector_unbound_pvc_count",
        "volume_operation_total_seconds",
        "volume_operation_errors_total",
        "storage_operation_duration_seconds",
        "retroactive_storageclass_errors_total",
        "workqueue_adds_total",
        "workqueue_queue_duration_seconds",
        "workqueue_retries_total",
    ] {
        assert!(m.contains(&format!("# TYPE {name} ")), "{name} missing in\n{m}");
    }
    assert!(metric_value(&m, "workqueue_adds_total{name=\"claims\"}").unwrap_or(0.0) >= 1.0);
    server.shutdown().await.unwrap();
}

/// Upstream logs each phase change and bind at V(2), and each recorded event at V(3):
/// kube-controller-manager shows none of them by default. `run` shows them from `-v` on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_logs_phase_changes_binds_and_events_from_v_on_as_upstream_does() {
    let dir = tempfile::tempdir().unwrap();
    let server = start_server(dir.path(), "127.0.0.1:0".parse().unwrap()).await;
    let c = client(server.kubeconfig_path()).await;
    let progress = ["volume entered phase", "claim bound to volume", "volume bound to claim", "claim entered phase"];
    let events = Api::<k8s_openapi::api::core::v1::Event>::namespaced(c.clone(), "default");
    for (name, flags, shown) in [("quiet", &[][..], false), ("verbose", &["--v=2"][..], true)] {
        let (volume, claim) = (format!("pv-{name}"), format!("claim-{name}"));
        create_pair(&c, &volume, &claim).await;
        // A claim no volume fits (and its class does not exist): its event is logged at V(3)
        // upstream.
        let lonely = format!("lonely-{name}");
        let big = pvc_requesting(&lonely, "manual", "100Gi");
        Api::<PersistentVolumeClaim>::namespaced(c.clone(), "default")
            .create(&PostParams::default(), &big)
            .await
            .unwrap();
        let r = Replica::start(dir.path(), name, server.kubeconfig_path(), flags);
        assert!(wait_bound(&c, &claim, &volume, Duration::from_secs(30)).await, "log:\n{}", r.logs());
        let on_lonely = kube::api::ListParams::default().fields(&format!("involvedObject.name={lonely}"));
        let recorded = eventually("the lonely claim's event", Duration::from_secs(30), || async {
            events.list(&on_lonely).await.is_ok_and(|l| !l.items.is_empty())
        })
        .await;
        assert!(recorded, "no event recorded for {lonely}; log:\n{}", r.logs());
        let event_logged = |log: &str| log.lines().any(|l| l.contains(": event ") && l.contains(&lonely));
        // The last line follows the claim's Bound write: given a moment to be written.
        let all = eventually("the lines", Duration::from_secs(2), || async {
            let log = r.logs();
            progress.iter().all(|line| log.contains(line)) && event_logged(&log)
        })
        .await;
        let log = r.logs();
        assert_eq!(all, shown, "run {flags:?} logged:\n{log}");
        if !shown {
            assert!(!progress.iter().any(|line| log.contains(line)), "run {flags:?} logged:\n{log}");
            assert!(!event_logged(&log), "run {flags:?} logged:\n{log}");
        }
    }
    server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_elect_one_writer_and_the_standby_takes_over_after_kill_9() {
    let dir = tempfile::tempdir().unwrap();
    let server = start_server(dir.path(), "127.0.0.1:0".parse().unwrap()).await;
    let c = client(server.kubeconfig_path()).await;
    let kc = server.kubeconfig_path().to_path_buf();
    let mut replicas =
        vec![Replica::start(dir.path(), "a", &kc, FAST_ELECTION), Replica::start(dir.path(), "b", &kc, FAST_ELECTION)];
    let elected = eventually("a leader and a ready standby", Duration::from_secs(30), || async {
        let a = replicas[0].metric(LEADER).await;
        let b = replicas[1].metric(LEADER).await;
        matches!((a, b), (Some(x), Some(y)) if x + y == 1.0)
    })
    .await;
    assert!(elected, "a:\n{}\nb:\n{}", replicas[0].logs(), replicas[1].logs());
    assert!(lease_holder(&c).await.is_some_and(|h| !h.is_empty()));

    create_pair(&c, "pv-1", "claim-1").await;
    assert!(wait_bound(&c, "claim-1", "pv-1", Duration::from_secs(30)).await);
    let leader = if replicas[0].metric(LEADER).await == Some(1.0) { 0 } else { 1 };
    let standby = 1 - leader;
    let writes = |m: &str| {
        m.lines().filter(|l| l.starts_with("rest_client_requests_total{") && !l.contains("method=\"GET\"")).count()
    };
    let standby_metrics = replicas[standby].metrics().await;
    assert_eq!(writes(&standby_metrics), 0, "standby wrote:\n{standby_metrics}");
    assert!(writes(&replicas[leader].metrics().await) > 0);
    let holder_before = lease_holder(&c).await;
    // Each replica logs its own Lease identity; the holder is one of them.
    let holder = holder_before.clone().expect("a holder");
    assert!(replicas[leader].logs().contains(&format!("identity={holder}")), "{}", replicas[leader].logs());
    let verbose = http_get(replicas[leader].metrics, "/readyz?verbose").await.map(|(_, b)| b).unwrap_or_default();
    assert!(verbose.contains("[+]leaderElection ok\n"), "{verbose}");

    // kill -9 the leader, then give the standby pending work.
    let _ = replicas[leader].child.kill();
    let _ = replicas[leader].child.wait();
    create_pair(&c, "pv-2", "claim-2").await;
    let took_over = wait_bound(&c, "claim-2", "pv-2", Duration::from_secs(30)).await;
    let s = replicas.remove(standby);
    assert!(took_over, "standby log:\n{}", s.logs());
    assert_eq!(s.metric(LEADER).await, Some(1.0));
    assert_ne!(lease_holder(&c).await, holder_before);
    server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graceful_shutdown_releases_the_lease() {
    let dir = tempfile::tempdir().unwrap();
    let server = start_server(dir.path(), "127.0.0.1:0".parse().unwrap()).await;
    let c = client(server.kubeconfig_path()).await;
    let r = Replica::start(dir.path(), "a", server.kubeconfig_path(), FAST_ELECTION);
    let led = eventually("leadership", Duration::from_secs(30), || async { r.metric(LEADER).await == Some(1.0) }).await;
    assert!(led, "{}", r.logs());
    let holder = lease_holder(&c).await.expect("a holder");
    let pid = r.child.id().to_string();
    let status = Command::new("kill").args(["-TERM", &pid]).status().unwrap();
    assert!(status.success());
    let released =
        eventually("lease released", Duration::from_secs(10), || async { lease_holder(&c).await.is_none() }).await;
    assert!(released, "{}", r.logs());
    // client-go's LeaderElection events, on the Lease.
    let want = [format!("{holder} became leader"), format!("{holder} stopped leading")];
    let events = || async {
        let lp = kube::api::ListParams::default().fields("reason=LeaderElection");
        let list = Api::<k8s_openapi::api::core::v1::Event>::namespaced(c.clone(), "kube-system").list(&lp).await;
        let mut got: Vec<(String, String, String)> = list
            .map(|l| l.items)
            .unwrap_or_default()
            .into_iter()
            .map(|e| {
                let o = e.involved_object;
                (o.kind.unwrap_or_default(), o.name.unwrap_or_default(), e.message.unwrap_or_default())
            })
            .collect();
        got.sort_by(|a, b| a.2.cmp(&b.2));
        got
    };
    let both =
        eventually("LeaderElection events", Duration::from_secs(10), || async { events().await.len() == 2 }).await;
    let got = events().await;
    assert!(both, "{got:?}");
    for (g, w) in got.iter().zip(&want) {
        assert_eq!((g.0.as_str(), g.1.as_str(), &g.2), ("Lease", "pv-controller", w));
    }
    server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn controller_recovers_when_the_api_server_restarts() {
    let dir = tempfile::tempdir().unwrap();
    let server = start_server(dir.path(), "127.0.0.1:0".parse().unwrap()).await;
    let addr = server.local_addr();
    let kc = server.kubeconfig_path().to_path_buf();
    let c = client(&kc).await;
    create_pair(&c, "pv-1", "claim-1").await;
    let r = Replica::start(dir.path(), "a", &kc, &[]);
    assert!(wait_bound(&c, "claim-1", "pv-1", Duration::from_secs(30)).await);

    server.shutdown().await.unwrap();
    // While the server is down, the claim goes away behind the controller's back.
    {
        // The aborted watch tasks let go of the store as the runtime drops them; opening waits
        // for that (off the runtime, which must go on to drop them).
        let path = dir.path().join("api").join("store");
        let reopened =
            tokio::task::spawn_blocking(move || pv_apiserver::open_store(&path, pv_apiserver::DEFAULT_COMMIT_DELAY))
                .await
                .unwrap();
        let store = reopened.expect("store reopens");
        store.delete("persistentvolumeclaims", "default", "claim-1", None, None).expect("delete claim");
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let server = start_server(dir.path(), addr).await;
    let c = client(&kc).await;
    create_pair(&c, "pv-2", "claim-2").await;
    let recovered = wait_bound(&c, "claim-2", "pv-2", Duration::from_secs(60)).await;
    assert!(recovered, "controller log:\n{}", r.logs());
    let released = eventually("pv-1 Released after its claim vanished", Duration::from_secs(30), || async {
        let v = Api::<PersistentVolume>::all(c.clone()).get("pv-1").await.ok();
        v.and_then(|v| v.status?.phase).as_deref() == Some("Released")
    })
    .await;
    assert!(released, "controller log:\n{}", r.logs());
    server.shutdown().await.unwrap();
}

fn run_expecting_failure(kubeconfig: &Path) -> (i32, String) {
    let out = Command::new(BIN)
        .arg("run")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(["--metrics-addr", "127.0.0.1:0"])
        .output()
        .expect("pv-controller runs");
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    (out.status.code().unwrap_or(-1), stderr)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreachable_server_and_refused_credentials_are_one_line_errors() {
    let dir = tempfile::tempdir().unwrap();
    let server = start_server(dir.path(), "127.0.0.1:0".parse().unwrap()).await;
    let kc = std::fs::read_to_string(server.kubeconfig_path()).unwrap();
    let url = server.url().to_string();

    let closed = format!("https://127.0.0.1:{}", free_port());
    let unreachable = dir.path().join("unreachable.kubeconfig");
    std::fs::write(&unreachable, kc.replace(&url, &closed)).unwrap();
    let (code, err) = run_expecting_failure(&unreachable);
    assert_eq!(code, 1, "{err}");
    assert!(err.lines().any(|l| l.starts_with("error: cannot reach API server") && l.contains(&closed)), "{err}");

    let bad_token = dir.path().join("bad-token.kubeconfig");
    std::fs::write(&bad_token, kc.replace(server.token(), "not-the-token")).unwrap();
    let (code, err) = run_expecting_failure(&bad_token);
    assert_eq!(code, 1, "{err}");
    assert!(err.lines().any(|l| l.starts_with("error:") && l.contains("HTTP 401") && l.contains(&url)), "{err}");
    server.shutdown().await.unwrap();
}

/// The sum of every sample of `name` (all label sets) in a text exposition.
fn metric_sum(text: &str, name: &str) -> f64 {
    text.lines()
        .filter(|l| l.starts_with(name) && l[name.len()..].starts_with(['{', ' ']))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// Soak on the kube-rs path: claims of a host-path Delete class are provisioned, bound and
/// deleted, round after round. The controller deletes each volume itself (object, then its
/// finalizer); afterwards `/metrics` must count exactly the PVs and PVCs the API server has.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn provisioned_claims_created_and_deleted_leave_metrics_equal_to_the_api() {
    let n: usize = std::env::var("PV_SOAK_CLAIMS").ok().and_then(|s| s.parse().ok()).unwrap_or(30);
    let dir = tempfile::tempdir().unwrap();
    let (server, c, r) = start_with_local_class(dir.path()).await;
    let pp = PostParams::default();
    let claims = Api::<PersistentVolumeClaim>::namespaced(c.clone(), "default");
    let pvs = Api::<PersistentVolume>::all(c.clone());
    claims.create(&pp, &pvc_of_class("keep", "local")).await.unwrap();
    for round in 0..3 {
        for i in 0..n {
            claims.create(&pp, &pvc_of_class(&format!("c{round}-{i}"), "local")).await.unwrap();
        }
        let all_bound = eventually("every claim Bound", Duration::from_secs(60), || async {
            let list = claims.list(&Default::default()).await.unwrap();
            list.items.iter().filter(|c| c.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound")).count()
                == n + 1
        })
        .await;
        assert!(all_bound, "controller log:\n{}", r.logs());
        for i in 0..n {
            claims.delete(&format!("c{round}-{i}"), &Default::default()).await.unwrap();
        }
        let gone = eventually("the deleted claims' volumes gone", Duration::from_secs(60), || async {
            pvs.list(&Default::default()).await.unwrap().items.len() == 1
        })
        .await;
        assert!(gone, "controller log:\n{}", r.logs());
    }
    // The watch events of the last deletes reach the controller soon after the API shows them.
    let settled = eventually("metrics equal to the API's objects", Duration::from_secs(20), || async {
        let m = r.metrics().await;
        metric_sum(&m, "pv_collector_total_pv_count") == 1.0
            && metric_sum(&m, "pv_collector_bound_pv_count") + metric_sum(&m, "pv_collector_unbound_pv_count") == 1.0
            && metric_sum(&m, "pv_collector_bound_pvc_count") + metric_sum(&m, "pv_collector_unbound_pvc_count") == 1.0
    })
    .await;
    let m = r.metrics().await;
    let counts: Vec<&str> = m.lines().filter(|l| l.starts_with("pv_collector_")).collect();
    assert!(settled, "1 PV and 1 PVC exist; the controller counts:\n{}\nlog:\n{}", counts.join("\n"), r.logs());
    server.shutdown().await.unwrap();
}

/// Request counts by HTTP method.
type ByMethod = std::collections::BTreeMap<String, f64>;

/// The requests `run`'s client made so far, by HTTP method (every code).
async fn requests_by_method(r: &Replica) -> ByMethod {
    let m = r.metrics().await;
    let mut by = ByMethod::new();
    for l in m.lines().filter(|l| l.starts_with("rest_client_requests_total{")) {
        let method = l.split("method=\"").nth(1).and_then(|s| s.split('"').next()).unwrap_or("?");
        let v: f64 = l.rsplit(' ').next().and_then(|v| v.parse().ok()).unwrap_or(0.0);
        *by.entry(method.to_string()).or_insert(0.0) += v;
    }
    by
}

/// What a bind costs the API server: a new volume one write (its phase), a static bind four
/// (the volume's claimRef and phase, the claim's volumeName and phase), a provisioned claim the
/// provisioner's annotation, a lookup of the volume it is about to create, the volume's and its
/// event's creates, then the bind's last three writes: no other read, no no-op write, and
/// nothing more at the resyncs after (the pairs are settled).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bind_makes_only_the_requests_it_needs() {
    const N: usize = 12;
    let dir = tempfile::tempdir().unwrap();
    let (server, c, r) = start_with_local_class(dir.path()).await;
    let pp = PostParams::default();
    let pvs = Api::<PersistentVolume>::all(c.clone());
    let claims = Api::<PersistentVolumeClaim>::namespaced(c.clone(), "default");
    let ready = eventually("/readyz", Duration::from_secs(20), || async {
        http_get(r.metrics, "/readyz").await.map(|(s, _)| s) == Some(200)
    })
    .await;
    assert!(ready, "controller log:\n{}", r.logs());
    let delta = |before: &ByMethod, after: &ByMethod| {
        let mut d = after.clone();
        for (k, v) in before {
            *d.entry(k.clone()).or_insert(0.0) -= v;
        }
        d.retain(|_, v| *v != 0.0);
        d
    };
    let want =
        |pairs: &[(&str, usize)]| -> ByMethod { pairs.iter().map(|(m, n)| (m.to_string(), *n as f64)).collect() };
    // A resync (every 2 s here) must not add requests either: wait past two.
    let settle = || tokio::time::sleep(Duration::from_secs(5));

    let start = requests_by_method(&r).await;
    for i in 0..N {
        pvs.create(&pp, &pv(&format!("pv-{i}"))).await.unwrap();
    }
    let available = eventually("every PV Available", Duration::from_secs(30), || async {
        let list = pvs.list(&Default::default()).await.unwrap();
        list.items.iter().filter(|v| v.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Available")).count()
            == N
    })
    .await;
    assert!(available, "controller log:\n{}", r.logs());
    settle().await;
    let after_volumes = requests_by_method(&r).await;
    assert_eq!(delta(&start, &after_volumes), want(&[("PUT", N)]), "new volumes; log:\n{}", r.logs());

    // Creates the claims `{prefix}-{i}` of `class` and waits until every one is Bound.
    let bind_claims = |prefix: &'static str, class: &'static str| {
        let (c, claims, pp, r) = (&c, &claims, &pp, &r);
        async move {
            for i in 0..N {
                claims.create(pp, &pvc_of_class(&format!("{prefix}-{i}"), class)).await.unwrap();
            }
            for i in 0..N {
                let bound = eventually(&format!("{prefix}-{i} Bound"), Duration::from_secs(30), || async {
                    claim_bound_to(c, &format!("{prefix}-{i}")).await.is_some()
                })
                .await;
                assert!(bound, "controller log:\n{}", r.logs());
            }
        }
    };
    bind_claims("claim", "manual").await;
    settle().await;
    let after_static = requests_by_method(&r).await;
    assert_eq!(delta(&after_volumes, &after_static), want(&[("PUT", 4 * N)]), "static binds; log:\n{}", r.logs());

    bind_claims("dyn", "local").await;
    settle().await;
    let after_dynamic = requests_by_method(&r).await;
    assert_eq!(
        delta(&after_static, &after_dynamic),
        want(&[("GET", N), ("POST", 2 * N), ("PUT", 4 * N)]),
        "provisioned claims; log:\n{}",
        r.logs()
    );
    server.shutdown().await.unwrap();
}

/// `/debug/caches` lists every volume and claim the controller caches with the
/// resourceVersion it holds: after binding they are the API server's objects and versions.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn debug_caches_lists_the_cached_objects_with_their_resource_versions() {
    let dir = tempfile::tempdir().unwrap();
    let server = start_server(dir.path(), "127.0.0.1:0".parse().unwrap()).await;
    let c = client(server.kubeconfig_path()).await;
    create_pair(&c, "pv-1", "claim-1").await;
    let r = Replica::start(dir.path(), "a", server.kubeconfig_path(), &[]);
    assert!(wait_bound(&c, "claim-1", "pv-1", Duration::from_secs(30)).await, "controller log:\n{}", r.logs());
    let api_rvs = || async {
        let pv = Api::<PersistentVolume>::all(c.clone()).get("pv-1").await.unwrap();
        let pvc = Api::<PersistentVolumeClaim>::namespaced(c.clone(), "default").get("claim-1").await.unwrap();
        serde_json::json!({
            "volumes": {"pv-1": pv.metadata.resource_version},
            "claims": {"default/claim-1": pvc.metadata.resource_version},
        })
    };
    let (mut same, mut last) = (false, String::new());
    let start = Instant::now();
    while !same && start.elapsed() < Duration::from_secs(10) {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let Some((200, body)) = http_get(r.metrics, "/debug/caches").await else { continue };
        same = serde_json::from_str::<serde_json::Value>(&body).ok() == Some(api_rvs().await);
        last = body;
    }
    assert!(same, "/debug/caches: {last}\nAPI: {}", api_rvs().await);
    server.shutdown().await.unwrap();
}

/// `run --shadow` beside a binder that gave the only volume to the other of two claims that fit
/// it: which claim a binder syncs first decides, so the shadow's choice is judged `equivalent`
/// (with the rule that made it so), and none of what follows from it (the claim's phase,
/// capacity, bind annotations) is called a difference.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shadow_judges_the_volume_given_to_another_fitting_claim_as_equivalent() {
    let dir = tempfile::tempdir().unwrap();
    let server = start_server(dir.path(), "127.0.0.1:0".parse().unwrap()).await;
    let c = client(server.kubeconfig_path()).await;
    let pp = PostParams::default();
    let volumes = Api::<PersistentVolume>::all(c.clone());
    let claims = Api::<PersistentVolumeClaim>::namespaced(c.clone(), "default");
    // No class: a claim without a volume gets only FailedBinding from either binder.
    let mut volume = pv("pv-1");
    volume.spec.as_mut().unwrap().storage_class_name = None;
    volumes.create(&pp, &volume).await.unwrap();
    claims.create(&pp, &pvc_of_class("c1", "")).await.unwrap();
    let r = Replica::start(dir.path(), "shadow", server.kubeconfig_path(), &["--shadow", "--shadow-settle", "1s"]);
    let report = || async {
        let (_, body) = http_get(r.metrics, "/shadow").await.unwrap_or_default();
        serde_json::from_str::<serde_json::Value>(&body).unwrap_or_default()
    };
    // The shadow would bind c1 (the only claim it has seen); nothing is written.
    let decided = eventually("the shadow's decisions on c1", Duration::from_secs(20), || async {
        report().await["pending"].as_u64().unwrap_or(0) > 0
    })
    .await;
    assert!(decided, "{}", r.logs());
    assert_eq!(claim_bound_to(&c, "c1").await, None, "shadow mode wrote");

    // The binder in charge (this test) gives pv-1 to c2, a claim just as fit, and records
    // FailedBinding on c1 as upstream's binder does.
    let mut c2 = claims.create(&pp, &pvc_of_class("c2", "")).await.unwrap();
    let spec = c2.spec.as_mut().unwrap();
    spec.volume_name = Some("pv-1".into());
    c2.metadata.annotations = Some(
        [("pv.kubernetes.io/bind-completed", "yes"), ("pv.kubernetes.io/bound-by-controller", "yes")]
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .into(),
    );
    let mut c2 = claims.replace("c2", &pp, &c2).await.unwrap();
    c2.status = Some(
        serde_json::from_value(serde_json::json!({
        "phase": "Bound", "accessModes": ["ReadWriteOnce"], "capacity": {"storage": "1Gi"}}))
        .unwrap(),
    );
    claims.replace_status("c2", &pp, &c2).await.unwrap();
    let mut v = volumes.get("pv-1").await.unwrap();
    v.spec.as_mut().unwrap().claim_ref = Some(
        serde_json::from_value(serde_json::json!({
        "kind": "PersistentVolumeClaim", "apiVersion": "v1", "namespace": "default", "name": "c2",
        "uid": c2.metadata.uid}))
        .unwrap(),
    );
    v.metadata.annotations = Some([("pv.kubernetes.io/bound-by-controller".to_string(), "yes".to_string())].into());
    let mut v = volumes.replace("pv-1", &pp, &v).await.unwrap();
    v.status = Some(serde_json::from_value(serde_json::json!({"phase": "Bound"})).unwrap());
    volumes.replace_status("pv-1", &pp, &v).await.unwrap();
    let c1 = claims.get("c1").await.unwrap();
    let event: k8s_openapi::api::core::v1::Event = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "c1.failed", "namespace": "default"},
        "involvedObject": {"kind": "PersistentVolumeClaim", "namespace": "default", "name": "c1", "uid": c1.metadata.uid},
        "type": "Normal", "reason": "FailedBinding", "message": "no persistent volumes available for this claim",
        "source": {"component": "persistentvolume-controller"}}))
    .unwrap();
    Api::<k8s_openapi::api::core::v1::Event>::namespaced(c.clone(), "default").create(&pp, &event).await.unwrap();

    let judged = eventually("every decision judged", Duration::from_secs(30), || async {
        let rep = report().await;
        rep["pending"].as_u64() == Some(0) && rep["decisions"].as_u64().unwrap_or(0) > 0
    })
    .await;
    let rep = report().await;
    assert!(judged, "{rep:#}\n{}", r.logs());
    let differences = rep["differences"].as_array().cloned().unwrap_or_default();
    let differ: Vec<_> = differences.iter().filter(|d| d["result"] == "differ").collect();
    assert!(differ.is_empty(), "{rep:#}");
    let c1_volume = differences
        .iter()
        .find(|d| d["object"] == "default/c1" && d["field"] == "spec.volumeName")
        .unwrap_or_else(|| panic!("c1's volume judged: {rep:#}"));
    assert_eq!(
        (&c1_volume["result"], &c1_volume["ours"], &c1_volume["theirs"]),
        (&"equivalent".into(), &"pv-1".into(), &"".into())
    );
    assert!(c1_volume["rule"].as_str().unwrap_or_default().contains("both claims fit the volume"), "{rep:#}");
    drop(r);
    server.shutdown().await.unwrap();
}
