//! The writes of binding and unbinding, in upstream's order, each skipped when nothing changes.
//!
//! `bind` writes: PV claimRef (+ bound-by-controller), PV phase Bound, PVC volumeName (+
//! bound-by-controller, bind-completed), PVC phase Bound with capacity and access modes. It stops
//! at the first failure; the next sync of either object resumes where it stopped.

use crate::controller::Controller;
use crate::error::{Error, Result};
use crate::metrics;
use crate::steps::Edit;
use pv_model::annotations as ann;
use pv_model::binding::{self, Relation};
use pv_model::helpers;
use pv_model::k8s::{PersistentVolume, PersistentVolumeClaim, PersistentVolumeClaimStatus};
use pv_model::phase::PvPhase;
use pv_model::reasons;
use std::sync::Arc;

impl Controller {
    /// Writes the volume as `edit` changes it; no write when it changes nothing.
    pub(crate) async fn write_volume(&self, volume: &Arc<PersistentVolume>, edit: &Edit) -> Result<Arc<PersistentVolume>> {
        let Some(changed) = edit.apply(volume) else { return Ok(volume.clone()) };
        let saved = self.save_volume(volume, &changed, edit.status(), edit.what()).await?;
        if let Edit::Phase(phase, _) = edit {
            tracing::info!(target: crate::PROGRESS, volume = %helpers::name(&volume.metadata), phase = phase.as_str(), "volume entered phase");
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

    /// Sets a claim's phase; with a volume, also its access modes and (when becoming bound) its
    /// capacity and current volume attributes class; without, clears them. No write when nothing
    /// differs.
    pub(crate) async fn update_claim_status(
        &self,
        claim: &Arc<PersistentVolumeClaim>,
        phase: &str,
        volume: Option<&PersistentVolume>,
    ) -> Result<Arc<PersistentVolumeClaim>> {
        let mut clone = (**claim).clone();
        let old = claim.status.clone().unwrap_or_default();
        let status = clone.status.get_or_insert_with(PersistentVolumeClaimStatus::default);
        let mut dirty = false;
        if old.phase.as_deref().unwrap_or("") != phase {
            status.phase = Some(phase.to_string());
            dirty = true;
        }
        match volume {
            None => {
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
            }
            Some(v) => {
                let spec = v.spec.clone().unwrap_or_default();
                if old.access_modes != spec.access_modes {
                    status.access_modes = spec.access_modes.clone();
                    dirty = true;
                }
                // Capacity only when becoming bound: a difference may be intentional (resize).
                if old.phase.as_deref().unwrap_or("") != phase {
                    let Some(vcap) = spec.capacity.as_ref().and_then(|c| c.get("storage")) else {
                        return Err(Error::Invalid(format!(
                            "PersistentVolume {:?} is without a storage capacity",
                            helpers::name(&v.metadata)
                        )));
                    };
                    if let Some(pre) = helpers::annotation(&v.metadata, ann::PRE_RESIZE_CAPACITY) {
                        status.capacity =
                            Some([("storage".to_string(), pv_model::k8s::K8sQuantity(pre.to_string()))].into());
                        dirty = true;
                    } else {
                        let ccap = old.capacity.as_ref().and_then(|c| c.get("storage"));
                        let same = ccap.is_some_and(|c| {
                            pv_model::Quantity::parse(&c.0).ok() == pv_model::Quantity::parse(&vcap.0).ok()
                        });
                        if !same {
                            status.capacity = spec.capacity.clone();
                            dirty = true;
                        }
                    }
                }
                // The volume's attributes class, set only when the claim becomes bound (as
                // upstream): afterwards the external resizer owns the field.
                if old.phase.as_deref() == Some(helpers::pvc_phase::PENDING)
                    && phase == helpers::pvc_phase::BOUND
                    && old.current_volume_attributes_class_name != spec.volume_attributes_class_name
                {
                    status.current_volume_attributes_class_name = spec.volume_attributes_class_name.clone();
                    dirty = true;
                }
            }
        }
        if !dirty {
            return Ok(claim.clone());
        }
        let saved = self.save_claim(claim, &clone, true, "saving claim status").await?;
        if old.phase.as_deref().unwrap_or("") != phase {
            tracing::info!(target: crate::PROGRESS, pvc = %helpers::claim_key(claim), phase, "claim entered phase");
            if let (helpers::pvc_phase::BOUND, Some(v)) = (phase, volume) {
                self.observe_time_to_bound(claim, v);
            }
        }
        Ok(saved)
    }

    /// `pv_controller_claim_time_to_bound_seconds`: the claim, created at its creationTimestamp,
    /// is Bound now; the path is how its volume came to be (the volume's provisioned-by
    /// annotation: one of this controller's plugins, another provisioner, or none).
    fn observe_time_to_bound(&self, claim: &PersistentVolumeClaim, volume: &PersistentVolume) {
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

    /// Sets a claim's phase and emits an event, both only when the phase changes.
    pub(crate) async fn update_claim_status_with_event(
        &self,
        claim: &Arc<PersistentVolumeClaim>,
        phase: &str,
        volume: Option<&PersistentVolume>,
        type_: &'static str,
        reason: &'static str,
        message: &str,
    ) -> Result<Arc<PersistentVolumeClaim>> {
        if helpers::claim_phase(claim) == phase {
            return Ok(claim.clone());
        }
        let saved = self.update_claim_status(claim, phase, volume).await?;
        self.recorder.event(&*saved, type_, reason, message).await;
        Ok(saved)
    }

    /// Points the volume at the claim (claimRef with the claim's UID), marking it bound by the
    /// controller unless a user pre-bound it.
    async fn bind_volume_to_claim(
        &self,
        volume: &Arc<PersistentVolume>,
        claim: &PersistentVolumeClaim,
    ) -> Result<Arc<PersistentVolume>> {
        let should_mark = !matches!(binding::classify(volume, claim), Relation::ThisClaim { .. });
        let mut clone = (**volume).clone();
        let mut dirty = false;
        let r = helpers::claim_ref(volume);
        let same = r.is_some_and(|r| {
            r.name.as_deref() == claim.metadata.name.as_deref()
                && r.namespace.as_deref() == claim.metadata.namespace.as_deref()
                && r.uid.as_deref() == claim.metadata.uid.as_deref()
        });
        if !same {
            clone.spec.get_or_insert_with(Default::default).claim_ref = Some(helpers::claim_reference(claim));
            dirty = true;
        }
        if should_mark && !helpers::has_annotation(&clone.metadata, ann::BOUND_BY_CONTROLLER) {
            helpers::set_annotation(&mut clone.metadata, ann::BOUND_BY_CONTROLLER, "yes");
            dirty = true;
        }
        if !dirty {
            return Ok(volume.clone());
        }
        let saved = self.save_volume(volume, &clone, false, "saving volume claimRef").await?;
        tracing::info!(target: crate::PROGRESS, volume = %helpers::name(&volume.metadata), pvc = %helpers::claim_key(claim), "claim bound to volume");
        Ok(saved)
    }

    /// Points the claim at the volume and marks the binding complete.
    async fn bind_claim_to_volume(
        &self,
        claim: &Arc<PersistentVolumeClaim>,
        volume: &PersistentVolume,
    ) -> Result<Arc<PersistentVolumeClaim>> {
        let vname = helpers::name(&volume.metadata);
        let should_mark = helpers::claim_volume_name(claim) != vname;
        let mut clone = (**claim).clone();
        let mut dirty = false;
        if should_mark {
            clone.spec.get_or_insert_with(Default::default).volume_name = Some(vname.to_string());
            dirty = true;
            if !helpers::has_annotation(&clone.metadata, ann::BOUND_BY_CONTROLLER) {
                helpers::set_annotation(&mut clone.metadata, ann::BOUND_BY_CONTROLLER, "yes");
            }
        }
        if !helpers::has_annotation(&clone.metadata, ann::BIND_COMPLETED) {
            helpers::set_annotation(&mut clone.metadata, ann::BIND_COMPLETED, "yes");
            dirty = true;
        }
        if !dirty {
            return Ok(claim.clone());
        }
        let saved = self.save_claim(claim, &clone, false, "saving claim volumeName").await?;
        tracing::info!(target: crate::PROGRESS, volume = %vname, pvc = %helpers::claim_key(claim), "volume bound to claim");
        Ok(saved)
    }

    /// Binds volume and claim: four writes at most, PV first.
    pub(crate) async fn bind(&self, volume: &Arc<PersistentVolume>, claim: &Arc<PersistentVolumeClaim>) -> Result<()> {
        let earlier = binding::rebinds_same_name(volume, claim).then(|| helpers::claim_ref(volume).cloned()).flatten();
        let volume = self.bind_volume_to_claim(volume, claim).await?;
        let volume = self.update_volume_phase(&volume, PvPhase::Bound, "").await?;
        let claim = self.bind_claim_to_volume(claim, &volume).await?;
        self.update_claim_status(&claim, helpers::pvc_phase::BOUND, Some(&volume)).await?;
        if let Some(earlier) = earlier {
            // Asked for by the volume's pv-controller.io/rebind annotation: said on both.
            let (vname, key) = (helpers::name(&volume.metadata), helpers::claim_key(&claim));
            let was = earlier.uid.as_deref().unwrap_or("");
            tracing::info!(volume = %vname, pvc = %key, earlier_uid = %was, "retained volume bound again to a re-created claim of the same name");
            let on_claim = pv_model::messages::rebound_claim(vname, was);
            let on_volume = pv_model::messages::rebound_volume(&key, helpers::uid(&claim.metadata), was);
            self.recorder.event(&*claim, reasons::NORMAL, reasons::REBOUND, on_claim).await;
            self.recorder.event(&*volume, reasons::NORMAL, reasons::REBOUND, on_volume).await;
        }
        Ok(())
    }

    /// Rolls back a binding: a controller-made binding loses its claimRef, a user's pre-binding
    /// keeps the claimRef without UID. Then the volume is Available.
    pub(crate) async fn unbind_volume(&self, volume: &Arc<PersistentVolume>) -> Result<()> {
        let saved = self.write_volume(volume, &Edit::RollBackBinding).await?;
        self.update_volume_phase(&saved, PvPhase::Available, "").await?;
        Ok(())
    }
}
