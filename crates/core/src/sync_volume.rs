//! `sync_volume`: what to do with a volume, branch by branch, labelled with what it observes.

use crate::controller::Controller;
use crate::error::{Error, Result};
use pv_model::annotations as ann;
use pv_model::helpers::{self, policy, pv_phase};
use pv_model::k8s::{PersistentVolume, PersistentVolumeClaim};
use pv_model::{csi, reasons};
use std::sync::Arc;

/// True when no claim holds the volume: it has no claimRef, or one without a uid (pre-bound by a
/// user to a claim that has not bound yet). The volume sync makes such a volume Available.
pub fn is_volume_unclaimed(volume: &PersistentVolume) -> bool {
    helpers::claim_ref(volume).is_none_or(|r| r.uid.as_deref().unwrap_or("").is_empty())
}

/// The phase the volume's next sync gives it before anything else happens, when that differs
/// from its phase now: Available for an unclaimed volume (a new PV has no phase until then).
pub fn phase_after_first_sync(volume: &PersistentVolume) -> Option<&'static str> {
    (is_volume_unclaimed(volume) && helpers::volume_phase(volume) != pv_phase::AVAILABLE).then_some(pv_phase::AVAILABLE)
}

impl Controller {
    /// Keeps `migrated-to` and the deletion-protection finalizer of a provisioned volume right.
    async fn update_volume_migration_and_finalizers(
        &self,
        volume: Arc<PersistentVolume>,
    ) -> Result<Arc<PersistentVolume>> {
        let mut clone = (*volume).clone();
        let provisioner = helpers::annotation(&volume.metadata, ann::PROVISIONED_BY).map(str::to_string);
        let mut anns = clone.metadata.annotations.clone().unwrap_or_default();
        let ann_changed = csi::update_migration_annotation(&mut anns, provisioner.as_deref());
        if ann_changed {
            clone.metadata.annotations = if anns.is_empty() { None } else { Some(anns) };
        }
        let fin_changed = modify_deletion_finalizers(&mut clone);
        if !ann_changed && !fin_changed {
            return Ok(volume);
        }
        self.save_volume(&volume, &clone, false, "saving volume migration annotations").await
    }

    /// Looks a claim up by key: cache, then the API server.
    async fn find_claim(&self, namespace: &str, name: &str) -> Result<Option<Arc<PersistentVolumeClaim>>> {
        if let Some(c) = self.claim(&format!("{namespace}/{name}")) {
            return Ok(Some(c));
        }
        self.get_claim_from_api(namespace, name).await
    }

    async fn get_claim_from_api(&self, namespace: &str, name: &str) -> Result<Option<Arc<PersistentVolumeClaim>>> {
        match self.api.get_claim(namespace, name).await {
            Ok(c) => Ok(Some(self.store_claim(c))),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(Error::api("reading claim")(e)),
        }
    }

    /// The volume state machine.
    pub(crate) async fn sync_volume(&self, volume: Arc<PersistentVolume>) -> Result<()> {
        let volume = self.update_volume_migration_and_finalizers(volume).await?;
        let name = helpers::name(&volume.metadata).to_string();

        let Some(claim_ref) = helpers::claim_ref(&volume).cloned() else {
            // Unused volume.
            self.update_volume_phase(&volume, pv_phase::AVAILABLE, "").await?;
            return Ok(());
        };
        if claim_ref.uid.as_deref().unwrap_or("").is_empty() {
            // Pre-bound by a user to a claim that has not bound yet; the claim sync binds it.
            self.update_volume_phase(&volume, pv_phase::AVAILABLE, "").await?;
            return Ok(());
        }
        let ns = claim_ref.namespace.clone().unwrap_or_default();
        let cname = claim_ref.name.clone().unwrap_or_default();
        let ref_uid = claim_ref.uid.clone().unwrap_or_default();

        // The claim by name: cache, then (for volumes not yet released) the API server, so a
        // claim our cache has not seen yet is never mistaken for a deleted one.
        let phase = helpers::volume_phase(&volume).to_string();
        let mut claim = if phase != pv_phase::RELEASED && phase != pv_phase::FAILED {
            self.find_claim(&ns, &cname).await?
        } else {
            self.claim(&format!("{ns}/{cname}"))
        };
        if claim.as_ref().is_some_and(|c| helpers::uid(&c.metadata) != ref_uid) {
            // Another claim with the same name. The cache may be behind: ask the API server.
            claim = self.get_claim_from_api(&ns, &cname).await?.filter(|c| helpers::uid(&c.metadata) == ref_uid);
        }

        let Some(claim) = claim else {
            // The claim is gone: release and reclaim. A Failed volume stays Failed (the user should
            // see it) while reclaim is retried.
            let mut volume = volume;
            if phase != pv_phase::RELEASED && phase != pv_phase::FAILED {
                tracing::info!(volume = %name, policy = helpers::reclaim_policy(&volume), "volume is released and its reclaim policy will be executed");
                volume = self.update_volume_phase(&volume, pv_phase::RELEASED, "").await?;
            }
            return self.reclaim_volume(volume).await;
        };

        let claim_volume = helpers::claim_volume_name(&claim);
        if claim_volume.is_empty() {
            if helpers::volume_mode_mismatch(&claim, &volume) {
                // The claim sync will never pick this volume; say why on both.
                let vmsg = format!("Cannot bind PersistentVolume to requested PersistentVolumeClaim {:?} due to incompatible volumeMode.", cname);
                self.recorder.event(&*volume, reasons::WARNING, reasons::VOLUME_MISMATCH, vmsg).await;
                let cmsg = format!("Cannot bind PersistentVolume {name:?} to requested PersistentVolumeClaim due to incompatible volumeMode.");
                self.recorder.event(&*claim, reasons::WARNING, reasons::VOLUME_MISMATCH, cmsg).await;
                return Ok(());
            }
            // Half-bound (by us, or pre-bound by a user): the claim sync finishes it. Queue it now
            // rather than waiting for resync; this is what binds freshly provisioned volumes.
            self.claim_queue.add(&helpers::claim_key(&claim));
            return Ok(());
        }
        if claim_volume == name {
            // Bound properly.
            self.update_volume_phase(&volume, pv_phase::BOUND, "").await?;
            return Ok(());
        }
        // The claim is bound to another volume.
        if helpers::has_annotation(&volume.metadata, ann::PROVISIONED_BY)
            && helpers::reclaim_policy(&volume) == policy::DELETE
        {
            // Provisioned for this claim, but it got another volume: not needed, delete it.
            let mut volume = volume;
            if phase != pv_phase::RELEASED && phase != pv_phase::FAILED {
                volume = self.update_volume_phase(&volume, pv_phase::RELEASED, "").await?;
            }
            return self.reclaim_volume(volume).await;
        }
        // Bound by us: roll back. Pre-bound by a user: keep the claimRef, drop the UID.
        self.unbind_volume(&volume).await
    }
}

/// Adds or removes the controller's deletion-protection finalizer on a provisioned volume as its
/// reclaim policy says. Returns true when the finalizers changed.
fn modify_deletion_finalizers(volume: &mut PersistentVolume) -> bool {
    let Some(provisioner) = helpers::annotation(&volume.metadata, ann::PROVISIONED_BY).map(str::to_string) else {
        return false;
    };
    let mut fins = volume.metadata.finalizers.clone().unwrap_or_default();
    let before = fins.clone();
    if csi::migrated_driver(&provisioner).is_some() {
        fins.retain(|f| f != ann::PV_CONTROLLER_FINALIZER);
    } else if provisioner.starts_with(ann::IN_TREE_PREFIX) {
        let pol = helpers::reclaim_policy(volume);
        let has = fins.iter().any(|f| f == ann::PV_CONTROLLER_FINALIZER);
        // A volume being deleted never gains a finalizer (the API server refuses it anyway).
        if pol == policy::DELETE && !has && volume.metadata.deletion_timestamp.is_none() {
            fins.push(ann::PV_CONTROLLER_FINALIZER.to_string());
        } else if (pol == policy::RETAIN || pol == policy::RECYCLE) && has {
            fins.retain(|f| f != ann::PV_CONTROLLER_FINALIZER);
        }
        fins.retain(|f| f != ann::EXTERNAL_PROVISIONER_FINALIZER);
    } else {
        return false;
    }
    if fins == before {
        return false;
    }
    volume.metadata.finalizers = if fins.is_empty() { None } else { Some(fins) };
    true
}
