//! The decisions of the volume sync and the bound-claim sync, as values: pure functions of the
//! objects the sync looked up, so that every branch is testable without an API and the sync only
//! carries the plan out (the unbound-claim sync's decision is [`crate::UnboundClaimPlan`]).
//!
//! Upstream's `syncVolume` and `syncBoundClaim` (pkg/controller/volume/persistentvolume/
//! pv_controller.go) interleave these decisions with their writes; the branches and their order
//! are the same here.

use pv_model::annotations as ann;
use pv_model::helpers::{self, policy, pv_phase};
use pv_model::k8s::{PersistentVolume, PersistentVolumeClaim};
use std::sync::Arc;

/// Which claim a volume's sync has to look at, and where.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClaimLookup {
    /// The volume names no claim (no claimRef, or one without a uid): nothing to look up.
    None,
    /// The claim the volume's claimRef names.
    Claim {
        /// `claimRef.namespace`.
        namespace: String,
        /// `claimRef.name`.
        name: String,
        /// `claimRef.uid`: a claim of the same name with another uid is not this claim.
        uid: String,
        /// Whether a claim missing from the cache is asked of the API server, so a claim the
        /// cache has not seen yet is never mistaken for a deleted one. Not for a Released or
        /// Failed volume: its claim is gone already.
        ask_api: bool,
    },
}

/// What the volume sync does once it knows the volume's claim.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum VolumePlan {
    /// No claimRef: the volume is unused. Phase Available.
    Unused,
    /// A claimRef without uid: pre-bound by a user to a claim that has not bound yet; the claim
    /// sync binds it. Phase Available.
    PreBound,
    /// The claim is gone: phase Released (unless Released or Failed already, a Failed volume
    /// staying Failed while its reclaim is retried), then the reclaim policy.
    Release {
        /// Whether the phase changes to Released first.
        mark_released: bool,
    },
    /// The claim has not bound yet and its volumeMode differs from the volume's: the claim sync
    /// will never pick this volume, so a VolumeMismatch event says why, on both.
    VolumeModeMismatch,
    /// The claim has not bound yet (half-bound by us, or pre-bound by a user): queue the claim's
    /// sync now, rather than at resync; this binds a freshly provisioned volume.
    QueueClaim(String),
    /// The claim is bound to this volume. Phase Bound.
    Bound,
    /// The claim is bound to another volume and this one was provisioned for it with reclaim
    /// policy Delete: not needed, release and delete it.
    DeleteUnneeded {
        /// Whether the phase changes to Released first.
        mark_released: bool,
    },
    /// The claim is bound to another volume: roll the volume's claimRef back (bound by us), or
    /// drop only its uid (pre-bound by a user).
    Unbind,
}

/// What the bound-claim sync does, given the volume its `volumeName` names.
#[derive(Clone, Debug)]
pub enum BoundClaimPlan {
    /// `volumeName` is empty: phase Lost, ClaimLost.
    LostReference,
    /// The volume does not exist: phase Lost, ClaimLost.
    LostVolume,
    /// The volume's claimRef has another claim's uid: phase Lost, ClaimMisbound.
    Misbound,
    /// The volume has no claimRef (it came unbound, or the cache is behind): bind it again.
    Rebind(Arc<PersistentVolume>),
    /// The volume points back: write whatever of the binding is missing (usually nothing).
    KeepBound(Arc<PersistentVolume>),
}

/// Upstream's event message for [`BoundClaimPlan::LostReference`].
pub const LOST_REFERENCE: &str = "Bound claim has lost reference to PersistentVolume. Data on the volume is lost!";
/// Upstream's event message for [`BoundClaimPlan::LostVolume`].
pub const LOST_VOLUME: &str = "Bound claim has lost its PersistentVolume. Data on the volume is lost!";
/// Upstream's event message for [`BoundClaimPlan::Misbound`].
pub const MISBOUND: &str = "Two claims are bound to the same volume, this one is bound incorrectly";

/// Which claim the volume's sync looks up.
pub fn claim_lookup(volume: &PersistentVolume) -> ClaimLookup {
    let Some(r) = helpers::claim_ref(volume) else { return ClaimLookup::None };
    let uid = r.uid.clone().unwrap_or_default();
    if uid.is_empty() {
        return ClaimLookup::None;
    }
    ClaimLookup::Claim {
        namespace: r.namespace.clone().unwrap_or_default(),
        name: r.name.clone().unwrap_or_default(),
        uid,
        ask_api: !is_released_or_failed(volume),
    }
}

fn is_released_or_failed(volume: &PersistentVolume) -> bool {
    matches!(helpers::volume_phase(volume), pv_phase::RELEASED | pv_phase::FAILED)
}

/// The volume sync's decision. `claim`: what the lookup of [`claim_lookup`] found; a claim with
/// another uid than the claimRef's counts as gone.
pub fn plan_volume(volume: &PersistentVolume, claim: Option<&PersistentVolumeClaim>) -> VolumePlan {
    let Some(claim_ref) = helpers::claim_ref(volume) else { return VolumePlan::Unused };
    let ref_uid = claim_ref.uid.as_deref().unwrap_or("");
    if ref_uid.is_empty() {
        return VolumePlan::PreBound;
    }
    let mark_released = !is_released_or_failed(volume);
    let Some(claim) = claim.filter(|c| helpers::uid(&c.metadata) == ref_uid) else {
        return VolumePlan::Release { mark_released };
    };
    let claim_volume = helpers::claim_volume_name(claim);
    if claim_volume.is_empty() {
        if helpers::volume_mode_mismatch(claim, volume) {
            return VolumePlan::VolumeModeMismatch;
        }
        return VolumePlan::QueueClaim(helpers::claim_key(claim));
    }
    if claim_volume == helpers::name(&volume.metadata) {
        return VolumePlan::Bound;
    }
    if helpers::has_annotation(&volume.metadata, ann::PROVISIONED_BY)
        && helpers::reclaim_policy(volume) == policy::DELETE
    {
        return VolumePlan::DeleteUnneeded { mark_released };
    }
    VolumePlan::Unbind
}

/// The bound-claim sync's decision. `volume`: the volume the claim's `volumeName` names, if it
/// exists.
pub fn plan_bound_claim(claim: &PersistentVolumeClaim, volume: Option<Arc<PersistentVolume>>) -> BoundClaimPlan {
    if helpers::claim_volume_name(claim).is_empty() {
        return BoundClaimPlan::LostReference;
    }
    let Some(volume) = volume else { return BoundClaimPlan::LostVolume };
    match helpers::claim_ref(&volume) {
        None => BoundClaimPlan::Rebind(volume),
        Some(r) if r.uid.as_deref().unwrap_or("") == helpers::uid(&claim.metadata) => BoundClaimPlan::KeepBound(volume),
        Some(_) => BoundClaimPlan::Misbound,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pv(v: serde_json::Value) -> PersistentVolume {
        let mut base = json!({"metadata": {"name": "pv1"}, "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"]}});
        merge(&mut base, v);
        serde_json::from_value(base).unwrap()
    }

    fn pvc(v: serde_json::Value) -> PersistentVolumeClaim {
        let mut base = json!({"metadata": {"name": "c1", "namespace": "ns", "uid": "u1"}, "spec": {"accessModes": ["ReadWriteOnce"]}});
        merge(&mut base, v);
        serde_json::from_value(base).unwrap()
    }

    fn merge(a: &mut serde_json::Value, b: serde_json::Value) {
        match (a, b) {
            (serde_json::Value::Object(a), serde_json::Value::Object(b)) => {
                for (k, v) in b {
                    merge(a.entry(k).or_insert(serde_json::Value::Null), v);
                }
            }
            (a, b) => *a = b,
        }
    }

    fn claimed(phase: &str) -> PersistentVolume {
        pv(json!({"spec": {"claimRef": {"namespace": "ns", "name": "c1", "uid": "u1"}}, "status": {"phase": phase}}))
    }

    #[test]
    fn a_volume_without_claim_ref_is_unused_and_looks_nothing_up() {
        let v = pv(json!({}));
        assert_eq!(claim_lookup(&v), ClaimLookup::None);
        assert_eq!(plan_volume(&v, None), VolumePlan::Unused);
    }

    #[test]
    fn a_claim_ref_without_uid_is_a_user_pre_binding() {
        let v = pv(json!({"spec": {"claimRef": {"namespace": "ns", "name": "c1"}}}));
        assert_eq!(claim_lookup(&v), ClaimLookup::None);
        assert_eq!(plan_volume(&v, Some(&pvc(json!({})))), VolumePlan::PreBound);
    }

    #[test]
    fn the_lookup_asks_the_api_server_only_while_the_volume_is_not_released() {
        let want =
            |ask_api| ClaimLookup::Claim { namespace: "ns".into(), name: "c1".into(), uid: "u1".into(), ask_api };
        assert_eq!(claim_lookup(&claimed("Bound")), want(true));
        assert_eq!(claim_lookup(&claimed("Pending")), want(true));
        assert_eq!(claim_lookup(&claimed("Released")), want(false));
        assert_eq!(claim_lookup(&claimed("Failed")), want(false));
    }

    #[test]
    fn a_gone_claim_releases_the_volume_once() {
        assert_eq!(plan_volume(&claimed("Bound"), None), VolumePlan::Release { mark_released: true });
        assert_eq!(plan_volume(&claimed("Released"), None), VolumePlan::Release { mark_released: false });
        assert_eq!(plan_volume(&claimed("Failed"), None), VolumePlan::Release { mark_released: false });
    }

    #[test]
    fn a_claim_of_the_same_name_with_another_uid_is_gone() {
        let other = pvc(json!({"metadata": {"uid": "u2"}, "spec": {"volumeName": "pv1"}}));
        assert_eq!(plan_volume(&claimed("Bound"), Some(&other)), VolumePlan::Release { mark_released: true });
    }

    #[test]
    fn an_unbound_claim_is_queued_unless_its_volume_mode_differs() {
        let c = pvc(json!({}));
        assert_eq!(plan_volume(&claimed("Available"), Some(&c)), VolumePlan::QueueClaim("ns/c1".into()));
        let block = pvc(json!({"spec": {"volumeMode": "Block"}}));
        assert_eq!(plan_volume(&claimed("Available"), Some(&block)), VolumePlan::VolumeModeMismatch);
    }

    #[test]
    fn a_claim_bound_to_the_volume_makes_it_bound() {
        let c = pvc(json!({"spec": {"volumeName": "pv1"}}));
        assert_eq!(plan_volume(&claimed("Available"), Some(&c)), VolumePlan::Bound);
        assert_eq!(plan_volume(&claimed("Bound"), Some(&c)), VolumePlan::Bound);
    }

    #[test]
    fn a_claim_bound_elsewhere_deletes_an_unneeded_provisioned_volume_and_unbinds_any_other() {
        let c = pvc(json!({"spec": {"volumeName": "pv2"}}));
        let provisioned = |policy: &str, phase: &str| {
            pv(json!({"metadata": {"annotations": {ann::PROVISIONED_BY: "kubernetes.io/host-path"}},
                      "spec": {"claimRef": {"namespace": "ns", "name": "c1", "uid": "u1"}, "persistentVolumeReclaimPolicy": policy},
                      "status": {"phase": phase}}))
        };
        assert_eq!(
            plan_volume(&provisioned("Delete", "Bound"), Some(&c)),
            VolumePlan::DeleteUnneeded { mark_released: true }
        );
        assert_eq!(
            plan_volume(&provisioned("Delete", "Released"), Some(&c)),
            VolumePlan::DeleteUnneeded { mark_released: false }
        );
        assert_eq!(plan_volume(&provisioned("Retain", "Bound"), Some(&c)), VolumePlan::Unbind);
        assert_eq!(plan_volume(&claimed("Bound"), Some(&c)), VolumePlan::Unbind);
    }

    #[test]
    fn a_bound_claim_without_volume_name_or_volume_is_lost() {
        assert!(matches!(plan_bound_claim(&pvc(json!({})), None), BoundClaimPlan::LostReference));
        let c = pvc(json!({"spec": {"volumeName": "pv1"}}));
        assert!(matches!(plan_bound_claim(&c, None), BoundClaimPlan::LostVolume));
    }

    #[test]
    fn a_bound_claim_rebinds_an_unclaimed_volume_keeps_its_own_and_is_misbound_to_another_claims() {
        let c = pvc(json!({"spec": {"volumeName": "pv1"}}));
        assert!(matches!(plan_bound_claim(&c, Some(Arc::new(pv(json!({}))))), BoundClaimPlan::Rebind(_)));
        assert!(matches!(plan_bound_claim(&c, Some(Arc::new(claimed("Bound")))), BoundClaimPlan::KeepBound(_)));
        let other = pv(json!({"spec": {"claimRef": {"namespace": "ns", "name": "c1", "uid": "u2"}}}));
        assert!(matches!(plan_bound_claim(&c, Some(Arc::new(other))), BoundClaimPlan::Misbound));
    }
}
