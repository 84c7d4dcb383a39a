//! The claim syncs' steps: the migration annotation first, then the unbound claim's
//! ([`plan::plan_unbound_claim`]) or the bound claim's ([`plan::plan_bound_claim`]) decision,
//! spelt out. A bind is the same four writes wherever it comes from: the volume's claimRef, the
//! volume's phase, the claim's `volumeName` and bind annotations, the claim's status.

use super::volume::Edit;
use crate::plan::{self, BoundClaimPlan, Provisioning, UnboundClaimPlan};
use crate::view::View;
use pv_model::annotations as ann;
use pv_model::helpers::{self, pvc_phase};
use pv_model::k8s::{PersistentVolume, PersistentVolumeClaim, PersistentVolumeClaimStatus};
use pv_model::phase::PvPhase;
use pv_model::{binding, csi, messages, reasons};
use std::sync::Arc;

/// The steps of `plan` that would do something, each in a few words, found by carrying the
/// writes out on copies of `claim` and the plan's volume (nothing is written): what `explain`
/// shows as the controller's next sync. Writes that change nothing and the closing settle are
/// left out.
pub fn dry_run(claim: &PersistentVolumeClaim, plan: &ClaimSteps) -> Vec<String> {
    let mut c = claim.clone();
    let mut v = plan.volume.as_deref().cloned();
    let vname = v.as_ref().map(|v| helpers::name(&v.metadata).to_string()).unwrap_or_default();
    let mut out = Vec::new();
    for step in &plan.steps {
        match step {
            ClaimStep::WriteClaim(edit) => match edit.apply(&c, v.as_ref()) {
                Ok(Some(changed)) => {
                    out.push(format!("claim: {}", with_capacity(edit, &changed, &vname)));
                    c = changed;
                }
                Ok(None) => {}
                Err(why) => {
                    out.push(format!("stop: {why}"));
                    break;
                }
            },
            ClaimStep::WriteVolume(edit) => {
                let Some(cur) = v.as_ref() else { continue };
                if let Some(changed) = edit.apply(cur) {
                    out.push(format!("volume {vname}: {}", edit.describe()));
                    v = Some(changed);
                }
            }
            ClaimStep::Reserve => out.push(format!("promise volume {vname} to the claim while the bind runs")),
            ClaimStep::Event { type_, reason, message, .. } => {
                out.push(format!("event on the claim: {type_} {reason}: {message}"))
            }
            ClaimStep::VolumeEvent { type_, reason, message } => {
                out.push(format!("event on volume {vname}: {type_} {reason}: {message}"))
            }
            ClaimStep::Provision(how) => out.extend(provision_words(&c, how)),
            ClaimStep::Enqueue => out.push("sync the claim again".into()),
            ClaimStep::Settle => {}
            ClaimStep::Fail(why) => {
                out.push(format!("stop: {why}"));
                break;
            }
        }
    }
    out
}

/// [`ClaimEdit::describe`], with the capacity a claim becoming Bound got (`changed`: the claim
/// as the edit left it).
fn with_capacity(edit: &ClaimEdit, changed: &PersistentVolumeClaim, vname: &str) -> String {
    let cap = changed.status.as_ref().and_then(|s| s.capacity.as_ref()).and_then(|c| c.get("storage"));
    match (edit, cap) {
        (ClaimEdit::Status { phase, .. }, Some(q)) if *phase == pvc_phase::BOUND => {
            format!("{}, capacity {}", edit.describe(vname), q.0)
        }
        _ => edit.describe(vname),
    }
}

fn provision_words(claim: &PersistentVolumeClaim, how: &Provisioning) -> Vec<String> {
    let failed = |why: String| vec![format!("event on the claim: Warning {}: {why}", reasons::PROVISIONING_FAILED)];
    match how {
        Provisioning::Disabled => vec!["nothing: dynamic provisioning is switched off".into()],
        Provisioning::Internal { refusal: Some(r), plugin, class, .. } => failed(r.message(plugin.name(), class)),
        Provisioning::Internal { plugin, .. } => {
            vec![format!("provision a volume with {} (an operation)", plugin.name())]
        }
        Provisioning::External { provisioner, .. } => {
            let mut out = Vec::new();
            if helpers::annotation(&claim.metadata, ann::STORAGE_PROVISIONER) != Some(provisioner) {
                out.push(format!("claim: annotation {} {provisioner}", ann::STORAGE_PROVISIONER));
            }
            let message = messages::external_provisioning(provisioner);
            out.push(format!("event on the claim: Normal {}: {message}", reasons::EXTERNAL_PROVISIONING));
            out
        }
        Provisioning::Failed(why) => failed(why.clone()),
    }
}

/// Upstream's message when a claim with no class finds no volume.
pub const NO_CLASS_MESSAGE: &str = messages::NO_CLASS;

/// Upstream's WaitForFirstConsumer event message.
pub const WAITING_FOR_FIRST_CONSUMER: &str = messages::WAITING_FOR_FIRST_CONSUMER;

/// What ends the wait for a first consumer, appended to upstream's message with detailed events
/// (`Config::detailed_events`).
pub const FIRST_CONSUMER_HINT: &str = messages::FIRST_CONSUMER_HINT;

/// The reason and message of the event of a claim waiting for its first consumer, given the
/// unscheduled pods that use it: upstream's, and with `detailed` (where no scheduler may run,
/// `up`) what ends the wait after upstream's WaitForFirstConsumer text.
pub fn waiting_for_consumer_event(pods: &[String], detailed: bool) -> (&'static str, String) {
    match pods {
        [] if detailed => {
            (reasons::WAIT_FOR_FIRST_CONSUMER, format!("{WAITING_FOR_FIRST_CONSUMER}; {FIRST_CONSUMER_HINT}"))
        }
        [] => (reasons::WAIT_FOR_FIRST_CONSUMER, WAITING_FOR_FIRST_CONSUMER.to_string()),
        _ => (reasons::WAIT_FOR_POD_SCHEDULED, messages::waiting_for_pods(pods)),
    }
}

/// A change of the claim, applied to the claim as it is when the step runs (and, where it reads
/// one, the volume as the steps before left it).
#[derive(Clone, Debug, PartialEq)]
pub enum ClaimEdit {
    /// `migrated-to` as the claim's provisioner says (upstream's `updateMigrationAnnotations`).
    Migration,
    /// The phase; with the volume, also its access modes and (when becoming bound) its capacity
    /// and attributes class; without, those cleared (upstream's `updateClaimStatus`).
    Status {
        /// The phase.
        phase: &'static str,
        /// Whether the status is taken from the volume being bound.
        from_volume: bool,
    },
    /// `volumeName` set to the volume (with `bound-by-controller` when the binder set it) and
    /// `bind-completed` (upstream's `bindClaimToVolume`).
    VolumeName,
    /// The cluster's default class, for a claim without one.
    DefaultClass(String),
}

impl ClaimEdit {
    /// The edited copy, `None` when the edit changes nothing; `Err` when the volume cannot give
    /// what the edit needs (a volume without a storage capacity).
    pub fn apply(
        &self,
        claim: &PersistentVolumeClaim,
        volume: Option<&PersistentVolume>,
    ) -> Result<Option<PersistentVolumeClaim>, String> {
        // Each branch decides on the claim as it is and copies it only to change it.
        Ok(match self {
            ClaimEdit::Migration => {
                let mut anns = claim.metadata.annotations.clone().unwrap_or_default();
                csi::anneal_migration_annotations(&mut anns, true).then(|| {
                    let mut clone = claim.clone();
                    clone.metadata.annotations = Some(anns);
                    clone
                })
            }
            ClaimEdit::Status { phase, from_volume } => {
                let mut clone = claim.clone();
                status(&mut clone, claim, phase, if *from_volume { volume } else { None })?.then_some(clone)
            }
            ClaimEdit::VolumeName => {
                let vname = volume.map(|v| helpers::name(&v.metadata)).unwrap_or_default();
                let name_differs = helpers::claim_volume_name(claim) != vname;
                let complete = helpers::has_annotation(&claim.metadata, ann::BIND_COMPLETED);
                if !name_differs && complete {
                    return Ok(None);
                }
                let mut clone = claim.clone();
                if name_differs {
                    clone.spec.get_or_insert_with(Default::default).volume_name = Some(vname.to_string());
                    if !helpers::has_annotation(&clone.metadata, ann::BOUND_BY_CONTROLLER) {
                        helpers::set_annotation(&mut clone.metadata, ann::BOUND_BY_CONTROLLER, "yes");
                    }
                }
                if !complete {
                    helpers::set_annotation(&mut clone.metadata, ann::BIND_COMPLETED, "yes");
                }
                Some(clone)
            }
            ClaimEdit::DefaultClass(class) => {
                let mut clone = claim.clone();
                clone.spec.get_or_insert_with(Default::default).storage_class_name = Some(class.clone());
                Some(clone)
            }
        })
    }

    /// Whether the edit is written through the status subresource.
    pub fn status(&self) -> bool {
        matches!(self, ClaimEdit::Status { .. })
    }

    /// The change in a few words, as `explain` and the simulator's steps say it (`vname`: the
    /// volume being bound): `status.phase Bound`, `spec.volumeName pv1, annotations …`.
    pub fn describe(&self, vname: &str) -> String {
        match self {
            ClaimEdit::Migration => "migrated-to annotation".into(),
            ClaimEdit::Status { phase, .. } => format!("status.phase {phase}"),
            ClaimEdit::VolumeName => {
                format!("spec.volumeName {vname}, annotations bound-by-controller and bind-completed")
            }
            ClaimEdit::DefaultClass(class) => format!("spec.storageClassName {class} (the default class)"),
        }
    }

    /// What the write is called in an error.
    pub fn what(&self) -> &'static str {
        match self {
            ClaimEdit::Migration => "saving claim migration annotations",
            ClaimEdit::Status { .. } => "saving claim status",
            ClaimEdit::VolumeName => "saving claim volumeName",
            ClaimEdit::DefaultClass(_) => "assigning default storage class",
        }
    }
}

/// Sets `clone`'s status as [`ClaimEdit::Status`] says; whether anything differs from `claim`.
fn status(
    clone: &mut PersistentVolumeClaim,
    claim: &PersistentVolumeClaim,
    phase: &str,
    volume: Option<&PersistentVolume>,
) -> Result<bool, String> {
    let old = claim.status.clone().unwrap_or_default();
    let status = clone.status.get_or_insert_with(PersistentVolumeClaimStatus::default);
    let mut dirty = false;
    let phase_changes = old.phase.as_deref().unwrap_or("") != phase;
    if phase_changes {
        status.phase = Some(phase.to_string());
        dirty = true;
    }
    let Some(v) = volume else {
        if old.access_modes.is_some() {
            status.access_modes = None;
            dirty = true;
        }
        if old.capacity.is_some() {
            status.capacity = None;
            dirty = true;
        }
        if old.current_volume_attributes_class_name.is_some() {
            status.current_volume_attributes_class_name = None;
            dirty = true;
        }
        return Ok(dirty);
    };
    let spec = v.spec.clone().unwrap_or_default();
    if old.access_modes != spec.access_modes {
        status.access_modes = spec.access_modes.clone();
        dirty = true;
    }
    // Capacity only when becoming bound: a difference may be intentional (resize).
    if phase_changes {
        let Some(vcap) = spec.capacity.as_ref().and_then(|c| c.get("storage")) else {
            return Err(format!("PersistentVolume {:?} is without a storage capacity", helpers::name(&v.metadata)));
        };
        if let Some(pre) = helpers::annotation(&v.metadata, ann::PRE_RESIZE_CAPACITY) {
            status.capacity = Some([("storage".to_string(), pv_model::k8s::K8sQuantity(pre.to_string()))].into());
            dirty = true;
        } else {
            let ccap = old.capacity.as_ref().and_then(|c| c.get("storage"));
            let same =
                ccap.is_some_and(|c| pv_model::Quantity::parse(&c.0).ok() == pv_model::Quantity::parse(&vcap.0).ok());
            if !same {
                status.capacity = spec.capacity.clone();
                dirty = true;
            }
        }
    }
    // The volume's attributes class, set only when the claim becomes bound (as upstream):
    // afterwards the external resizer owns the field.
    if old.phase.as_deref() == Some(pvc_phase::PENDING)
        && phase == pvc_phase::BOUND
        && old.current_volume_attributes_class_name != spec.volume_attributes_class_name
    {
        status.current_volume_attributes_class_name = spec.volume_attributes_class_name.clone();
        dirty = true;
    }
    Ok(dirty)
}

/// What is added to an event's message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Detail {
    /// Nothing.
    None,
    /// Why each volume was rejected, where events are detailed (`Config::detailed_events`).
    RejectionBreakdown,
}

/// One step of a claim's sync. "The claim" and "the volume" are the claim being synced and the
/// volume [`ClaimSteps::volume`] names, each as the steps before left it.
#[derive(Clone, Debug)]
pub enum ClaimStep {
    /// Write the claim as the edit changes it (nothing when it changes nothing).
    WriteClaim(ClaimEdit),
    /// Write the volume as the edit changes it (nothing when it changes nothing).
    WriteVolume(Edit),
    /// Promise the volume to the claim for the rest of the sync, so that no other worker binds it
    /// meanwhile; the sync stops (and is retried) when another claim's bind holds it.
    Reserve,
    /// Record an event on the claim.
    Event {
        /// `Normal` or `Warning`.
        type_: &'static str,
        /// The reason.
        reason: &'static str,
        /// The message.
        message: String,
        /// What is added to it.
        detail: Detail,
    },
    /// Record an event on the volume.
    VolumeEvent {
        /// `Normal` or `Warning`.
        type_: &'static str,
        /// The reason.
        reason: &'static str,
        /// The message.
        message: String,
    },
    /// Provision a volume for the claim as decided (an operation, or the external provisioner's
    /// annotation).
    Provision(Provisioning),
    /// Queue the claim's sync again now.
    Enqueue,
    /// The claim and its volume, as the decision read them, are settled: nothing to do until
    /// either changes (refused by the caches when a write since made a new version).
    Settle,
    /// Stop with an error: the state cannot be right (someone removed `bind-completed` from a
    /// claim the binder bound).
    Fail(String),
}

impl ClaimStep {
    /// The step in a few words, naming the objects it acts on (`claim`: the claim synced,
    /// `namespace/name`; `volume`: the volume its steps name): `reserve volume pv1`,
    /// `write claim ns/c1: status.phase Bound`, `event Normal FailedBinding on claim ns/c1`
    /// (an event's message is left to the event), `provision a volume with … (an operation)`.
    pub fn describe(&self, claim: &str, volume: &str) -> String {
        match self {
            ClaimStep::WriteClaim(edit) => format!("write claim {claim}: {}", edit.describe(volume)),
            ClaimStep::WriteVolume(edit) => format!("write volume {volume}: {}", edit.describe()),
            ClaimStep::Reserve => format!("reserve volume {volume}"),
            ClaimStep::Event { type_, reason, .. } => format!("event {type_} {reason} on claim {claim}"),
            ClaimStep::VolumeEvent { type_, reason, .. } => format!("event {type_} {reason} on volume {volume}"),
            ClaimStep::Provision(how) => provision_step(claim, how),
            ClaimStep::Enqueue => format!("sync claim {claim} again"),
            ClaimStep::Settle => "settled".into(),
            ClaimStep::Fail(why) => format!("stop: {why}"),
        }
    }
}

/// What a sync's [`ClaimStep::Provision`] does, in a few words: an operation started, a failure
/// recorded, or nothing.
fn provision_step(claim: &str, how: &Provisioning) -> String {
    match how {
        Provisioning::Disabled => "nothing: dynamic provisioning is switched off".into(),
        Provisioning::Internal { plugin, class, refusal, .. } => {
            let start = format!("provision a volume with {} (an operation)", plugin.name());
            match refusal {
                None => start,
                Some(r) => format!("{start}, which fails: {}", r.message(plugin.name(), class)),
            }
        }
        Provisioning::External { provisioner, .. } => {
            format!("hand the claim to external provisioner {provisioner} (an operation)")
        }
        Provisioning::Failed(_) => {
            format!("event {} {} on claim {claim}", reasons::WARNING, reasons::PROVISIONING_FAILED)
        }
    }
}

/// A claim sync's steps and the volume they bind, if any.
#[derive(Clone, Debug)]
pub struct ClaimSteps {
    /// The volume the writes and volume events act on.
    pub volume: Option<Arc<PersistentVolume>>,
    /// The steps, in order.
    pub steps: Vec<ClaimStep>,
}

/// The claim sync's steps for `claim` as it is now, over the caches as `view` shows them;
/// `detailed`: events say more than upstream's where no one else explains (`up`).
pub fn claim_steps(view: &impl View, claim: &Arc<PersistentVolumeClaim>, detailed: bool) -> ClaimSteps {
    let mut steps = Vec::with_capacity(5);
    // The decisions read the claim as the migration write will leave it.
    let migrated = ClaimEdit::Migration.apply(claim, None).ok().flatten().map(Arc::new);
    if migrated.is_some() {
        steps.push(ClaimStep::WriteClaim(ClaimEdit::Migration));
    }
    let claim = migrated.as_ref().unwrap_or(claim);
    let volume = if binding::claim_is_bound(claim) {
        bound_claim(view, claim, &mut steps)
    } else {
        unbound_claim(view, claim, detailed, &mut steps)
    };
    ClaimSteps { volume, steps }
}

fn pending() -> ClaimStep {
    ClaimStep::WriteClaim(ClaimEdit::Status { phase: pvc_phase::PENDING, from_volume: false })
}

fn warning(reason: &'static str, message: String) -> ClaimStep {
    ClaimStep::Event { type_: reasons::WARNING, reason, message, detail: Detail::None }
}

/// The bind's writes, PV first, and the events of a volume bound again to a re-created claim of
/// the same name.
fn bind(volume: &PersistentVolume, claim: &Arc<PersistentVolumeClaim>, steps: &mut Vec<ClaimStep>) {
    let earlier = binding::rebinds_same_name(volume, claim).then(|| helpers::claim_ref(volume).cloned()).flatten();
    steps.push(ClaimStep::WriteVolume(Edit::ClaimRef(claim.clone())));
    steps.push(ClaimStep::WriteVolume(Edit::Phase(PvPhase::Bound, String::new())));
    steps.push(ClaimStep::WriteClaim(ClaimEdit::VolumeName));
    steps.push(ClaimStep::WriteClaim(ClaimEdit::Status { phase: pvc_phase::BOUND, from_volume: true }));
    if let Some(earlier) = earlier {
        // Asked for by the volume's pv-controller.io/rebind annotation: said on both.
        let (vname, key) = (helpers::name(&volume.metadata), helpers::claim_key(claim));
        let was = earlier.uid.as_deref().unwrap_or("");
        let (normal, reason) = (reasons::NORMAL, reasons::REBOUND);
        let message = messages::rebound_claim(vname, was);
        steps.push(ClaimStep::Event { type_: normal, reason, message, detail: Detail::None });
        let message = messages::rebound_volume(&key, helpers::uid(&claim.metadata), was);
        steps.push(ClaimStep::VolumeEvent { type_: normal, reason, message });
    }
}

fn unbound_claim(
    view: &impl View,
    claim: &Arc<PersistentVolumeClaim>,
    detailed: bool,
    steps: &mut Vec<ClaimStep>,
) -> Option<Arc<PersistentVolume>> {
    match plan::plan_unbound_claim(view, claim) {
        UnboundClaimPlan::Bind { volume, reserve } => {
            if reserve {
                steps.push(ClaimStep::Reserve);
            }
            bind(&volume, claim, steps);
            return Some(volume);
        }
        UnboundClaimPlan::AssignDefaultClass(class) => {
            // The write syncs the claim again, which binds or provisions with the class.
            steps.push(ClaimStep::WriteClaim(ClaimEdit::DefaultClass(class)));
            steps.push(ClaimStep::Enqueue);
        }
        // Provisioning runs as an operation; it updates the claim itself.
        UnboundClaimPlan::Provision(provisioning) => steps.push(ClaimStep::Provision(provisioning)),
        UnboundClaimPlan::WaitForFirstConsumer { pods } => {
            let (reason, message) = waiting_for_consumer_event(&pods, detailed);
            steps.push(ClaimStep::Event { type_: reasons::NORMAL, reason, message, detail: Detail::None });
            steps.push(pending());
        }
        UnboundClaimPlan::NoClass => {
            // Upstream's text; with detailed events, why each volume was rejected too.
            let detail = if detailed { Detail::RejectionBreakdown } else { Detail::None };
            let message = NO_CLASS_MESSAGE.to_string();
            steps.push(ClaimStep::Event { type_: reasons::NORMAL, reason: reasons::FAILED_BINDING, message, detail });
            steps.push(pending());
        }
        // The requested volume does not exist (yet): stay Pending.
        UnboundClaimPlan::VolumeNotFound(_) => steps.push(pending()),
        UnboundClaimPlan::VolumeMismatch { volume, verdict } => {
            let message = messages::cannot_bind_to_requested(helpers::name(&volume.metadata), &verdict.detail);
            steps.push(warning(reasons::VOLUME_MISMATCH, message));
            steps.push(pending());
        }
        UnboundClaimPlan::ClaimedByOther { volume, other, invalid } => {
            let requested = helpers::name(&volume.metadata);
            // Upstream records this whether or not the state is invalid.
            steps.push(warning(reasons::FAILED_BINDING, messages::already_bound_elsewhere(requested)));
            if invalid {
                // Only possible if someone removed bind-completed from a claim the binder bound.
                let key = helpers::claim_key(claim);
                steps.push(ClaimStep::Fail(format!(
                    "invalid binding of claim {key:?} to volume {requested:?}: volume already claimed by {other:?}"
                )));
            } else {
                steps.push(pending());
            }
        }
    }
    None
}

fn bound_claim(
    view: &impl View,
    claim: &Arc<PersistentVolumeClaim>,
    steps: &mut Vec<ClaimStep>,
) -> Option<Arc<PersistentVolume>> {
    let volume = view.volume(helpers::claim_volume_name(claim));
    match plan::plan_bound_claim(claim, volume) {
        BoundClaimPlan::LostReference => lost(claim, reasons::CLAIM_LOST, messages::LOST_REFERENCE, steps),
        BoundClaimPlan::LostVolume => lost(claim, reasons::CLAIM_LOST, messages::LOST_VOLUME, steps),
        BoundClaimPlan::Misbound(_) => lost(claim, reasons::CLAIM_MISBOUND, messages::MISBOUND, steps),
        BoundClaimPlan::Rebind(volume) => {
            bind(&volume, claim, steps);
            return Some(volume);
        }
        // The bind writes only what is missing (usually nothing: the pair settles).
        BoundClaimPlan::KeepBound(volume) => {
            bind(&volume, claim, steps);
            // Settled unless a write made a new version of either (which syncs again).
            steps.push(ClaimStep::Settle);
            return Some(volume);
        }
    }
    None
}

/// Phase Lost (terminal), then its Warning; both once.
fn lost(claim: &PersistentVolumeClaim, reason: &'static str, message: &str, steps: &mut Vec<ClaimStep>) {
    if helpers::claim_phase(claim) != pvc_phase::LOST {
        steps.push(ClaimStep::WriteClaim(ClaimEdit::Status { phase: pvc_phase::LOST, from_volume: false }));
        steps.push(warning(reason, message.to_string()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugin::PluginRegistry;
    use crate::view::Objects;
    use serde_json::json;

    fn pv(claim_ref: serde_json::Value, phase: &str) -> PersistentVolume {
        serde_json::from_value(json!({"metadata": {"name": "pv1", "resourceVersion": "1"},
            "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                     "persistentVolumeReclaimPolicy": "Retain", "claimRef": claim_ref},
            "status": {"phase": phase}}))
        .unwrap()
    }

    fn pvc(spec: serde_json::Value, annotations: serde_json::Value, phase: &str) -> PersistentVolumeClaim {
        let mut c = json!({"metadata": {"name": "c1", "namespace": "ns", "uid": "u1", "annotations": annotations},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}},
                     "storageClassName": ""},
            "status": {"phase": phase}});
        for (k, v) in spec.as_object().unwrap() {
            c["spec"][k] = v.clone();
        }
        serde_json::from_value(c).unwrap()
    }

    fn names(steps: &[ClaimStep]) -> Vec<String> {
        steps
            .iter()
            .map(|s| match s {
                ClaimStep::WriteClaim(e) => format!("claim {e:?}"),
                ClaimStep::WriteVolume(Edit::ClaimRef(_)) => "volume ClaimRef".into(),
                ClaimStep::WriteVolume(e) => format!("volume {e:?}"),
                ClaimStep::Event { reason, .. } => format!("event {reason}"),
                ClaimStep::VolumeEvent { reason, .. } => format!("volume event {reason}"),
                other => format!("{other:?}"),
            })
            .collect()
    }

    /// Carries the steps' writes out on the objects alone, as the executor does on what each
    /// save returns.
    fn run(claim: &PersistentVolumeClaim, plan: &ClaimSteps) -> (PersistentVolumeClaim, Option<PersistentVolume>) {
        let (mut c, mut v) = (claim.clone(), plan.volume.as_deref().cloned());
        for s in &plan.steps {
            match s {
                ClaimStep::WriteClaim(e) => c = e.apply(&c, v.as_ref()).unwrap().unwrap_or(c),
                ClaimStep::WriteVolume(e) => {
                    let cur = v.take().unwrap();
                    v = Some(e.apply(&cur).unwrap_or(cur));
                }
                _ => {}
            }
        }
        (c, v)
    }

    #[test]
    fn a_claim_binds_to_the_best_match_in_four_writes_volume_first_and_a_second_sync_writes_nothing() {
        let free = pv(json!(null), "Available");
        let view = Objects::new(PluginRegistry::new()).volume(free.clone());
        let claim = pvc(json!({}), json!({}), "Pending");
        let plan = claim_steps(&view, &Arc::new(claim.clone()), false);
        assert_eq!(
            names(&plan.steps),
            [
                "Reserve",
                "volume ClaimRef",
                "volume Phase(Bound, \"\")",
                "claim VolumeName",
                "claim Status { phase: \"Bound\", from_volume: true }"
            ]
        );
        let (bound_claim, bound_volume) = run(&claim, &plan);
        assert_eq!(helpers::claim_volume_name(&bound_claim), "pv1");
        assert_eq!(helpers::claim_phase(&bound_claim), pvc_phase::BOUND);
        assert!(helpers::has_annotation(&bound_claim.metadata, ann::BIND_COMPLETED));
        let bound_volume = bound_volume.unwrap();
        assert_eq!(helpers::claim_ref(&bound_volume).unwrap().uid.as_deref(), Some("u1"));
        assert!(helpers::has_annotation(&bound_volume.metadata, ann::BOUND_BY_CONTROLLER));
        assert_eq!(bound_claim.status.as_ref().unwrap().capacity, bound_volume.spec.as_ref().unwrap().capacity);
        // The bound pair's next sync: the same four edits, none changing anything, then settle.
        let view = Objects::new(PluginRegistry::new()).volume(bound_volume.clone());
        let again = claim_steps(&view, &Arc::new(bound_claim.clone()), false);
        assert!(matches!(again.steps.last(), Some(ClaimStep::Settle)));
        let (c, v) = run(&bound_claim, &again);
        assert_eq!((c, v.unwrap()), (bound_claim, bound_volume));
    }

    #[test]
    fn the_dry_run_lists_what_the_next_sync_would_change_and_nothing_for_a_settled_pair() {
        let view = Objects::new(PluginRegistry::new()).volume(pv(json!(null), "Available"));
        let claim = pvc(json!({}), json!({}), "Pending");
        let plan = claim_steps(&view, &Arc::new(claim.clone()), false);
        assert_eq!(
            dry_run(&claim, &plan),
            [
                "promise volume pv1 to the claim while the bind runs",
                "volume pv1: spec.claimRef to ns/c1",
                "volume pv1: status.phase Bound",
                "claim: spec.volumeName pv1, annotations bound-by-controller and bind-completed",
                "claim: status.phase Bound, capacity 1Gi",
            ]
        );
        let (c, v) = run(&claim, &plan);
        let view = Objects::new(PluginRegistry::new()).volume(v.unwrap());
        assert!(
            dry_run(&c, &claim_steps(&view, &Arc::new(c.clone()), false)).is_empty(),
            "a bound pair's sync changes nothing"
        );
    }

    #[test]
    fn a_bound_claim_whose_volume_is_gone_is_lost_once_status_before_warning() {
        let claim = pvc(json!({"volumeName": "pv9"}), json!({"pv.kubernetes.io/bind-completed": "yes"}), "Bound");
        let view = Objects::new(PluginRegistry::new());
        let plan = claim_steps(&view, &Arc::new(claim.clone()), false);
        assert_eq!(names(&plan.steps), ["claim Status { phase: \"Lost\", from_volume: false }", "event ClaimLost"]);
        let (lost, _) = run(&claim, &plan);
        assert_eq!(helpers::claim_phase(&lost), pvc_phase::LOST);
        assert!(claim_steps(&view, &Arc::new(lost.clone()), false).steps.is_empty(), "Lost is written once");
    }

    #[test]
    fn a_claim_naming_another_claims_volume_is_told_and_stays_pending_or_fails_when_it_was_ours() {
        let taken = pv(json!({"namespace": "ns", "name": "other", "uid": "u9"}), "Bound");
        let view = Objects::new(PluginRegistry::new()).volume(taken);
        let claim = pvc(json!({"volumeName": "pv1"}), json!({}), "Pending");
        let plan = claim_steps(&view, &Arc::new(claim.clone()), false);
        assert_eq!(
            names(&plan.steps),
            ["event FailedBinding", "claim Status { phase: \"Pending\", from_volume: false }"]
        );
        assert!(plan.volume.is_none(), "nothing is written to a volume the claim does not get");
        let ours = pvc(json!({"volumeName": "pv1"}), json!({"pv.kubernetes.io/bound-by-controller": "yes"}), "Pending");
        let plan = claim_steps(&view, &Arc::new(ours.clone()), false);
        assert!(matches!(plan.steps[..], [ClaimStep::Event { .. }, ClaimStep::Fail(_)]));
    }

    #[test]
    fn a_claim_without_class_and_volume_gets_upstreams_text_and_the_breakdown_only_when_detailed() {
        let view = Objects::new(PluginRegistry::new());
        let claim = pvc(json!({}), json!({}), "Pending");
        for (detailed, want) in [(false, Detail::None), (true, Detail::RejectionBreakdown)] {
            let plan = claim_steps(&view, &Arc::new(claim.clone()), detailed);
            let ClaimStep::Event { message, detail, .. } = &plan.steps[0] else { panic!("{:?}", plan.steps) };
            assert_eq!((message.as_str(), *detail), (NO_CLASS_MESSAGE, want));
        }
    }

    #[test]
    fn a_volume_without_capacity_cannot_give_a_claim_its_bound_status() {
        let mut v = pv(json!(null), "Available");
        v.spec.as_mut().unwrap().capacity = None;
        let claim = pvc(json!({}), json!({}), "Pending");
        let edit = ClaimEdit::Status { phase: pvc_phase::BOUND, from_volume: true };
        assert!(edit.apply(&claim, Some(&v)).unwrap_err().contains("without a storage capacity"));
    }

    #[test]
    fn a_claim_waiting_for_its_first_consumer_gets_upstreams_text_and_the_hint_only_when_detailed() {
        assert_eq!(
            waiting_for_consumer_event(&[], false),
            ("WaitForFirstConsumer", "waiting for first consumer to be created before binding".to_string())
        );
        let (reason, detailed) = waiting_for_consumer_event(&[], true);
        assert_eq!(reason, "WaitForFirstConsumer");
        assert_eq!(detailed, format!("waiting for first consumer to be created before binding; {FIRST_CONSUMER_HINT}"));
    }

    #[test]
    fn unscheduled_pods_are_named_as_upstream_names_them_either_way() {
        for detailed in [false, true] {
            assert_eq!(
                waiting_for_consumer_event(&["web-0".into()], detailed),
                ("WaitForPodScheduled", "waiting for pod web-0 to be scheduled".to_string())
            );
            assert_eq!(
                waiting_for_consumer_event(&["a".into(), "b".into()], detailed),
                ("WaitForPodScheduled", "waiting for pods a,b to be scheduled".to_string())
            );
        }
    }
}
