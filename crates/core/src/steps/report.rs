//! What a sync carried out, as the executor reports it to an observer
//! ([`crate::controller::Observer`]): the object synced and each step taken, in order, with what
//! came of it. Pure data and its wording; the executor fills it in only when someone observes.

use super::claim::ClaimStep;
use super::volume::VolumeStep;
use crate::plan::Provisioning;
use pv_model::ObjectKey;
use std::fmt;

/// The object a sync synced.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Synced {
    /// A volume, by name.
    Volume(String),
    /// A claim, by namespace/name.
    Claim(ObjectKey),
}

impl Synced {
    /// The object's kind: `PersistentVolume` or `PersistentVolumeClaim`.
    pub fn kind(&self) -> &'static str {
        match self {
            Synced::Volume(_) => "PersistentVolume",
            Synced::Claim(_) => "PersistentVolumeClaim",
        }
    }

    /// The namespace (empty for a volume).
    pub fn namespace(&self) -> &str {
        match self {
            Synced::Volume(_) => "",
            Synced::Claim(k) => k.namespace(),
        }
    }

    /// The name.
    pub fn name(&self) -> &str {
        match self {
            Synced::Volume(n) => n,
            Synced::Claim(k) => k.name(),
        }
    }
}

impl fmt::Display for Synced {
    /// `volume pv1`, `claim ns/c1`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Synced::Volume(n) => write!(f, "volume {n}"),
            Synced::Claim(k) => write!(f, "claim {k}"),
        }
    }
}

/// What came of a step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Carried out: a write saved its change, an event was recorded, an operation handed on.
    Done,
    /// A write whose edit changed nothing: nothing was sent.
    Unchanged,
    /// The step failed, with this error, and the sync stopped there (to be retried).
    Failed(String),
}

/// A step of either sync.
#[derive(Clone, Debug)]
pub enum Step {
    /// A step of the volume sync ([`super::volume_steps`]).
    Volume(VolumeStep),
    /// A step of a claim sync ([`super::claim_steps`]).
    Claim(ClaimStep),
}

/// A step as the executor carried it out.
#[derive(Clone, Debug)]
pub struct Taken {
    /// The step.
    pub step: Step,
    /// What came of it.
    pub outcome: Outcome,
}

impl Taken {
    /// Whether the step writes an object (a volume or a claim; events are not objects here).
    pub fn is_write(&self) -> bool {
        matches!(
            self.step,
            Step::Volume(VolumeStep::Write { .. }) | Step::Claim(ClaimStep::WriteClaim(_) | ClaimStep::WriteVolume(_))
        )
    }

    /// Whether the step saved a change of an object: a write sent and answered.
    pub fn wrote(&self) -> bool {
        self.is_write() && self.outcome == Outcome::Done
    }

    /// Whether the step acted on the cluster or on the controller's work: a write sent (saved or
    /// failed), an event, a reservation, an operation started (a provisioning, a deletion, a
    /// recycling), a stop on an invalid state. Lookups, settles, queueing, log lines, writes that
    /// changed nothing and reclaim policies that do nothing (Retain, left to a CSI driver) do not.
    pub fn acted(&self) -> bool {
        if self.outcome == Outcome::Unchanged {
            return false;
        }
        match &self.step {
            Step::Volume(s) => match s {
                VolumeStep::Write { .. } | VolumeStep::Event { .. } => true,
                VolumeStep::Reclaim(how) => how.starts_operation(),
                VolumeStep::LookUpClaim(_)
                | VolumeStep::EnqueueClaim(_)
                | VolumeStep::Settle(_)
                | VolumeStep::Announce => false,
            },
            Step::Claim(s) => match s {
                ClaimStep::WriteClaim(_)
                | ClaimStep::WriteVolume(_)
                | ClaimStep::Reserve
                | ClaimStep::Event { .. }
                | ClaimStep::VolumeEvent { .. }
                | ClaimStep::Fail(_) => true,
                ClaimStep::Provision(p) => !matches!(p, Provisioning::Disabled),
                ClaimStep::Enqueue | ClaimStep::Settle => false,
            },
        }
    }

    /// Whether a person reading what a sync did is shown the step: all but lookups, settles, log
    /// lines and writes that changed nothing.
    pub fn shown(&self) -> bool {
        if self.outcome == Outcome::Unchanged {
            return false;
        }
        !matches!(
            self.step,
            Step::Volume(VolumeStep::LookUpClaim(_) | VolumeStep::Settle(_) | VolumeStep::Announce)
                | Step::Claim(ClaimStep::Settle)
        )
    }
}

/// One sync as carried out: the object synced, the volume its steps name, and its steps in
/// order (up to the one that failed, if one did).
#[derive(Clone, Debug)]
pub struct SyncReport {
    /// The object synced.
    pub object: Synced,
    /// The volume the steps act on: the volume synced, or the one a claim sync binds (empty when
    /// it binds none).
    pub volume: String,
    /// The steps, in order.
    pub steps: Vec<Taken>,
}

impl SyncReport {
    /// Whether any step acted ([`Taken::acted`]): a sync that only looked, queued or settled did
    /// nothing.
    pub fn acted(&self) -> bool {
        self.steps.iter().any(Taken::acted)
    }

    /// How many changes of objects the sync saved ([`Taken::wrote`]).
    pub fn writes(&self) -> usize {
        self.steps.iter().filter(|t| t.wrote()).count()
    }

    /// The words of each step a person is shown ([`Taken::shown`]), in order; a failed step says
    /// why.
    pub fn describe_steps(&self) -> Vec<String> {
        let claim = match &self.object {
            Synced::Claim(k) => k.to_string(),
            Synced::Volume(_) => String::new(),
        };
        self.steps
            .iter()
            .filter(|t| t.shown())
            .map(|t| {
                let words = match &t.step {
                    Step::Volume(s) => s.describe(&self.volume),
                    Step::Claim(s) => s.describe(&claim, &self.volume),
                };
                match &t.outcome {
                    Outcome::Failed(why) => format!("{words} (failed: {why})"),
                    _ => words,
                }
            })
            .collect()
    }
}

impl fmt::Display for SyncReport {
    /// The object, then the steps shown, `; ` between them:
    /// `claim ns/c1: reserve volume pv1; write volume pv1: spec.claimRef to ns/c1; …`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.object, self.describe_steps().join("; "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugin::PluginRegistry;
    use crate::steps::{claim_steps, volume_steps, ClaimEdit, Edit, Read, Reclaim};
    use crate::view::Objects;
    use pv_model::k8s::{PersistentVolume, PersistentVolumeClaim};
    use pv_model::phase::PvPhase;
    use serde_json::json;
    use std::sync::Arc;

    fn pv() -> PersistentVolume {
        serde_json::from_value(json!({"metadata": {"name": "pv1", "resourceVersion": "1"},
            "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                     "persistentVolumeReclaimPolicy": "Retain"},
            "status": {"phase": "Available"}}))
        .unwrap()
    }

    fn pvc(class: &str) -> Arc<PersistentVolumeClaim> {
        Arc::new(
            serde_json::from_value(json!({"metadata": {"name": "c1", "namespace": "ns", "uid": "u1"},
                "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}},
                         "storageClassName": class},
                "status": {"phase": "Pending"}}))
            .unwrap(),
        )
    }

    fn done(step: Step) -> Taken {
        Taken { step, outcome: Outcome::Done }
    }

    #[test]
    fn a_bind_names_each_write_on_its_object_in_order() {
        let view = Objects::new(PluginRegistry::new()).volume(pv());
        let plan = claim_steps(&view, &pvc(""), false);
        let report = SyncReport {
            object: Synced::Claim(ObjectKey::new("ns", "c1")),
            volume: "pv1".into(),
            steps: plan.steps.into_iter().map(|s| done(Step::Claim(s))).collect(),
        };
        assert!(report.acted());
        assert_eq!(report.writes(), 4);
        assert_eq!(
            report.to_string(),
            "claim ns/c1: reserve volume pv1; write volume pv1: spec.claimRef to ns/c1; \
             write volume pv1: status.phase Bound; \
             write claim ns/c1: spec.volumeName pv1, annotations bound-by-controller and bind-completed; \
             write claim ns/c1: status.phase Bound"
        );
        assert_eq!(
            (report.object.kind(), report.object.namespace(), report.object.name()),
            ("PersistentVolumeClaim", "ns", "c1")
        );
    }

    #[test]
    fn a_claim_without_volume_or_class_says_its_event_and_its_pending_phase() {
        let view = Objects::new(PluginRegistry::new());
        let plan = claim_steps(&view, &pvc(""), false);
        let report = SyncReport {
            object: Synced::Claim(ObjectKey::new("ns", "c1")),
            volume: String::new(),
            // Pending already: the status write changes nothing.
            steps: plan
                .steps
                .into_iter()
                .map(|s| {
                    let outcome =
                        if matches!(s, ClaimStep::WriteClaim(_)) { Outcome::Unchanged } else { Outcome::Done };
                    Taken { step: Step::Claim(s), outcome }
                })
                .collect(),
        };
        assert!(report.acted(), "an event is an act");
        assert_eq!(report.writes(), 0);
        assert_eq!(report.describe_steps(), ["event Normal FailedBinding on claim ns/c1"]);
    }

    #[test]
    fn a_sync_that_only_looked_queued_settled_or_wrote_nothing_did_nothing() {
        let c = pvc("");
        let quiet = SyncReport {
            object: Synced::Volume("pv1".into()),
            volume: "pv1".into(),
            steps: vec![
                done(Step::Volume(VolumeStep::LookUpClaim(crate::plan::ClaimLookup::None))),
                Taken {
                    step: Step::Volume(VolumeStep::Write {
                        edit: Edit::Phase(PvPhase::Bound, String::new()),
                        event: None,
                    }),
                    outcome: Outcome::Unchanged,
                },
                done(Step::Volume(VolumeStep::Settle(c.clone()))),
                done(Step::Volume(VolumeStep::EnqueueClaim(ObjectKey::new("ns", "c1")))),
                done(Step::Volume(VolumeStep::Reclaim(Reclaim::Retain))),
            ],
        };
        assert!(!quiet.acted());
        assert_eq!(quiet.writes(), 0);
        // What is shown: the queueing and the policy, not the lookup, the settle or the no-op write.
        assert_eq!(quiet.to_string(), "volume pv1: sync claim ns/c1 now; reclaim: Retain");
        // A delete starts an operation; a failed write acts (it was sent) and says why.
        let delete = done(Step::Volume(VolumeStep::Reclaim(Reclaim::Delete)));
        assert!(delete.acted() && !delete.is_write());
        let failed = Taken {
            step: Step::Claim(ClaimStep::WriteClaim(ClaimEdit::Status { phase: "Bound", from_volume: true })),
            outcome: Outcome::Failed("conflict".into()),
        };
        assert!(failed.acted() && failed.is_write() && !failed.wrote());
        let report =
            SyncReport { object: Synced::Claim(ObjectKey::new("ns", "c1")), volume: "pv1".into(), steps: vec![failed] };
        assert_eq!(report.to_string(), "claim ns/c1: write claim ns/c1: status.phase Bound (failed: conflict)");
    }

    #[test]
    fn a_volume_sync_names_the_volume_and_the_claim_its_events_are_on() {
        let mut v = pv();
        v.spec.as_mut().unwrap().claim_ref = Some(pv_model::helpers::claim_reference(&pvc("")));
        v.spec.as_mut().unwrap().volume_mode = Some("Block".into());
        let claim = pvc("");
        let steps = volume_steps(&v, Read::Claim(Some(&claim)));
        let words: Vec<String> = steps.iter().map(|s| s.describe("pv1")).collect();
        assert_eq!(
            words,
            ["event Warning VolumeMismatch on volume pv1", "event Warning VolumeMismatch on claim ns/c1"]
        );
        let fail = VolumeStep::Write {
            edit: Edit::Phase(PvPhase::Failed, "why".into()),
            event: Some(("Warning", "VolumeUnknownReclaimPolicy")),
        };
        assert_eq!(
            fail.describe("pv1"),
            "write volume pv1: status.phase Failed, event Warning VolumeUnknownReclaimPolicy on volume pv1"
        );
        assert_eq!(Synced::Volume("pv1".into()).to_string(), "volume pv1");
    }
}
