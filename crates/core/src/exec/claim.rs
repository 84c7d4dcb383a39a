//! The claim syncs: carry out [`crate::steps::claim_steps`] in order, each write acting on the
//! claim or the volume as the step before left it.

use crate::controller::Controller;
use crate::error::{Error, Result};
use crate::steps::{self, ClaimEdit, ClaimStep, Detail, Outcome, Step, SyncReport, Synced, Taken};
use pv_model::helpers;
use pv_model::k8s::{PersistentVolume, PersistentVolumeClaim};
use pv_model::ObjectKey;
use std::sync::Arc;

impl Controller {
    /// The claim state machine. Stops at the first error; the next sync resumes where this one
    /// stopped. An observer ([`crate::Config::observer`]) is told of the steps carried out.
    pub(crate) async fn sync_claim(&self, claim: Arc<PersistentVolumeClaim>) -> Result<()> {
        let plan = steps::claim_steps(&self.caches, &claim, self.config.detailed_events);
        let key = helpers::claim_key(&claim);
        let Some(observer) = &self.config.observer else {
            return self.run_claim_steps(claim, plan, &key, &mut None).await;
        };
        let volume = plan.volume.as_ref().map(|v| helpers::name(&v.metadata).to_string()).unwrap_or_default();
        let mut taken = Some(Vec::with_capacity(plan.steps.len()));
        let result = self.run_claim_steps(claim, plan, &key, &mut taken).await;
        if let Some(steps) = taken {
            observer.synced(SyncReport { object: Synced::Claim(key), volume, steps });
        }
        result
    }

    /// [`Controller::sync_claim`]'s steps, each noted in `taken` (when it is `Some`) with what
    /// came of it.
    async fn run_claim_steps(
        &self,
        claim: Arc<PersistentVolumeClaim>,
        plan: steps::ClaimSteps,
        key: &ObjectKey,
        taken: &mut Option<Vec<Taken>>,
    ) -> Result<()> {
        let mut claim = claim;
        let mut volume = plan.volume;
        // The objects as the decision read them (the claim after its migration write): what a
        // Settle step settles, which the caches refuse once a write made a new version.
        let (mut read_claim, read_volume) = (claim.clone(), volume.clone());
        let mut reservation = None;
        let mut result = Ok(());
        for step in plan.steps {
            // A copy for the observer only: nothing is copied when nobody observes.
            let noted = taken.is_some().then(|| step.clone());
            let done = match step {
                ClaimStep::WriteClaim(edit) => self.write_claim(&claim, &edit, volume.as_deref()).await.map(|saved| {
                    if edit == ClaimEdit::Migration {
                        read_claim = saved.clone();
                    }
                    let wrote = !Arc::ptr_eq(&saved, &claim);
                    claim = saved;
                    if wrote {
                        Outcome::Done
                    } else {
                        Outcome::Unchanged
                    }
                }),
                ClaimStep::WriteVolume(edit) => {
                    let v = volume.as_ref().expect("a claim sync writes only the volume it binds");
                    let v = v.clone();
                    self.write_volume(&v, &edit).await.map(|saved| {
                        let wrote = !Arc::ptr_eq(&saved, &v);
                        volume = Some(saved);
                        if wrote {
                            Outcome::Done
                        } else {
                            Outcome::Unchanged
                        }
                    })
                }
                ClaimStep::Reserve => {
                    let vname = helpers::name(&volume.as_ref().expect("a reservation names its volume").metadata);
                    match self.caches.reserve(vname, key) {
                        Some(r) => {
                            reservation = Some(r);
                            Ok(Outcome::Done)
                        }
                        None => Err(Error::Reserved(vname.to_string())),
                    }
                }
                ClaimStep::Event { type_, reason, message, detail } => {
                    let why = match detail {
                        Detail::None => String::new(),
                        Detail::RejectionBreakdown => self.caches.rejection_breakdown(&claim),
                    };
                    self.recorder.event_with_detail(&*claim, type_, reason, &message, &why).await;
                    Ok(Outcome::Done)
                }
                ClaimStep::VolumeEvent { type_, reason, message } => {
                    let v = volume.as_ref().expect("a volume event names its volume");
                    self.recorder.event(&**v, type_, reason, message).await;
                    Ok(Outcome::Done)
                }
                ClaimStep::Provision(how) => self.provision_claim(claim.clone(), how).await.map(|()| Outcome::Done),
                ClaimStep::Enqueue => {
                    self.claim_queue.add(key);
                    Ok(Outcome::Done)
                }
                ClaimStep::Settle => {
                    if let Some(v) = &read_volume {
                        self.caches.settle_claim(&read_claim, v);
                    }
                    Ok(Outcome::Done)
                }
                ClaimStep::Fail(why) => Err(Error::Invalid(why)),
            };
            if let (Some(taken), Some(step)) = (taken.as_mut(), noted) {
                let outcome = done.as_ref().map_or_else(|e| Outcome::Failed(e.to_string()), Outcome::clone);
                taken.push(Taken { step: Step::Claim(step), outcome });
            }
            if let Err(e) = done {
                result = Err(e);
                break;
            }
        }
        if reservation.take().is_some() {
            // A provisioning of this claim (if one started) is done once it is bound.
            self.metrics.operation_finished(key, self.clock.now_ms(), result.is_err());
        }
        result
    }

    /// Writes the claim as `edit` changes it (with `volume`, the volume being bound, as the steps
    /// before left it); no write when it changes nothing.
    pub(crate) async fn write_claim(
        &self,
        claim: &Arc<PersistentVolumeClaim>,
        edit: &ClaimEdit,
        volume: Option<&PersistentVolume>,
    ) -> Result<Arc<PersistentVolumeClaim>> {
        let Some(changed) = edit.apply(claim, volume).map_err(Error::Invalid)? else { return Ok(claim.clone()) };
        let saved = self.save_claim(claim, &changed, edit.status(), edit.what()).await;
        let key = helpers::claim_key(claim);
        match edit {
            ClaimEdit::Status { phase, from_volume } if helpers::claim_phase(claim) != *phase && saved.is_ok() => {
                tracing::info!(target: crate::PROGRESS, pvc = %key, phase, "claim entered phase");
                if let (helpers::pvc_phase::BOUND, true, Some(v)) = (*phase, *from_volume, volume) {
                    self.observe_time_to_bound(claim, v);
                }
            }
            ClaimEdit::VolumeName if saved.is_ok() => {
                let vname = volume.map(|v| helpers::name(&v.metadata)).unwrap_or_default();
                tracing::info!(target: crate::PROGRESS, volume = %vname, pvc = %key, "volume bound to claim");
            }
            ClaimEdit::DefaultClass(class) => {
                self.metrics.retroactive(saved.is_ok());
                if saved.is_ok() {
                    tracing::info!(target: crate::PROGRESS, pvc = %key, class = %class, "assigned default storage class");
                }
            }
            _ => {}
        }
        saved
    }
}
