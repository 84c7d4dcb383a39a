//! The volume's writes ([`crate::steps::Edit`]s, each skipped when it changes nothing), the
//! unbinding after a recycle, and the time-to-bound metric of a claim the steps bound. The bind
//! itself is four steps ([`crate::steps::claim`]): PV claimRef (+ bound-by-controller), PV phase
//! Bound, PVC volumeName (+ bound-by-controller, bind-completed), PVC phase Bound with capacity
//! and access modes; it stops at the first failure, and the next sync of either object resumes
//! where it stopped.

use crate::controller::Controller;
use crate::error::Result;
use crate::metrics;
use crate::steps::Edit;
use pv_model::annotations as ann;
use pv_model::helpers;
use pv_model::k8s::{PersistentVolume, PersistentVolumeClaim};
use pv_model::phase::PvPhase;
use std::sync::Arc;

impl Controller {
    /// Writes the volume as `edit` changes it; no write when it changes nothing.
    pub(crate) async fn write_volume(
        &self,
        volume: &Arc<PersistentVolume>,
        edit: &Edit,
    ) -> Result<Arc<PersistentVolume>> {
        let Some(changed) = edit.apply(volume) else { return Ok(volume.clone()) };
        let saved = self.save_volume(volume, &changed, edit.status(), edit.what()).await?;
        let name = helpers::name(&volume.metadata);
        match edit {
            Edit::Phase(phase, _) => {
                tracing::info!(target: crate::PROGRESS, volume = %name, phase = phase.as_str(), "volume entered phase")
            }
            Edit::ClaimRef(claim) => {
                tracing::info!(target: crate::PROGRESS, volume = %name, pvc = %helpers::claim_key(claim), "claim bound to volume")
            }
            Edit::MigrationAndFinalizers | Edit::RollBackBinding => {}
        }
        Ok(saved)
    }

    /// Sets a volume's phase (and message); no write when the phase is already set.
    pub(crate) async fn update_volume_phase(
        &self,
        volume: &Arc<PersistentVolume>,
        phase: PvPhase,
        message: &str,
    ) -> Result<Arc<PersistentVolume>> {
        self.write_volume(volume, &Edit::Phase(phase, message.to_string())).await
    }

    /// Sets a volume's phase and emits an event, both only when the phase changes.
    pub(crate) async fn update_volume_phase_with_event(
        &self,
        volume: &Arc<PersistentVolume>,
        phase: PvPhase,
        type_: &'static str,
        reason: &'static str,
        message: &str,
    ) -> Result<Arc<PersistentVolume>> {
        if PvPhase::of(volume) == Some(phase) {
            return Ok(volume.clone());
        }
        let saved = self.update_volume_phase(volume, phase, message).await?;
        self.recorder.event(&*saved, type_, reason, message).await;
        Ok(saved)
    }

    /// `pv_controller_claim_time_to_bound_seconds`: the claim, created at its creationTimestamp,
    /// is Bound now; the path is how its volume came to be (the volume's provisioned-by
    /// annotation: one of this controller's plugins, another provisioner, or none).
    pub(crate) fn observe_time_to_bound(&self, claim: &PersistentVolumeClaim, volume: &PersistentVolume) {
        let Some(created) = claim.metadata.creation_timestamp.as_ref() else { return };
        let path = match helpers::annotation(&volume.metadata, ann::PROVISIONED_BY) {
            None => metrics::PATH_STATIC,
            Some(p) if self.plugins.provisionable_by_name(p).is_ok() => metrics::PATH_PROVISIONED,
            Some(_) => metrics::PATH_EXTERNAL,
        };
        let now_ms = self.clock.now().as_millisecond();
        let seconds = (now_ms - created.0.as_millisecond()) as f64 / 1000.0;
        self.metrics.claim_bound(path, seconds);
    }

    /// Rolls back a binding: a controller-made binding loses its claimRef, a user's pre-binding
    /// keeps the claimRef without UID. Then the volume is Available.
    pub(crate) async fn unbind_volume(&self, volume: &Arc<PersistentVolume>) -> Result<()> {
        let saved = self.write_volume(volume, &Edit::RollBackBinding).await?;
        self.update_volume_phase(&saved, PvPhase::Available, "").await?;
        Ok(())
    }
}
