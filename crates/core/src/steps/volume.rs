//! The volume sync's steps. A [`VolumeStep::LookUpClaim`] ends its list: the rest depends on
//! what the lookup finds, and [`volume_steps`] is asked again with the answer (the writes before
//! it are then done, so the second list starts where the first stopped).

use crate::plan::{self, ClaimLookup, VolumePlan};
use pv_model::annotations as ann;
use pv_model::binding::{self, Relation};
use pv_model::helpers;
use pv_model::k8s::{PersistentVolume, PersistentVolumeClaim, PersistentVolumeStatus};
use pv_model::messages;
use pv_model::phase::{PvPhase, ReclaimPolicy};
use pv_model::{csi, reasons, ObjectKey};
use std::sync::Arc;

/// A change of the volume, applied to the volume as it is when the step runs. A step whose edit
/// changes nothing writes nothing.
#[derive(Clone, Debug, PartialEq)]
pub enum Edit {
    /// `migrated-to` annotations and the deletion-protection finalizer as the reclaim policy and
    /// provisioner say (upstream's `updateVolumeMigrationAnnotationsAndFinalizers`).
    MigrationAndFinalizers,
    /// The phase (status subresource), with this message (empty: none).
    Phase(PvPhase, String),
    /// Point the claimRef at this claim (name, namespace, uid), marking the volume
    /// `bound-by-controller` unless a user pre-bound it to the claim (upstream's
    /// `bindVolumeToClaim`).
    ClaimRef(Arc<PersistentVolumeClaim>),
    /// Roll the binding back: drop the claimRef and `bound-by-controller` of a volume the binder
    /// bound, or only the claimRef's uid of one a user pre-bound (upstream's `unbindVolume`).
    RollBackBinding,
}

impl Edit {
    /// The edited copy, or `None` when the edit changes nothing.
    pub fn apply(&self, volume: &PersistentVolume) -> Option<PersistentVolume> {
        // Each branch decides on the volume as it is and copies it only to change it.
        match self {
            Edit::MigrationAndFinalizers => {
                let mut anns = volume.metadata.annotations.clone().unwrap_or_default();
                let ann_changed = csi::anneal_migration_annotations(&mut anns, false);
                // Only a provisioned volume's finalizers are kept by its reclaim policy.
                let provisioned = helpers::has_annotation(&volume.metadata, ann::PROVISIONED_BY);
                if !ann_changed && !provisioned {
                    return None;
                }
                let mut clone = volume.clone();
                if ann_changed {
                    clone.metadata.annotations = if anns.is_empty() { None } else { Some(anns) };
                }
                let fin_changed = csi::modify_deletion_finalizers(&mut clone);
                (ann_changed || fin_changed).then_some(clone)
            }
            Edit::Phase(phase, message) => {
                if PvPhase::of(volume) == Some(*phase) {
                    return None;
                }
                let mut clone = volume.clone();
                let status = clone.status.get_or_insert_with(PersistentVolumeStatus::default);
                status.phase = Some(phase.as_str().to_string());
                status.message = if message.is_empty() { None } else { Some(message.clone()) };
                Some(clone)
            }
            Edit::ClaimRef(claim) => {
                let should_mark = !matches!(binding::classify(volume, claim), Relation::ThisClaim { .. });
                let same = helpers::claim_ref(volume).is_some_and(|r| {
                    r.name.as_deref() == claim.metadata.name.as_deref()
                        && r.namespace.as_deref() == claim.metadata.namespace.as_deref()
                        && r.uid.as_deref() == claim.metadata.uid.as_deref()
                });
                let mark = should_mark && !helpers::has_annotation(&volume.metadata, ann::BOUND_BY_CONTROLLER);
                if same && !mark {
                    return None;
                }
                let mut clone = volume.clone();
                if !same {
                    clone.spec.get_or_insert_with(Default::default).claim_ref = Some(helpers::claim_reference(claim));
                }
                if mark {
                    helpers::set_annotation(&mut clone.metadata, ann::BOUND_BY_CONTROLLER, "yes");
                }
                Some(clone)
            }
            Edit::RollBackBinding => {
                let mut clone = volume.clone();
                if helpers::has_annotation(&volume.metadata, ann::BOUND_BY_CONTROLLER) {
                    if let Some(s) = clone.spec.as_mut() {
                        s.claim_ref = None;
                    }
                    helpers::remove_annotation(&mut clone.metadata, ann::BOUND_BY_CONTROLLER);
                } else if let Some(r) = clone.spec.as_mut().and_then(|s| s.claim_ref.as_mut()) {
                    r.uid = None;
                }
                Some(clone)
            }
        }
    }

    /// Whether the edit is written through the status subresource.
    pub fn status(&self) -> bool {
        matches!(self, Edit::Phase(..))
    }

    /// The change in a few words, as `explain` and the simulator's steps say it:
    /// `spec.claimRef to ns/c1`, `status.phase Bound`.
    pub fn describe(&self) -> String {
        match self {
            Edit::MigrationAndFinalizers => "migrated-to annotation and deletion finalizer".into(),
            Edit::Phase(phase, _) => format!("status.phase {}", phase.as_str()),
            Edit::ClaimRef(claim) => format!("spec.claimRef to {}", helpers::claim_key(claim)),
            Edit::RollBackBinding => "claimRef rolled back".into(),
        }
    }

    /// What the write is called in an error.
    pub fn what(&self) -> &'static str {
        match self {
            Edit::MigrationAndFinalizers => "saving volume migration annotations",
            Edit::Phase(..) => "saving volume phase",
            Edit::ClaimRef(_) => "saving volume claimRef",
            Edit::RollBackBinding => "rolling back volume binding",
        }
    }
}

/// Which object an event of the volume sync is about.
#[derive(Clone, Debug, PartialEq)]
pub enum On {
    /// The volume being synced.
    Volume,
    /// Its claim.
    Claim(Arc<PersistentVolumeClaim>),
}

/// What a released volume's reclaim policy makes the sync do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reclaim {
    /// Migrated to CSI (`migrated-to` set): the CSI driver's provisioner reclaims it.
    LeftToCsiDriver,
    /// `Retain`: nothing.
    Retain,
    /// `Recycle`: schedule the recycle operation.
    Recycle,
    /// `Delete`: schedule the delete operation.
    Delete,
}

impl Reclaim {
    /// Whether carrying the policy out starts an operation (Recycle, Delete).
    pub fn starts_operation(self) -> bool {
        matches!(self, Reclaim::Recycle | Reclaim::Delete)
    }
}

impl std::fmt::Display for Reclaim {
    /// `reclaim: Delete`, `reclaim: left to the CSI driver`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Reclaim::LeftToCsiDriver => "reclaim: left to the CSI driver",
            Reclaim::Retain => "reclaim: Retain",
            Reclaim::Recycle => "reclaim: Recycle",
            Reclaim::Delete => "reclaim: Delete",
        })
    }
}

/// One step of the volume sync.
#[derive(Clone, Debug, PartialEq)]
pub enum VolumeStep {
    /// Write the volume as the edit changes it (nothing when it changes nothing); the steps after
    /// act on what was saved. `event`: recorded on the volume, with the edit's message, only when
    /// the write happened.
    Write {
        /// The change.
        edit: Edit,
        /// `(type, reason)` of the event the change is recorded with, if any.
        event: Option<(&'static str, &'static str)>,
    },
    /// Read the claim the claimRef names (cache, then the API server as the lookup says); the
    /// rest is planned again with what it finds.
    LookUpClaim(ClaimLookup),
    /// Record an event.
    Event {
        /// On which object.
        on: On,
        /// `Normal` or `Warning`.
        type_: &'static str,
        /// The reason.
        reason: &'static str,
        /// The message.
        message: String,
    },
    /// Queue the claim's sync now rather than at resync.
    EnqueueClaim(ObjectKey),
    /// The volume, as the decision read it, and its claim are settled: nothing to do until
    /// either changes (refused by the caches when a write since made a new version).
    Settle(Arc<PersistentVolumeClaim>),
    /// Log that the volume is released and its reclaim policy will be executed.
    Announce,
    /// Carry out the reclaim policy of a released volume.
    Reclaim(Reclaim),
}

impl VolumeStep {
    /// The step in a few words, naming the objects it acts on (`volume`: the volume synced):
    /// `write volume pv1: status.phase Bound`, `event Warning VolumeMismatch on claim ns/c1`
    /// (an event's message is left to the event), `reclaim: Delete`.
    pub fn describe(&self, volume: &str) -> String {
        match self {
            VolumeStep::Write { edit, event: None } => format!("write volume {volume}: {}", edit.describe()),
            VolumeStep::Write { edit, event: Some((type_, reason)) } => {
                format!("write volume {volume}: {}, event {type_} {reason} on volume {volume}", edit.describe())
            }
            VolumeStep::LookUpClaim(ClaimLookup::None) => "look up no claim".into(),
            VolumeStep::LookUpClaim(ClaimLookup::Claim { namespace, name, .. }) => {
                format!("look up claim {}", ObjectKey::new(namespace, name))
            }
            VolumeStep::Event { on: On::Volume, type_, reason, .. } => {
                format!("event {type_} {reason} on volume {volume}")
            }
            VolumeStep::Event { on: On::Claim(claim), type_, reason, .. } => {
                format!("event {type_} {reason} on claim {}", helpers::claim_key(claim))
            }
            VolumeStep::EnqueueClaim(key) => format!("sync claim {key} now"),
            VolumeStep::Settle(claim) => format!("settled with claim {}", helpers::claim_key(claim)),
            VolumeStep::Announce => "announce the release".into(),
            VolumeStep::Reclaim(how) => how.to_string(),
        }
    }
}

/// What the volume sync has read of the volume's claim so far.
#[derive(Clone, Copy, Debug)]
pub enum Read<'a> {
    /// Nothing yet.
    Nothing,
    /// The lookup of [`plan::claim_lookup`] is done: the claim it found, if any.
    Claim(Option<&'a Arc<PersistentVolumeClaim>>),
}

/// The volume sync's steps, in order, for `volume` as it is now and what has been read.
pub fn volume_steps(volume: &PersistentVolume, read: Read<'_>) -> Vec<VolumeStep> {
    let mut steps = Vec::new();
    let claim = match read {
        Read::Nothing => {
            if Edit::MigrationAndFinalizers.apply(volume).is_some() {
                steps.push(write(Edit::MigrationAndFinalizers));
            }
            match plan::claim_lookup(volume) {
                ClaimLookup::None => None,
                lookup => {
                    steps.push(VolumeStep::LookUpClaim(lookup));
                    return steps;
                }
            }
        }
        Read::Claim(claim) => claim,
    };
    let available = || write(Edit::Phase(PvPhase::Available, String::new()));
    let release = |mark_released: bool, announce: bool, steps: &mut Vec<VolumeStep>| {
        if mark_released {
            if announce {
                steps.push(VolumeStep::Announce);
            }
            steps.push(write(Edit::Phase(PvPhase::Released, String::new())));
        }
        steps.push(reclaim(volume));
    };
    match plan::plan_volume(volume, claim) {
        VolumePlan::Unused | VolumePlan::PreBound => steps.push(available()),
        VolumePlan::Release { mark_released } => release(mark_released, true, &mut steps),
        VolumePlan::DeleteUnneeded { mark_released } => release(mark_released, false, &mut steps),
        VolumePlan::VolumeModeMismatch(claim) => {
            let volume_name = helpers::name(&volume.metadata);
            let cname = helpers::name(&claim.metadata);
            steps.push(VolumeStep::Event {
                on: On::Volume,
                type_: reasons::WARNING,
                reason: reasons::VOLUME_MISMATCH,
                message: messages::volume_mode_mismatch_on_volume(cname),
            });
            steps.push(VolumeStep::Event {
                on: On::Claim(claim.clone()),
                type_: reasons::WARNING,
                reason: reasons::VOLUME_MISMATCH,
                message: messages::volume_mode_mismatch_on_claim(volume_name),
            });
        }
        VolumePlan::QueueClaim(key) => steps.push(VolumeStep::EnqueueClaim(key)),
        VolumePlan::Bound => {
            steps.push(write(Edit::Phase(PvPhase::Bound, String::new())));
            if let Some(claim) = claim {
                // Settled unless a write made a new version (which syncs again).
                steps.push(VolumeStep::Settle(claim.clone()));
            }
        }
        VolumePlan::Unbind => {
            steps.push(write(Edit::RollBackBinding));
            steps.push(available());
        }
    }
    steps
}

fn write(edit: Edit) -> VolumeStep {
    VolumeStep::Write { edit, event: None }
}

/// The reclaim step of a released volume, by its policy; an unknown policy fails the volume.
fn reclaim(volume: &PersistentVolume) -> VolumeStep {
    let how = if helpers::annotation(&volume.metadata, ann::MIGRATED_TO).is_some_and(|d| !d.is_empty()) {
        Reclaim::LeftToCsiDriver
    } else {
        match ReclaimPolicy::of(volume) {
            Some(ReclaimPolicy::Retain) => Reclaim::Retain,
            Some(ReclaimPolicy::Recycle) => Reclaim::Recycle,
            Some(ReclaimPolicy::Delete) => Reclaim::Delete,
            None => {
                return VolumeStep::Write {
                    edit: Edit::Phase(PvPhase::Failed, messages::UNKNOWN_RECLAIM_POLICY.to_string()),
                    event: Some((reasons::WARNING, reasons::VOLUME_UNKNOWN_RECLAIM_POLICY)),
                }
            }
        }
    };
    VolumeStep::Reclaim(how)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::tests::merge;
    use serde_json::json;

    fn pv(extra: serde_json::Value) -> PersistentVolume {
        let mut v = json!({"metadata": {"name": "pv1"}, "spec": {"capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteOnce"], "persistentVolumeReclaimPolicy": "Delete",
            "claimRef": {"namespace": "ns", "name": "c1", "uid": "u1"}}, "status": {"phase": "Bound"}});
        merge(&mut v, extra);
        serde_json::from_value(v).unwrap()
    }

    fn pvc(volume_name: &str) -> Arc<PersistentVolumeClaim> {
        Arc::new(
            serde_json::from_value(json!({"metadata": {"name": "c1", "namespace": "ns", "uid": "u1"},
                "spec": {"accessModes": ["ReadWriteOnce"], "volumeName": volume_name}}))
            .unwrap(),
        )
    }

    /// Carries the writes out on the object alone, as the executor does on what each save returns.
    fn run_writes(volume: &PersistentVolume, steps: &[VolumeStep]) -> PersistentVolume {
        let mut v = volume.clone();
        for s in steps {
            if let VolumeStep::Write { edit, .. } = s {
                v = edit.apply(&v).unwrap_or(v);
            }
        }
        v
    }

    fn phase(p: PvPhase) -> VolumeStep {
        VolumeStep::Write { edit: Edit::Phase(p, String::new()), event: None }
    }

    #[test]
    fn a_volume_with_a_claim_ref_reads_the_claim_before_anything_else_is_decided() {
        let v = pv(json!({}));
        let lookup = plan::claim_lookup(&v);
        assert_eq!(volume_steps(&v, Read::Nothing), vec![VolumeStep::LookUpClaim(lookup)]);
        let c = pvc("pv1");
        assert_eq!(volume_steps(&v, Read::Claim(Some(&c))), vec![phase(PvPhase::Bound), VolumeStep::Settle(c)]);
    }

    #[test]
    fn an_in_tree_provisioned_volume_gets_its_finalizer_first_and_the_second_list_starts_after_it() {
        let v =
            pv(json!({"metadata": {"annotations": {"pv.kubernetes.io/provisioned-by": "kubernetes.io/host-path"}}}));
        let first = volume_steps(&v, Read::Nothing);
        assert_eq!(first[0], VolumeStep::Write { edit: Edit::MigrationAndFinalizers, event: None });
        assert!(matches!(first[1], VolumeStep::LookUpClaim(_)));
        let saved = run_writes(&v, &first);
        assert_eq!(saved.metadata.finalizers, Some(vec![pv_model::finalizers::PV_CONTROLLER.to_string()]));
        assert_eq!(Edit::MigrationAndFinalizers.apply(&saved), None, "the edit is done once");
        assert!(matches!(volume_steps(&saved, Read::Nothing)[..], [VolumeStep::LookUpClaim(_)]));
    }

    #[test]
    fn a_gone_claim_releases_announces_and_reclaims_by_policy() {
        let v = pv(json!({}));
        let steps = volume_steps(&v, Read::Claim(None));
        assert_eq!(steps, vec![VolumeStep::Announce, phase(PvPhase::Released), VolumeStep::Reclaim(Reclaim::Delete)]);
        let released = run_writes(&v, &steps);
        assert_eq!(PvPhase::of(&released), Some(PvPhase::Released));
        // Released already: only the policy, again (the operation scheduler keeps it to one).
        assert_eq!(volume_steps(&released, Read::Claim(None)), vec![VolumeStep::Reclaim(Reclaim::Delete)]);
        for (policy, how) in [("Retain", Reclaim::Retain), ("Recycle", Reclaim::Recycle)] {
            let v = pv(json!({"spec": {"persistentVolumeReclaimPolicy": policy}, "status": {"phase": "Released"}}));
            assert_eq!(volume_steps(&v, Read::Claim(None)), vec![VolumeStep::Reclaim(how)]);
        }
        let migrated = pv(json!({"metadata": {"annotations": {"pv.kubernetes.io/migrated-to": "ebs.csi.aws.com"}},
            "status": {"phase": "Released"}}));
        assert_eq!(volume_steps(&migrated, Read::Claim(None)), vec![VolumeStep::Reclaim(Reclaim::LeftToCsiDriver)]);
    }

    #[test]
    fn an_unknown_policy_fails_the_volume_with_an_event_once() {
        let v = pv(json!({"spec": {"persistentVolumeReclaimPolicy": "Shred"}, "status": {"phase": "Released"}}));
        let fail = VolumeStep::Write {
            edit: Edit::Phase(PvPhase::Failed, messages::UNKNOWN_RECLAIM_POLICY.into()),
            event: Some((reasons::WARNING, reasons::VOLUME_UNKNOWN_RECLAIM_POLICY)),
        };
        let steps = volume_steps(&v, Read::Claim(None));
        assert_eq!(steps, vec![fail.clone()]);
        let failed = run_writes(&v, &steps);
        assert_eq!(failed.status.as_ref().unwrap().message.as_deref(), Some(messages::UNKNOWN_RECLAIM_POLICY));
        // Failed already: the write (and so its event) changes nothing.
        assert_eq!(volume_steps(&failed, Read::Claim(None)), vec![fail]);
        assert_eq!(Edit::Phase(PvPhase::Failed, String::new()).apply(&failed), None);
    }

    #[test]
    fn a_volume_whose_claim_bound_elsewhere_is_rolled_back_or_deleted() {
        let ours = pv(json!({"metadata": {"annotations": {"pv.kubernetes.io/bound-by-controller": "yes"}},
            "spec": {"persistentVolumeReclaimPolicy": "Retain"}}));
        let elsewhere = pvc("pv2");
        let steps = volume_steps(&ours, Read::Claim(Some(&elsewhere)));
        assert_eq!(
            steps,
            vec![VolumeStep::Write { edit: Edit::RollBackBinding, event: None }, phase(PvPhase::Available)]
        );
        let after = run_writes(&ours, &steps);
        assert!(after.spec.as_ref().unwrap().claim_ref.is_none());
        assert_eq!(PvPhase::of(&after), Some(PvPhase::Available));
        // A user's pre-binding keeps its claimRef, without the uid.
        let users = pv(json!({"spec": {"persistentVolumeReclaimPolicy": "Retain"}}));
        let after = run_writes(&users, &volume_steps(&users, Read::Claim(Some(&elsewhere))));
        let r = after.spec.as_ref().unwrap().claim_ref.clone().unwrap();
        assert_eq!((r.name.as_deref(), r.uid), (Some("c1"), None));
        // Provisioned for it with Delete: released and deleted, without the release announcement.
        let provisioned =
            pv(json!({"metadata": {"annotations": {"pv.kubernetes.io/provisioned-by": "csi.example.com"}}}));
        assert_eq!(
            volume_steps(&provisioned, Read::Claim(Some(&elsewhere))),
            vec![phase(PvPhase::Released), VolumeStep::Reclaim(Reclaim::Delete)]
        );
    }

    #[test]
    fn a_claim_not_bound_yet_is_queued_or_told_its_volume_mode_differs() {
        let v = pv(json!({"status": {"phase": "Available"}}));
        assert_eq!(
            volume_steps(&v, Read::Claim(Some(&pvc("")))),
            vec![VolumeStep::EnqueueClaim(ObjectKey::new("ns", "c1"))]
        );
        let block: Arc<PersistentVolumeClaim> = Arc::new(
            serde_json::from_value(json!({"metadata": {"name": "c1", "namespace": "ns", "uid": "u1"},
                "spec": {"accessModes": ["ReadWriteOnce"], "volumeMode": "Block"}}))
            .unwrap(),
        );
        let steps = volume_steps(&v, Read::Claim(Some(&block)));
        let on: Vec<_> = steps
            .iter()
            .map(|s| match s {
                VolumeStep::Event { on, reason, .. } => (on.clone(), *reason),
                other => panic!("only events, got {other:?}"),
            })
            .collect();
        assert_eq!(on, vec![(On::Volume, reasons::VOLUME_MISMATCH), (On::Claim(block), reasons::VOLUME_MISMATCH)]);
        assert_eq!(run_writes(&v, &steps), v, "nothing is written");
    }
}
