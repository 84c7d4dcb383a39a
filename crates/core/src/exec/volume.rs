//! The volume sync: look the claim up, then carry out [`crate::plan::plan_volume`]'s decision.

use crate::controller::Controller;
use crate::error::{Error, Result};
use crate::plan::{self, ClaimLookup, VolumePlan};
use pv_model::helpers;
use pv_model::k8s::{PersistentVolume, PersistentVolumeClaim};
use pv_model::messages;
use pv_model::phase::PvPhase;
use pv_model::{csi, reasons, ObjectKey};
use std::sync::Arc;

impl Controller {
    /// Keeps `migrated-to` and the deletion-protection finalizer of a provisioned volume right.
    async fn update_volume_migration_and_finalizers(
        &self,
        volume: Arc<PersistentVolume>,
    ) -> Result<Arc<PersistentVolume>> {
        let mut clone = (*volume).clone();
        let mut anns = clone.metadata.annotations.clone().unwrap_or_default();
        let ann_changed = csi::anneal_migration_annotations(&mut anns, false);
        if ann_changed {
            clone.metadata.annotations = if anns.is_empty() { None } else { Some(anns) };
        }
        let fin_changed = csi::modify_deletion_finalizers(&mut clone);
        if !ann_changed && !fin_changed {
            return Ok(volume);
        }
        self.save_volume(&volume, &clone, false, "saving volume migration annotations").await
    }

    /// Looks a claim up by key: cache, then the API server.
    async fn find_claim(&self, namespace: &str, name: &str) -> Result<Option<Arc<PersistentVolumeClaim>>> {
        if let Some(c) = self.caches.claim(&ObjectKey::new(namespace, name)) {
            return Ok(Some(c));
        }
        self.get_claim_from_api(namespace, name).await
    }

    async fn get_claim_from_api(&self, namespace: &str, name: &str) -> Result<Option<Arc<PersistentVolumeClaim>>> {
        match self.api.get_claim(namespace, name).await {
            Ok(c) => Ok(Some(self.caches.store_claim(c))),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(Error::api("reading claim")(e)),
        }
    }

    /// The claim a volume's claimRef names, as [`plan::claim_lookup`] says to find it: the cache,
    /// then (for volumes not yet released) the API server; a cached claim of the same name with
    /// another uid is checked with the API server too, the cache may be behind.
    async fn look_up_claim(&self, lookup: &ClaimLookup) -> Result<Option<Arc<PersistentVolumeClaim>>> {
        let ClaimLookup::Claim { namespace, name, uid, ask_api } = lookup else { return Ok(None) };
        let claim = if *ask_api {
            self.find_claim(namespace, name).await?
        } else {
            self.caches.claim(&ObjectKey::new(namespace, name))
        };
        if claim.as_ref().is_some_and(|c| helpers::uid(&c.metadata) != uid) {
            return Ok(self.get_claim_from_api(namespace, name).await?.filter(|c| helpers::uid(&c.metadata) == uid));
        }
        Ok(claim)
    }

    /// The volume state machine: keep its migration annotation and finalizer right, look its
    /// claim up, then carry out [`plan::plan_volume`]'s decision.
    pub(crate) async fn sync_volume(&self, volume: Arc<PersistentVolume>) -> Result<()> {
        let volume = self.update_volume_migration_and_finalizers(volume).await?;
        let claim = self.look_up_claim(&plan::claim_lookup(&volume)).await?;
        let name = helpers::name(&volume.metadata).to_string();
        match plan::plan_volume(&volume, claim.as_ref()) {
            VolumePlan::Unused | VolumePlan::PreBound => {
                self.update_volume_phase(&volume, PvPhase::Available, "").await?;
                Ok(())
            }
            VolumePlan::Release { mark_released } => {
                let mut volume = volume;
                if mark_released {
                    tracing::info!(target: crate::PROGRESS, volume = %name, policy = helpers::reclaim_policy(&volume), "volume is released and its reclaim policy will be executed");
                    volume = self.update_volume_phase(&volume, PvPhase::Released, "").await?;
                }
                self.reclaim_volume(volume).await
            }
            VolumePlan::VolumeModeMismatch(claim) => {
                let cname = helpers::name(&claim.metadata);
                let vmsg = messages::volume_mode_mismatch_on_volume(cname);
                self.recorder.event(&*volume, reasons::WARNING, reasons::VOLUME_MISMATCH, vmsg).await;
                let cmsg = messages::volume_mode_mismatch_on_claim(&name);
                self.recorder.event(&*claim, reasons::WARNING, reasons::VOLUME_MISMATCH, cmsg).await;
                Ok(())
            }
            VolumePlan::QueueClaim(key) => {
                self.claim_queue.add(&key);
                Ok(())
            }
            VolumePlan::Bound => {
                self.update_volume_phase(&volume, PvPhase::Bound, "").await?;
                if let Some(claim) = &claim {
                    // Settled unless a write above made a new version (which syncs again).
                    self.caches.settle_volume(&volume, claim);
                }
                Ok(())
            }
            VolumePlan::DeleteUnneeded { mark_released } => {
                let mut volume = volume;
                if mark_released {
                    volume = self.update_volume_phase(&volume, PvPhase::Released, "").await?;
                }
                self.reclaim_volume(volume).await
            }
            VolumePlan::Unbind => self.unbind_volume(&volume).await,
        }
    }
}
