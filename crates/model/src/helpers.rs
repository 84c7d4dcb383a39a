//! Small read-only helpers over PV, PVC, StorageClass and Pod objects: keys, classes, phases,
//! access modes, and who points at whom.

use crate::annotations as ann;
use crate::k8s::{ObjectMeta, ObjectReference, PersistentVolume, PersistentVolumeClaim, Pod, StorageClass};
use crate::key::ObjectKey;
use crate::quantity::Quantity;
use std::collections::BTreeMap;

/// PV phases.
pub mod pv_phase {
    use crate::phase::PvPhase;
    /// Created, not yet processed.
    pub const PENDING: &str = PvPhase::Pending.as_str();
    /// Free to be bound.
    pub const AVAILABLE: &str = PvPhase::Available.as_str();
    /// Bound to a claim.
    pub const BOUND: &str = PvPhase::Bound.as_str();
    /// Its claim is gone; waiting for reclaim.
    pub const RELEASED: &str = PvPhase::Released.as_str();
    /// Reclaim failed.
    pub const FAILED: &str = PvPhase::Failed.as_str();
}

/// PVC phases.
pub mod pvc_phase {
    /// Not bound.
    pub const PENDING: &str = "Pending";
    /// Bound to a volume.
    pub const BOUND: &str = "Bound";
    /// Its volume is gone or bound elsewhere.
    pub const LOST: &str = "Lost";
}

/// Reclaim policies.
pub mod policy {
    use crate::phase::ReclaimPolicy;
    /// Keep the volume and its data.
    pub const RETAIN: &str = ReclaimPolicy::Retain.as_str();
    /// Empty the volume and make it Available again.
    pub const RECYCLE: &str = ReclaimPolicy::Recycle.as_str();
    /// Delete the storage asset and the PV.
    pub const DELETE: &str = ReclaimPolicy::Delete.as_str();
}

/// `-` for an empty string, as kubectl prints missing values.
pub fn or_dash(s: &str) -> &str {
    if s.is_empty() {
        "-"
    } else {
        s
    }
}

/// `namespace/name` of a claim: the key of the claim queue and cache.
pub fn claim_key(claim: &PersistentVolumeClaim) -> ObjectKey {
    ObjectKey::of(&claim.metadata)
}

/// `namespace/name` a claimRef points to.
pub fn claim_ref_key(r: &ObjectReference) -> ObjectKey {
    ObjectKey::of_ref(r)
}

/// Name of an object (empty when unset).
pub fn name(meta: &ObjectMeta) -> &str {
    meta.name.as_deref().unwrap_or("")
}

/// UID of an object (empty when unset).
pub fn uid(meta: &ObjectMeta) -> &str {
    meta.uid.as_deref().unwrap_or("")
}

/// True when the object carries the annotation (any value).
pub fn has_annotation(meta: &ObjectMeta, key: &str) -> bool {
    meta.annotations.as_ref().is_some_and(|a| a.contains_key(key))
}

/// Value of an annotation.
pub fn annotation<'a>(meta: &'a ObjectMeta, key: &str) -> Option<&'a str> {
    meta.annotations.as_ref().and_then(|a| a.get(key)).map(String::as_str)
}

/// Sets an annotation, creating the map if needed.
pub fn set_annotation(meta: &mut ObjectMeta, key: &str, value: &str) {
    meta.annotations.get_or_insert_with(BTreeMap::new).insert(key.to_string(), value.to_string());
}

/// Removes an annotation; an emptied map becomes `None` (as upstream leaves it).
pub fn remove_annotation(meta: &mut ObjectMeta, key: &str) -> bool {
    let Some(a) = meta.annotations.as_mut() else {
        return false;
    };
    let removed = a.remove(key).is_some();
    if a.is_empty() {
        meta.annotations = None;
    }
    removed
}

/// True when the object carries the finalizer.
pub fn has_finalizer(meta: &ObjectMeta, f: &str) -> bool {
    meta.finalizers.as_ref().is_some_and(|v| v.iter().any(|x| x == f))
}

/// The class a claim asks for: the beta annotation wins, then `spec.storageClassName`, else "".
pub fn claim_class(claim: &PersistentVolumeClaim) -> &str {
    if let Some(c) = annotation(&claim.metadata, ann::BETA_STORAGE_CLASS) {
        return c;
    }
    claim.spec.as_ref().and_then(|s| s.storage_class_name.as_deref()).unwrap_or("")
}

/// True when the claim names a class at all (`""` counts: it asks for "no class").
pub fn claim_has_class(claim: &PersistentVolumeClaim) -> bool {
    has_annotation(&claim.metadata, ann::BETA_STORAGE_CLASS)
        || claim.spec.as_ref().is_some_and(|s| s.storage_class_name.is_some())
}

/// The class a volume belongs to: the beta annotation wins, then `spec.storageClassName`.
pub fn volume_class(volume: &PersistentVolume) -> &str {
    if let Some(c) = annotation(&volume.metadata, ann::BETA_STORAGE_CLASS) {
        return c;
    }
    volume.spec.as_ref().and_then(|s| s.storage_class_name.as_deref()).unwrap_or("")
}

/// `spec.volumeName` of a claim ("" when unset).
pub fn claim_volume_name(claim: &PersistentVolumeClaim) -> &str {
    claim.spec.as_ref().and_then(|s| s.volume_name.as_deref()).unwrap_or("")
}

/// `status.phase` of a claim ("" when unset).
pub fn claim_phase(claim: &PersistentVolumeClaim) -> &str {
    claim.status.as_ref().and_then(|s| s.phase.as_deref()).unwrap_or("")
}

/// `status.phase` of a volume ("" when unset).
pub fn volume_phase(volume: &PersistentVolume) -> &str {
    volume.status.as_ref().and_then(|s| s.phase.as_deref()).unwrap_or("")
}

/// `spec.claimRef` of a volume.
pub fn claim_ref(volume: &PersistentVolume) -> Option<&ObjectReference> {
    volume.spec.as_ref().and_then(|s| s.claim_ref.as_ref())
}

/// Reclaim policy of a volume ("" when unset; the API server defaults it to Retain).
pub fn reclaim_policy(volume: &PersistentVolume) -> &str {
    volume.spec.as_ref().and_then(|s| s.persistent_volume_reclaim_policy.as_deref()).unwrap_or("")
}

/// Capacity of a volume (`spec.capacity.storage`), zero when missing or unparsable.
pub fn volume_capacity(volume: &PersistentVolume) -> Quantity {
    volume
        .spec
        .as_ref()
        .and_then(|s| s.capacity.as_ref())
        .and_then(|c| c.get("storage"))
        .and_then(|q| Quantity::parse(&q.0).ok())
        .unwrap_or_default()
}

/// Requested size of a claim (`spec.resources.requests.storage`), zero when missing.
pub fn claim_request(claim: &PersistentVolumeClaim) -> Quantity {
    claim
        .spec
        .as_ref()
        .and_then(|s| s.resources.as_ref())
        .and_then(|r| r.requests.as_ref())
        .and_then(|r| r.get("storage"))
        .and_then(|q| Quantity::parse(&q.0).ok())
        .unwrap_or_default()
}

/// Volume mode of a claim (`Filesystem` when unset).
pub fn claim_volume_mode(claim: &PersistentVolumeClaim) -> &str {
    claim.spec.as_ref().and_then(|s| s.volume_mode.as_deref()).unwrap_or("Filesystem")
}

/// Volume mode of a volume (`Filesystem` when unset).
pub fn volume_mode(volume: &PersistentVolume) -> &str {
    volume.spec.as_ref().and_then(|s| s.volume_mode.as_deref()).unwrap_or("Filesystem")
}

/// True when claim and volume disagree on volume mode (unset means Filesystem on both sides).
pub fn volume_mode_mismatch(claim: &PersistentVolumeClaim, volume: &PersistentVolume) -> bool {
    claim_volume_mode(claim) != volume_mode(volume)
}

/// `volumeAttributesClassName` of a claim ("" when unset).
pub fn claim_vac(claim: &PersistentVolumeClaim) -> &str {
    claim.spec.as_ref().and_then(|s| s.volume_attributes_class_name.as_deref()).unwrap_or("")
}

/// `volumeAttributesClassName` of a volume ("" when unset).
pub fn volume_vac(volume: &PersistentVolume) -> &str {
    volume.spec.as_ref().and_then(|s| s.volume_attributes_class_name.as_deref()).unwrap_or("")
}

/// A reference to the claim, as the controller writes into `spec.claimRef`.
pub fn claim_reference(claim: &PersistentVolumeClaim) -> ObjectReference {
    ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("PersistentVolumeClaim".into()),
        namespace: claim.metadata.namespace.clone(),
        name: claim.metadata.name.clone(),
        uid: claim.metadata.uid.clone(),
        resource_version: claim.metadata.resource_version.clone(),
        field_path: None,
    }
}

/// Access modes as a bit set, so sets compare and index cheaply.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct AccessModes(pub u8);

impl AccessModes {
    /// ReadWriteOnce.
    pub const RWO: u8 = 1;
    /// ReadOnlyMany.
    pub const ROX: u8 = 2;
    /// ReadWriteMany.
    pub const RWX: u8 = 4;
    /// ReadWriteOncePod.
    pub const RWOP: u8 = 8;

    /// Parses a list of mode names; unknown names are ignored (validation rejects them).
    pub fn from_names<'a>(names: impl IntoIterator<Item = &'a String>) -> Self {
        let bit = |n: &str| ACCESS_MODE_TABLE.iter().find(|(name, _, _)| *name == n).map_or(0, |(_, b, _)| *b);
        AccessModes(names.into_iter().fold(0, |bits, n| bits | bit(n)))
    }

    /// The modes' table entries, in the order of their bits (RWO, ROX, RWX, RWOP).
    fn entries(&self) -> impl Iterator<Item = &'static (&'static str, u8, &'static str)> + '_ {
        let mut all: Vec<_> = ACCESS_MODE_TABLE.iter().filter(|(_, b, _)| self.0 & b != 0).collect();
        all.sort_by_key(|(_, b, _)| *b);
        all.into_iter()
    }

    /// The modes' names, in the order of their bits (RWO, ROX, RWX, RWOP).
    pub fn names(&self) -> Vec<&'static str> {
        self.entries().map(|(n, _, _)| *n).collect()
    }

    /// True when the set holds `mode` (one of the bits, e.g. [`AccessModes::RWOP`]).
    pub fn has(&self, mode: u8) -> bool {
        self.0 & mode == mode
    }

    /// Number of modes in the set.
    pub fn len(&self) -> u32 {
        self.0.count_ones()
    }

    /// True for the empty set.
    pub fn is_empty(&self) -> bool {
        self.0 == 0
    }

    /// True when every mode of `other` is in `self`.
    pub fn contains_all(&self, other: AccessModes) -> bool {
        self.0 & other.0 == other.0
    }

    /// Short form as kubectl prints it (`RWO,ROX`).
    pub fn short(&self) -> String {
        self.entries().map(|(_, _, s)| *s).collect::<Vec<_>>().join(",")
    }
}

/// Every access mode, once: its name, its bit in [`AccessModes`] and kubectl's short form, in the
/// order kube-apiserver lists them as supported values.
pub const ACCESS_MODE_TABLE: [(&str, u8, &str); 4] = [
    ("ReadOnlyMany", AccessModes::ROX, "ROX"),
    ("ReadWriteMany", AccessModes::RWX, "RWX"),
    ("ReadWriteOnce", AccessModes::RWO, "RWO"),
    ("ReadWriteOncePod", AccessModes::RWOP, "RWOP"),
];

/// The access modes' names, as kube-apiserver lists them as supported values.
pub const ACCESS_MODE_NAMES: [&str; 4] =
    [ACCESS_MODE_TABLE[0].0, ACCESS_MODE_TABLE[1].0, ACCESS_MODE_TABLE[2].0, ACCESS_MODE_TABLE[3].0];

/// kubectl's short form of one access mode's name (`RWO`), or the name itself when it is none.
pub fn access_mode_short(name: &str) -> &str {
    ACCESS_MODE_TABLE.iter().find(|(n, _, _)| *n == name).map_or(name, |(_, _, s)| s)
}

/// Access modes a claim requests.
pub fn claim_access_modes(claim: &PersistentVolumeClaim) -> AccessModes {
    AccessModes::from_names(claim.spec.as_ref().and_then(|s| s.access_modes.as_ref()).into_iter().flatten())
}

/// Access modes a volume offers.
pub fn volume_access_modes(volume: &PersistentVolume) -> AccessModes {
    AccessModes::from_names(volume.spec.as_ref().and_then(|s| s.access_modes.as_ref()).into_iter().flatten())
}

/// True when the class is marked default (either annotation, value "true").
pub fn is_default_class(class: &StorageClass) -> bool {
    annotation(&class.metadata, ann::IS_DEFAULT_CLASS) == Some("true")
        || annotation(&class.metadata, ann::BETA_IS_DEFAULT_CLASS) == Some("true")
}

/// The default class among `classes`: newest creationTimestamp first, then name ascending.
pub fn default_class<'a>(classes: impl IntoIterator<Item = &'a StorageClass>) -> Option<&'a StorageClass> {
    classes.into_iter().filter(|c| is_default_class(c)).min_by(|a, b| {
        let ta = a.metadata.creation_timestamp.as_ref().map(|t| t.0);
        let tb = b.metadata.creation_timestamp.as_ref().map(|t| t.0);
        tb.cmp(&ta).then_with(|| name(&a.metadata).cmp(name(&b.metadata)))
    })
}

/// True when the class binds on first consumer (`volumeBindingMode: WaitForFirstConsumer`).
pub fn is_delay_binding_class(class: &StorageClass) -> bool {
    class.volume_binding_mode.as_deref() == Some("WaitForFirstConsumer")
}

/// True when a pod has finished (its volumes are no longer in use).
pub fn is_pod_terminated(pod: &Pod) -> bool {
    matches!(pod.status.as_ref().and_then(|s| s.phase.as_deref()), Some("Succeeded") | Some("Failed"))
}

/// Names of the claims a pod uses: direct references and generic ephemeral volumes
/// (`<pod>-<volume>`).
pub fn pod_claim_names(pod: &Pod) -> Vec<String> {
    let mut out = Vec::new();
    let pod_name = name(&pod.metadata);
    for v in pod.spec.as_ref().and_then(|s| s.volumes.as_ref()).into_iter().flatten() {
        if let Some(pvc) = &v.persistent_volume_claim {
            out.push(pvc.claim_name.clone());
        }
        if v.ephemeral.is_some() {
            out.push(format!("{pod_name}-{}", v.name));
        }
    }
    out
}

/// True when the pod has been assigned a node.
pub fn pod_is_scheduled(pod: &Pod) -> bool {
    pod.spec.as_ref().and_then(|s| s.node_name.as_deref()).is_some_and(|n| !n.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn access_mode_sets_compare_by_containment() {
        let rwo = AccessModes::from_names(&["ReadWriteOnce".to_string()]);
        let both = AccessModes::from_names(&["ReadWriteOnce".to_string(), "ReadOnlyMany".to_string()]);
        assert!(both.contains_all(rwo));
        assert!(!rwo.contains_all(both));
        assert_eq!(both.short(), "RWO,ROX");
        assert_eq!(both.len(), 2);
    }
}
