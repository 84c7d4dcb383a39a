//! `pv-controller up`: the embedded default. Starts the Kubernetes-compatible API server over
//! the durable store under `--data-dir`, prints where to reach it, attaches the controller (unless
//! `--no-controller`) in-process over the same store, and stops gracefully on SIGINT/SIGTERM.
//!
//! Scripts wait for the two lines `kubeconfig: PATH` and `server: URL` on stdout: they are
//! printed once the listener is bound and the kubeconfig written, and nothing else goes to
//! stdout. A restart on the same data directory resumes: same objects, same resourceVersion
//! sequence, same token and CA (the kubeconfig is rewritten, since the port may differ).

use super::user;
use pv_apiserver::{Server, ServerConfig};
use pv_core::{Config, Controller, SystemClock};
use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

/// Arguments of `up`.
#[derive(clap::Args, Debug)]
pub struct UpArgs {
    /// Directory for the object store, the kubeconfig and host-path volumes.
    #[arg(long, default_value = "./.pv-controller")]
    pub data_dir: PathBuf,
    /// Address to listen on (port 0 picks a free port). Loopback unless you say otherwise.
    #[arg(long, default_value = "127.0.0.1:6443")]
    pub listen: SocketAddr,
    /// Serve the API only; do not start the controller.
    #[arg(long)]
    pub no_controller: bool,
    /// Worker tasks per queue (default: 8 per CPU, between 8 and 64).
    #[arg(long)]
    pub workers: Option<usize>,
}

/// Runs `up` until SIGINT or SIGTERM.
pub fn run(a: UpArgs) -> anyhow::Result<ExitCode> {
    super::init_logging("warn", false);
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    rt.block_on(serve(a))
}

async fn serve(a: UpArgs) -> anyhow::Result<ExitCode> {
    if a.workers == Some(0) {
        return Err(user("--workers: must be at least 1"));
    }
    let server =
        Server::start(ServerConfig::new(a.data_dir.clone(), a.listen)).await.map_err(|e| user(format!("{e:#}")))?;
    let volumes = a.data_dir.join("volumes");
    std::fs::create_dir_all(&volumes).map_err(|e| user(format!("creating {}: {e}", volumes.display())))?;
    {
        let mut out = std::io::stdout().lock();
        writeln!(out, "kubeconfig: {}", server.kubeconfig_path().display())?;
        writeln!(out, "server: {}", server.url())?;
        out.flush()?;
    }
    // The controller runs against the same store in-process (pv_sim::local): the API server's
    // capacity goes to its clients, and the store's rules hold for both.
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let controller = if a.no_controller {
        None
    } else {
        let store = server.store();
        let api = Arc::new(pv_sim::MemApi::new(store.clone()));
        let plugins = pv_plugins::registry(Some(volumes.clone()));
        let controller = Controller::new(api, plugins, SystemClock::new(), Config::default());
        let mut rx = stop_rx.clone();
        let workers = a.workers.unwrap_or_else(pv_core::runtime::default_workers);
        Some(tokio::spawn(async move {
            let informers = pv_sim::local::start(&store, &controller);
            controller.resync();
            let shutdown = async move {
                let _ = rx.wait_for(|stop| *stop).await;
            };
            pv_core::runtime::run(controller, workers, shutdown).await;
            drop(informers);
        }))
    };
    wait_for_signal().await?;
    eprintln!("shutting down");
    let _ = stop_tx.send(true);
    if let Some(c) = controller {
        let _ = tokio::time::timeout(std::time::Duration::from_secs(10), c).await;
    }
    server.shutdown().await?;
    Ok(ExitCode::SUCCESS)
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
