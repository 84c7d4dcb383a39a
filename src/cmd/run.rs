//! `pv-controller run`: the controller against any Kubernetes API server, as a drop-in
//! replacement for kube-controller-manager's `persistentvolume-binder`.
//!
//! Wiring only: connect (and fail fast with the server URL when that does not work), start the
//! informers and the metrics endpoints, optionally win the Lease, then run workers. Losing the
//! Lease stops everything at once and exits 1, as kube-controller-manager does, so the
//! Deployment restarts the process as a fresh candidate.

mod recycling;
mod secure_metrics;

use super::user;
use clap::Args;
use pv_kube::http::Health;
use pv_kube::lease::{default_identity, Elector, KubeLeaseStore, LeaderElectionConfig};
use pv_kube::{ControllerOptions, LeaderState, Wiring};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;
use tokio::sync::watch;

/// How long the preflight check and the Lease requests may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(15);

/// How long a graceful shutdown waits for running operations before releasing the Lease.
const OPERATIONS_GRACE: Duration = Duration::from_secs(30);

/// Log format.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// Flags of `run`.
#[derive(Args, Debug)]
pub struct RunArgs {
    /// How to reach the cluster.
    #[command(flatten)]
    pub kube: super::KubeconfigArgs,
    /// Run only while holding the Lease, so several replicas can run with one writer.
    #[arg(long, num_args = 0..=1, default_missing_value = "true", default_value = "false",
          action = clap::ArgAction::Set)]
    pub leader_elect: bool,
    /// Namespace of the leader-election Lease.
    #[arg(long, visible_alias = "leader-elect-resource-namespace", default_value = "kube-system")]
    pub leader_elect_namespace: String,
    /// Name of the leader-election Lease.
    #[arg(long, default_value = "pv-controller")]
    pub leader_elect_resource_name: String,
    /// How long standbys wait after the last renewal before taking over.
    #[arg(long, default_value = "15s", value_parser = parse_duration)]
    pub leader_elect_lease_duration: Duration,
    /// How long the leader retries renewing before giving up.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub leader_elect_renew_deadline: Duration,
    /// How often to try to acquire or renew.
    #[arg(long, default_value = "2s", value_parser = parse_duration)]
    pub leader_elect_retry_period: Duration,
    /// Address for /metrics, /healthz and /readyz.
    #[arg(long, default_value = "127.0.0.1:9090")]
    pub metrics_addr: SocketAddr,
    /// How often every volume and claim is synced again.
    #[arg(long, visible_alias = "pvclaimbinder-sync-period", default_value = "15s", value_parser = parse_duration)]
    pub resync_period: Duration,
    /// Workers per queue (default: 128 per CPU, between 64 and 256).
    #[arg(long)]
    pub workers: Option<usize>,
    /// Enables the host-path plugin: provision, delete and recycle directories under DIR.
    #[arg(long, value_name = "DIR")]
    pub hostpath_root: Option<PathBuf>,
    /// Feature gates, `Name=true|false,...`, as kube-controller-manager takes them: an unknown
    /// gate, or a locked one set against its lock, stops the start.
    #[arg(long, default_value = "")]
    pub feature_gates: String,
    /// Log format.
    #[arg(long, visible_alias = "logging-format", value_enum, default_value = "text")]
    pub log_format: LogFormat,
    /// Log verbosity, klog style: `--v=2`, `-v=2`, or `-v`, `-vv`.
    #[arg(short = 'v', long = "v", value_name = "N", num_args = 0..=1, default_value = "0",
          default_missing_value = "1", value_parser = super::parse_verbosity)]
    pub v: u8,
    /// Recycler pods (kube-controller-manager's flags).
    #[command(flatten)]
    pub recycler: recycling::RecyclerFlags,
    /// HTTPS with delegated authorization for the endpoints.
    #[command(flatten)]
    pub secure_metrics: secure_metrics::SecureMetricsFlags,
    /// Provision volumes for claims whose class names a provisioner (kube-controller-manager's
    /// flag; `false` leaves every such claim Pending).
    #[arg(long, num_args = 0..=1, default_missing_value = "true", default_value = "true",
          action = clap::ArgAction::Set)]
    pub enable_dynamic_provisioning: bool,
    /// Enables the host-path plugin as kube-controller-manager's flag does, under
    /// /tmp/hostpath_pv (its provisioner's directory) unless --hostpath-root names another.
    #[arg(long, num_args = 0..=1, default_missing_value = "true", default_value = "false",
          action = clap::ArgAction::Set)]
    pub enable_hostpath_provisioner: bool,
    /// Event messages that say more than upstream's: why each volume was rejected (FailedBinding)
    /// and what ends a WaitForFirstConsumer wait. Off by default: upstream's texts exactly.
    #[arg(long, num_args = 0..=1, default_missing_value = "true", default_value = "false",
          action = clap::ArgAction::Set)]
    pub detailed_events: bool,
    /// Shadow mode: run beside the binder in charge (kube-controller-manager's), decide every
    /// sync as `run` would and write nothing at all; compare each decision with what the cluster
    /// holds `--shadow-settle` later (`/shadow` on the metrics port, `pv-controller shadow
    /// report`). Needs only get, list and watch.
    #[arg(long)]
    pub shadow: bool,
    /// How long after a decision shadow mode reads the cluster to judge it; longer than the
    /// binder in charge's resync period (KCM's --pvclaimbinder-sync-period, 15s by default). A
    /// field the binder has not touched yet waits up to three windows.
    #[arg(long, default_value = "20s", value_parser = parse_duration, requires = "shadow")]
    pub shadow_settle: Duration,
}

/// Where `--enable-hostpath-provisioner` provisions without `--hostpath-root`: upstream's
/// host-path provisioner creates `/tmp/hostpath_pv/<uuid>`.
const UPSTREAM_HOSTPATH_ROOT: &str = "/tmp/hostpath_pv";

impl RunArgs {
    /// The host-path root, from `--hostpath-root` or `--enable-hostpath-provisioner`.
    pub fn hostpath_root(&self) -> Option<PathBuf> {
        self.hostpath_root
            .clone()
            .or_else(|| self.enable_hostpath_provisioner.then(|| PathBuf::from(UPSTREAM_HOSTPATH_ROOT)))
    }
}

/// Parses a duration as Go's `time.ParseDuration` does, as every kube-controller-manager flag
/// takes it (`500ms`, `15s`, `1m30s`, `1h`, `1.5h`); it must be positive.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    match parse_duration_or_zero(s)? {
        d if d.is_zero() => Err(format!("duration {:?} must be positive", s.trim())),
        d => Ok(d),
    }
}

/// [`parse_duration`] that also takes a zero duration (`0`, `0s`), for a flag where zero turns
/// something off.
pub fn parse_duration_or_zero(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    if s.is_empty() {
        return Err("invalid duration \"\" (use e.g. 500ms, 15s, 1m30s)".into());
    }
    let d: kube::core::Duration =
        s.parse().map_err(|e| format!("invalid duration {s:?}: {e} (use e.g. 500ms, 15s, 1m30s)"))?;
    if d.is_negative() {
        return Err(format!("duration {s:?} must not be negative"));
    }
    Ok(d.into())
}

/// Runs `run`.
pub fn run(a: RunArgs) -> anyhow::Result<ExitCode> {
    super::init_logging(super::log_filter(a.v, false), a.log_format == LogFormat::Json);
    let gates = super::feature_gates::parse(&a.feature_gates).map_err(user)?;
    for (name, value) in &gates {
        tracing::debug!(gate = %name, value, "feature gate");
    }
    if a.workers == Some(0) {
        return Err(user("--workers: must be at least 1"));
    }
    if a.shadow {
        // Each of these writes (a Lease, directories, TokenReviews): shadow mode writes nothing.
        let refused = [
            (a.leader_elect, "--leader-elect (a Lease is a write; run one shadow)"),
            (
                a.hostpath_root().is_some(),
                "--hostpath-root / --enable-hostpath-provisioner (the host-path plugin writes directories)",
            ),
            (a.secure_metrics.metrics_secure, "--metrics-secure (its TokenReviews are writes)"),
        ];
        if let Some((_, flag)) = refused.iter().find(|(set, _)| *set) {
            return Err(user(format!("--shadow writes nothing, so it does not take {flag}")));
        }
    }
    if let Some(root) = &a.hostpath_root() {
        std::fs::create_dir_all(root).map_err(|e| user(format!("--hostpath-root {}: {e}", root.display())))?;
    }
    // One identity for the Lease and for events' `reportingInstance`, so that an event can be
    // traced to the replica that wrote it.
    let identity = default_identity();
    let election = a.leader_elect.then(|| {
        let mut c = LeaderElectionConfig::new(&a.leader_elect_namespace, &a.leader_elect_resource_name, &identity);
        c.lease_duration = a.leader_elect_lease_duration;
        c.renew_deadline = a.leader_elect_renew_deadline;
        c.retry_period = a.leader_elect_retry_period;
        c
    });
    if let Some(c) = &election {
        c.validate().map_err(|e| user(format!("--leader-elect: {e}")))?;
    }
    let recyclers = a.recycler.recyclers()?;
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let result = rt.block_on(run_async(a, identity, election, recyclers));
    rt.shutdown_timeout(Duration::from_secs(1));
    result
}

/// Resolves when `rx` turns true (or its sender is gone).
async fn stopped(mut rx: watch::Receiver<bool>) {
    let _ = rx.wait_for(|s| *s).await;
}

/// First SIGINT/SIGTERM: graceful stop. Second: exit at once.
fn spawn_signal_handler(stop: watch::Sender<bool>) {
    tokio::spawn(async move {
        for n in 0.. {
            wait_for_signal().await;
            if n > 0 {
                eprintln!("error: interrupted twice, exiting without cleanup");
                std::process::exit(1);
            }
            tracing::info!("shutting down");
            let _ = stop.send(true);
        }
    });
}

async fn wait_for_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

async fn run_async(
    a: RunArgs,
    identity: String,
    election: Option<LeaderElectionConfig>,
    recyclers: pv_kube::recycler::PodRecyclers,
) -> anyhow::Result<ExitCode> {
    let (client, _, host) = a.kube.connect(REQUEST_TIMEOUT).await?;
    tracing::info!(%identity, "this replica's identity: its Lease holder name and its events' reportingInstance");

    let (stop_tx, stop_rx) = watch::channel(false);
    spawn_signal_handler(stop_tx);
    let opts = ControllerOptions {
        workers: a.workers.unwrap_or(ControllerOptions::default().workers),
        resync_period: a.resync_period,
        hostpath_root: a.hostpath_root(),
        pod_recyclers: Some(recyclers),
        enable_dynamic_provisioning: a.enable_dynamic_provisioning,
        detailed_events: a.detailed_events,
        reporting_instance: identity,
    };
    let wiring = if a.shadow {
        tracing::info!(settle = ?a.shadow_settle, "shadow mode: nothing is written; decisions are compared with the binder in charge");
        pv_kube::runner::start_shadow(client.clone(), &host, &opts, a.shadow_settle)
    } else {
        pv_kube::start(client.clone(), &host, &opts)
    };
    if let Some(shadow) = wiring.shadow.clone() {
        let stop = stopped(stop_rx.clone());
        tokio::spawn(async move { shadow.run(stop).await });
    }
    let elector = election.map(|cfg| {
        let store = KubeLeaseStore::new(client.clone(), &cfg.namespace, &cfg.name, REQUEST_TIMEOUT);
        Elector::new(store, cfg)
    });
    let health = Health {
        controller: wiring.controller.clone(),
        synced: wiring.informers.synced_receiver(),
        leader: elector.as_ref().map(|(_, rx)| rx.clone()),
        requests: Some(wiring.requests.clone()),
        shadow: wiring.shadow.clone(),
    };
    a.secure_metrics.serve(a.metrics_addr, health, client.clone(), stopped(stop_rx.clone())).await?;

    let code = match elector {
        None => {
            pv_kube::run_workers(&wiring, opts.workers, stopped(stop_rx)).await;
            wait_for_operations(&wiring).await;
            ExitCode::SUCCESS
        }
        Some((elector, state)) => lead(&wiring, opts.workers, elector, state, stop_rx).await,
    };
    wiring.informers.stop();
    Ok(code)
}

/// Campaigns, then runs workers while leading. Returns the process exit code.
async fn lead(
    wiring: &Wiring,
    workers: usize,
    mut elector: Elector<KubeLeaseStore>,
    state: watch::Receiver<LeaderState>,
    mut stop: watch::Receiver<bool>,
) -> ExitCode {
    tracing::info!("waiting to acquire the leader-election lease");
    if !elector.acquire(&mut stop).await {
        return ExitCode::SUCCESS;
    }
    let (release_tx, mut release_rx) = watch::channel(false);
    let renew = tokio::spawn(async move { elector.renew(&mut release_rx).await });
    let mut lost_rx = state.clone();
    let lost = async move {
        let _ = lost_rx.wait_for(|s| *s == LeaderState::Lost).await;
    };
    tokio::select! {
        _ = pv_kube::run_workers(wiring, workers, stopped(stop)) => {}
        _ = lost => {
            // Stop writing at once: the runtime is torn down when this returns.
            let why = match renew.await {
                Ok(Err(e)) => e.to_string(),
                _ => "leadership lost".into(),
            };
            eprintln!("error: {why}; exiting so that a restart campaigns again");
            return ExitCode::from(1);
        }
    }
    wait_for_operations(wiring).await;
    let _ = release_tx.send(true);
    match renew.await {
        Ok(Err(e)) => {
            eprintln!("error: {e}");
            ExitCode::from(1)
        }
        _ => ExitCode::SUCCESS,
    }
}

/// Lets provisioning/deletion operations that already started finish (bounded), so nothing
/// writes after the Lease is released.
async fn wait_for_operations(wiring: &Wiring) {
    let deadline = tokio::time::Instant::now() + OPERATIONS_GRACE;
    while !wiring.controller.operations().is_idle() && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_as_go_parses_them() {
        assert_eq!(parse_duration("15s"), Ok(Duration::from_secs(15)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration_or_zero("2ms"), Ok(Duration::from_millis(2)));
        assert_eq!(parse_duration_or_zero("0"), Ok(Duration::ZERO));
        assert_eq!(parse_duration_or_zero("0s"), Ok(Duration::ZERO));
        assert!(parse_duration_or_zero("-1s").unwrap_err().contains("must not be negative"));
        assert!(parse_duration_or_zero("2").unwrap_err().contains("invalid duration"));
        assert_eq!(parse_duration("1h2m3s4ms"), Ok(Duration::from_millis(3_723_004)));
        assert_eq!(parse_duration("1.5h"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_duration("250us"), Ok(Duration::from_micros(250)));
        // Go wants a unit on anything but 0.
        assert!(parse_duration("3").is_err());
        assert!(parse_duration("0s").is_err());
        assert!(parse_duration("-5s").is_err());
        assert!(parse_duration("").is_err());
        assert!(parse_duration("5 parsecs").is_err());
    }
}
