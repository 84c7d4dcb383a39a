//! Reclaiming released volumes by policy: Retain (nothing), Recycle and Delete (operations).

use crate::controller::Controller;
use crate::error::{Error, Result};
use crate::metrics;
use crate::operations::OpKey;
use crate::plugin::{RecyclerEvents, VolumePlugin};
use crate::steps::Reclaim;
use pv_model::annotations as ann;
use pv_model::binding::{self, Holder};
use pv_model::finalizers;
use pv_model::helpers;
use pv_model::k8s::PersistentVolume;
use pv_model::messages;
use pv_model::phase::PvPhase;
use pv_model::{csi, reasons, ObjectKey};
use std::sync::Arc;

/// How often the removal of the deletion finalizer is tried when another writer wins the race.
const FINALIZER_ATTEMPTS: u32 = 5;

/// Outcome of deleting a volume's asset.
pub(crate) enum Deleted {
    /// The asset is gone.
    Yes,
    /// An external deleter owns it; nothing was done.
    External,
}

/// Records a recycler's reports on the volume being recycled, as upstream's
/// `newRecyclerEventRecorder`: reason `RecyclerPod`, message `Recycler pod: <report>`.
struct RecyclerPodEvents<'a> {
    controller: &'a Controller,
    volume: &'a PersistentVolume,
}

#[async_trait::async_trait]
impl RecyclerEvents for RecyclerPodEvents<'_> {
    async fn report(&self, event_type: &str, message: &str) {
        let type_ = if event_type == reasons::WARNING { reasons::WARNING } else { reasons::NORMAL };
        let message = messages::recycler_pod(message);
        self.controller.recorder.event(self.volume, type_, reasons::RECYCLER_POD, message).await;
    }
}

impl Controller {
    /// Starts reclaiming a released volume as its policy says ([`Reclaim`]).
    pub(crate) fn reclaim_volume(&self, volume: Arc<PersistentVolume>, how: Reclaim) {
        let name = helpers::name(&volume.metadata).to_string();
        let uid = helpers::uid(&volume.metadata).to_string();
        match how {
            Reclaim::LeftToCsiDriver => {}
            Reclaim::Retain => tracing::debug!(volume = %name, "policy is Retain, nothing to do"),
            Reclaim::Recycle => {
                let this = self.self_arc();
                self.operations.schedule(
                    OpKey::Recycle { volume: name.clone(), uid },
                    Box::pin(async move {
                        this.recycle_volume_operation(volume).await;
                        Ok(())
                    }),
                    self.sync_volume_again(&name),
                );
            }
            Reclaim::Delete => {
                // Timed from here to the PV gone (see `metrics`); failures count as errors.
                let plugin = self.provisioner_name_of(&volume);
                self.metrics.operation_started(&name, &plugin, metrics::DELETE, self.clock.now_ms());
                let this = self.self_arc();
                self.operations.schedule(
                    OpKey::Delete { volume: name.clone(), uid },
                    Box::pin(async move {
                        let name = helpers::name(&volume.metadata).to_string();
                        let r = this.delete_volume_operation(volume).await;
                        if r.is_err() {
                            this.metrics.operation_finished(&name, this.clock.now_ms(), true);
                        }
                        r
                    }),
                    self.sync_volume_again(&name),
                );
            }
        }
    }

    /// Whether the volume may still be reclaimed, by [`crate::plan::still_released`] over the
    /// claim the caches hold for its claimRef.
    fn still_released(&self, volume: &PersistentVolume) -> bool {
        let claim = helpers::claim_ref(volume).and_then(|r| self.caches.claim(&helpers::claim_ref_key(r)));
        crate::plan::still_released(volume, claim.as_deref())
    }

    /// Whether the volume's claim exists in the API server and still holds the volume (same uid,
    /// bound to it or to nothing yet), although the cache said it was gone. Asked before each
    /// irreversible step (recycling or deleting the storage, deleting the PV): a claim missing
    /// from the cache (a watch that lags or relists) must never cost its data. `Err` when the
    /// answer is unknown, which also stops the step; the next sync tries again.
    async fn claim_holds_volume_live(&self, volume: &PersistentVolume) -> Result<bool> {
        let Some(r) = helpers::claim_ref(volume) else {
            return Ok(false);
        };
        let key = helpers::claim_ref_key(r);
        let (namespace, name) = (r.namespace.as_deref().unwrap_or(""), r.name.as_deref().unwrap_or(""));
        match self.api.get_claim(namespace, name).await {
            Ok(c) => {
                let holds = matches!(binding::holder(volume, Some(&c)), Holder::Binding | Holder::BoundHere);
                if holds {
                    tracing::warn!(volume = %helpers::name(&volume.metadata), pvc = %key,
                        "the claim exists in the API server though the cache does not have it: the volume is not reclaimed");
                    // Cached, the next sync of the volume finds it and binds the volume again.
                    self.caches.store_claim(c);
                    self.volume_queue.add(helpers::name(&volume.metadata));
                }
                Ok(holds)
            }
            Err(e) if e.is_not_found() => Ok(false),
            Err(e) => Err(Error::api("reading the volume's claim before reclaiming")(e)),
        }
    }

    /// Reads the latest volume from the API server (operations may have waited).
    async fn fresh_volume(&self, name: &str) -> Option<Arc<PersistentVolume>> {
        match self.api.get_volume(name).await {
            Ok(v) => Some(self.caches.store_volume(v)),
            Err(e) => {
                tracing::debug!(volume = %name, error = %e, "error reading persistent volume");
                None
            }
        }
    }

    /// Marks a volume Failed with a VolumeFailedRecycle warning. A failed save is retried by the
    /// next sync, which recycles again.
    async fn recycle_failed(&self, volume: &Arc<PersistentVolume>, message: &str) {
        let _ = self
            .update_volume_phase_with_event(
                volume,
                PvPhase::Failed,
                reasons::WARNING,
                reasons::VOLUME_FAILED_RECYCLE,
                message,
            )
            .await;
    }

    async fn recycle_volume_operation(&self, volume: Arc<PersistentVolume>) {
        let name = helpers::name(&volume.metadata).to_string();
        let Some(volume) = self.fresh_volume(&name).await else {
            return;
        };
        if !self.still_released(&volume) {
            tracing::debug!(volume = %name, "volume no longer needs recycling, skipping");
            return;
        }
        // A cached claim with the old name is a new claim: its pods do not use this volume.
        let r = helpers::claim_ref(&volume).cloned().unwrap_or_default();
        if self.caches.claim(&helpers::claim_ref_key(&r)).is_none() {
            let mut pods: Vec<String> = self
                .caches
                .pods_using(&helpers::claim_ref_key(&r))
                .iter()
                .map(|p| ObjectKey::of(&p.metadata).into())
                .collect();
            pods.sort();
            if !pods.is_empty() {
                let msg = messages::used_by_pods(&pods);
                self.recorder.event(&*volume, reasons::NORMAL, reasons::VOLUME_FAILED_RECYCLE, msg).await;
                return;
            }
        }
        let plugin = match self.plugins.recyclable_by_spec(&volume) {
            Ok(p) => p,
            Err(_) => {
                self.recycle_failed(&volume, "No recycler plugin found for the volume!").await;
                return;
            }
        };
        if let Some(msg) = self.shared_host_path(&volume, "recycling") {
            tracing::warn!(volume = %name, "{msg}");
            self.recycle_failed(&volume, &msg).await;
            return;
        }
        if !matches!(self.claim_holds_volume_live(&volume).await, Ok(false)) {
            return;
        }
        // Upstream times no recycling in its metrics.
        let relay = RecyclerPodEvents { controller: self, volume: &volume };
        if let Err(e) = plugin.recycle(&volume, &relay).await {
            self.recycle_failed(&volume, &messages::recycle_failed(&e.to_string())).await;
            return;
        }
        tracing::info!(volume = %name, "volume recycled");
        self.recorder.event(&*volume, reasons::NORMAL, reasons::VOLUME_RECYCLED, messages::RECYCLED).await;
        if let Err(e) = self.unbind_volume(&volume).await {
            // The next sync recycles again; recycling an empty volume is harmless.
            tracing::debug!(volume = %name, error = %e, "failed to make recycled volume Available");
        }
    }

    async fn delete_volume_operation(&self, volume: Arc<PersistentVolume>) -> Result<()> {
        let name = helpers::name(&volume.metadata).to_string();
        let Some(fresh) = self.fresh_volume(&name).await else {
            return Ok(());
        };
        if !self.still_released(&fresh) {
            tracing::debug!(volume = %name, "volume no longer needs deletion, skipping");
            return Ok(());
        }
        if self.claim_holds_volume_live(&fresh).await? {
            return Ok(());
        }
        match self.do_delete_volume(&fresh).await {
            Err(e) => {
                let msg = e.message.clone();
                if e.in_use {
                    self.recorder.event(&*fresh, reasons::NORMAL, reasons::VOLUME_DELETE, msg.clone()).await;
                } else {
                    self.update_volume_phase_with_event(
                        &fresh,
                        PvPhase::Failed,
                        reasons::WARNING,
                        reasons::VOLUME_FAILED_DELETE,
                        &msg,
                    )
                    .await?;
                }
                // Deletion is retried on later syncs, even while Failed.
                Err(Error::Plugin(e))
            }
            Ok(Deleted::External) => Ok(()),
            Ok(Deleted::Yes) => {
                // The asset is gone: delete the object (our finalizer holds it as Terminating),
                // then lift the finalizer so it goes. In this order no sync in between can see a
                // live Delete volume without its finalizer and put it back.
                if let Err(e) = self.api.delete_volume(&name).await {
                    if !e.is_not_found() {
                        tracing::debug!(volume = %name, error = %e, "failed to delete volume object, will retry");
                        return Ok(());
                    }
                }
                // The pv-protection controller takes its finalizer off the same object at
                // about the same moment: a write that loses that race (409, or a cache already
                // newer than what was read) reads the volume again and retries after a short
                // pause (a read may not see the winner's write for a few milliseconds), rather
                // than leaving the volume Terminating until the next resync.
                for attempt in 1..=FINALIZER_ATTEMPTS {
                    let v = match self.api.get_volume(&name).await {
                        Ok(v) => self.caches.store_volume(v),
                        Err(e) if e.is_not_found() => return Ok(()),
                        Err(e) => return Err(Error::api("reading deleted volume")(e)),
                    };
                    match self.remove_deletion_finalizer(v).await {
                        Err(e) if (e.is_conflict() || matches!(e, Error::Stale(_))) && attempt < FINALIZER_ATTEMPTS => {
                            tracing::debug!(volume = %name, error = %e, "finalizer removal lost a race, retrying");
                            self.clock.sleep(std::time::Duration::from_millis(10 << attempt)).await;
                        }
                        r => return r.map(drop),
                    }
                }
                Ok(())
            }
        }
    }

    async fn remove_deletion_finalizer(&self, volume: Arc<PersistentVolume>) -> Result<Arc<PersistentVolume>> {
        if !helpers::has_finalizer(&volume.metadata, finalizers::PV_CONTROLLER) {
            return Ok(volume);
        }
        let mut clone = (*volume).clone();
        if let Some(f) = clone.metadata.finalizers.as_mut() {
            f.retain(|x| x != finalizers::PV_CONTROLLER);
            if f.is_empty() {
                clone.metadata.finalizers = None;
            }
        }
        match self.save_volume(&volume, &clone, false, "removing volume finalizer").await {
            Err(e) if e.is_not_found() => Ok(volume),
            r => r,
        }
    }

    /// Finds the deleter for a volume and deletes its asset.
    pub(crate) async fn do_delete_volume(&self, volume: &PersistentVolume) -> Result<Deleted, crate::PluginError> {
        let plugin = match self.find_deletable_plugin(volume) {
            Ok(Some(p)) => p,
            Ok(None) => {
                tracing::debug!(volume = %helpers::name(&volume.metadata), "external deleter for volume requested, ignoring");
                return Ok(Deleted::External);
            }
            Err(e) => return Err(crate::PluginError::new(e)),
        };
        if let Some(msg) = self.shared_host_path(volume, "deleting") {
            tracing::warn!(volume = %helpers::name(&volume.metadata), "{msg}");
            return Err(crate::PluginError::new(msg));
        }
        let started = std::time::Instant::now();
        let r = plugin.delete(volume).await;
        self.metrics.observe(plugin.name(), metrics::PLUGIN_DELETE, started.elapsed().as_secs_f64(), r.is_err());
        r?;
        tracing::info!(volume = %helpers::name(&volume.metadata), "volume deleted");
        Ok(Deleted::Yes)
    }

    /// Why the volume's host-path directory must not be deleted or recycled (`action`): another
    /// volume names it, a directory inside it or one containing it, so its data would go too.
    /// Upstream's host-path deleter has no such check. The other volumes are the controller's
    /// cache, the volume itself the copy just read from the API server: a fresh LIST would cost
    /// every volume of the cluster per delete and still not close the window between it and the
    /// delete, while a volume too new for the cache cannot yet hold data a pod wrote through it
    /// (it must first be bound and mounted, which the cache sees long before). The cache's index
    /// answers without reading any volume (`VolumeIndex::host_path_conflict`).
    fn shared_host_path(&self, volume: &PersistentVolume, action: &str) -> Option<String> {
        let shared = self.caches.host_path_conflict(volume)?;
        Some(shared.refusal(action))
    }

    /// The plugin name upstream's delete metrics carry for a volume (its
    /// `getProvisionerNameFromVolume`): the deleting plugin's, else for an external deleter the
    /// provisioner of the volume's class (the CSI driver for a migrated one), else `N/A`.
    fn provisioner_name_of(&self, volume: &PersistentVolume) -> String {
        match self.find_deletable_plugin(volume) {
            Err(_) => metrics::NOT_AVAILABLE.into(),
            Ok(Some(p)) => p.name().into(),
            Ok(None) => match self.caches.class(helpers::volume_class(volume)) {
                None => metrics::NOT_AVAILABLE.into(),
                Some(c) => csi::migrated_driver(&c.provisioner).unwrap_or(&c.provisioner).to_string(),
            },
        }
    }

    fn find_deletable_plugin(&self, volume: &PersistentVolume) -> Result<Option<Arc<dyn VolumePlugin>>, String> {
        if let Some(p) = helpers::annotation(&volume.metadata, ann::PROVISIONED_BY).filter(|p| !p.is_empty()) {
            return match self.plugins.deletable_by_name(p) {
                Ok(plugin) => Ok(Some(plugin)),
                Err(_) if !p.starts_with(ann::IN_TREE_PREFIX) => Ok(None),
                Err(e) => Err(e),
            };
        }
        if helpers::has_annotation(&volume.metadata, ann::MIGRATED_TO) {
            return Ok(None);
        }
        if volume.spec.as_ref().is_some_and(|s| s.csi.is_some()) {
            return Ok(None);
        }
        self.plugins
            .deletable_by_spec(volume)
            .map(Some)
            .map_err(|e| messages::no_deleter(helpers::name(&volume.metadata), &e))
    }
}
