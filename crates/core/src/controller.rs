//! The controller: its state, the watch-event handlers, and the per-key sync entry points.
//!
//! State is split so that readers (the plans, metrics) never wait on writers for long: each cache
//! has its own lock, held only to read or replace an `Arc`. As upstream splits
//! `pv_controller_base.go` (wiring) from `pv_controller.go` (sync logic), the decisions live in
//! [`crate::plan`] and their execution in `exec/` (volume, claim, bind, provision, reclaim).

use crate::api::ClusterApi;
use crate::cache::{ClaimCache, Stored, VolumeCache};
use crate::clock::Clock;
use crate::events::{Involved, Recorder};
use crate::metrics::Metrics;
use crate::operations::{Mode, OpKey, Operations};
use crate::plugin::PluginRegistry;
use crate::queue::WorkQueue;
use crate::writer::Writers;
use pv_model::k8s::{Node, PersistentVolume, PersistentVolumeClaim, Pod, StorageClass};
use pv_model::ObjectKey;
use pv_model::{helpers, reasons};
use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex, RwLock};
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
        }
    }
}

/// The kinds (resource names) the controller watches, in the order their initial lists are
/// delivered: classes, nodes and pods first, then volumes before claims, so that a claim is never
/// matched against a partial volume cache. Every in-process informer (`up`, `simulate`) lists
/// and watches these; `run`'s kube-rs informers watch the same five and report synced only once
/// all five have listed.
pub const WATCHED_KINDS: [&str; 5] = ["storageclasses", "nodes", "pods", "persistentvolumes", "persistentvolumeclaims"];

/// A watch event as the handlers receive it.
#[derive(Clone, Debug)]
pub enum ObjectEvent<T> {
    /// Added or modified (or listed).
    Applied(T),
    /// Deleted.
    Deleted(T),
}

/// The PersistentVolume controller.
pub struct Controller {
    me: std::sync::Weak<Controller>,
    pub(crate) api: Arc<dyn ClusterApi>,
    pub(crate) plugins: PluginRegistry,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) config: Config,
    pub(crate) volumes: RwLock<VolumeCache>,
    pub(crate) claims: RwLock<ClaimCache>,
    pub(crate) classes: RwLock<HashMap<String, Arc<StorageClass>>>,
    pub(crate) pods: RwLock<HashMap<ObjectKey, Arc<Pod>>>,
    pub(crate) pods_by_claim: RwLock<HashMap<ObjectKey, BTreeSet<ObjectKey>>>,
    pub(crate) nodes: RwLock<HashMap<String, Arc<Node>>>,
    pub(crate) operations: Arc<Operations>,
    pub(crate) recorder: Recorder,
    pub(crate) reservations: Mutex<HashMap<String, ObjectKey>>,
    /// One writer per volume at a time (see [`crate::writer`]).
    pub(crate) volume_writers: Writers,
    /// One writer per claim at a time.
    pub(crate) claim_writers: Writers,
    /// Assets the last sweep found unused (see [`Controller::sweep_unused_assets`]).
    unused_assets: Mutex<HashSet<String>>,
    /// Volume work queue.
    pub volume_queue: WorkQueue,
    /// Claim work queue.
    pub claim_queue: WorkQueue,
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
            api,
            plugins,
            clock,
            config,
            volumes: RwLock::default(),
            claims: RwLock::default(),
            classes: RwLock::default(),
            pods: RwLock::default(),
            pods_by_claim: RwLock::default(),
            nodes: RwLock::default(),
            reservations: Mutex::default(),
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
        match ev {
            ObjectEvent::Applied(v) => {
                let name = helpers::name(&v.metadata).to_string();
                let plugin = self.volume_plugin_name(&v);
                let Some(v) = self.volumes.write().unwrap().store(v, &plugin).cached() else {
                    return;
                };
                self.volume_queue.add(&name);
                self.wake_claims_for(&v);
            }
            ObjectEvent::Deleted(v) => {
                let name = helpers::name(&v.metadata);
                self.volumes.write().unwrap().delete(name, v.metadata.resource_version.as_deref());
                // A deletion of this volume (if one started) is done.
                self.metrics.operation_finished(name, self.clock.now_ms(), false);
                // Sync the claim now so it goes Lost without waiting for resync.
                if let Some(r) = helpers::claim_ref(&v) {
                    self.claim_queue.add(&helpers::claim_ref_key(r));
                }
            }
        }
    }

    /// A volume that is free (or pre-bound) wakes the unbound claims it could satisfy, so binding
    /// does not wait for the periodic resync.
    fn wake_claims_for(&self, v: &PersistentVolume) {
        if let Some(r) = helpers::claim_ref(v) {
            if r.uid.as_deref().unwrap_or("").is_empty() {
                self.claim_queue.add(&helpers::claim_ref_key(r));
            }
            return;
        }
        if helpers::volume_phase(v) != helpers::pv_phase::AVAILABLE || v.metadata.deletion_timestamp.is_some() {
            return;
        }
        let keys = self.claims.read().unwrap().unbound_claims_for(v, self.config.wake_limit);
        for k in keys {
            self.claim_queue.add(&k);
        }
    }

    /// A PVC was added, changed or deleted.
    pub fn on_claim(&self, ev: ObjectEvent<PersistentVolumeClaim>) {
        match ev {
            ObjectEvent::Applied(c) => {
                let key = helpers::claim_key(&c);
                if self.claims.write().unwrap().store(c).cached().is_some() {
                    self.claim_queue.add(&key);
                }
            }
            ObjectEvent::Deleted(c) => {
                let key = helpers::claim_key(&c);
                self.claims.write().unwrap().delete(&key, c.metadata.resource_version.as_deref());
                self.metrics.operation_forgotten(&key);
                // Sync its volume now so it is Released without waiting for resync.
                let vn = helpers::claim_volume_name(&c);
                if !vn.is_empty() {
                    self.volume_queue.add(vn);
                }
                let claiming: Vec<String> = self
                    .volumes
                    .read()
                    .unwrap()
                    .index
                    .volumes_claiming(&key)
                    .map(|v| helpers::name(&v.metadata).to_string())
                    .collect();
                for v in claiming {
                    self.volume_queue.add(&v);
                }
            }
        }
    }

    /// A StorageClass was added, changed or deleted.
    pub fn on_class(&self, ev: ObjectEvent<StorageClass>) {
        let mut classes = self.classes.write().unwrap();
        match ev {
            ObjectEvent::Applied(c) => {
                classes.insert(helpers::name(&c.metadata).to_string(), Arc::new(c));
            }
            ObjectEvent::Deleted(c) => {
                classes.remove(helpers::name(&c.metadata));
            }
        }
    }

    /// A Pod was added, changed or deleted (pods tell which claims are in use or waiting).
    pub fn on_pod(&self, ev: ObjectEvent<Pod>) {
        let (pod, deleted) = match ev {
            ObjectEvent::Applied(p) => (p, false),
            ObjectEvent::Deleted(p) => (p, true),
        };
        let ns = pod.metadata.namespace.clone().unwrap_or_default();
        let key = ObjectKey::of(&pod.metadata);
        let mut pods = self.pods.write().unwrap();
        let mut by_claim = self.pods_by_claim.write().unwrap();
        if let Some(old) = pods.remove(&key) {
            for c in helpers::pod_claim_names(&old) {
                if let Some(s) = by_claim.get_mut(ObjectKey::new(&ns, &c).as_str()) {
                    s.remove(&key);
                }
            }
        }
        if !deleted {
            for c in helpers::pod_claim_names(&pod) {
                by_claim.entry(ObjectKey::new(&ns, &c)).or_default().insert(key.clone());
            }
            pods.insert(key, Arc::new(pod));
        }
    }

    /// A Node was added, changed or deleted.
    pub fn on_node(&self, ev: ObjectEvent<Node>) {
        let mut nodes = self.nodes.write().unwrap();
        match ev {
            ObjectEvent::Applied(n) => {
                nodes.insert(helpers::name(&n.metadata).to_string(), Arc::new(n));
            }
            ObjectEvent::Deleted(n) => {
                nodes.remove(helpers::name(&n.metadata));
            }
        }
    }

    /// Enqueues every known volume and claim (the periodic resync).
    pub fn resync(&self) {
        let names: Vec<String> = self.volumes.read().unwrap().index.names().cloned().collect();
        for n in names {
            self.volume_queue.add(&n);
        }
        let keys: Vec<ObjectKey> = self.claims.read().unwrap().keys().cloned().collect();
        for k in keys {
            self.claim_queue.add(&k);
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
            let mut unused: Vec<String> = listed.into_iter().filter(|n| self.volume(n).is_none()).collect();
            if unused.is_empty() {
                continue;
            }
            let volumes: Vec<Arc<PersistentVolume>> = {
                let cache = self.volumes.read().unwrap();
                cache.index.names().filter_map(|n| cache.get(n)).collect()
            };
            let sources: HashSet<String> = volumes.iter().filter_map(|v| plugin.asset_of(v)).collect();
            let claimed: HashSet<String> = {
                let claims = self.claims.read().unwrap();
                let keys: Vec<ObjectKey> = claims.keys().cloned().collect();
                keys.iter()
                    .filter_map(|k| claims.get(k))
                    .map(|c| format!("pvc-{}", helpers::uid(&c.metadata)))
                    .collect()
            };
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

    // ---- cache readers --------------------------------------------------------------------

    /// The cached volume.
    pub fn volume(&self, name: &str) -> Option<Arc<PersistentVolume>> {
        self.volumes.read().unwrap().get(name)
    }

    /// The cached claim.
    pub fn claim(&self, key: &str) -> Option<Arc<PersistentVolumeClaim>> {
        self.claims.read().unwrap().get(key)
    }

    /// Names of every cached volume, sorted (tests compare them with the API's objects).
    pub fn cached_volume_names(&self) -> Vec<String> {
        let mut v: Vec<String> = self.volumes.read().unwrap().index.names().cloned().collect();
        v.sort();
        v
    }

    /// Keys (`namespace/name`) of every cached claim, sorted.
    pub fn cached_claim_keys(&self) -> Vec<ObjectKey> {
        let mut v: Vec<ObjectKey> = self.claims.read().unwrap().keys().cloned().collect();
        v.sort();
        v
    }

    /// The cached node.
    pub fn node(&self, name: &str) -> Option<Arc<Node>> {
        self.nodes.read().unwrap().get(name).cloned()
    }

    /// The cached class.
    pub fn class(&self, name: &str) -> Option<Arc<StorageClass>> {
        self.classes.read().unwrap().get(name).cloned()
    }

    /// Counts for the `pv_collector_*` metrics, with upstream's rules: a PV or PVC counts as
    /// bound when its *phase* is Bound; every PV also counts by plugin name and volume mode.
    pub fn collect_counts(&self) -> Counts {
        let mut c = Counts::default();
        self.volumes.read().unwrap().count_into(&mut c);
        self.claims.read().unwrap().count_into(&mut c);
        c
    }

    /// The plugin name upstream reports for a PV in `pv_collector_total_pv_count`: the first of
    /// the binder's own volume plugins that supports the volume — host-path and NFS, the only ones
    /// kube-controller-manager gives its binder — else `N/A` (CSI, local, iSCSI, FC, ... volumes;
    /// the CSI plugin is the attach/detach controller's, not the binder's).
    pub fn volume_plugin_name(&self, v: &PersistentVolume) -> String {
        let s = v.spec.as_ref();
        let name = if s.is_some_and(|s| s.host_path.is_some()) {
            "kubernetes.io/host-path"
        } else if s.is_some_and(|s| s.nfs.is_some()) {
            "kubernetes.io/nfs"
        } else {
            crate::metrics::NOT_AVAILABLE
        };
        name.into()
    }

    // ---- stores after writes -----------------------------------------------------------------

    pub(crate) fn store_volume(&self, v: PersistentVolume) -> Arc<PersistentVolume> {
        let name = helpers::name(&v.metadata).to_string();
        let plugin = self.volume_plugin_name(&v);
        let mut volumes = self.volumes.write().unwrap();
        match volumes.store(v, &plugin) {
            Stored::Cached(v) | Stored::Gone(v) => v,
            // Older than the cache (a watch event overtook the write's response): the newer one.
            Stored::Older => volumes.get(&name).expect("a volume older than the cache is cached"),
        }
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
    pub(crate) fn sync_claim_again(&self, key: &str) -> crate::operations::Again {
        let (me, key) = (self.me.clone(), key.to_string());
        Box::new(move || {
            if let Some(c) = me.upgrade() {
                c.claim_queue.add(&key);
            }
        })
    }

    pub(crate) fn store_claim(&self, c: PersistentVolumeClaim) -> Arc<PersistentVolumeClaim> {
        let key = helpers::claim_key(&c);
        let mut claims = self.claims.write().unwrap();
        match claims.store(c) {
            Stored::Cached(c) | Stored::Gone(c) => c,
            // Older than the cache (a watch event overtook the write's response): the newer one.
            Stored::Older => claims.get(&key).expect("a claim older than the cache is cached"),
        }
    }

    // ---- per-key entry points --------------------------------------------------------------

    /// Syncs the volume with this name from the cache. Errors mean "retry later".
    pub async fn sync_volume_key(self: &Arc<Self>, name: &str) -> crate::Result<()> {
        let Some(v) = self.volume(name) else {
            return Ok(());
        };
        self.sync_volume(v).instrument(tracing::debug_span!("sync_volume", volume = %name)).await
    }

    /// Syncs the claim with this key from the cache. Errors mean "retry later".
    pub async fn sync_claim_key(self: &Arc<Self>, key: &str) -> crate::Result<()> {
        let Some(c) = self.claim(key) else {
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
    pub async fn process_claim(self: &Arc<Self>, key: String) {
        let result = self.sync_claim_key(&key).await;
        finish(&self.claim_queue, "claim", &key, result);
    }
}

/// Ends the processing of a key: forget its failures on success, requeue it with backoff on error.
fn finish(queue: &WorkQueue, what: &str, key: &str, result: crate::Result<()>) {
    match result {
        Ok(()) => queue.forget(key),
        Err(e @ crate::Error::Stale(_)) => {
            tracing::debug!(object = %key, error = %e, "{what} sync read an older volume, syncing again");
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

/// Object counts for the `pv_collector_*` metrics.
#[derive(Default, Debug)]
pub struct Counts {
    /// Bound PVs by class.
    pub bound_pv: HashMap<String, u64>,
    /// Unbound PVs by class.
    pub unbound_pv: HashMap<String, u64>,
    /// Bound PVCs by (namespace, class, volume attributes class).
    pub bound_pvc: HashMap<(String, String, String), u64>,
    /// Unbound PVCs by (namespace, class, volume attributes class).
    pub unbound_pvc: HashMap<(String, String, String), u64>,
    /// All PVs by (plugin name, volume mode).
    pub total_pv: HashMap<(String, String), u64>,
}

impl crate::view::View for Controller {
    fn volume(&self, name: &str) -> Option<Arc<PersistentVolume>> {
        Controller::volume(self, name)
    }

    fn best_match(&self, claim: &PersistentVolumeClaim, delay_binding: bool) -> Option<Arc<PersistentVolume>> {
        let is_reserved = self.reserved_for_others(claim);
        self.volumes.read().unwrap().index.find_best_match(claim, delay_binding, &is_reserved)
    }

    fn class(&self, name: &str) -> Option<Arc<StorageClass>> {
        Controller::class(self, name)
    }

    fn default_class(&self) -> Option<String> {
        let classes = self.classes.read().unwrap();
        helpers::default_class(classes.values().map(|c| &**c)).map(|c| helpers::name(&c.metadata).to_string())
    }

    fn unscheduled_pods_using(&self, claim: &PersistentVolumeClaim) -> Vec<String> {
        Controller::unscheduled_pods_using(self, claim)
    }

    fn provisioning_plugin(&self, provisioner: &str) -> std::result::Result<Arc<dyn crate::VolumePlugin>, String> {
        self.plugins.provisionable_by_name(provisioner)
    }

    fn dynamic_provisioning(&self) -> bool {
        self.config.enable_dynamic_provisioning
    }
}
