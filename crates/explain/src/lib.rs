//! `pv-controller explain`: why a PersistentVolumeClaim is Pending, Bound or Lost.
//!
//! People ask "why is my claim Pending?" and the answer is spread over every volume, the claim's
//! class, its pods and the controller's rules. This crate answers it by asking the controller
//! itself rather than re-implementing it: the state is loaded into a [`Snapshot`], seen through
//! a read-only `pv_core::View` (the controller's own volume index, no API, nothing written), and
//! [`explain`] reads the controller's plan for the claim (`pv_core::plan::plan_unbound_claim`, the
//! function whose value the claim sync itself executes) plus each volume's verdict from
//! `pv_model::matching`. There is no second copy of the matching rules here, so the explanation
//! cannot drift from what the controller does.
//!
//! Past the binder, for a claim handed to an external provisioner, [`provisioner`] looks at
//! what a person would (its CSIDriver, its leader Lease, its events on the claim, the selected
//! node's CSINode, published capacity) and gives one verdict.
//!
//! Modules: [`snapshot`] (state in, view out), [`live`] (reading a cluster), [`analyze`] (the
//! explanation), [`provisioner`] (past the binder), [`render`] (JSON and text).

pub mod analyze;
pub mod cluster;
pub mod live;
pub mod pod;
pub mod provisioner;
pub mod render;
pub mod snapshot;

pub use analyze::{explain, Candidate, Explanation, Next, Request};
pub use cluster::{explain_claims, ClaimList};
pub use pod::{explain_pod, PodExplanation, PodNext, PodVerdict};
pub use render::{to_json, to_text, to_text_width, to_text_with};
pub use snapshot::{plugins, Snapshot, SnapshotError};

/// Explains `namespace/name` over a snapshot: the controller's plan over its view of it. `None`
/// when the claim does not exist.
///
/// Volumes the controller has not synced yet (no phase) are taken as the volume sync leaves
/// them, Available, and the explanation says so: the controller syncs volumes before it matches
/// claims against them, so that is the state its decision for the claim sees.
pub fn explain_snapshot(snapshot: &Snapshot, namespace: &str, name: &str) -> Option<Explanation> {
    explain_snapshot_at(snapshot, namespace, name, k8s_openapi::jiff::Timestamp::now())
}

/// [`explain_snapshot`] at time `now` (the ages of Leases and events are measured from it).
pub fn explain_snapshot_at(
    snapshot: &Snapshot,
    namespace: &str,
    name: &str,
    now: k8s_openapi::jiff::Timestamp,
) -> Option<Explanation> {
    let (synced, becoming_available) = snapshot.after_first_volume_syncs();
    let view = synced.view(plugins());
    let claim = synced.claim(namespace, name)?;
    Some(explain_in(snapshot, &synced, &view, &becoming_available, claim, now))
}

/// One claim of `synced` (a snapshot after the first volume syncs, seen through `view`),
/// explained with everything past the binder that `snapshot` holds.
pub(crate) fn explain_in(
    snapshot: &Snapshot,
    synced: &Snapshot,
    view: &pv_core::view::Objects,
    becoming_available: &[String],
    claim: &pv_model::k8s::PersistentVolumeClaim,
    now: k8s_openapi::jiff::Timestamp,
) -> Explanation {
    let mut e = explain(view, &synced.volumes, claim);
    analyze::note_becoming_available(&mut e, becoming_available);
    add_past_binder(snapshot, claim, &mut e, now);
    e
}

/// What the objects past the binder add to a claim's explanation: for a claim handed to an
/// external provisioner, what that provisioner does (see [`provisioner`]); for a claim that
/// waits for its first consumer, what the scheduler said about the pods that use it, whether a
/// scheduler runs at all (the hint differs), and a provisioning attempt that failed for the node
/// the scheduler had picked (csi-provisioner then removes `selected-node`, and the failure would
/// otherwise vanish from the answer).
pub(crate) fn add_past_binder(
    snapshot: &Snapshot,
    claim: &pv_model::k8s::PersistentVolumeClaim,
    e: &mut Explanation,
    now: k8s_openapi::jiff::Timestamp,
) {
    if e.provisioner.is_some() {
        return;
    }
    if let Some((p, class)) = e.external.clone() {
        let report = provisioner::check(snapshot, claim, &p, &class, now);
        analyze::note_provisioner(e, report);
        return;
    }
    if e.next != Next::WaitFirstConsumer {
        if e.reason == "bound" {
            analyze::note_consumers(snapshot, claim, e, now, false);
        }
        return;
    }
    analyze::note_consumers(snapshot, claim, e, now, true);
    let Some(p) = provisioner::of_class(snapshot, claim) else { return };
    let report = provisioner::check(snapshot, claim, &p, pv_model::helpers::claim_class(claim), now);
    if report.verdict == provisioner::Verdict::Failing {
        analyze::note_failed_attempt(e, report);
    }
}
