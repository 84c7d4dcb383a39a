//! The read side of the controller: every object it watches, as the informers deliver them and
//! as its own writes return them, and the reservations of binds in flight. [`Caches`] is what
//! the plans read ([`View`]) and what the watch-event handlers update; it holds no API and
//! cannot write, so a plan that reads it cannot have a side effect. The executor
//! ([`crate::Controller`]) holds the caches and enqueues what a handler says to wake.
//!
//! Each cache has its own lock, held only to read or replace an `Arc`, so that readers (the
//! plans, metrics) never wait on writers for long.
//!
//! A Bound pair whose syncs found nothing to do is *settled*: the periodic resync passes it over
//! until the volume or the claim changes (a new version of either, or its deletion, unsettles
//! both), so an idle controller's cost does not grow with the number of bound pairs. Only a
//! volume whose plan was Bound and a claim whose plan was KeepBound, with no write, settle; a
//! stuck claim (and everything else) is synced at every resync, its events emitted again, as
//! upstream does. When both locks are taken, the volumes' is taken first.

use crate::cache::{ClaimCache, Counts, ObjectEvent, Source, Stored, VolumeCache};
use crate::plan;
use crate::plugin::{PluginRegistry, VolumePlugin};
use crate::pods::PodIndex;
use crate::view::View;
use pv_model::helpers;
use pv_model::hostpath::SharedPath;
use pv_model::k8s::{Node, PersistentVolume, PersistentVolumeClaim, Pod, StorageClass};
use pv_model::ObjectKey;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, RwLock};

/// What a watch event makes worth syncing now rather than at the next resync.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Wake {
    /// Volume names, in order.
    pub volumes: Vec<String>,
    /// Claim keys, in order (after the volumes).
    pub claims: Vec<ObjectKey>,
}

/// The caches, read-only to the plans.
pub struct Caches {
    volumes: RwLock<VolumeCache>,
    claims: RwLock<ClaimCache>,
    classes: RwLock<HashMap<String, Arc<StorageClass>>>,
    pods: RwLock<PodIndex<Arc<Pod>>>,
    nodes: RwLock<HashMap<String, Arc<Node>>>,
    /// Volumes promised to a claim by a bind in flight, by volume name.
    reservations: Mutex<HashMap<String, ObjectKey>>,
    plugins: PluginRegistry,
    dynamic_provisioning: bool,
    /// How many pending claims a newly available volume wakes at most.
    wake_limit: usize,
}

/// A volume promised to a claim while its bind is in flight; the promise ends when this drops.
pub struct Reservation<'a> {
    caches: &'a Caches,
    volume: String,
}

impl Drop for Reservation<'_> {
    fn drop(&mut self) {
        self.caches.reservations.lock().unwrap().remove(&self.volume);
    }
}

impl Caches {
    /// Empty caches; `plugins` answer which provisioner is in-process.
    pub fn new(plugins: PluginRegistry, dynamic_provisioning: bool, wake_limit: usize) -> Self {
        Caches {
            volumes: RwLock::default(),
            claims: RwLock::default(),
            classes: RwLock::default(),
            pods: RwLock::default(),
            nodes: RwLock::default(),
            reservations: Mutex::default(),
            plugins,
            dynamic_provisioning,
            wake_limit,
        }
    }

    // ---- watch events ---------------------------------------------------------------------

    /// A PV was added, changed or deleted.
    pub fn on_volume(&self, ev: ObjectEvent<PersistentVolume>) -> Wake {
        match ev {
            ObjectEvent::Applied(v) => {
                let name = helpers::name(&v.metadata).to_string();
                let Some(v) = self.store_volume_version(v, Source::Informer).0.cached() else {
                    return Wake::default();
                };
                Wake { volumes: vec![name], claims: self.claims_woken_by(&v) }
            }
            ObjectEvent::Deleted(v) => {
                let m = &v.metadata;
                self.volumes.write().unwrap().delete(helpers::name(m), m.resource_version.as_deref(), m.uid.as_deref());
                // Its claim goes Lost without waiting for resync.
                let claims: Vec<ObjectKey> = helpers::claim_ref(&v).map(helpers::claim_ref_key).into_iter().collect();
                self.unsettle_claims(&claims);
                Wake { volumes: Vec::new(), claims }
            }
        }
    }

    /// A volume that is free (or pre-bound) wakes the unbound claims it could satisfy, so binding
    /// does not wait for the periodic resync.
    fn claims_woken_by(&self, v: &PersistentVolume) -> Vec<ObjectKey> {
        if let Some(r) = helpers::claim_ref(v) {
            return if pv_model::binding::is_volume_unclaimed(v) {
                vec![helpers::claim_ref_key(r)]
            } else {
                Vec::new()
            };
        }
        if helpers::volume_phase(v) != helpers::pv_phase::AVAILABLE || v.metadata.deletion_timestamp.is_some() {
            return Vec::new();
        }
        self.claims.read().unwrap().unbound_claims_for(v, self.wake_limit)
    }

    /// A PVC was added, changed or deleted.
    pub fn on_claim(&self, ev: ObjectEvent<PersistentVolumeClaim>) -> Wake {
        match ev {
            ObjectEvent::Applied(c) => {
                let key = helpers::claim_key(&c);
                let stored = self.store_claim_version(c, Source::Informer).0.cached().is_some();
                Wake { volumes: Vec::new(), claims: if stored { vec![key] } else { Vec::new() } }
            }
            ObjectEvent::Deleted(c) => {
                let key = helpers::claim_key(&c);
                let m = &c.metadata;
                self.claims.write().unwrap().delete(&key, m.resource_version.as_deref(), m.uid.as_deref());
                // Its volume is Released without waiting for resync, and so is any other
                // volume still claiming it.
                let mut volumes: Vec<String> = Some(helpers::claim_volume_name(&c))
                    .filter(|v| !v.is_empty())
                    .map(str::to_string)
                    .into_iter()
                    .collect();
                volumes.extend(self.volumes.read().unwrap().index.names_claiming(&key).iter().cloned());
                self.unsettle_volumes(&volumes);
                Wake { volumes, claims: Vec::new() }
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
        let key = ObjectKey::of(&pod.metadata);
        let now = (!deleted).then(|| {
            let claims = helpers::pod_claim_names(&pod);
            (Arc::new(pod), claims)
        });
        self.pods.write().unwrap().set(&key, now);
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

    /// Every cached volume and claim that is not settled (the periodic resync).
    pub fn unsettled(&self) -> Wake {
        let volumes = self.volumes.read().unwrap().index.unsettled_names().cloned().collect();
        let claims = self.claims.read().unwrap().unsettled_keys().cloned().collect();
        Wake { volumes, claims }
    }

    /// Marks the volume settled: its sync found its claim bound to it and wrote nothing. Only if
    /// both are still cached at the versions the sync read.
    pub(crate) fn settle_volume(&self, volume: &PersistentVolume, claim: &PersistentVolumeClaim) {
        let mut volumes = self.volumes.write().unwrap();
        let claims = self.claims.read().unwrap();
        if claims.resource_version(&helpers::claim_key(claim)) == Some(claim.metadata.resource_version.as_deref()) {
            volumes.index.settle(helpers::name(&volume.metadata), volume.metadata.resource_version.as_deref());
        }
    }

    /// Marks the claim settled: its sync found its volume pointing back and wrote nothing. Only
    /// if both are still cached at the versions the sync read.
    pub(crate) fn settle_claim(&self, claim: &PersistentVolumeClaim, volume: &PersistentVolume) {
        let volumes = self.volumes.read().unwrap();
        let mut claims = self.claims.write().unwrap();
        let name = helpers::name(&volume.metadata);
        if volumes.index.resource_version(name) == Some(volume.metadata.resource_version.as_deref()) {
            claims.settle(&helpers::claim_key(claim), claim.metadata.resource_version.as_deref());
        }
    }

    fn unsettle_claims(&self, keys: &[ObjectKey]) {
        if keys.is_empty() {
            return;
        }
        let mut claims = self.claims.write().unwrap();
        for k in keys {
            claims.unsettle(k);
        }
    }

    fn unsettle_volumes(&self, names: &[String]) {
        if names.is_empty() {
            return;
        }
        let mut volumes = self.volumes.write().unwrap();
        for n in names {
            volumes.index.unsettle(n);
        }
    }

    /// Stores a version of a volume; a new one unsettles the claims its claimRef named and names.
    /// With the outcome, and for an answer, the volume cached when this one was older (read under
    /// the same lock; a watch event does not ask, since a packed one is decoded).
    fn store_volume_version(
        &self,
        v: PersistentVolume,
        source: Source,
    ) -> (Stored<PersistentVolume>, Option<Arc<PersistentVolume>>) {
        let name = helpers::name(&v.metadata).to_string();
        let plugin = volume_plugin_name(&v);
        let mut claims: Vec<ObjectKey> = helpers::claim_ref(&v).map(helpers::claim_ref_key).into_iter().collect();
        let (stored, newer) = {
            let mut volumes = self.volumes.write().unwrap();
            claims.extend(volumes.index.claim_key_of(&name).cloned());
            let stored = volumes.store(v, &plugin, source);
            let newer =
                (source == Source::Answer && matches!(stored, Stored::Older)).then(|| volumes.get(&name)).flatten();
            (stored, newer)
        };
        if !matches!(stored, Stored::Older) {
            self.unsettle_claims(&claims);
        }
        (stored, newer)
    }

    /// Stores a version of a claim; a new one unsettles the volumes whose claimRef names it.
    /// With the outcome, and for an answer, the claim cached when this one was older.
    fn store_claim_version(
        &self,
        c: PersistentVolumeClaim,
        source: Source,
    ) -> (Stored<PersistentVolumeClaim>, Option<Arc<PersistentVolumeClaim>>) {
        let key = helpers::claim_key(&c);
        let (stored, newer) = {
            let mut claims = self.claims.write().unwrap();
            let stored = claims.store(c, source);
            let newer =
                (source == Source::Answer && matches!(stored, Stored::Older)).then(|| claims.get(&key)).flatten();
            (stored, newer)
        };
        if !matches!(stored, Stored::Older) {
            let volumes = self.volumes.read().unwrap().index.names_claiming(&key).to_vec();
            self.unsettle_volumes(&volumes);
        }
        (stored, newer)
    }

    // ---- the controller's own writes ------------------------------------------------------

    /// Caches a volume a write (or a read) returned; the cached one if the watch already brought a
    /// newer one. Not cached when the informer has reported it deleted (see [`crate::cache`]).
    pub(crate) fn store_volume(&self, v: PersistentVolume) -> Arc<PersistentVolume> {
        match self.store_volume_version(v, Source::Answer) {
            (Stored::Cached(v) | Stored::Gone(v), _) => v,
            // Older than the cache (a watch event overtook the write's response): the newer one.
            (Stored::Older, newer) => newer.expect("a volume older than the cache is cached"),
        }
    }

    /// Caches a claim a write (or a read) returned; the cached one if it is newer. Not cached
    /// when the informer has reported it deleted.
    pub(crate) fn store_claim(&self, c: PersistentVolumeClaim) -> Arc<PersistentVolumeClaim> {
        match self.store_claim_version(c, Source::Answer) {
            (Stored::Cached(c) | Stored::Gone(c), _) => c,
            // Older than the cache (a watch event overtook the write's response): the newer one.
            (Stored::Older, newer) => newer.expect("a claim older than the cache is cached"),
        }
    }

    /// Promises `volume` to the claim `claim` while its bind is in flight, so that other workers
    /// do not pick it for another claim; `None` when it is promised to another claim already.
    pub(crate) fn reserve(&self, volume: &str, claim: &ObjectKey) -> Option<Reservation<'_>> {
        let mut r = self.reservations.lock().unwrap();
        if r.get(volume).is_some_and(|c| c != claim) {
            return None;
        }
        r.insert(volume.to_string(), claim.clone());
        Some(Reservation { caches: self, volume: volume.to_string() })
    }

    /// Whether a volume is promised to a claim other than `claim`: a bind of it is in flight on
    /// another worker. Read once per decision; the binder and the FailedBinding breakdown skip
    /// such volumes alike.
    fn reserved_for_others(&self, claim: &PersistentVolumeClaim) -> impl Fn(&str) -> bool {
        let key = helpers::claim_key(claim);
        let reserved = self.reservations.lock().unwrap().clone();
        move |v| reserved.get(v).is_some_and(|c| *c != key)
    }

    // ---- readers ----------------------------------------------------------------------------

    /// The cached volume.
    pub fn volume(&self, name: &str) -> Option<Arc<PersistentVolume>> {
        self.volumes.read().unwrap().get(name)
    }

    /// The cached claim.
    pub fn claim(&self, key: &str) -> Option<Arc<PersistentVolumeClaim>> {
        self.claims.read().unwrap().get(key)
    }

    /// The cached node.
    pub fn node(&self, name: &str) -> Option<Arc<Node>> {
        self.nodes.read().unwrap().get(name).cloned()
    }

    /// The cached class.
    pub fn class(&self, name: &str) -> Option<Arc<StorageClass>> {
        self.classes.read().unwrap().get(name).cloned()
    }

    /// Every cached volume.
    pub fn volumes(&self) -> Vec<Arc<PersistentVolume>> {
        let cache = self.volumes.read().unwrap();
        cache.index.names().filter_map(|n| cache.get(n)).collect()
    }

    /// Every cached claim.
    pub fn claims(&self) -> Vec<Arc<PersistentVolumeClaim>> {
        let claims = self.claims.read().unwrap();
        claims.keys().filter_map(|k| claims.get(k)).collect()
    }

    /// Names of every cached volume, sorted (tests compare them with the API's objects).
    pub fn volume_names(&self) -> Vec<String> {
        let mut v: Vec<String> = self.volumes.read().unwrap().index.names().cloned().collect();
        v.sort();
        v
    }

    /// Keys (`namespace/name`) of every cached claim, sorted.
    pub fn claim_keys(&self) -> Vec<ObjectKey> {
        let mut v: Vec<ObjectKey> = self.claims.read().unwrap().keys().cloned().collect();
        v.sort();
        v
    }

    /// Another cached volume whose host path contains this one's or lies inside it.
    pub fn host_path_conflict(&self, volume: &PersistentVolume) -> Option<SharedPath> {
        self.volumes.read().unwrap().index.host_path_conflict(volume)
    }

    /// Running (not terminated) pods that use the claim with this key.
    pub fn pods_using(&self, claim_key: &str) -> Vec<Arc<Pod>> {
        self.pods.read().unwrap().using(claim_key).filter(|p| !helpers::is_pod_terminated(p)).cloned().collect()
    }

    /// " (12 volumes: 7 too small, 3 access modes, 2 class)" — why every volume was rejected; empty
    /// when there are no volumes. Appended to upstream's FailedBinding message with detailed
    /// events (`Config::detailed_events`).
    pub fn rejection_breakdown(&self, claim: &PersistentVolumeClaim) -> String {
        let delay = plan::is_delay_binding(self, claim);
        let is_reserved = self.reserved_for_others(claim);
        let counts = self.volumes.read().unwrap().index.verdict_counts(claim, delay, &is_reserved);
        let total: usize = counts.values().sum();
        if total == 0 {
            return String::new();
        }
        let mut parts: Vec<(usize, &str)> = counts.iter().map(|(k, n)| (*n, k.breakdown_label())).collect();
        parts.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(b.1)));
        let list: Vec<String> = parts.iter().map(|(n, l)| format!("{n} {l}")).collect();
        format!(" ({total} volume{}: {})", if total == 1 { "" } else { "s" }, list.join(", "))
    }

    /// Counts for the `pv_collector_*` metrics, with upstream's rules: a PV or PVC counts as
    /// bound when its *phase* is Bound; every PV also counts by plugin name and volume mode.
    pub fn collect_counts(&self) -> Counts {
        let mut c = Counts::default();
        self.volumes.read().unwrap().count_into(&mut c);
        self.claims.read().unwrap().count_into(&mut c);
        c
    }

    /// Pending claims by the reason `explain` gives ([`crate::UnboundClaimPlan::pending_reason`]),
    /// from the controller's own plan over these caches, sorted by reason
    /// (`pv_controller_pending_claims`).
    pub fn pending_claims(&self) -> Vec<(&'static str, u64)> {
        let pending: Vec<_> = self.claims.read().unwrap().not_bound();
        let mut by = BTreeMap::<&'static str, u64>::new();
        for c in pending {
            let phase = helpers::claim_phase(&c);
            if !(phase.is_empty() || phase == helpers::pvc_phase::PENDING) || pv_model::binding::claim_is_bound(&c) {
                continue;
            }
            *by.entry(plan::plan_unbound_claim(self, &c).pending_reason()).or_default() += 1;
        }
        by.into_iter().collect()
    }
}

impl View for Caches {
    fn volume(&self, name: &str) -> Option<Arc<PersistentVolume>> {
        Caches::volume(self, name)
    }

    fn best_match(&self, claim: &PersistentVolumeClaim, delay_binding: bool) -> Option<Arc<PersistentVolume>> {
        let is_reserved = self.reserved_for_others(claim);
        self.volumes.read().unwrap().index.find_best_match(claim, delay_binding, &is_reserved)
    }

    fn class(&self, name: &str) -> Option<Arc<StorageClass>> {
        Caches::class(self, name)
    }

    fn node(&self, name: &str) -> Option<Arc<Node>> {
        Caches::node(self, name)
    }

    fn default_class(&self) -> Option<String> {
        let classes = self.classes.read().unwrap();
        helpers::default_class(classes.values().map(|c| &**c)).map(|c| helpers::name(&c.metadata).to_string())
    }

    fn unscheduled_pods_using(&self, claim: &PersistentVolumeClaim) -> Vec<String> {
        self.pods_using(&helpers::claim_key(claim))
            .into_iter()
            .filter(|p| !helpers::pod_is_scheduled(p))
            .map(|p| helpers::name(&p.metadata).to_string())
            .collect()
    }

    fn provisioning_plugin(&self, provisioner: &str) -> Result<Arc<dyn VolumePlugin>, String> {
        self.plugins.provisionable_by_name(provisioner)
    }

    fn dynamic_provisioning(&self) -> bool {
        self.dynamic_provisioning
    }
}

/// The plugin name upstream reports for a PV in `pv_collector_total_pv_count`: the first of
/// the binder's own volume plugins that supports the volume — host-path and NFS, the only ones
/// kube-controller-manager gives its binder — else `N/A` (CSI, local, iSCSI, FC, ... volumes;
/// the CSI plugin is the attach/detach controller's, not the binder's).
pub fn volume_plugin_name(v: &PersistentVolume) -> String {
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

#[cfg(test)]
mod tests {
    //! The caches against a relisting informer: what a relist reports gone must stay gone, even
    //! when the controller's own write or read of the object is answered after the relist.

    use super::*;
    use crate::informer::{Informer, Step};
    use pv_model::finalizers;
    use serde_json::json;

    fn caches() -> Caches {
        Caches::new(PluginRegistry::new(), true, 8)
    }

    /// A Released Delete volume `name` (uid `uid`) at `rv`, with the finalizers given, being
    /// deleted when `terminating`.
    fn pv(name: &str, uid: &str, rv: u64, finalizers: &[&str], terminating: bool) -> PersistentVolume {
        let mut v: PersistentVolume = serde_json::from_value(json!({
            "metadata": {"name": name, "uid": uid, "resourceVersion": rv.to_string(), "finalizers": finalizers},
            "spec": {"persistentVolumeReclaimPolicy": "Delete", "hostPath": {"path": format!("/tmp/{name}")},
                     "claimRef": {"namespace": "ns", "name": "gone", "uid": "claim-uid"}},
            "status": {"phase": "Released"},
        }))
        .unwrap();
        if terminating {
            v.metadata.deletion_timestamp = Some(pv_model::k8s::Time(jiff::Timestamp::UNIX_EPOCH));
        }
        v
    }

    fn pvc(name: &str, uid: &str, rv: u64) -> PersistentVolumeClaim {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "ns", "uid": uid, "resourceVersion": rv.to_string()},
            "spec": {"storageClassName": "fast"},
            "status": {"phase": "Pending"},
        }))
        .unwrap()
    }

    /// Feeds `steps` through `informer` into the caches' volume handler.
    fn volumes(c: &Caches, informer: &mut Informer<PersistentVolume>, steps: Vec<Step<PersistentVolume>>) {
        for s in steps {
            informer.step(s, |e| {
                c.on_volume(e);
            });
        }
    }

    fn claims(c: &Caches, informer: &mut Informer<PersistentVolumeClaim>, steps: Vec<Step<PersistentVolumeClaim>>) {
        for s in steps {
            informer.step(s, |e| {
                c.on_claim(e);
            });
        }
    }

    const BOTH: [&str; 2] = [finalizers::PV_CONTROLLER, finalizers::PV_PROTECTION];

    /// The informer knew the volume at 600; the controller's Delete reclaim removed its finalizer
    /// (answer 619, pv-protection's finalizer still on), and the watch expired before the
    /// deletion (620) was seen. The relist's list lacks the volume whether it was taken before
    /// or after the write's version (the other volume listed at 610 or 700 stands for the
    /// list's version): the cache drops it, as client-go's Replace does, whatever the version
    /// the write cached.
    #[test]
    fn a_relist_that_lacks_a_volume_drops_it_whatever_version_a_write_cached() {
        for list_version in [610, 700] {
            let c = caches();
            let mut informer = Informer::new();
            volumes(
                &c,
                &mut informer,
                vec![Step::Listing, Step::Applied(pv("pvc-61ea", "u1", 600, &BOTH, false)), Step::Listed],
            );
            c.store_volume(pv("pvc-61ea", "u1", 619, &[finalizers::PV_PROTECTION], true));
            assert_eq!(c.volume("pvc-61ea").unwrap().metadata.resource_version.as_deref(), Some("619"));
            let other = pv("other", "u2", list_version, &[], false);
            volumes(&c, &mut informer, vec![Step::Listing, Step::Applied(other), Step::Listed]);
            assert!(c.volume("pvc-61ea").is_none(), "list at {list_version}: the deleted volume is dropped");
            assert_eq!(c.volume_names(), ["other"]);
        }
    }

    /// The same Delete reclaim, with the other order: the relist (taken after the deletion at
    /// 620) reports the volume gone *before* the answer of the finalizer write (619) is handled.
    /// The relist only knows the version the informer last saw (600), but it has passed every
    /// version the volume ever had: neither that answer nor a read answered as late may bring
    /// it back, or the cache holds a volume that no event will ever remove.
    #[test]
    fn a_write_answered_after_a_relist_reported_the_volume_gone_does_not_bring_it_back() {
        let c = caches();
        let mut informer = Informer::new();
        volumes(
            &c,
            &mut informer,
            vec![Step::Listing, Step::Applied(pv("pvc-61ea", "u1", 600, &BOTH, false)), Step::Listed],
        );
        // Read before the finalizer write: cached at 618, being deleted.
        c.store_volume(pv("pvc-61ea", "u1", 618, &BOTH, true));
        volumes(
            &c,
            &mut informer,
            vec![Step::Listing, Step::Applied(pv("other", "u2", 700, &[], false)), Step::Listed],
        );
        assert!(c.volume("pvc-61ea").is_none());
        let answer = c.store_volume(pv("pvc-61ea", "u1", 619, &[finalizers::PV_PROTECTION], true));
        assert_eq!(answer.metadata.resource_version.as_deref(), Some("619"), "the caller still gets its answer");
        assert!(c.volume("pvc-61ea").is_none(), "the finalizer write's late answer does not bring the volume back");
        assert_eq!(c.volume_names(), ["other"]);
        // A new volume of the same name is another object: its create's answer is cached.
        c.store_volume(pv("pvc-61ea", "u3", 720, &[finalizers::PV_PROTECTION], false));
        assert_eq!(c.volume("pvc-61ea").unwrap().metadata.uid.as_deref(), Some("u3"));
    }

    /// A relist may be older than what the informer saw before (a list served from another API
    /// server's watch cache), so a volume it lacks may still exist: the watch that follows
    /// brings its later versions back, since the informer's own events are not answers of
    /// writes. Only the controller's writes and reads are refused for a uid reported gone.
    #[test]
    fn the_watch_brings_back_a_volume_a_stale_relist_reported_gone() {
        let c = caches();
        let mut informer = Informer::new();
        volumes(&c, &mut informer, vec![Step::Listing, Step::Applied(pv("v", "u1", 600, &BOTH, false)), Step::Listed]);
        volumes(&c, &mut informer, vec![Step::Listing, Step::Listed]);
        assert!(c.volume("v").is_none());
        volumes(&c, &mut informer, vec![Step::Applied(pv("v", "u1", 630, &BOTH, false))]);
        assert_eq!(c.volume("v").unwrap().metadata.resource_version.as_deref(), Some("630"));
    }

    /// Claims alike: a claim a relist reported gone is not brought back by the late answer of a
    /// write (or read) of it.
    #[test]
    fn a_write_answered_after_a_relist_reported_the_claim_gone_does_not_bring_it_back() {
        let c = caches();
        let mut informer = Informer::new();
        claims(&c, &mut informer, vec![Step::Listing, Step::Applied(pvc("data", "c1", 500)), Step::Listed]);
        claims(&c, &mut informer, vec![Step::Listing, Step::Applied(pvc("other", "c2", 700)), Step::Listed]);
        assert!(c.claim("ns/data").is_none());
        c.store_claim(pvc("data", "c1", 510));
        assert!(c.claim("ns/data").is_none(), "the late answer does not bring the claim back");
        c.store_claim(pvc("data", "c3", 720));
        assert_eq!(c.claim("ns/data").unwrap().metadata.uid.as_deref(), Some("c3"), "a new claim of that name is");
    }
}
