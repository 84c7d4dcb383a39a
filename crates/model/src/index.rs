//! The volume index: every known volume, with the free ones ordered by capacity under their
//! access-mode set and class, so the best match for a claim costs O(log n) in the common case.
//!
//! Upstream scans every volume of every access-mode set that could satisfy a claim. Here:
//! - free volumes (no claimRef, not being deleted; phase Available, or any phase that the volume's
//!   own sync turns into Available, [`crate::binding::settled_volume_phase`]) sit in a `BTreeSet` ordered by
//!   `(capacity, name)` under `(access-mode set, class)`; the best free match is the first entry at
//!   or above the requested size that passes the remaining rules (volume mode, attributes class,
//!   selector), so only a selector or mode mismatch makes the search walk further;
//! - volumes with a claimRef are found through a map from claim key to volume names, which is how
//!   a volume pre-bound to the claim wins;
//! - claimed volumes (Bound, or Released and Failed ones still holding their claimRef) are never in
//!   the free sets at all.
//!
//! The result is exactly [`crate::matching::best_match_by_scan`]'s; a property test holds them
//! equal.
//!
//! Bound volumes are kept packed ([`Held`]): the fields the index orders by are extracted once,
//! and such a volume is decoded only when it is read. Every other volume is shared as is.

use crate::helpers::{self, AccessModes};
use crate::hostpath::{self, SharedPath};
use crate::k8s::{PersistentVolume, PersistentVolumeClaim};
use crate::key::ObjectKey;
use crate::matching::{evaluate_in_mode_set, VerdictKind};
use crate::packed::{Dictionary, Held};
use crate::phase::PvPhase;
use crate::quantity::Quantity;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

#[derive(Clone, Debug)]
struct Entry {
    volume: Held<PersistentVolume>,
    resource_version: Option<Box<str>>,
    modes: AccessModes,
    class: String,
    capacity: Quantity,
    free: bool,
    claim_key: Option<ObjectKey>,
    bound: bool,
    tag: u32,
    /// The controller's last sync of this version found nothing to do (see [`VolumeIndex::settle`]).
    settled: bool,
    /// The host path, normalised ([`hostpath::normalize`]).
    host_path: Option<Box<str>>,
}

/// What the index knows of a volume without reading it: for counting (metrics).
pub struct Summary<'a> {
    /// Its class.
    pub class: &'a str,
    /// Its phase is Bound.
    pub bound: bool,
    /// The caller's tag, given to [`VolumeIndex::apply_tagged`].
    pub tag: u32,
}

/// All known volumes, indexed for matching. Synchronous state: `apply`, `delete`, `reset`.
#[derive(Default, Debug)]
pub struct VolumeIndex {
    entries: HashMap<String, Entry>,
    /// Number of volumes (free or not) per access-mode set, ordered fewest modes first.
    mode_sets: BTreeMap<(u32, u8), usize>,
    /// Free volumes per (mode set, class), ordered by capacity then name.
    free: HashMap<(u8, String), BTreeSet<(Quantity, String)>>,
    /// Volume names per claim key their claimRef points to, sorted. Almost always one name, so a
    /// `Vec` (one small allocation) rather than a set (a B-tree node of ~300 bytes per claim).
    by_claim: HashMap<ObjectKey, Vec<String>>,
    /// Volume names per normalised host path, sorted: ordered by path, so the directories inside
    /// one are a range.
    host_paths: BTreeMap<Box<str>, Vec<String>>,
    /// What bound volumes are packed against.
    dictionary: Dictionary,
}

fn is_free(v: &PersistentVolume) -> bool {
    helpers::claim_ref(v).is_none()
        && crate::binding::settled_volume_phase(v) == PvPhase::Available.as_str()
        && v.metadata.deletion_timestamp.is_none()
}

impl VolumeIndex {
    /// An empty index.
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of volumes.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when there are no volumes.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The volume with this name (a fresh copy).
    pub fn get(&self, name: &str) -> Option<Arc<PersistentVolume>> {
        self.entries.get(name).map(|e| e.volume.get(&self.dictionary))
    }

    /// The resourceVersion of the volume with this name, without decoding it.
    pub fn resource_version(&self, name: &str) -> Option<Option<&str>> {
        self.entries.get(name).map(|e| e.resource_version.as_deref())
    }

    /// Marks the volume settled if its cached version is `resource_version`: the controller's
    /// sync of that version found nothing to do, so a periodic resync may pass it over until it
    /// or its claim changes ([`VolumeIndex::unsettle`]). Returns whether it is now settled.
    pub fn settle(&mut self, name: &str, resource_version: Option<&str>) -> bool {
        match self.entries.get_mut(name) {
            Some(e) if e.resource_version.as_deref() == resource_version => {
                e.settled = true;
                true
            }
            _ => false,
        }
    }

    /// Ends what [`VolumeIndex::settle`] marked: the volume is synced at every resync again.
    pub fn unsettle(&mut self, name: &str) {
        if let Some(e) = self.entries.get_mut(name) {
            e.settled = false;
        }
    }

    /// The names of the volumes not settled, in no particular order.
    pub fn unsettled_names(&self) -> impl Iterator<Item = &String> {
        self.entries.iter().filter(|(_, e)| !e.settled).map(|(n, _)| n)
    }

    /// The key of the claim the volume's claimRef names, read without decoding the volume.
    pub fn claim_key_of(&self, name: &str) -> Option<&ObjectKey> {
        self.entries.get(name).and_then(|e| e.claim_key.as_ref())
    }

    /// The names of the volumes whose claimRef names `claim_key`, sorted.
    pub fn names_claiming(&self, claim_key: &str) -> &[String] {
        self.by_claim.get(claim_key).map(Vec::as_slice).unwrap_or_default()
    }

    /// Every volume's name, in no particular order.
    pub fn names(&self) -> impl Iterator<Item = &String> {
        self.entries.keys()
    }

    /// Every volume's [`Summary`], in no particular order, reading none of them.
    pub fn summaries(&self) -> impl Iterator<Item = Summary<'_>> {
        self.entries.values().map(|e| Summary { class: &e.class, bound: e.bound, tag: e.tag })
    }

    /// Adds or replaces a volume.
    pub fn apply(&mut self, volume: Arc<PersistentVolume>) {
        self.apply_tagged(volume, 0);
    }

    /// Adds or replaces a volume, with a tag of the caller's (returned in its [`Summary`]).
    pub fn apply_tagged(&mut self, volume: Arc<PersistentVolume>, tag: u32) {
        let name = helpers::name(&volume.metadata).to_string();
        self.remove(&name);
        let bound = PvPhase::of(&volume) == Some(PvPhase::Bound);
        let entry = Entry {
            bound,
            tag,
            modes: helpers::volume_access_modes(&volume),
            class: helpers::volume_class(&volume).to_string(),
            capacity: helpers::volume_capacity(&volume),
            free: is_free(&volume),
            settled: false,
            claim_key: helpers::claim_ref(&volume).map(helpers::claim_ref_key),
            resource_version: volume.metadata.resource_version.as_deref().map(Into::into),
            host_path: hostpath::of(&volume).map(|p| hostpath::normalize(p).into()),
            volume: Held::new(volume.clone(), bound, &self.dictionary),
        };
        *self.mode_sets.entry((entry.modes.len(), entry.modes.0)).or_default() += 1;
        if entry.free {
            self.free.entry((entry.modes.0, entry.class.clone())).or_default().insert((entry.capacity, name.clone()));
        }
        if let Some(k) = &entry.claim_key {
            let names = self.by_claim.entry(k.clone()).or_default();
            if let Err(at) = names.binary_search(&name) {
                names.insert(at, name.clone());
            }
        }
        if let Some(p) = &entry.host_path {
            let names = self.host_paths.entry(p.clone()).or_default();
            if let Err(at) = names.binary_search(&name) {
                names.insert(at, name.clone());
            }
        }
        self.entries.insert(name, entry);
    }

    /// Removes a volume; returns it if it was known.
    pub fn delete(&mut self, name: &str) -> Option<Arc<PersistentVolume>> {
        self.remove(name).map(|e| e.volume.get(&self.dictionary))
    }

    /// Removes a volume's entry from every structure, without reading the volume.
    fn remove(&mut self, name: &str) -> Option<Entry> {
        let e = self.entries.remove(name)?;
        let key = (e.modes.len(), e.modes.0);
        if let Some(n) = self.mode_sets.get_mut(&key) {
            *n -= 1;
            if *n == 0 {
                self.mode_sets.remove(&key);
            }
        }
        if e.free {
            let k = (e.modes.0, e.class.clone());
            if let Some(set) = self.free.get_mut(&k) {
                set.remove(&(e.capacity, name.to_string()));
                if set.is_empty() {
                    self.free.remove(&k);
                }
            }
        }
        if let Some(ck) = &e.claim_key {
            if let Some(set) = self.by_claim.get_mut(ck) {
                set.retain(|n| n != name);
                if set.is_empty() {
                    self.by_claim.remove(ck);
                }
            }
        }
        if let Some(p) = &e.host_path {
            if let Some(names) = self.host_paths.get_mut(p) {
                names.retain(|n| n != name);
                if names.is_empty() {
                    self.host_paths.remove(p);
                }
            }
        }
        Some(e)
    }

    /// Another volume whose host path is `volume`'s directory, inside it or contains it (the
    /// first by name; see [`hostpath::conflict`]), so that deleting or recycling `volume`'s
    /// directory would destroy that volume's data. Reads no volume: the directories containing
    /// `volume`'s are looked up one by one, those inside it are a range of the ordered paths.
    pub fn host_path_conflict(&self, volume: &PersistentVolume) -> Option<SharedPath> {
        let this = hostpath::normalize(hostpath::of(volume)?);
        let mut ancestors: Vec<&str> =
            this.match_indices('/').map(|(i, _)| if i == 0 { "/" } else { &this[..i] }).collect();
        ancestors.push(&this);
        ancestors.dedup();
        let mut near: Vec<(&str, &str)> = Vec::new();
        for a in ancestors {
            if let Some((p, names)) = self.host_paths.get_key_value(a) {
                near.extend(names.iter().map(|n| (n.as_str(), &**p)));
            }
        }
        let prefix = if this.ends_with('/') { this.clone() } else { format!("{this}/") };
        let inside =
            self.host_paths.range::<str, _>((std::ops::Bound::Included(prefix.as_str()), std::ops::Bound::Unbounded));
        for (p, names) in inside.take_while(|(p, _)| p.starts_with(&prefix)) {
            near.extend(names.iter().map(|n| (n.as_str(), &**p)));
        }
        hostpath::conflict(volume, near)
    }

    /// Replaces the whole content.
    pub fn reset(&mut self, volumes: impl IntoIterator<Item = Arc<PersistentVolume>>) {
        *self = Self::default();
        for v in volumes {
            self.apply(v);
        }
    }

    /// How many volumes [`crate::matching::evaluate`] gives each verdict for this claim, for the
    /// FailedBinding breakdown. A volume whose access modes fall short or whose claimRef names
    /// another claim is counted from the index's fields; only the rest are read. A volume that
    /// would match but that `reserved` says is promised to another claim (as
    /// [`Self::find_best_match`] skips it) counts as claimed by another claim.
    pub fn verdict_counts(
        &self,
        claim: &PersistentVolumeClaim,
        delay_binding: bool,
        reserved: &dyn Fn(&str) -> bool,
    ) -> BTreeMap<VerdictKind, usize> {
        let wanted = helpers::claim_access_modes(claim);
        let key = helpers::claim_key(claim);
        let mut counts = BTreeMap::new();
        for (name, e) in &self.entries {
            let kind = if !e.modes.contains_all(wanted) {
                VerdictKind::AccessModes
            } else if e.claim_key.as_ref().is_some_and(|k| *k != key) {
                VerdictKind::ClaimedByOther
            } else {
                match evaluate_in_mode_set(claim, &e.volume.get(&self.dictionary), delay_binding).kind {
                    VerdictKind::Match if reserved(name) => VerdictKind::ClaimedByOther,
                    kind => kind,
                }
            };
            *counts.entry(kind).or_default() += 1;
        }
        counts
    }

    /// The best volume for the claim, as upstream's `findBestMatchForClaim` chooses it, skipping
    /// volumes for which `reserved` says they are promised to another claim.
    pub fn find_best_match(
        &self,
        claim: &PersistentVolumeClaim,
        delay_binding: bool,
        reserved: &dyn Fn(&str) -> bool,
    ) -> Option<Arc<PersistentVolume>> {
        let wanted = helpers::claim_access_modes(claim);
        let key = helpers::claim_key(claim);
        let class = helpers::claim_class(claim);
        let requested = helpers::claim_request(claim);
        for &(_, bits) in self.mode_sets.keys() {
            if !AccessModes(bits).contains_all(wanted) {
                continue;
            }
            // A volume pre-bound to this claim wins within its mode set.
            for name in self.by_claim.get(key.as_str()).into_iter().flatten() {
                let e = &self.entries[name];
                if e.modes.0 == bits {
                    let v = e.volume.get(&self.dictionary);
                    if evaluate_in_mode_set(claim, &v, delay_binding).prebound {
                        return Some(v);
                    }
                }
            }
            if delay_binding {
                continue;
            }
            if let Some(set) = self.free.get(&(bits, class.to_string())) {
                for (_, name) in set.range((requested, String::new())..) {
                    if reserved(name) {
                        continue;
                    }
                    let v = self.entries[name].volume.get(&self.dictionary);
                    if evaluate_in_mode_set(claim, &v, delay_binding).is_match() {
                        return Some(v);
                    }
                }
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::matching::best_match_by_scan;
    use k8s_openapi::api::core::v1::{
        ObjectReference, PersistentVolumeClaimSpec, PersistentVolumeSpec, PersistentVolumeStatus,
        VolumeResourceRequirements,
    };
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity as Q;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
    use proptest::prelude::*;

    fn modes(bits: u8) -> Vec<String> {
        crate::helpers::AccessModes(bits & 0xf).names().into_iter().map(str::to_string).collect()
    }

    #[allow(clippy::too_many_arguments)]
    fn pv(
        name: &str,
        gi: i64,
        bits: u8,
        class: &str,
        phase: &str,
        claim: Option<(&str, &str)>,
        label: Option<&str>,
        block: bool,
    ) -> PersistentVolume {
        PersistentVolume {
            metadata: ObjectMeta {
                name: Some(name.into()),
                labels: label.map(|l| [("tier".to_string(), l.to_string())].into()),
                ..Default::default()
            },
            spec: Some(PersistentVolumeSpec {
                capacity: Some([("storage".to_string(), Q(format!("{gi}Gi")))].into()),
                access_modes: Some(modes(bits)),
                storage_class_name: if class.is_empty() { None } else { Some(class.into()) },
                volume_mode: Some(if block { "Block" } else { "Filesystem" }.into()),
                claim_ref: claim.map(|(n, u)| ObjectReference {
                    namespace: Some("ns".into()),
                    name: Some(n.into()),
                    uid: if u.is_empty() { None } else { Some(u.into()) },
                    ..Default::default()
                }),
                ..Default::default()
            }),
            status: Some(PersistentVolumeStatus { phase: Some(phase.into()), ..Default::default() }),
        }
    }

    fn pvc(name: &str, gi: i64, bits: u8, class: Option<&str>, selector: Option<&str>) -> PersistentVolumeClaim {
        PersistentVolumeClaim {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("ns".into()),
                uid: Some(format!("uid-{name}")),
                ..Default::default()
            },
            spec: Some(PersistentVolumeClaimSpec {
                access_modes: Some(modes(bits)),
                resources: Some(VolumeResourceRequirements {
                    requests: Some([("storage".to_string(), Q(format!("{gi}Gi")))].into()),
                    ..Default::default()
                }),
                storage_class_name: class.map(str::to_string),
                selector: selector.map(|l| LabelSelector {
                    match_labels: Some([("tier".to_string(), l.to_string())].into()),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            status: None,
        }
    }

    fn index(vols: &[PersistentVolume]) -> VolumeIndex {
        let mut i = VolumeIndex::new();
        for v in vols {
            i.apply(Arc::new(v.clone()));
        }
        i
    }

    fn best(i: &VolumeIndex, c: &PersistentVolumeClaim) -> Option<String> {
        i.find_best_match(c, false, &|_| false).map(|v| v.metadata.name.clone().unwrap())
    }

    #[test]
    fn smallest_sufficient_volume_wins() {
        let i = index(&[
            pv("big", 10, 1, "", "Available", None, None, false),
            pv("small", 1, 1, "", "Available", None, None, false),
            pv("mid", 5, 1, "", "Available", None, None, false),
        ]);
        assert_eq!(best(&i, &pvc("c", 2, 1, Some(""), None)).as_deref(), Some("mid"));
    }

    #[test]
    fn a_volume_not_synced_yet_matches_as_its_sync_will_leave_it() {
        // A new volume has no phase (or Pending) until its first sync makes it Available; a claim
        // synced first must still find it. One still holding a claimRef stays out.
        let mut fresh = pv("fresh", 2, 1, "", "", None, None, false);
        fresh.status = None;
        let i = index(&[
            fresh,
            pv("pending", 3, 1, "", "Pending", None, None, false),
            pv("released", 1, 1, "", "Released", Some(("gone", "uid-gone")), None, false),
            // Its claimRef removed by hand: its sync makes it Available, whatever its phase.
            pv("unclaimed", 4, 1, "", "Failed", None, None, false),
        ]);
        assert_eq!(best(&i, &pvc("c", 1, 1, Some(""), None)).as_deref(), Some("fresh"));
        assert_eq!(best(&i, &pvc("c", 3, 1, Some(""), None)).as_deref(), Some("pending"));
        assert_eq!(best(&i, &pvc("c", 4, 1, Some(""), None)).as_deref(), Some("unclaimed"));
        let counts = i.verdict_counts(&pvc("c", 1, 1, Some(""), None), false, &|_| false);
        assert_eq!(counts.get(&VerdictKind::Phase), None, "{counts:?}");
    }

    #[test]
    fn fewer_modes_beat_a_smaller_volume_with_more_modes() {
        let i = index(&[
            pv("rwo-big", 10, 1, "", "Available", None, None, false),
            pv("rwo-rox-small", 2, 3, "", "Available", None, None, false),
        ]);
        assert_eq!(best(&i, &pvc("c", 1, 1, Some(""), None)).as_deref(), Some("rwo-big"));
    }

    #[test]
    fn prebound_volume_beats_smaller_ones_and_ignores_phase_and_class() {
        let i = index(&[
            pv("small", 1, 1, "", "Available", None, None, false),
            pv("reserved", 9, 1, "gold", "Pending", Some(("c", "")), None, false),
        ]);
        assert_eq!(best(&i, &pvc("c", 1, 1, Some(""), None)).as_deref(), Some("reserved"));
    }

    #[test]
    fn claimed_released_and_other_class_volumes_are_never_chosen() {
        let i = index(&[
            pv("other", 5, 1, "", "Bound", Some(("x", "uid-x")), None, false),
            pv("released", 5, 1, "", "Released", Some(("gone", "uid-gone")), None, false),
            pv("gold", 5, 1, "gold", "Available", None, None, false),
        ]);
        assert_eq!(best(&i, &pvc("c", 1, 1, Some(""), None)), None);
    }

    #[test]
    fn delayed_binding_leaves_free_volumes_alone() {
        let i = index(&[pv("free", 5, 1, "", "Available", None, None, false)]);
        assert!(i.find_best_match(&pvc("c", 1, 1, Some(""), None), true, &|_| false).is_none());
    }

    #[test]
    fn reserved_volumes_are_skipped() {
        let i = index(&[
            pv("a", 5, 1, "", "Available", None, None, false),
            pv("b", 6, 1, "", "Available", None, None, false),
        ]);
        let got = i.find_best_match(&pvc("c", 1, 1, Some(""), None), false, &|n| n == "a");
        assert_eq!(got.unwrap().metadata.name.as_deref(), Some("b"));
    }

    #[test]
    fn a_reserved_match_counts_as_claimed_by_another_claim() {
        // The breakdown must agree with find_best_match, which skips the reserved volume.
        let i = index(&[
            pv("a", 5, 1, "", "Available", None, None, false),
            pv("small", 1, 1, "", "Available", None, None, false),
        ]);
        let counts = i.verdict_counts(&pvc("c", 2, 1, Some(""), None), false, &|n| n == "a");
        let want: BTreeMap<VerdictKind, usize> =
            [(VerdictKind::ClaimedByOther, 1), (VerdictKind::Capacity, 1)].into_iter().collect();
        assert_eq!(counts, want);
    }

    #[test]
    fn delete_removes_from_every_structure() {
        let mut i = index(&[pv("a", 5, 1, "", "Available", None, None, false)]);
        i.delete("a");
        assert!(i.is_empty());
        assert_eq!(best(&i, &pvc("c", 1, 1, Some(""), None)), None);
    }

    fn at(name: &str, path: &str) -> PersistentVolume {
        let mut v = pv(name, 1, 1, "", "Bound", None, None, false);
        v.spec.as_mut().unwrap().host_path =
            Some(k8s_openapi::api::core::v1::HostPathVolumeSource { path: path.into(), type_: None });
        v
    }

    #[test]
    fn host_path_conflicts_are_found_above_below_and_at_a_directory() {
        let mut i = index(&[at("same", "/r//x/"), at("other", "/r/xy"), at("below", "/r/x/y/z")]);
        let me = at("me", "/r/x");
        assert_eq!(i.host_path_conflict(&me).unwrap().other, "below", "the first by name");
        i.delete("below");
        assert_eq!(i.host_path_conflict(&me).unwrap().other, "same");
        i.delete("same");
        assert_eq!(i.host_path_conflict(&me), None, "/r/xy is another directory");
        i.apply(Arc::new(at("root", "/")));
        assert_eq!(i.host_path_conflict(&me).unwrap().other_path, "/");
        i.apply(Arc::new(at("root", "/elsewhere")));
        assert_eq!(i.host_path_conflict(&me), None, "a replaced volume leaves its old path");
        i.apply(Arc::new(at("me", "/r/x")));
        assert_eq!(i.host_path_conflict(&me), None, "a volume never conflicts with itself");
    }

    fn arb_pv() -> impl Strategy<Value = PersistentVolume> {
        (
            0u32..40,
            1i64..8,
            1u8..16,
            prop_oneof!["", "gold"],
            prop_oneof!["Available", "Available", "Bound", "Released", "Pending"],
            prop_oneof![Just(None), Just(Some(("c", ""))), Just(Some(("c", "uid-c"))), Just(Some(("d", "uid-d")))],
            prop_oneof![Just(None), Just(Some("a")), Just(Some("b"))],
            proptest::bool::weighted(0.1),
        )
            .prop_map(|(n, gi, bits, class, phase, claim, label, block)| {
                pv(&format!("pv-{n}"), gi, bits, &class, &phase, claim, label, block)
            })
    }

    proptest! {
        #[test]
        fn index_agrees_with_a_plain_scan(
            vols in proptest::collection::vec(arb_pv(), 0..30),
            gi in 1i64..8,
            bits in 1u8..16,
            class in prop_oneof![Just(Some("")), Just(Some("gold")), Just(None)],
            sel in prop_oneof![Just(None), Just(Some("a"))],
            delay in proptest::bool::weighted(0.2),
        ) {
            // Later duplicates replace earlier ones in the index; mirror that for the scan.
            let mut by_name: BTreeMap<String, PersistentVolume> = BTreeMap::new();
            for v in vols { by_name.insert(v.metadata.name.clone().unwrap(), v); }
            let vols: Vec<_> = by_name.into_values().collect();
            let i = index(&vols);
            let c = pvc("c", gi, bits, class, sel);
            let scan = best_match_by_scan(&c, vols.iter(), delay).map(|v| v.metadata.name.clone().unwrap());
            let fast = i.find_best_match(&c, delay, &|_| false).map(|v| v.metadata.name.clone().unwrap());
            prop_assert_eq!(scan, fast);
            let mut by_scan: BTreeMap<VerdictKind, usize> = BTreeMap::new();
            for v in &vols { *by_scan.entry(crate::matching::evaluate(&c, v, delay).kind).or_default() += 1; }
            prop_assert_eq!(by_scan, i.verdict_counts(&c, delay, &|_| false));
        }

        #[test]
        fn host_path_conflict_agrees_with_a_plain_scan(
            paths in proptest::collection::vec((0u32..8, "(/|//)?(a|b|ab|\\.|\\.\\.)(/(a|b|\\.\\.)){0,3}/?"), 0..12),
            mine in "(/|//)?(a|b)(/(a|b|\\.)){0,2}/?",
        ) {
            let vols: BTreeMap<String, PersistentVolume> =
                paths.iter().map(|(n, p)| (format!("pv-{n}"), at(&format!("pv-{n}"), p))).collect();
            let i = index(&vols.values().cloned().collect::<Vec<_>>());
            for me in [at("pv-0", &mine), at("me", &mine)] {
                let scan = hostpath::conflict(&me, vols.values().map(|v| (v.metadata.name.as_deref().unwrap(), hostpath::of(v).unwrap())));
                prop_assert_eq!(scan, i.host_path_conflict(&me));
            }
        }
    }
}
