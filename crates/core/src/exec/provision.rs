//! Dynamic provisioning: internal plugins provision here; external provisioners are handed the
//! claim by annotation.

use crate::controller::Controller;
use crate::error::{Error, Result};
use crate::metrics;
use crate::operations::OpKey;
use crate::plan::{Provisioning, Refusal};
use crate::plugin::{ProvisionOptions, VolumePlugin};
use pv_model::annotations as ann;
use pv_model::finalizers;
use pv_model::helpers;
use pv_model::k8s::{Node, PersistentVolumeClaim, StorageClass};
use pv_model::messages;
use pv_model::phase::{PvPhase, ReclaimPolicy};
use pv_model::{csi, reasons};
use std::sync::Arc;

impl Controller {
    /// Carries out a provisioning the plan decided: starts it as an operation keyed by the claim,
    /// or says why it cannot start.
    pub(crate) async fn provision_claim(&self, claim: Arc<PersistentVolumeClaim>, how: Provisioning) -> Result<()> {
        let (internal, class, provisioner) = match how {
            Provisioning::Disabled => return Ok(()),
            Provisioning::Failed(e) => {
                // Retried on every sync of the claim.
                self.recorder.event(&*claim, reasons::WARNING, reasons::PROVISIONING_FAILED, e).await;
                return Ok(());
            }
            Provisioning::Internal { plugin, class, node, refusal } => {
                let name = plugin.name().to_string();
                (Some((plugin, node, refusal)), class, name)
            }
            Provisioning::External { provisioner, class } => (None, class, provisioner),
        };
        let key = helpers::claim_key(&claim);
        let name = OpKey::Provision { claim: key.clone(), uid: helpers::uid(&claim.metadata).to_string() };
        let this = self.self_arc();
        let again = self.sync_claim_again(&key);
        self.operations.schedule(
            name,
            Box::pin(async move {
                // Timed from here to the claim bound (see `metrics`); failures count as errors.
                this.metrics.operation_started(&key, &provisioner, metrics::PROVISION, this.clock.now_ms());
                let r = match internal {
                    None => this.provision_external(claim, &provisioner).await,
                    Some((plugin, node, refusal)) => this.provision_internal(claim, plugin, class, node, refusal).await,
                };
                if r.is_err() {
                    this.metrics.operation_finished(&key, this.clock.now_ms(), true);
                }
                r
            }),
            again,
        );
        Ok(())
    }

    /// Annotates the claim with the provisioner that should provision it.
    async fn set_claim_provisioner(
        &self,
        claim: Arc<PersistentVolumeClaim>,
        provisioner: &str,
    ) -> Result<Arc<PersistentVolumeClaim>> {
        if helpers::annotation(&claim.metadata, ann::STORAGE_PROVISIONER) == Some(provisioner) {
            return Ok(claim);
        }
        let mut clone = (*claim).clone();
        helpers::set_annotation(&mut clone.metadata, ann::BETA_STORAGE_PROVISIONER, provisioner);
        helpers::set_annotation(&mut clone.metadata, ann::STORAGE_PROVISIONER, provisioner);
        if let Some(a) = clone.metadata.annotations.as_mut() {
            csi::update_migration_annotation(a, Some(provisioner));
        }
        self.save_claim(&claim, &clone, false, "saving claim provisioner").await
    }

    /// Hands the claim to the external provisioner the plan named (a CSI driver for a migrated
    /// in-tree name) by annotation.
    async fn provision_external(&self, claim: Arc<PersistentVolumeClaim>, provisioner: &str) -> Result<()> {
        let claim = match self.set_claim_provisioner(claim.clone(), provisioner).await {
            Ok(c) => c,
            Err(e) => {
                // Upstream's event; the next sync tries again.
                let msg = messages::error_saving_claim(&e.api_message());
                self.recorder.event(&*claim, reasons::WARNING, reasons::PROVISIONING_FAILED, msg).await;
                return Err(e);
            }
        };
        let msg = messages::external_provisioning(provisioner);
        self.recorder.event(&*claim, reasons::NORMAL, reasons::EXTERNAL_PROVISIONING, msg).await;
        Ok(())
    }

    async fn fail_provisioning(&self, claim: &PersistentVolumeClaim, msg: String) -> Error {
        self.recorder.event(claim, reasons::WARNING, reasons::PROVISIONING_FAILED, msg.clone()).await;
        Error::Plugin(crate::PluginError::new(msg))
    }

    async fn provision_internal(
        &self,
        claim: Arc<PersistentVolumeClaim>,
        plugin: Arc<dyn VolumePlugin>,
        class: Arc<StorageClass>,
        node: Option<Arc<Node>>,
        refusal: Option<Refusal>,
    ) -> Result<()> {
        let plugin_name = plugin.name().to_string();
        // The plan's refusals, where upstream's operation meets them.
        if let Some(r) = refusal.as_ref().filter(|r| r.before_annotation()) {
            return Err(self.fail_provisioning(&claim, r.message(&plugin_name, &class)).await);
        }
        let claim = self.set_claim_provisioner(claim, &class.provisioner).await?;

        // A previous attempt may have finished: the PV name is deterministic. One that finished
        // while this claim's sync was deciding (its plan read the cache before that attempt
        // stored the volume) is in the cache already; only a volume the cache lacks is asked for.
        let pv_name = format!("pvc-{}", helpers::uid(&claim.metadata));
        if self.caches.volume(&pv_name).is_some() {
            return Ok(());
        }
        match self.api.get_volume(&pv_name).await {
            Ok(_) => return Ok(()),
            Err(e) if e.is_not_found() => {}
            Err(e) => return Err(Error::api("checking for an existing provisioned volume")(e)),
        }
        // The selected node is looked up as the operation runs, as upstream's operation looks it
        // up: one that reached the cache since the plan was made is taken.
        let (node, refusal) = match refusal {
            Some(Refusal::NodeNotFound(name)) => match self.caches.node(&name) {
                Some(n) => (Some(n), None),
                None => (None, Some(Refusal::NodeNotFound(name))),
            },
            r => (node, r),
        };
        if let Some(r) = refusal {
            return Err(self.fail_provisioning(&claim, r.message(&plugin_name, &class)).await);
        }
        let claim_ref = helpers::claim_reference(&claim);
        let options = ProvisionOptions {
            pv_name: pv_name.clone(),
            claim: claim.clone(),
            class: class.clone(),
            reclaim_policy: class.reclaim_policy.clone().unwrap_or_else(|| ReclaimPolicy::Delete.as_str().into()),
            mount_options: class.mount_options.clone().unwrap_or_default(),
            parameters: class.parameters.clone().unwrap_or_default(),
            selected_node: node.map(|n| (*n).clone()),
        };
        let started = std::time::Instant::now();
        let provisioned = plugin.provision(&options).await;
        let seconds = started.elapsed().as_secs_f64();
        self.metrics.observe(&plugin_name, metrics::PLUGIN_PROVISION, seconds, provisioned.is_err());
        let mut volume = match provisioned {
            Ok(v) => v,
            Err(e) => {
                self.reschedule_provisioning(&claim).await;
                let msg = messages::failed_to_provision(helpers::name(&class.metadata), &e.to_string());
                return Err(self.fail_provisioning(&claim, msg).await);
            }
        };
        if volume.metadata.name.as_deref().unwrap_or("").is_empty() {
            volume.metadata.name = Some(pv_name.clone());
        }
        let spec = volume.spec.get_or_insert_with(Default::default);
        spec.claim_ref = Some(claim_ref);
        let class_name = helpers::claim_class(&claim);
        if !class_name.is_empty() {
            spec.storage_class_name = Some(class_name.to_string());
        }
        let delete_policy = spec.persistent_volume_reclaim_policy.as_deref() == Some(ReclaimPolicy::Delete.as_str());
        volume.status.get_or_insert_with(Default::default).phase = Some(PvPhase::Bound.as_str().into());
        helpers::set_annotation(&mut volume.metadata, ann::BOUND_BY_CONTROLLER, "yes");
        helpers::set_annotation(&mut volume.metadata, ann::PROVISIONED_BY, &plugin_name);
        if delete_policy {
            volume.metadata.finalizers = Some(vec![finalizers::PV_CONTROLLER.to_string()]);
        }

        let key = helpers::claim_key(&claim);
        let mut last_err = None;
        for attempt in 0..self.config.create_provisioned_pv_retry_count.max(1) {
            if attempt > 0 {
                self.clock.sleep(self.config.create_provisioned_pv_interval).await;
            }
            match self.api.create_volume(&volume).await {
                Ok(saved) => {
                    self.caches.store_volume(saved);
                    last_err = None;
                    break;
                }
                Err(crate::ApiError::AlreadyExists(_)) => {
                    last_err = None;
                    break;
                }
                Err(e) => {
                    tracing::debug!(pvc = %key, error = %e, "failed to save provisioned volume");
                    last_err = Some(e);
                }
            }
        }
        if let Some(err) = last_err.take() {
            // A failed create may still have been applied (the response was lost). Deleting the
            // asset under a PV that exists would lose data; ask before cleaning up.
            match self.api.get_volume(&pv_name).await {
                Ok(existing)
                    if helpers::claim_ref(&existing).and_then(|r| r.uid.as_deref())
                        == claim.metadata.uid.as_deref() =>
                {
                    self.caches.store_volume(existing);
                }
                Ok(_) => last_err = Some(err),
                Err(e) if e.is_not_found() => last_err = Some(err),
                Err(e) => {
                    // Unknown: keep the asset. The next attempt finds the PV or provisions again
                    // under the same deterministic name, so nothing is orphaned.
                    tracing::debug!(pvc = %key, error = %e, "cannot tell whether the provisioned volume was saved");
                    return Err(Error::api("checking the provisioned volume")(e));
                }
            }
        }
        if let Some(err) = last_err {
            // The asset exists but its PV could not be saved: delete the asset, never orphan it.
            let msg = messages::error_creating_pv(&key, &err.to_string());
            self.recorder.event(&*claim, reasons::WARNING, reasons::PROVISIONING_FAILED, msg).await;
            let mut delete_err = None;
            for attempt in 0..self.config.create_provisioned_pv_retry_count.max(1) {
                if attempt > 0 {
                    self.clock.sleep(self.config.create_provisioned_pv_interval).await;
                }
                match plugin.delete(&volume).await {
                    Ok(()) => {
                        delete_err = None;
                        break;
                    }
                    Err(e) => delete_err = Some(e),
                }
            }
            if let Some(e) = delete_err {
                let msg = messages::error_cleaning_volume(&key, &e.to_string());
                self.recorder.event(&*claim, reasons::WARNING, reasons::PROVISIONING_CLEANUP_FAILED, msg).await;
            }
            return Err(Error::api("saving provisioned volume")(err));
        }
        let msg = messages::provisioned(&pv_name, &plugin_name);
        self.recorder.event(&*claim, reasons::NORMAL, reasons::PROVISIONING_SUCCEEDED, msg).await;
        Ok(())
    }

    /// After a failed provisioning under delayed binding, drops the selected node so the
    /// scheduler picks again.
    async fn reschedule_provisioning(&self, claim: &Arc<PersistentVolumeClaim>) {
        if !helpers::has_annotation(&claim.metadata, ann::SELECTED_NODE) {
            return;
        }
        let mut clone = (**claim).clone();
        helpers::remove_annotation(&mut clone.metadata, ann::SELECTED_NODE);
        if let Err(e) = self.save_claim(claim, &clone, false, "dropping the selected node").await {
            tracing::debug!(pvc = %helpers::claim_key(claim), error = %e, "failed to drop selected node")
        }
    }
}
