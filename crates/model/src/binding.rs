//! Who holds a volume: the one rule every part of the controller asks, from either side.
//!
//! From a claim's side, [`classify`] says how a volume stands towards that claim (free, already
//! this claim's, an earlier claim's of the same name, another claim's). From the volume's side,
//! [`holder`] says how the claim its claimRef names stands towards the volume (nobody, gone,
//! binding, bound here, bound elsewhere). The volume and claim syncs' plans, the volume index,
//! the matching rules, the checks before a reclaim and `explain` all decide through these two.

use crate::annotations as ann;
use crate::helpers::{self, claim_ref, name, uid};
use crate::k8s::{ObjectReference, PersistentVolume, PersistentVolumeClaim};
use crate::phase::{PvPhase, ReclaimPolicy};
use crate::ObjectKey;

/// How a volume stands towards one claim.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Relation {
    /// No claimRef: free for any claim it fits.
    Unclaimed,
    /// The claimRef names this claim: with no uid yet (`pre_bound`: a user's pre-binding, or a
    /// bind half done by the binder) or with this claim's uid.
    ThisClaim {
        /// The claimRef has no uid yet.
        pre_bound: bool,
    },
    /// The claimRef names this claim's namespace and name with another uid: an earlier claim of
    /// this name held it. `rebind`: the volume asks to be bound again to a re-created claim of
    /// that name (see [`rebinds_same_name`]).
    EarlierOfSameName {
        /// The volume may be bound to this claim.
        rebind: bool,
    },
    /// The claimRef names another claim.
    OtherClaim(ObjectKey),
}

impl Relation {
    /// The claim may be bound to this volume as far as the claimRef goes (free, its own, or an
    /// earlier claim's that asks to be bound again): the other rules (size, class, ...) decide.
    pub fn may_bind(&self) -> bool {
        matches!(self, Relation::Unclaimed | Relation::ThisClaim { .. } | Relation::EarlierOfSameName { rebind: true })
    }
}

/// How `volume` stands towards `claim`.
pub fn classify(volume: &PersistentVolume, claim: &PersistentVolumeClaim) -> Relation {
    let Some(r) = claim_ref(volume) else { return Relation::Unclaimed };
    let same_name = r.name.as_deref().unwrap_or("") == name(&claim.metadata)
        && r.namespace.as_deref().unwrap_or("") == claim.metadata.namespace.as_deref().unwrap_or("");
    if !same_name {
        return Relation::OtherClaim(ObjectKey::of_ref(r));
    }
    let ref_uid = r.uid.as_deref().unwrap_or("");
    if ref_uid.is_empty() {
        Relation::ThisClaim { pre_bound: true }
    } else if ref_uid == uid(&claim.metadata) {
        Relation::ThisClaim { pre_bound: false }
    } else {
        Relation::EarlierOfSameName { rebind: asks_rebind(volume) }
    }
}

/// True when the volume asks to be bound again to a re-created claim of its earlier claim's name
/// and `claim` is one: annotation `pv-controller.io/rebind: same-name`, reclaim policy Retain,
/// phase Bound or Released, and a claimRef naming the claim's namespace and name with another
/// uid. A claim of that name with another uid exists, so the one the claimRef names is gone
/// (one name holds one object at a time), even before the volume's sync has marked it Released.
pub fn rebinds_same_name(volume: &PersistentVolume, claim: &PersistentVolumeClaim) -> bool {
    classify(volume, claim) == Relation::EarlierOfSameName { rebind: true }
}

/// The rebind annotation on a Retain volume that is Bound or Released.
fn asks_rebind(volume: &PersistentVolume) -> bool {
    helpers::annotation(&volume.metadata, ann::REBIND) == Some(ann::REBIND_SAME_NAME)
        && ReclaimPolicy::of(volume) == Some(ReclaimPolicy::Retain)
        && matches!(PvPhase::of(volume), Some(PvPhase::Bound | PvPhase::Released))
}

/// The claim a volume's claimRef names, once the claim has bound it (the claimRef has a uid); a
/// claimRef without uid is a pre-binding no claim holds yet.
pub fn held_by(volume: &PersistentVolume) -> Option<&ObjectReference> {
    claim_ref(volume).filter(|r| !r.uid.as_deref().unwrap_or("").is_empty())
}

/// True when the claim has bound: it carries `pv.kubernetes.io/bind-completed`, the mark upstream's
/// claim sync branches on (its `volumeName` alone may be a user's pre-binding).
pub fn claim_is_bound(claim: &PersistentVolumeClaim) -> bool {
    helpers::has_annotation(&claim.metadata, ann::BIND_COMPLETED)
}

/// True when no claim holds the volume: it has no claimRef, or one without a uid (pre-bound by a
/// user to a claim that has not bound yet). The volume sync makes such a volume Available.
pub fn is_volume_unclaimed(volume: &PersistentVolume) -> bool {
    held_by(volume).is_none()
}

/// How the claim a volume's claimRef names stands towards the volume.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Holder {
    /// No claim holds it: no claimRef, or one without uid.
    Nobody,
    /// The claim is gone: not found, or a claim of that name with another uid.
    Gone,
    /// The claim exists and has not bound yet (no `volumeName`).
    Binding,
    /// The claim is bound to this volume.
    BoundHere,
    /// The claim is bound to another volume.
    BoundElsewhere,
}

impl Holder {
    /// Its claim no longer needs the volume: it may be released and reclaimed.
    pub fn is_released(self) -> bool {
        matches!(self, Holder::Gone | Holder::BoundElsewhere)
    }
}

/// How `claim` — what a lookup of the volume's claimRef found, if anything — stands towards
/// `volume`. A claim with another uid than the claimRef's is not the claim it names.
pub fn holder(volume: &PersistentVolume, claim: Option<&PersistentVolumeClaim>) -> Holder {
    let Some(r) = held_by(volume) else { return Holder::Nobody };
    let ref_uid = r.uid.as_deref().unwrap_or("");
    let Some(claim) = claim.filter(|c| uid(&c.metadata) == ref_uid) else { return Holder::Gone };
    match helpers::claim_volume_name(claim) {
        "" => Holder::Binding,
        v if v == name(&volume.metadata) => Holder::BoundHere,
        _ => Holder::BoundElsewhere,
    }
}

/// The phase the volume's next sync gives it before anything else happens, when that differs
/// from its phase now: Available for an unclaimed volume (a new PV has no phase, or Pending, until
/// then).
pub fn phase_after_first_sync(volume: &PersistentVolume) -> Option<&'static str> {
    (is_volume_unclaimed(volume) && helpers::volume_phase(volume) != helpers::pv_phase::AVAILABLE)
        .then_some(helpers::pv_phase::AVAILABLE)
}

/// The phase the binder matches a volume by: its phase as its own sync leaves it
/// ([`phase_after_first_sync`]), so that a claim synced before a new volume's first sync binds
/// to that volume instead of provisioning another or reporting that none fits; and
/// `explain` shows the same.
pub fn settled_volume_phase(volume: &PersistentVolume) -> &str {
    phase_after_first_sync(volume).unwrap_or_else(|| helpers::volume_phase(volume))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pv(claim_ref: serde_json::Value, phase: &str, policy: &str, rebind: bool) -> PersistentVolume {
        let mut v = serde_json::json!({
            "metadata": {"name": "pv"},
            "spec": {"claimRef": claim_ref, "persistentVolumeReclaimPolicy": policy},
            "status": {"phase": phase},
        });
        if claim_ref.is_null() {
            v["spec"].as_object_mut().unwrap().remove("claimRef");
        }
        if rebind {
            v["metadata"]["annotations"] = serde_json::json!({ann::REBIND: ann::REBIND_SAME_NAME});
        }
        serde_json::from_value(v).unwrap()
    }

    fn pvc(name: &str, uid: &str, volume: &str) -> PersistentVolumeClaim {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "namespace": "ns", "uid": uid},
            "spec": {"volumeName": volume},
        }))
        .unwrap()
    }

    fn cref(name: &str, uid: &str) -> serde_json::Value {
        serde_json::json!({"namespace": "ns", "name": name, "uid": uid})
    }

    #[test]
    fn a_volume_stands_towards_a_claim_in_one_of_four_ways() {
        let c = pvc("a", "u1", "");
        assert_eq!(classify(&pv(serde_json::Value::Null, "Available", "Retain", false), &c), Relation::Unclaimed);
        assert_eq!(
            classify(&pv(cref("a", ""), "Available", "Retain", false), &c),
            Relation::ThisClaim { pre_bound: true }
        );
        assert_eq!(
            classify(&pv(cref("a", "u1"), "Bound", "Retain", false), &c),
            Relation::ThisClaim { pre_bound: false }
        );
        assert_eq!(
            classify(&pv(cref("b", "u1"), "Bound", "Retain", false), &c),
            Relation::OtherClaim(ObjectKey::new("ns", "b"))
        );
        assert_eq!(
            classify(&pv(cref("a", "u0"), "Released", "Retain", false), &c),
            Relation::EarlierOfSameName { rebind: false }
        );
        assert_eq!(
            classify(&pv(cref("a", "u0"), "Released", "Retain", true), &c),
            Relation::EarlierOfSameName { rebind: true }
        );
    }

    #[test]
    fn only_a_retained_bound_or_released_volume_asks_to_be_bound_again() {
        let c = pvc("a", "u1", "");
        assert!(rebinds_same_name(&pv(cref("a", "u0"), "Bound", "Retain", true), &c));
        assert!(!rebinds_same_name(&pv(cref("a", "u0"), "Released", "Delete", true), &c));
        assert!(!rebinds_same_name(&pv(cref("a", "u0"), "Available", "Retain", true), &c));
        assert!(!rebinds_same_name(&pv(cref("a", "u1"), "Bound", "Retain", true), &c));
    }

    #[test]
    fn the_claim_a_claim_ref_names_holds_the_volume_until_it_is_gone_or_bound_elsewhere() {
        let v = pv(cref("a", "u1"), "Bound", "Delete", false);
        assert_eq!(holder(&pv(serde_json::Value::Null, "", "Delete", false), None), Holder::Nobody);
        assert_eq!(holder(&pv(cref("a", ""), "", "Delete", false), Some(&pvc("a", "u1", ""))), Holder::Nobody);
        assert_eq!(holder(&v, None), Holder::Gone);
        assert_eq!(holder(&v, Some(&pvc("a", "u2", "pv"))), Holder::Gone);
        assert_eq!(holder(&v, Some(&pvc("a", "u1", ""))), Holder::Binding);
        assert_eq!(holder(&v, Some(&pvc("a", "u1", "pv"))), Holder::BoundHere);
        assert_eq!(holder(&v, Some(&pvc("a", "u1", "other"))), Holder::BoundElsewhere);
        assert!(Holder::Gone.is_released() && Holder::BoundElsewhere.is_released());
        assert!(!Holder::Binding.is_released() && !Holder::BoundHere.is_released() && !Holder::Nobody.is_released());
    }
}
