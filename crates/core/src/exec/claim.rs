//! The claim syncs: carry out [`crate::steps::claim_steps`] in order, each write acting on the
//! claim or the volume as the step before left it.

use crate::controller::Controller;
use crate::error::{Error, Result};
use crate::steps::{self, ClaimEdit, ClaimStep, Detail};
use pv_model::helpers;
use pv_model::k8s::{PersistentVolume, PersistentVolumeClaim};
use std::sync::Arc;

impl Controller {
    /// The claim state machine. Stops at the first error; the next sync resumes where this one
    /// stopped.
    pub(crate) async fn sync_claim(&self, claim: Arc<PersistentVolumeClaim>) -> Result<()> {
        let plan = steps::claim_steps(&self.caches, &claim, self.config.detailed_events);
        let key = helpers::claim_key(&claim);
        let mut claim = claim;
        let mut volume = plan.volume;
        // The objects as the decision read them (the claim after its migration write): what a
        // Settle step settles, which the caches refuse once a write made a new version.
        let (mut read_claim, read_volume) = (claim.clone(), volume.clone());
        let mut reservation = None;
        let mut result = Ok(());
        for step in plan.steps {
            let done = match step {
                ClaimStep::WriteClaim(edit) => self.write_claim(&claim, &edit, volume.as_deref()).await.map(|saved| {
                    if edit == ClaimEdit::Migration {
                        read_claim = saved.clone();
                    }
                    claim = saved;
                }),
                ClaimStep::WriteVolume(edit) => {
                    let v = volume.as_ref().expect("a claim sync writes only the volume it binds");
                    self.write_volume(v, &edit).await.map(|saved| volume = Some(saved))
                }
                ClaimStep::Reserve => {
                    let vname = helpers::name(&volume.as_ref().expect("a reservation names its volume").metadata);
                    match self.caches.reserve(vname, &key) {
                        Some(r) => {
                            reservation = Some(r);
                            Ok(())
                        }
                        None => return Err(Error::Reserved(vname.to_string())),
                    }
                }
                ClaimStep::Event { type_, reason, message, detail } => {
                    let why = match detail {
                        Detail::None => String::new(),
                        Detail::RejectionBreakdown => self.caches.rejection_breakdown(&claim),
                    };
                    self.recorder.event_with_detail(&*claim, type_, reason, &message, &why).await;
                    Ok(())
                }
                ClaimStep::VolumeEvent { type_, reason, message } => {
                    let v = volume.as_ref().expect("a volume event names its volume");
                    self.recorder.event(&**v, type_, reason, message).await;
                    Ok(())
                }
                ClaimStep::Provision(how) => self.provision_claim(claim.clone(), how).await,
                ClaimStep::Enqueue => {
                    self.claim_queue.add(&key);
                    Ok(())
                }
                ClaimStep::Settle => {
                    if let Some(v) = &read_volume {
                        self.caches.settle_claim(&read_claim, v);
                    }
                    Ok(())
                }
                ClaimStep::Fail(why) => Err(Error::Invalid(why)),
            };
            if let Err(e) = done {
                result = Err(e);
                break;
            }
        }
        if reservation.take().is_some() {
            // A provisioning of this claim (if one started) is done once it is bound.
            self.metrics.operation_finished(&key, self.clock.now_ms(), result.is_err());
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
