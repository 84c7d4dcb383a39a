//! `pv-controller up`: the embedded default. Starts the Kubernetes-compatible API server over
//! the durable store under `--data-dir`, prints where to reach it, attaches the controllers
//! `--controllers` selects (all by default, none with `--no-controller`) in-process over the same
//! store: the binder, and the pv- and pvc-protection controllers that remove the finalizers the
//! store's admission adds. With the binder it serves `/metrics`, `/healthz` and `/readyz` as
//! `run` does. It stops gracefully on SIGINT/SIGTERM.
//!
//! Scripts wait for the two lines `kubeconfig: PATH` and `server: URL` on stdout: they are
//! printed once the listener is bound and the kubeconfig written, and nothing else goes to
//! stdout (logs go to stderr). A restart on the same data directory resumes: same objects, same
//! resourceVersion sequence, same token and CA (the kubeconfig is rewritten, since the port may
//! differ). A start that fails leaves no data directory it created behind.

use super::controllers::{self, Controllers};
use super::user;
use pv_apiserver::{Server, ServerConfig, ServerHandle};
use pv_core::{Config, Controller, Protection, SystemClock};
use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

/// The default of `--metrics-addr`, the same as `run`'s.
const DEFAULT_METRICS_ADDR: &str = "127.0.0.1:9090";

/// Arguments of `up`.
#[derive(clap::Args, Debug)]
pub struct UpArgs {
    /// Directory for the object store, the kubeconfig and host-path volumes.
    #[arg(long, default_value = "./.pv-controller")]
    pub data_dir: PathBuf,
    /// Address to listen on, HOST:PORT (a name such as localhost, or an IP; port 0 picks a free
    /// port). Loopback unless you say otherwise.
    #[arg(long, default_value = "127.0.0.1:6443")]
    pub listen: String,
    /// Serve the API only: no controller runs (`--controllers ''`). Deleted claims and volumes
    /// then keep their protection finalizers until something removes them.
    #[arg(long)]
    pub no_controller: bool,
    /// Which in-process controllers run, as kube-controller-manager's flag: `*` for all, `NAME`
    /// to turn one on, `-NAME` to leave one out, with KCM's names:
    /// persistentvolume-binder-controller, persistentvolume-protection-controller,
    /// persistentvolumeclaim-protection-controller, and, off unless named (not in `*`), a
    /// stand-in for persistentvolume-attach-detach-controller (alias attachdetach), which
    /// creates and deletes the VolumeAttachments of pods' CSI volumes. E.g.
    /// `'*,-persistentvolume-binder-controller'` when `pv-controller run` is the binder,
    /// `'*,attachdetach'` to test a driver's attacher with pods.
    #[arg(long, value_name = "LIST", default_value = "*", conflicts_with = "no_controller")]
    pub controllers: String,
    /// Stand in for kube-scheduler's volume step: place each pod without a node where its
    /// volumes fit (as `explain pod` finds), bind its WaitForFirstConsumer claims there (a
    /// fitting volume, or `volume.kubernetes.io/selected-node` for provisioning) and, once they
    /// are Bound, bind the pod to the node. Off by default: `up` runs no scheduler.
    #[arg(long)]
    pub scheduler: bool,
    /// Worker tasks per queue (default: 128 per CPU, between 64 and 256).
    #[arg(long)]
    pub workers: Option<usize>,
    /// Address for the controller's /metrics, /healthz and /readyz (port 0 picks a free port).
    /// When the default port is taken, `up` starts without them and says so.
    #[arg(long, default_value = DEFAULT_METRICS_ADDR)]
    pub metrics_addr: String,
    /// Reads (get, list) served at once; beyond it a request gets 429 with `Retry-After: 1`.
    /// Watches are not counted. 0: no limit. As kube-apiserver's flag.
    #[arg(long, default_value_t = pv_apiserver::inflight::DEFAULT_MAX_READ_ONLY)]
    pub max_requests_inflight: usize,
    /// Writes (create, update, patch, delete) served at once; beyond it 429. 0: no limit.
    #[arg(long, default_value_t = pv_apiserver::inflight::DEFAULT_MAX_MUTATING)]
    pub max_mutating_requests_inflight: usize,
    /// Under load, how long a commit waits for more writes to join it: one fsync for more
    /// writes, so less CPU per write (PostgreSQL's commit_delay). Only while other writes await
    /// their commit; a lone write commits at once. `0` turns it off.
    #[arg(long, value_name = "DURATION", default_value_t = pv_apiserver::DEFAULT_COMMIT_DELAY.into(),
          value_parser = |s: &str| super::run::parse_duration_or_zero(s).map(kube::core::Duration::from))]
    pub commit_delay: kube::core::Duration,
    /// Log verbosity, klog style: `--v=2`, `-v=2`, or `-v`, `-vv`; `RUST_LOG` overrides.
    #[arg(short = 'v', long = "v", value_name = "N", num_args = 0..=1, default_value = "0",
          default_missing_value = "1", value_parser = super::parse_verbosity)]
    pub v: u8,
    /// Event messages that say more than upstream's: why each volume was rejected (FailedBinding)
    /// and what ends a WaitForFirstConsumer wait (no scheduler runs here).
    /// `--detailed-events=false` gives upstream's texts exactly.
    #[arg(long, num_args = 0..=1, default_missing_value = "true", default_value = "true",
          action = clap::ArgAction::Set)]
    pub detailed_events: bool,
}

/// Runs `up` until SIGINT or SIGTERM.
pub fn run(a: UpArgs) -> anyhow::Result<ExitCode> {
    super::init_logging(super::log_filter(a.v, true), false);
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    rt.block_on(serve(a))
}

/// Resolves `HOST:PORT` (host names included) to one address, IPv4 first.
pub async fn resolve(flag: &str, addr: &str) -> anyhow::Result<SocketAddr> {
    if let Ok(a) = addr.parse::<SocketAddr>() {
        return Ok(a);
    }
    if !addr.contains(':') {
        return Err(user(format!("{flag} {addr:?}: expected HOST:PORT, e.g. 127.0.0.1:6443 or localhost:0")));
    }
    let found: Vec<SocketAddr> = tokio::net::lookup_host(addr)
        .await
        .map_err(|e| user(format!("{flag} {addr:?}: expected HOST:PORT ({e})")))?
        .collect();
    found
        .iter()
        .find(|a| a.is_ipv4())
        .or(found.first())
        .copied()
        .ok_or_else(|| user(format!("{flag} {addr:?}: the host name has no address")))
}

/// Refuses a `--data-dir` that exists but is not a directory.
fn check_data_dir(dir: &Path) -> anyhow::Result<()> {
    match std::fs::metadata(dir) {
        Ok(m) if !m.is_dir() => Err(user(format!("--data-dir {}: not a directory", dir.display()))),
        _ => Ok(()),
    }
}

/// Fails early, before anything is written, when the address cannot be bound (port in use).
fn check_listen(addr: SocketAddr) -> anyhow::Result<()> {
    std::net::TcpListener::bind(addr).map(drop).map_err(|e| user(format!("--listen {addr}: {e}")))
}

async fn serve(a: UpArgs) -> anyhow::Result<ExitCode> {
    if a.workers == Some(0) {
        return Err(user("--workers: must be at least 1"));
    }
    let which = if a.no_controller { Controllers::NONE } else { controllers::parse(&a.controllers).map_err(user)? };
    let listen = resolve("--listen", &a.listen).await?;
    check_data_dir(&a.data_dir)?;
    check_listen(listen)?;
    let created = !a.data_dir.exists();
    let mut cfg = ServerConfig::new(a.data_dir.clone(), listen);
    cfg.limits.max_requests_inflight = a.max_requests_inflight;
    cfg.limits.max_mutating_requests_inflight = a.max_mutating_requests_inflight;
    cfg.commit_delay = a.commit_delay.into();
    let server = match Server::start(cfg).await {
        Ok(s) => s,
        Err(e) => {
            if created {
                let _ = std::fs::remove_dir_all(&a.data_dir);
            }
            return Err(user(format!("{e:#}")));
        }
    };
    let volumes = a.data_dir.join("volumes");
    std::fs::create_dir_all(&volumes).map_err(|e| user(format!("creating {}: {e}", volumes.display())))?;
    {
        let mut out = std::io::stdout().lock();
        writeln!(out, "kubeconfig: {}", server.kubeconfig_path().display())?;
        writeln!(out, "server: {}", server.url())?;
        out.flush()?;
    }
    // The controllers run against the same store in-process (pv_local): the API server's
    // capacity goes to its clients, and the store's rules hold for both.
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    if !which.any() {
        eprintln!("no controller runs: deleted claims and volumes keep their protection finalizers (--controllers '*,-{}' keeps the protection controllers without the binder)", controllers::BINDER);
    }
    let mut tasks = Vec::new();
    if which.protection() {
        tasks.push(start_protection(&server, which, stop_rx.clone()));
    }
    if which.binder {
        tasks.push(start_binder(&a, &server, &volumes, stop_rx.clone()).await?);
    }
    let standins = pv_standins::StandIns { scheduler: a.scheduler, attach_detach: which.attach_detach };
    if standins.any() {
        let mut stop = stop_rx.clone();
        let store = server.store();
        tasks.push(tokio::spawn(pv_standins::run(store, standins, async move {
            let _ = stop.wait_for(|s| *s).await;
        })));
    }
    wait_for_signal().await?;
    eprintln!("shutting down");
    let _ = stop_tx.send(true);
    let _ = tokio::time::timeout(std::time::Duration::from_secs(10), futures_util::future::join_all(tasks)).await;
    server.shutdown().await?;
    Ok(ExitCode::SUCCESS)
}

/// Starts the pv- and pvc-protection controllers `which` selects (kube-controller-manager's, for
/// the finalizers the store's admission adds) until `stop`.
fn start_protection(
    server: &ServerHandle,
    which: Controllers,
    mut stop: tokio::sync::watch::Receiver<bool>,
) -> tokio::task::JoinHandle<()> {
    let store = server.store();
    let api = Arc::new(pv_local::MemApi::new(store.clone()));
    let scope = pv_core::protection::Scope { volumes: which.pv_protection, claims: which.pvc_protection };
    let protection = Protection::new(api, SystemClock::new(), scope);
    tokio::spawn(async move {
        let informers = pv_local::start_protection(&store, &protection);
        protection
            .run(async move {
                let _ = stop.wait_for(|stop| *stop).await;
            })
            .await;
        drop(informers);
    })
}

/// Starts the binder with its `/metrics`, `/healthz` and `/readyz` until `stop`.
async fn start_binder(
    a: &UpArgs,
    server: &ServerHandle,
    volumes: &Path,
    mut stop: tokio::sync::watch::Receiver<bool>,
) -> anyhow::Result<tokio::task::JoinHandle<()>> {
    let store = server.store();
    let api = Arc::new(pv_local::MemApi::new(store.clone()));
    let plugins = pv_plugins::registry(Some(volumes.to_path_buf()));
    let config = Config { detailed_events: a.detailed_events, ..Config::default() };
    let controller = Controller::new(api, plugins, SystemClock::new(), config);
    let (synced_tx, synced_rx) = tokio::sync::watch::channel(0usize);
    serve_metrics(&a.metrics_addr, &controller, synced_rx, stop.clone()).await?;
    let workers = a.workers.unwrap_or_else(pv_core::runtime::default_workers);
    Ok(tokio::spawn(async move {
        let informers = pv_local::start(&store, &controller);
        // The local informers list synchronously: every kind is synced now.
        let _ = synced_tx.send(pv_kube::informers::KINDS);
        tracing::info!(workers, "controller started");
        controller.resync();
        let shutdown = async move {
            let _ = stop.wait_for(|stop| *stop).await;
        };
        pv_core::runtime::run(controller, workers, shutdown).await;
        drop(informers);
    }))
}

/// Serves `/metrics`, `/healthz` and `/readyz` for the in-process controller. A taken default
/// port is only a warning (`up` is often started more than once on one machine); an address
/// the user gave must work.
async fn serve_metrics(
    addr: &str,
    controller: &Arc<Controller>,
    synced: tokio::sync::watch::Receiver<usize>,
    mut stop: tokio::sync::watch::Receiver<bool>,
) -> anyhow::Result<()> {
    let bind = resolve("--metrics-addr", addr).await?;
    let health =
        pv_kube::http::Health { controller: controller.clone(), synced, leader: None, requests: None, shadow: None };
    let shutdown = async move {
        let _ = stop.wait_for(|s| *s).await;
    };
    match pv_kube::http::serve(bind, health, shutdown).await {
        Ok((bound, _)) => {
            eprintln!("metrics: http://{bound}/metrics (also /healthz, /readyz)");
            Ok(())
        }
        Err(e) if addr == DEFAULT_METRICS_ADDR => {
            eprintln!("warning: not serving /metrics, /healthz, /readyz: {e} (choose another --metrics-addr)");
            Ok(())
        }
        Err(e) => Err(user(format!("--metrics-addr: {e}"))),
    }
}

async fn wait_for_signal() -> anyhow::Result<()> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let mut term = signal(SignalKind::terminate())?;
        tokio::select! {
            r = tokio::signal::ctrl_c() => r?,
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    tokio::signal::ctrl_c().await?;
    Ok(())
}
