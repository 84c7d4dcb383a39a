//! The executor: the caches ([`Caches`], the read side) and everything that acts on what the
//! plans decide — the API, one writer per object, the work queues, the operations, the event
//! recorder and the metrics. The watch-event handlers update the caches and enqueue what they
//! say to wake; the per-key syncs compute a plan ([`crate::plan`], over the caches alone) and
//! carry it out (`exec/`: volume, claim, bind, provision, reclaim). As upstream splits
//! `pv_controller_base.go` (wiring) from `pv_controller.go` (sync logic).

use crate::api::ClusterApi;
use crate::cache::ObjectEvent;
use crate::caches::{Caches, Wake};
use crate::clock::Clock;
use crate::events::{Involved, Recorder};
use crate::metrics::Metrics;
use crate::operations::{Mode, OpKey, Operations};
use crate::plugin::PluginRegistry;
use crate::queue::WorkQueue;
use crate::runner::{Keys, Lane, Runner, SyncKey};
use crate::steps::SyncReport;
use crate::writer::Writers;
use pv_model::k8s::{Node, PersistentVolume, PersistentVolumeClaim, Pod, StorageClass};
use pv_model::ObjectKey;
use pv_model::{helpers, reasons};
use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tracing::Instrument;

/// Controller settings.
#[derive(Clone, Debug)]
pub struct Config {
    /// How often every object is synced again.
    pub resync_period: Duration,
    /// Provision volumes for claims with a class (upstream's `enableDynamicProvisioning`).
    pub enable_dynamic_provisioning: bool,
    /// Attempts to save a provisioned PV before giving up and deleting the asset.
    pub create_provisioned_pv_retry_count: u32,
    /// Wait between those attempts.
    pub create_provisioned_pv_interval: Duration,
    /// How operations run.
    pub operations: Mode,
    /// How many pending claims a newly available volume wakes at most.
    pub wake_limit: usize,
    /// Event messages that say more than upstream's: FailedBinding's breakdown of why the volumes
    /// were rejected, and how a WaitForFirstConsumer wait ends. Off: upstream's texts exactly,
    /// as `run` has them unless `--detailed-events` (alerts and runbooks match them); `up` and
    /// `simulate` switch it on.
    pub detailed_events: bool,
    /// `reportingInstance` of the events written: the Lease identity in `run`, so that two
    /// writers of `source: persistentvolume-controller` events can be told apart. Empty (as
    /// kube-controller-manager's binder leaves it) where there is one writer.
    pub reporting_instance: String,
    /// Told of every volume and claim sync, once it ends, with the steps it carried out
    /// (`simulate -o changes` lists them). None: the syncs record nothing.
    pub observer: Option<Observer>,
}

/// What is told of each sync the controller carries out ([`Config::observer`]): the object
/// synced and its steps, in order, with what came of each ([`SyncReport`]). Called on the
/// worker that ran the sync, after its last step; it must not block.
#[derive(Clone)]
pub struct Observer(Arc<dyn Fn(SyncReport) + Send + Sync>);

impl Observer {
    /// An observer that calls `f` with each sync's report.
    pub fn new(f: impl Fn(SyncReport) + Send + Sync + 'static) -> Self {
        Observer(Arc::new(f))
    }

    /// Tells of one sync.
    pub fn synced(&self, report: SyncReport) {
        (self.0)(report)
    }
}

impl std::fmt::Debug for Observer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Observer")
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            resync_period: Duration::from_secs(15),
            enable_dynamic_provisioning: true,
            create_provisioned_pv_retry_count: 5,
            create_provisioned_pv_interval: Duration::from_secs(10),
            operations: Mode::Spawn,
            wake_limit: 8,
            detailed_events: false,
            reporting_instance: String::new(),
            observer: None,
        }
    }
}

/// The kinds (resource names) the controller watches, in the order their initial lists are
/// delivered: classes, nodes and pods first, then volumes before claims, so that a claim is never
/// matched against a partial volume cache. Every in-process informer (`up`, `simulate`) lists
/// and watches these; `run`'s kube-rs informers watch the same five and report synced only once
/// all five have listed.
pub const WATCHED_KINDS: [&str; 5] = ["storageclasses", "nodes", "pods", "persistentvolumes", "persistentvolumeclaims"];

/// The PersistentVolume controller: the executor, holding the caches.
pub struct Controller {
    me: std::sync::Weak<Controller>,
    pub(crate) api: Arc<dyn ClusterApi>,
    pub(crate) plugins: PluginRegistry,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) config: Config,
    /// What the plans read.
    pub(crate) caches: Caches,
    pub(crate) operations: Arc<Operations>,
    pub(crate) recorder: Recorder,
    /// One writer per volume at a time (see [`crate::writer`]).
    pub(crate) volume_writers: Writers,
    /// One writer per claim at a time.
    pub(crate) claim_writers: Writers,
    /// Assets the last sweep found unused (see [`Controller::sweep_unused_assets`]).
    unused_assets: Mutex<HashSet<String>>,
    /// Volume work queue.
    pub volume_queue: WorkQueue,
    /// Claim work queue.
    pub claim_queue: WorkQueue<ObjectKey>,
    /// Counters for `/metrics`.
    pub metrics: Metrics,
}

impl Controller {
    /// The event recorder: [`crate::runtime::run`] drains it; a simulation flushes it as a step.
    pub fn recorder(&self) -> &Recorder {
        &self.recorder
    }

    /// A controller over `api`, with `plugins`, on `clock`.
    pub fn new(api: Arc<dyn ClusterApi>, plugins: PluginRegistry, clock: Arc<dyn Clock>, config: Config) -> Arc<Self> {
        Arc::new_cyclic(|me| Controller {
            me: me.clone(),
            recorder: Recorder::new(api.clone(), clock.clone()).with_instance(&config.reporting_instance),
            operations: Operations::new(config.operations, clock.clone()),
            volume_queue: WorkQueue::new("volumes", clock.clone()),
            claim_queue: WorkQueue::new("claims", clock.clone()),
            caches: Caches::new(plugins.clone(), config.enable_dynamic_provisioning, config.wake_limit),
            api,
            plugins,
            clock,
            config,
            volume_writers: Writers::default(),
            claim_writers: Writers::default(),
            unused_assets: Mutex::default(),
            metrics: Metrics::default(),
        })
    }

    /// A strong reference to this controller (operations outlive the sync that starts them).
    pub(crate) fn self_arc(&self) -> Arc<Controller> {
        self.me.upgrade().expect("controller is alive while it runs")
    }

    /// The caches: what the plans read.
    pub fn caches(&self) -> &Caches {
        &self.caches
    }

    /// The clock.
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    /// The operation scheduler.
    pub fn operations(&self) -> &Arc<Operations> {
        &self.operations
    }

    /// The settings.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Another writer changed what only a binder writes (`fields`) on `obj`: a second binder
    /// (kube-controller-manager's left on, another instance outside the Lease). Logged at WARN,
    /// recorded as a Warning event on the object and counted by manager; the controller keeps
    /// working and does not undo the write.
    pub async fn foreign_binder_write(&self, obj: Involved, manager: &str, fields: &[&str]) {
        tracing::warn!(
            object = %obj.describe(),
            manager,
            fields = ?fields,
            "another binder wrote binder-owned fields; two PersistentVolume binders must not run together (disable kube-controller-manager's with --controllers=*,-persistentvolume-binder-controller)"
        );
        self.metrics.foreign_binder_write(manager);
        let message = format!(
            "{manager} wrote {} (fields only a PersistentVolume binder writes): another binder is running beside pv-controller",
            fields.join(", ")
        );
        self.recorder.event(obj, "Warning", reasons::FOREIGN_BINDER_WRITE, message).await;
    }

    // ---- watch-event handlers -------------------------------------------------------------

    /// A PV was added, changed or deleted.
    pub fn on_volume(&self, ev: ObjectEvent<PersistentVolume>) {
        let deleted = match &ev {
            ObjectEvent::Deleted(v) => Some(helpers::name(&v.metadata).to_string()),
            ObjectEvent::Applied(_) => None,
        };
        let wake = self.caches.on_volume(ev);
        if let Some(name) = deleted {
            // A deletion of this volume (if one started) is done.
            self.metrics.operation_finished(&name, self.clock.now_ms(), false);
        }
        self.wake(wake);
    }

    /// A PVC was added, changed or deleted.
    pub fn on_claim(&self, ev: ObjectEvent<PersistentVolumeClaim>) {
        let deleted = match &ev {
            ObjectEvent::Deleted(c) => Some(helpers::claim_key(c)),
            ObjectEvent::Applied(_) => None,
        };
        let wake = self.caches.on_claim(ev);
        if let Some(key) = deleted {
            self.metrics.operation_forgotten(&key);
        }
        self.wake(wake);
    }

    /// A StorageClass was added, changed or deleted.
    pub fn on_class(&self, ev: ObjectEvent<StorageClass>) {
        self.caches.on_class(ev);
    }

    /// A Pod was added, changed or deleted.
    pub fn on_pod(&self, ev: ObjectEvent<Pod>) {
        self.caches.on_pod(ev);
    }

    /// A Node was added, changed or deleted.
    pub fn on_node(&self, ev: ObjectEvent<Node>) {
        self.caches.on_node(ev);
    }

    /// Enqueues every known volume and claim but the settled pairs (the periodic resync; see
    /// [`crate::caches`]).
    pub fn resync(&self) {
        self.wake(self.caches.unsettled());
    }

    /// Enqueues what the caches said to sync now, in the order given (the simulator's resync
    /// gives [`crate::caches::Caches::unsettled`] sorted, so that a run can be replayed).
    pub fn wake(&self, wake: Wake) {
        for v in &wake.volumes {
            self.volume_queue.add(v);
        }
        for c in &wake.claims {
            self.claim_queue.add(c);
        }
    }

    /// Removes what an interrupted provisioning left behind: an asset a provisioner created for
    /// a claim (named as its volume would be, `pvc-<claim uid>`) when the process stopped before
    /// the volume object was made, and the claim was deleted before anyone provisioned it
    /// again. Nothing refers to such an asset and nothing ever will, so without this sweep it
    /// stays forever. An asset is kept while any cached volume names it or has it as its source,
    /// any cached claim would give its volume that name, or a provisioning is under way for that
    /// claim; and the plugin removes it only while it is empty (no volume ever existed, so no
    /// pod could have written to it). An asset goes only when two sweeps in a row found it
    /// unused, so a volume just created has reached the cache by then. `run` and `up` sweep three
    /// times per resync period, `simulate` once per resync round; returns what it removed.
    pub async fn sweep_unused_assets(&self) -> Vec<String> {
        let mut removed = Vec::new();
        let mut now_unused: HashSet<String> = HashSet::new();
        for plugin in self.plugins.provisioners() {
            let listed = match plugin.provisioned_assets().await {
                Ok(l) => l,
                Err(e) => {
                    tracing::debug!(plugin = plugin.name(), error = %e, "cannot list provisioned assets");
                    continue;
                }
            };
            // Cheap first: almost every asset is a cached volume's name.
            let mut unused: Vec<String> = listed.into_iter().filter(|n| self.caches.volume(n).is_none()).collect();
            if unused.is_empty() {
                continue;
            }
            let sources: HashSet<String> = self.caches.volumes().iter().filter_map(|v| plugin.asset_of(v)).collect();
            let claimed: HashSet<String> =
                self.caches.claims().iter().map(|c| format!("pvc-{}", helpers::uid(&c.metadata))).collect();
            let provisioning: HashSet<String> = self
                .operations
                .running()
                .into_iter()
                .filter_map(|op| match op {
                    OpKey::Provision { uid, .. } => Some(format!("pvc-{uid}")),
                    _ => None,
                })
                .collect();
            unused.retain(|n| !sources.contains(n) && !claimed.contains(n) && !provisioning.contains(n));
            let before = self.unused_assets.lock().unwrap().clone();
            for name in unused {
                now_unused.insert(name.clone());
                if !before.contains(&name) {
                    tracing::debug!(plugin = plugin.name(), asset = %name, "unused asset: removed at the next sweep if still unused");
                    continue;
                }
                match plugin.remove_unused_asset(&name).await {
                    Ok(true) => {
                        tracing::info!(plugin = plugin.name(), asset = %name, "removed an empty asset of an interrupted provisioning whose claim is gone");
                        removed.push(name);
                    }
                    Ok(false) => {}
                    Err(e) => {
                        tracing::warn!(plugin = plugin.name(), asset = %name, error = %e, "cannot remove an unused asset")
                    }
                }
            }
        }
        *self.unused_assets.lock().unwrap() = now_unused;
        removed
    }

    /// Enqueues the volume when called (an operation's follow-up; see [`Operations::schedule`]).
    pub(crate) fn sync_volume_again(&self, name: &str) -> crate::operations::Again {
        let (me, name) = (self.me.clone(), name.to_string());
        Box::new(move || {
            if let Some(c) = me.upgrade() {
                c.volume_queue.add(&name);
            }
        })
    }

    /// Enqueues the claim when called (an operation's follow-up).
    pub(crate) fn sync_claim_again(&self, key: &ObjectKey) -> crate::operations::Again {
        let (me, key) = (self.me.clone(), key.clone());
        Box::new(move || {
            if let Some(c) = me.upgrade() {
                c.claim_queue.add(&key);
            }
        })
    }

    // ---- per-key entry points --------------------------------------------------------------

    /// Syncs the volume with this name from the cache. Errors mean "retry later".
    pub async fn sync_volume_key(self: &Arc<Self>, name: &str) -> crate::Result<()> {
        let Some(v) = self.caches.volume(name) else {
            return Ok(());
        };
        self.sync_volume(v).instrument(tracing::debug_span!("sync_volume", volume = %name)).await
    }

    /// Syncs the claim with this key from the cache. Errors mean "retry later".
    pub async fn sync_claim_key(self: &Arc<Self>, key: &str) -> crate::Result<()> {
        let Some(c) = self.caches.claim(key) else {
            return Ok(());
        };
        self.sync_claim(c).instrument(tracing::debug_span!("sync_claim", pvc = %key)).await
    }

    /// Processes one volume key from the queue: sync, then forget or requeue with backoff.
    pub async fn process_volume(self: &Arc<Self>, key: String) {
        let result = self.sync_volume_key(&key).await;
        finish(&self.volume_queue, "volume", &key, result);
    }

    /// Processes one claim key from the queue.
    pub async fn process_claim(self: &Arc<Self>, key: ObjectKey) {
        let result = self.sync_claim_key(&key).await;
        finish(&self.claim_queue, "claim", &key, result);
    }

    /// The runner of the binder's two queues, on the controller's clock: volumes first, or
    /// claims first (a simulation's choice; in real time the order does not matter).
    pub fn runner(self: &Arc<Self>, claims_first: bool) -> Runner {
        let volumes: Arc<dyn Lane> = Arc::new(Keys(Volumes(self.clone())));
        let claims: Arc<dyn Lane> = Arc::new(Keys(Claims(self.clone())));
        let lanes = if claims_first { vec![claims, volumes] } else { vec![volumes, claims] };
        Runner::new(self.clock.clone(), lanes)
    }
}

/// The binder's claim queue, synced by [`Controller::process_claim`].
struct Claims(Arc<Controller>);

#[async_trait::async_trait]
impl SyncKey for Claims {
    type Key = ObjectKey;
    fn queue(&self) -> &WorkQueue<ObjectKey> {
        &self.0.claim_queue
    }
    async fn sync_key(&self, key: ObjectKey) {
        self.0.process_claim(key).await
    }
}

/// The binder's volume queue, synced by [`Controller::process_volume`].
struct Volumes(Arc<Controller>);

#[async_trait::async_trait]
impl SyncKey for Volumes {
    type Key = String;
    fn queue(&self) -> &WorkQueue<String> {
        &self.0.volume_queue
    }
    async fn sync_key(&self, key: String) {
        self.0.process_volume(key).await
    }
}

/// Ends the processing of a key: forget its failures on success, requeue it with backoff on error.
fn finish<K: Clone + Eq + std::hash::Hash + std::ops::Deref<Target = str>>(
    queue: &WorkQueue<K>,
    what: &str,
    key: &K,
    result: crate::Result<()>,
) {
    match result {
        Ok(()) => queue.forget(key),
        Err(e @ crate::Error::Stale(_)) => {
            tracing::debug!(object = &**key, error = %e, "{what} sync read an older volume, syncing again");
            queue.add(key);
        }
        Err(e) => {
            log_sync_error(what, key, &e);
            queue.add_rate_limited(key);
        }
    }
    queue.done(key);
}

fn log_sync_error(what: &str, key: &str, e: &crate::Error) {
    if e.is_race() {
        tracing::debug!(object = %key, error = %e, "could not sync {what}, will retry");
    } else {
        tracing::warn!(object = %key, error = %e, "could not sync {what}, will retry");
    }
}
