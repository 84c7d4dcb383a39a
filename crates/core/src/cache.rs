//! The controller's caches of volumes and claims.
//!
//! Both are fed by watch events *and* by the controller's own successful writes, and both refuse
//! an object older than the one they hold (compared by resourceVersion), so a late watch event
//! never rolls back what the controller just wrote. A version a cache already holds is not stored
//! again: the controller meets every version it writes twice, in the write's response and in the
//! watch event, and storing one means packing and indexing it. The volume cache is the
//! [`VolumeIndex`]; the claim cache also indexes unbound claims by class, so a volume that becomes
//! available can wake the claims it might satisfy instead of waiting for the periodic resync.
//!
//! Deleted objects must stay deleted. The controller's own write can be answered *after* the
//! watch has already reported the object gone: removing the last finalizer of a volume that is
//! being deleted (the Delete reclaim) deletes it in the same write, and the `Deleted` event may
//! be handled before the write's response. Storing that response would bring the volume back
//! into the cache for good (no event ever removes it again): wrong FailedBinding counts, wrong
//! `pv_collector_*` metrics, memory that grows with every deleted volume. So both caches treat
//! an object with a deletionTimestamp and no finalizers as gone (the API server deletes it in
//! that write; PVs and PVCs have no graceful deletion), and remember the resourceVersion and uid
//! each deleted object had ([`Tombstones`]), refusing any copy of it that is not newer.
//!
//! A deletion a relist reports (the watch was down when it happened; see [`crate::informer`])
//! carries only the version the informer last saw, which may be older than the answer of a write
//! still in flight: the Delete reclaim's finalizer write answered after a relist that no longer
//! lists the volume would pass the version check and stay cached for good. So the answer of a
//! write or a read ([`Source::Answer`]) is also refused when the informer reported its object
//! deleted — the same uid: an object, once deleted, has no later version, so the informer has
//! passed every version any answer can hold. A copy the informer itself delivers
//! ([`Source::Informer`]) is only held to the version: a relist served from a lagging cache may
//! miss an object that still exists, and the watch that follows brings it back.

use pv_model::helpers;
use pv_model::helpers::AccessModes;
use pv_model::k8s::{PersistentVolume, PersistentVolumeClaim};
use pv_model::{Dictionary, Held, ObjectKey, Quantity, VolumeIndex};
use std::collections::{BTreeSet, HashMap, VecDeque};
use std::sync::Arc;

/// A watch event as the handlers receive it.
#[derive(Clone, Debug)]
pub enum ObjectEvent<T> {
    /// Added or modified (or listed).
    Applied(T),
    /// Deleted.
    Deleted(T),
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

/// What storing an object into a cache did.
#[derive(Debug)]
pub enum Stored<T> {
    /// The object is cached now (or already was, at the same resourceVersion: then the cache is
    /// left as it is).
    Cached(Arc<T>),
    /// The cache holds a newer version; it is kept.
    Older,
    /// The object no longer exists (deleted in the write that produced it, reported deleted
    /// at this version or later, or — for an answer — reported deleted at all): it is not
    /// cached, and any older copy was removed.
    Gone(Arc<T>),
}

/// Where a copy of an object that a cache is given comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// The informer: a watch event or a listed object.
    Informer,
    /// The answer of the controller's own write or read, which may reach the cache after the
    /// informer reported the object deleted.
    Answer,
}

impl<T> Stored<T> {
    /// The stored object, when it was cached.
    pub fn cached(self) -> Option<Arc<T>> {
        match self {
            Stored::Cached(o) => Some(o),
            _ => None,
        }
    }
}

/// How many deleted objects a cache remembers. A tombstone only has to outlive the responses
/// of writes that were in flight when the object went, so a bounded number is plenty.
const TOMBSTONES: usize = 4096;

/// The resourceVersions and uids deleted objects had, newest last; the oldest are forgotten first.
#[derive(Default)]
pub struct Tombstones {
    by_key: HashMap<String, Grave>,
    order: VecDeque<String>,
}

/// What is remembered of a deleted object.
struct Grave {
    /// The version it was deleted at, or the last one the informer saw when a relist reported
    /// it gone (unparsable versions are not remembered).
    rv: Option<u64>,
    /// Its uid: no copy of that object can be newer than its deletion.
    uid: Option<Box<str>>,
}

impl Tombstones {
    /// Remembers that `key` (the object `uid`) was deleted at `rv`.
    fn bury(&mut self, key: &str, rv: Option<&str>, uid: Option<&str>) {
        let grave =
            Grave { rv: rv.and_then(|r| r.parse::<u64>().ok()), uid: uid.filter(|u| !u.is_empty()).map(Into::into) };
        if grave.rv.is_none() && grave.uid.is_none() {
            return;
        }
        if self.by_key.insert(key.to_string(), grave).is_none() {
            self.order.push_back(key.to_string());
        }
        while self.order.len() > TOMBSTONES {
            if let Some(old) = self.order.pop_front() {
                self.by_key.remove(&old);
            }
        }
    }

    /// True when the copy of `key` with metadata `m` from `source` is a ghost: `key` was
    /// deleted at its version or later, or, for an answer, its object (its uid) was deleted.
    fn buried(&self, key: &str, m: &pv_model::k8s::ObjectMeta, source: Source) -> bool {
        let Some(grave) = self.by_key.get(key) else {
            return false;
        };
        let rv = m.resource_version.as_deref().and_then(|r| r.parse::<u64>().ok());
        let older = matches!((grave.rv, rv), (Some(gone), Some(rv)) if rv <= gone);
        let same_object = grave.uid.is_some() && grave.uid.as_deref() == m.uid.as_deref();
        older || (source == Source::Answer && same_object)
    }

    /// Forgets `key` (a newer object of that name exists).
    fn lift(&mut self, key: &str) {
        if self.by_key.remove(key).is_some() {
            self.order.retain(|k| k != key);
        }
    }

    /// Number of remembered deletions.
    pub fn len(&self) -> usize {
        self.by_key.len()
    }

    /// True when nothing is remembered.
    pub fn is_empty(&self) -> bool {
        self.by_key.is_empty()
    }
}

/// True when the API server has deleted this object: it is being deleted and nothing holds it.
pub fn is_deleted(m: &pv_model::k8s::ObjectMeta) -> bool {
    m.deletion_timestamp.is_some() && m.finalizers.as_ref().is_none_or(|f| f.is_empty())
}

/// The label values the `pv_collector_*` metrics count objects by, interned: each cached object
/// keeps a number, so counting reads no object (a packed one would have to be decoded).
struct Labels<K> {
    values: Vec<K>,
    ids: HashMap<K, u32>,
}

impl<K> Default for Labels<K> {
    fn default() -> Self {
        Labels { values: Vec::new(), ids: HashMap::new() }
    }
}

impl<K: Clone + Eq + std::hash::Hash> Labels<K> {
    fn id(&mut self, key: K) -> u32 {
        if let Some(id) = self.ids.get(&key) {
            return *id;
        }
        let id = self.values.len() as u32;
        self.values.push(key.clone());
        self.ids.insert(key, id);
        id
    }

    fn get(&self, id: u32) -> &K {
        &self.values[id as usize]
    }
}

/// The labels a volume is counted by: plugin name, volume mode, and `spec.storageClassName`
/// (upstream's collector reads the field, not the beta annotation matching honours).
type VolumeLabels = (String, String, String);

/// How `new` compares with `old` as resourceVersions (`None` when either does not parse).
fn version_order(old: Option<&str>, new: Option<&str>) -> Option<std::cmp::Ordering> {
    let parse = |v: Option<&str>| v.and_then(|v| v.parse::<u64>().ok());
    Some(parse(new)?.cmp(&parse(old)?))
}

/// True when `old` and `new` are the same resourceVersion, so the same object: the API server
/// gives every write a new version. The controller meets each version it writes twice, in the
/// write's response and in the watch event; the second one needs no storing.
fn same_version(old: Option<&str>, new: Option<&str>) -> bool {
    version_order(old, new) == Some(std::cmp::Ordering::Equal)
}

/// True when `new` is not older than `old` (unparsable versions are accepted).
pub fn is_newer_or_same(old: Option<&str>, new: Option<&str>) -> bool {
    version_order(old, new) != Some(std::cmp::Ordering::Less)
}

/// Volumes, indexed for matching.
#[derive(Default)]
pub struct VolumeCache {
    /// The index (and the store of record).
    pub index: VolumeIndex,
    /// (plugin name, volume mode, spec class) of each volume, by the tag it has in the index.
    labels: Labels<VolumeLabels>,
    /// Volumes deleted lately, with their last resourceVersion.
    pub gone: Tombstones,
}

impl VolumeCache {
    /// Stores `v`, whose plugin (as `pv_collector_total_pv_count` names it) is `plugin`, unless the
    /// cache holds a newer version or `v` no longer exists (see the module note).
    pub fn store(&mut self, v: PersistentVolume, plugin: &str, source: Source) -> Stored<PersistentVolume> {
        let name = helpers::name(&v.metadata).to_string();
        let rv = v.metadata.resource_version.as_deref();
        if let Some(old_rv) = self.index.resource_version(&name) {
            if !is_newer_or_same(old_rv, rv) {
                return Stored::Older;
            }
            if same_version(old_rv, rv) {
                return Stored::Cached(Arc::new(v));
            }
        } else if self.gone.buried(&name, &v.metadata, source) {
            return Stored::Gone(Arc::new(v));
        }
        if is_deleted(&v.metadata) {
            self.gone.bury(&name, rv, v.metadata.uid.as_deref());
            self.index.delete(&name);
            return Stored::Gone(Arc::new(v));
        }
        self.gone.lift(&name);
        let spec_class = v.spec.as_ref().and_then(|s| s.storage_class_name.clone()).unwrap_or_default();
        let tag = self.labels.id((plugin.to_string(), helpers::volume_mode(&v).to_string(), spec_class));
        let v = Arc::new(v);
        self.index.apply_tagged(v.clone(), tag);
        Stored::Cached(v)
    }

    /// Adds the volumes to the metrics' counts: by phase and class, and by plugin and mode.
    pub fn count_into(&self, c: &mut Counts) {
        for v in self.index.summaries() {
            let (plugin, mode, class) = self.labels.get(v.tag);
            *c.total_pv.entry((plugin.clone(), mode.clone())).or_default() += 1;
            let by_class = if v.bound { &mut c.bound_pv } else { &mut c.unbound_pv };
            *by_class.entry(class.clone()).or_default() += 1;
        }
    }

    /// The volume with this name.
    pub fn get(&self, name: &str) -> Option<Arc<PersistentVolume>> {
        self.index.get(name)
    }

    /// Removes the volume `uid` that was deleted at resourceVersion `rv` (or that a relist
    /// reported gone, `rv` being the last version the informer saw).
    pub fn delete(&mut self, name: &str, rv: Option<&str>, uid: Option<&str>) -> Option<Arc<PersistentVolume>> {
        self.gone.bury(name, rv, uid);
        self.index.delete(name)
    }

    /// Number of cached volumes.
    pub fn len(&self) -> usize {
        self.index.names().count()
    }

    /// True when no volume is cached.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Claims by `namespace/name` (Bound ones packed), with unbound claims indexed by class.
#[derive(Default)]
pub struct ClaimCache {
    claims: HashMap<ObjectKey, ClaimEntry>,
    unbound_by_class: HashMap<String, BTreeSet<ObjectKey>>,
    /// (class, volume attributes class) of each claim, by the number its entry keeps.
    labels: Labels<(String, String)>,
    /// Claims deleted lately, with their last resourceVersion.
    pub gone: Tombstones,
    /// What bound claims are packed against.
    dictionary: Dictionary,
}

/// A cached claim and what the cache reads without decoding it.
struct ClaimEntry {
    claim: Held<PersistentVolumeClaim>,
    resource_version: Option<Box<str>>,
    /// The class, when the claim is unbound.
    unbound_class: Option<String>,
    modes: AccessModes,
    request: Quantity,
    bound: bool,
    /// The controller's last sync of this version found nothing to do (see [`ClaimCache::settle`]).
    settled: bool,
    /// (class, volume attributes class), in [`ClaimCache::labels`].
    labels: u32,
}

fn unbound_class(c: &PersistentVolumeClaim) -> Option<String> {
    let unbound = !pv_model::binding::claim_is_bound(c) && helpers::claim_volume_name(c).is_empty();
    unbound.then(|| helpers::claim_class(c).to_string())
}

impl ClaimCache {
    /// Stores `c` unless a newer version is cached or `c` no longer exists (see the module note).
    pub fn store(&mut self, c: PersistentVolumeClaim, source: Source) -> Stored<PersistentVolumeClaim> {
        let key = helpers::claim_key(&c);
        let rv = c.metadata.resource_version.as_deref();
        if let Some(old) = self.claims.get(&key) {
            if !is_newer_or_same(old.resource_version.as_deref(), rv) {
                return Stored::Older;
            }
            if same_version(old.resource_version.as_deref(), rv) {
                return Stored::Cached(Arc::new(c));
            }
        } else if self.gone.buried(&key, &c.metadata, source) {
            return Stored::Gone(Arc::new(c));
        }
        if is_deleted(&c.metadata) {
            let rv = rv.map(str::to_string);
            let uid = c.metadata.uid.clone();
            self.delete(&key, rv.as_deref(), uid.as_deref());
            return Stored::Gone(Arc::new(c));
        }
        self.gone.lift(&key);
        self.unindex(&key);
        let c = Arc::new(c);
        let bound = helpers::claim_phase(&c) == helpers::pvc_phase::BOUND;
        // Upstream's collector names a claim's class as matching does: the beta annotation first.
        let class = helpers::claim_class(&c);
        let entry = ClaimEntry {
            claim: Held::new(c.clone(), bound, &self.dictionary),
            bound,
            settled: false,
            labels: self.labels.id((class.to_string(), helpers::claim_vac(&c).to_string())),
            resource_version: c.metadata.resource_version.as_deref().map(Into::into),
            unbound_class: unbound_class(&c),
            modes: helpers::claim_access_modes(&c),
            request: helpers::claim_request(&c),
        };
        if let Some(class) = &entry.unbound_class {
            self.unbound_by_class.entry(class.clone()).or_default().insert(key.clone());
        }
        self.claims.insert(key, entry);
        Stored::Cached(c)
    }

    fn unindex(&mut self, key: &str) {
        if let Some(class) = self.claims.get(key).and_then(|e| e.unbound_class.as_ref()) {
            if let Some(set) = self.unbound_by_class.get_mut(class) {
                set.remove(key);
                if set.is_empty() {
                    self.unbound_by_class.remove(class);
                }
            }
        }
    }

    /// The claim with this key (a fresh copy).
    pub fn get(&self, key: &str) -> Option<Arc<PersistentVolumeClaim>> {
        self.claims.get(key).map(|e| e.claim.get(&self.dictionary))
    }

    /// Removes the claim `uid` that was deleted at resourceVersion `rv` (or that a relist
    /// reported gone, `rv` being the last version the informer saw).
    pub fn delete(&mut self, key: &str, rv: Option<&str>, uid: Option<&str>) -> Option<Arc<PersistentVolumeClaim>> {
        self.gone.bury(key, rv, uid);
        self.unindex(key);
        self.claims.remove(key).map(|e| e.claim.get(&self.dictionary))
    }

    /// The cached version of the claim with this key, read without decoding it; `None` when it
    /// is not cached.
    pub fn resource_version(&self, key: &str) -> Option<Option<&str>> {
        self.claims.get(key).map(|e| e.resource_version.as_deref())
    }

    /// Marks the claim settled if its cached version is `resource_version`: the controller's
    /// sync of that version found nothing to do, so a periodic resync may pass it over until it
    /// or its volume changes ([`ClaimCache::unsettle`]). Returns whether it is now settled.
    pub fn settle(&mut self, key: &str, resource_version: Option<&str>) -> bool {
        match self.claims.get_mut(key) {
            Some(e) if e.resource_version.as_deref() == resource_version => {
                e.settled = true;
                true
            }
            _ => false,
        }
    }

    /// Ends what [`ClaimCache::settle`] marked: the claim is synced at every resync again.
    pub fn unsettle(&mut self, key: &str) {
        if let Some(e) = self.claims.get_mut(key) {
            e.settled = false;
        }
    }

    /// The keys of the claims not settled, in no particular order.
    pub fn unsettled_keys(&self) -> impl Iterator<Item = &ObjectKey> {
        self.claims.iter().filter(|(_, e)| !e.settled).map(|(k, _)| k)
    }

    /// The claims whose phase is not Bound (fresh copies).
    pub fn not_bound(&self) -> Vec<Arc<PersistentVolumeClaim>> {
        self.claims.values().filter(|e| !e.bound).map(|e| e.claim.get(&self.dictionary)).collect()
    }

    /// Every claim key.
    pub fn keys(&self) -> impl Iterator<Item = &ObjectKey> {
        self.claims.keys()
    }

    /// Adds the claims to the metrics' counts: by phase, namespace, class and attributes class.
    pub fn count_into(&self, c: &mut Counts) {
        for (key, e) in &self.claims {
            let ns = key.namespace().to_string();
            let (class, vac) = self.labels.get(e.labels).clone();
            let by = if e.bound { &mut c.bound_pvc } else { &mut c.unbound_pvc };
            *by.entry((ns, class, vac)).or_default() += 1;
        }
    }

    /// Number of claims.
    pub fn len(&self) -> usize {
        self.claims.len()
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.claims.is_empty()
    }

    /// Unbound claims of `class` that `volume` could satisfy (modes and size), at most `limit`.
    pub fn unbound_claims_for(&self, volume: &PersistentVolume, limit: usize) -> Vec<ObjectKey> {
        let class = helpers::volume_class(volume);
        let modes = helpers::volume_access_modes(volume);
        let cap = helpers::volume_capacity(volume);
        self.unbound_by_class
            .get(class)
            .into_iter()
            .flatten()
            .filter(|k| self.claims.get(*k).is_some_and(|e| modes.contains_all(e.modes) && e.request <= cap))
            .take(limit)
            .cloned()
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pv_model::k8s::{ObjectMeta, PersistentVolumeClaimSpec, PersistentVolumeSpec};

    fn meta(name: &str, rv: &str) -> ObjectMeta {
        ObjectMeta {
            name: Some(name.into()),
            namespace: Some("ns".into()),
            resource_version: Some(rv.into()),
            ..Default::default()
        }
    }

    fn volume(rv: &str, class: &str) -> PersistentVolume {
        PersistentVolume {
            metadata: ObjectMeta { namespace: None, ..meta("pv", rv) },
            spec: Some(PersistentVolumeSpec { storage_class_name: Some(class.into()), ..Default::default() }),
            status: Some(pv_model::k8s::PersistentVolumeStatus { phase: Some("Bound".into()), ..Default::default() }),
        }
    }

    fn claim(rv: &str, class: &str) -> PersistentVolumeClaim {
        PersistentVolumeClaim {
            metadata: meta("claim", rv),
            spec: Some(PersistentVolumeClaimSpec { storage_class_name: Some(class.into()), ..Default::default() }),
            status: Some(pv_model::k8s::PersistentVolumeClaimStatus {
                phase: Some("Bound".into()),
                ..Default::default()
            }),
        }
    }

    fn class_of_volume(c: &VolumeCache) -> String {
        c.get("pv").and_then(|v| v.spec.clone()).and_then(|s| s.storage_class_name).unwrap_or_default()
    }

    fn class_of_claim(c: &ClaimCache) -> String {
        c.get("ns/claim").and_then(|v| v.spec.clone()).and_then(|s| s.storage_class_name).unwrap_or_default()
    }

    // Each object below differs from the one before only in its class, so the test can tell which
    // one a cache holds; an API server never gives two different objects one version.
    #[test]
    fn a_volume_at_the_version_cached_is_not_stored_again_an_older_one_is_refused_a_newer_one_replaces_it() {
        let mut c = VolumeCache::default();
        assert!(matches!(c.store(volume("5", "first"), "plugin", Source::Informer), Stored::Cached(_)));
        assert!(matches!(c.store(volume("5", "same-version"), "plugin", Source::Informer), Stored::Cached(_)));
        assert_eq!(class_of_volume(&c), "first");
        assert!(matches!(c.store(volume("4", "older"), "plugin", Source::Informer), Stored::Older));
        assert_eq!(class_of_volume(&c), "first");
        assert!(matches!(c.store(volume("6", "newer"), "plugin", Source::Informer), Stored::Cached(_)));
        assert_eq!(class_of_volume(&c), "newer");
    }

    #[test]
    fn a_claim_at_the_version_cached_is_not_stored_again_an_older_one_is_refused_a_newer_one_replaces_it() {
        let mut c = ClaimCache::default();
        assert!(matches!(c.store(claim("5", "first"), Source::Informer), Stored::Cached(_)));
        assert!(matches!(c.store(claim("5", "same-version"), Source::Informer), Stored::Cached(_)));
        assert_eq!(class_of_claim(&c), "first");
        assert!(matches!(c.store(claim("4", "older"), Source::Informer), Stored::Older));
        assert_eq!(class_of_claim(&c), "first");
        assert!(matches!(c.store(claim("6", "newer"), Source::Informer), Stored::Cached(_)));
        assert_eq!(class_of_claim(&c), "newer");
    }
}
