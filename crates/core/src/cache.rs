//! The controller's caches of volumes and claims.
//!
//! Both are fed by watch events *and* by the controller's own successful writes, and both refuse
//! an object older than the one they hold (compared by resourceVersion), so a late watch event
//! never rolls back what the controller just wrote. The volume cache is the [`VolumeIndex`]; the
//! claim cache also indexes unbound claims by class, so a volume that becomes available can wake
//! the claims it might satisfy instead of waiting for the periodic resync.

use pv_model::helpers;
use pv_model::helpers::AccessModes;
use pv_model::k8s::{PersistentVolume, PersistentVolumeClaim};
use pv_model::{Held, Quantity, VolumeIndex};
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

/// True when `new` is not older than `old` (unparsable versions are accepted).
pub fn is_newer_or_same(old: Option<&str>, new: Option<&str>) -> bool {
    match (old.and_then(|o| o.parse::<u64>().ok()), new.and_then(|n| n.parse::<u64>().ok())) {
        (Some(o), Some(n)) => n >= o,
        _ => true,
    }
}

/// Volumes, indexed for matching.
#[derive(Default)]
pub struct VolumeCache {
    /// The index (and the store of record).
    pub index: VolumeIndex,
}

impl VolumeCache {
    /// Stores `v` unless the cache holds a newer version: the stored object, or `None` when `v`
    /// was older (the cached one is not read).
    pub fn store(&mut self, v: PersistentVolume) -> Option<Arc<PersistentVolume>> {
        let name = helpers::name(&v.metadata);
        if let Some(old_rv) = self.index.resource_version(name) {
            if !is_newer_or_same(old_rv, v.metadata.resource_version.as_deref()) {
                return None;
            }
        }
        let v = Arc::new(v);
        self.index.apply(v.clone());
        Some(v)
    }

    /// The volume with this name.
    pub fn get(&self, name: &str) -> Option<Arc<PersistentVolume>> {
        self.index.get(name)
    }

    /// Removes a volume.
    pub fn delete(&mut self, name: &str) -> Option<Arc<PersistentVolume>> {
        self.index.delete(name)
    }
}

/// Claims by `namespace/name` (Bound ones packed), with unbound claims indexed by class.
#[derive(Default)]
pub struct ClaimCache {
    claims: HashMap<String, ClaimEntry>,
    unbound_by_class: HashMap<String, BTreeSet<String>>,
}

/// A cached claim and what the cache reads without decoding it.
struct ClaimEntry {
    claim: Held<PersistentVolumeClaim>,
    resource_version: Option<Box<str>>,
    /// The class, when the claim is unbound.
    unbound_class: Option<String>,
    modes: AccessModes,
    request: Quantity,
}

fn unbound_class(c: &PersistentVolumeClaim) -> Option<String> {
    let unbound = !helpers::has_annotation(&c.metadata, pv_model::annotations::BIND_COMPLETED)
        && helpers::claim_volume_name(c).is_empty();
    unbound.then(|| helpers::claim_class(c).to_string())
}

impl ClaimCache {
    /// Stores `c` unless a newer version is cached: the stored object, or `None` when `c` was older
    /// (the cached one is not read).
    pub fn store(&mut self, c: PersistentVolumeClaim) -> Option<Arc<PersistentVolumeClaim>> {
        let key = helpers::claim_key(&c);
        if let Some(old) = self.claims.get(&key) {
            if !is_newer_or_same(old.resource_version.as_deref(), c.metadata.resource_version.as_deref()) {
                return None;
            }
        }
        self.unindex(&key);
        let c = Arc::new(c);
        let entry = ClaimEntry {
            claim: Held::new(c.clone(), helpers::claim_phase(&c) == helpers::pvc_phase::BOUND),
            resource_version: c.metadata.resource_version.as_deref().map(Into::into),
            unbound_class: unbound_class(&c),
            modes: helpers::claim_access_modes(&c),
            request: helpers::claim_request(&c),
        };
        if let Some(class) = &entry.unbound_class {
            self.unbound_by_class.entry(class.clone()).or_default().insert(key.clone());
        }
        self.claims.insert(key, entry);
        Some(c)
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
        self.claims.get(key).map(|e| e.claim.get())
    }

    /// Removes a claim.
    pub fn delete(&mut self, key: &str) -> Option<Arc<PersistentVolumeClaim>> {
        self.unindex(key);
        self.claims.remove(key).map(|e| e.claim.get())
    }

    /// Every claim key.
    pub fn keys(&self) -> impl Iterator<Item = &String> {
        self.claims.keys()
    }

    /// Every claim (fresh copies).
    pub fn values(&self) -> impl Iterator<Item = Arc<PersistentVolumeClaim>> + '_ {
        self.claims.values().map(|e| e.claim.get())
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
    pub fn unbound_claims_for(&self, volume: &PersistentVolume, limit: usize) -> Vec<String> {
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
