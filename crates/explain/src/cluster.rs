//! `explain pvc -A` (or `-n NS` with no name): every claim that is not Bound, and every Lost one,
//! each explained as `explain pvc` explains it, grouped by reason, worst first.
//!
//! The snapshot is synced and put in the controller's index once, and every claim is explained
//! over that one view, so a thousand claims cost a thousand plans, not a thousand indexes.

use crate::analyze::Explanation;
use crate::snapshot::Snapshot;
use k8s_openapi::jiff::Timestamp;
use pv_model::helpers;

/// Every reason code, worst first: what stops a claim for good before what is under way. The
/// order `explain pvc -A` groups by; the README lists each with its meaning and next step.
pub const REASONS: [&str; 13] = [
    "lost",
    "claimed-by-other",
    "volume-mismatch",
    "volume-not-found",
    "provisioning-failed",
    "provisioning-disabled",
    "no-class",
    "wait-external-provisioner",
    "wait-first-consumer",
    "default-class",
    "provision",
    "bind",
    "bound",
];

/// The explained claims, worst reason first.
#[derive(Debug, Default)]
pub struct ClaimList {
    /// One explanation per claim, sorted by reason (as [`REASONS`]), then namespace and name.
    pub claims: Vec<Explanation>,
}

/// A claim whose phase still says Bound but that the bound-claim sync finds lost (its volume is
/// gone, or the volume's claimRef names another claim): it is marked Lost at the next sync.
fn lost(view: &pv_core::view::Objects, claim: &pv_model::k8s::PersistentVolumeClaim) -> bool {
    use pv_core::View;
    let volume = view.volume(helpers::claim_volume_name(claim));
    use pv_core::plan::BoundClaimPlan as P;
    matches!(pv_core::plan::plan_bound_claim(claim, volume), P::LostReference | P::LostVolume | P::Misbound(_))
}

fn rank(reason: &str) -> usize {
    REASONS.iter().position(|r| *r == reason).unwrap_or(REASONS.len())
}

/// Explains every claim of `namespace` (all namespaces when `None`) that is not Bound, and every
/// Lost one, at `now`.
pub fn explain_claims(snapshot: &Snapshot, namespace: Option<&str>, now: Timestamp) -> ClaimList {
    let (synced, becoming_available) = snapshot.after_first_volume_syncs();
    let view = synced.view(crate::plugins());
    let mut claims: Vec<Explanation> = synced
        .claims
        .iter()
        .filter(|c| namespace.is_none_or(|ns| c.metadata.namespace.as_deref().unwrap_or("default") == ns))
        .filter(|c| helpers::claim_phase(c) != helpers::pvc_phase::BOUND || lost(&view, c))
        .map(|c| {
            // Held for every claim until printed: only what a list shows of each.
            let mut e = crate::explain_in(snapshot, &synced, &view, &becoming_available, c, now);
            e.keep_nearest();
            e
        })
        .collect();
    claims.sort_by(|a, b| rank(a.reason).cmp(&rank(b.reason)).then_with(|| a.claim.cmp(&b.claim)));
    ClaimList { claims }
}
