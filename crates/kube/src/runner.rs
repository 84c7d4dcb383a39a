//! Wiring the controller to a cluster: build it over [`KubeApi`], start the informers, wait for
//! the initial lists, then run the workers until shutdown.
//!
//! Why wait for the lists: a controller that syncs a claim before it has seen every volume
//! would decide on partial data (provision a new volume while a matching one exists, or think a
//! bound volume's claim is gone). Upstream waits for its informers' caches for the same reason.

use crate::api::{KubeApi, RequestCounts};
use crate::foreign::OwnWrites;
use crate::informers::{start_informers, start_informers_seeing, Informers};
use crate::recycler::PodRecyclers;
use crate::shadow::{ReadOnly, Shadow, ShadowApi};
use kube::Client;
use pv_core::{Config, Controller, SystemClock};
use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// How the controller runs.
#[derive(Clone, Debug)]
pub struct ControllerOptions {
    /// Worker tasks per queue.
    pub workers: usize,
    /// How often every object is synced again.
    pub resync_period: Duration,
    /// Enables the host-path plugin, provisioning under this directory.
    pub hostpath_root: Option<PathBuf>,
    /// Recycle NFS and host-path volumes with recycler pods (`run`); without, host-path volumes
    /// under `hostpath_root` are recycled in-process and NFS volumes cannot be.
    pub pod_recyclers: Option<PodRecyclers>,
    /// Provision for claims whose class names a provisioner (KCM's
    /// `--enable-dynamic-provisioning`).
    pub enable_dynamic_provisioning: bool,
    /// Event texts that say more than upstream's ([`Config::detailed_events`]); off, as upstream.
    pub detailed_events: bool,
    /// Events' `reportingInstance` ([`Config::reporting_instance`]).
    pub reporting_instance: String,
}

impl Default for ControllerOptions {
    fn default() -> Self {
        ControllerOptions {
            workers: pv_core::runtime::default_workers(),
            resync_period: Duration::from_secs(15),
            hostpath_root: None,
            pod_recyclers: None,
            enable_dynamic_provisioning: true,
            detailed_events: false,
            reporting_instance: String::new(),
        }
    }
}

/// A controller connected to a cluster, its informers started.
pub struct Wiring {
    /// The controller.
    pub controller: Arc<Controller>,
    /// Its watches.
    pub informers: Informers,
    /// Requests the controller made (for `rest_client_requests_total`).
    pub requests: Arc<RequestCounts>,
    /// The controller's own writes, and whether it is writing (see [`crate::foreign`]).
    pub own: Arc<OwnWrites>,
    /// Shadow mode ([`start_shadow`]): nothing is written, and another binder's writes are
    /// expected.
    pub shadow: Option<Arc<Shadow>>,
}

/// The controller's configuration from `opts`.
fn config(opts: &ControllerOptions) -> Config {
    Config {
        resync_period: opts.resync_period,
        enable_dynamic_provisioning: opts.enable_dynamic_provisioning,
        detailed_events: opts.detailed_events,
        reporting_instance: opts.reporting_instance.clone(),
        ..Default::default()
    }
}

/// Builds the controller over `client` and starts its informers. `host` labels request metrics.
/// Nothing is written until [`run_workers`] runs.
pub fn start(client: Client, host: &str, opts: &ControllerOptions) -> Wiring {
    let requests = Arc::new(RequestCounts::new(host));
    let own = Arc::new(OwnWrites::default());
    let api = KubeApi::new(client.clone()).with_request_counts(requests.clone()).with_own_writes(own.clone());
    let config = config(opts);
    let mut plugins = pv_plugins::registry(opts.hostpath_root.clone());
    if let Some(recyclers) = &opts.pod_recyclers {
        recyclers.register(&client, &mut plugins);
    }
    let controller = Controller::new(Arc::new(api), plugins, SystemClock::new(), config);
    let informers = start_informers(client, controller.clone(), own.clone());
    Wiring { controller, informers, requests, own, shadow: None }
}

/// Builds the controller in shadow mode over `client`: its API is a [`ShadowApi`] (reads only;
/// every write recorded, judged `settle` later against what the cluster holds), no volume plugin
/// touches a disk and no recycler pod is started. The informers are the same as `run`'s.
pub fn start_shadow(client: Client, host: &str, opts: &ControllerOptions, settle: Duration) -> Wiring {
    let requests = Arc::new(RequestCounts::new(host));
    let own = Arc::new(OwnWrites::default());
    let shadow = Shadow::new(ReadOnly::new(client.clone(), crate::api::DEFAULT_REQUEST_TIMEOUT), settle);
    let config = config(opts);
    let api = ShadowApi::new(shadow.clone());
    let controller = Controller::new(Arc::new(api), pv_plugins::registry(None), SystemClock::new(), config);
    let caches = Arc::downgrade(&controller);
    shadow.set_exists(Box::new(move |kind, object| {
        caches.upgrade().is_some_and(|c| match kind {
            "PersistentVolume" => c.caches().volume(object).is_some(),
            _ => c.caches().claim(object).is_some(),
        })
    }));
    let seen = shadow.clone();
    let see: crate::informers::SeeVolume =
        Arc::new(move |v| seen.saw_volume(v.metadata.name.as_deref().unwrap_or_default()));
    let informers = start_informers_seeing(client, controller.clone(), own.clone(), Some(see));
    Wiring { controller, informers, requests, own, shadow: Some(shadow) }
}

/// Waits for the informers' initial lists, then runs `workers` workers per queue until
/// `shutdown` resolves. Returns false when shutdown came before the caches synced.
pub async fn run_workers(wiring: &Wiring, workers: usize, shutdown: impl Future<Output = ()>) -> bool {
    tokio::pin!(shutdown);
    tokio::select! {
        _ = wiring.informers.wait_synced() => {}
        _ = &mut shutdown => return false,
    }
    tracing::info!(workers, "caches synced, starting workers");
    wiring.controller.resync();
    // Writing until the workers stop, also when this future is dropped (leadership lost).
    struct Active<'a>(&'a OwnWrites);
    impl Drop for Active<'_> {
        fn drop(&mut self) {
            self.0.set_active(false);
        }
    }
    // In shadow mode another binder writes, and this process does not.
    wiring.own.set_active(wiring.shadow.is_none());
    let _active = Active(&wiring.own);
    pv_core::runtime::run(wiring.controller.clone(), workers, shutdown).await;
    tracing::info!("workers stopped");
    true
}
