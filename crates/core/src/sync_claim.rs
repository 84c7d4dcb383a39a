//! `sync_claim`: unbound claims find (or get provisioned) a volume; bound claims are kept true.

use crate::controller::Controller;
use crate::error::{Error, Result};
use pv_model::annotations as ann;
use pv_model::helpers::{self, pvc_phase};
use pv_model::k8s::{PersistentVolume, PersistentVolumeClaim};
use pv_model::{csi, matching, reasons};
use std::sync::Arc;

/// Upstream's message when a claim with no class finds no volume.
pub const NO_CLASS_MESSAGE: &str =
    "no persistent volumes available for this claim and no storage class is set";

impl Controller {
    async fn update_claim_migration_annotations(
        &self,
        claim: Arc<PersistentVolumeClaim>,
    ) -> Result<Arc<PersistentVolumeClaim>> {
        let provisioner = helpers::annotation(&claim.metadata, ann::STORAGE_PROVISIONER)
            .or_else(|| helpers::annotation(&claim.metadata, ann::BETA_STORAGE_PROVISIONER))
            .map(str::to_string);
        let mut anns = claim.metadata.annotations.clone().unwrap_or_default();
        if !csi::update_migration_annotation(&mut anns, provisioner.as_deref()) {
            return Ok(claim);
        }
        let mut clone = (*claim).clone();
        clone.metadata.annotations = Some(anns);
        let saved = self
            .api
            .update_claim(&clone)
            .await
            .map_err(Error::api("saving claim migration annotations"))?;
        Ok(self.store_claim(saved))
    }

    /// The claim state machine.
    pub(crate) async fn sync_claim(&self, claim: Arc<PersistentVolumeClaim>) -> Result<()> {
        let claim = self.update_claim_migration_annotations(claim).await?;
        if !helpers::has_annotation(&claim.metadata, ann::BIND_COMPLETED) {
            self.sync_unbound_claim(claim).await
        } else {
            self.sync_bound_claim(claim).await
        }
    }

    /// True when the claim's class binds on first consumer. A missing class is not delayed.
    pub fn is_delay_binding(&self, claim: &PersistentVolumeClaim) -> bool {
        let class = helpers::claim_class(claim);
        !class.is_empty()
            && self
                .class(class)
                .is_some_and(|c| helpers::is_delay_binding_class(&c))
    }

    /// The volume the controller would bind this claim to now.
    pub fn find_best_match(&self, claim: &PersistentVolumeClaim) -> Option<Arc<PersistentVolume>> {
        let delay = self.is_delay_binding(claim);
        let key = helpers::claim_key(claim);
        let reserved = self.reservations.lock().unwrap().clone();
        let is_reserved = |v: &str| reserved.get(v).is_some_and(|c| *c != key);
        self.volumes
            .read()
            .unwrap()
            .index
            .find_best_match(claim, delay, &is_reserved)
    }

    async fn sync_unbound_claim(&self, claim: Arc<PersistentVolumeClaim>) -> Result<()> {
        let key = helpers::claim_key(&claim);
        let requested = helpers::claim_volume_name(&claim).to_string();
        if requested.is_empty() {
            // The user does not care which volume.
            let delay = self.is_delay_binding(&claim);
            let Some(volume) = self.find_best_match(&claim) else {
                // No match: maybe give it the default class first (retroactive assignment).
                if self.assign_default_class(&claim).await? {
                    return Ok(());
                }
                if delay && !helpers::has_annotation(&claim.metadata, ann::SELECTED_NODE) {
                    self.emit_waiting_for_consumer(&claim).await;
                } else if !helpers::claim_class(&claim).is_empty() {
                    // Provisioning runs as an operation; it updates the claim itself.
                    return self.provision_claim(claim).await;
                } else {
                    let msg = format!("{NO_CLASS_MESSAGE}{}", self.rejection_breakdown(&claim));
                    self.recorder
                        .event(&*claim, reasons::NORMAL, reasons::FAILED_BINDING, msg)
                        .await;
                }
                self.update_claim_status(&claim, pvc_phase::PENDING, None)
                    .await?;
                return Ok(());
            };
            // Reserve the volume so concurrent workers do not pick it for another claim.
            let vname = helpers::name(&volume.metadata).to_string();
            {
                let mut r = self.reservations.lock().unwrap();
                if r.get(&vname).is_some_and(|c| *c != key) {
                    return Err(Error::Invalid(format!(
                        "volume {vname:?} is being bound to another claim"
                    )));
                }
                r.insert(vname.clone(), key.clone());
            }
            let result = self.bind(&volume, &claim).await;
            self.reservations.lock().unwrap().remove(&vname);
            return result;
        }

        // The user asked for a specific volume.
        let Some(volume) = self.volume(&requested) else {
            // It does not exist (yet): stay Pending.
            self.update_claim_status(&claim, pvc_phase::PENDING, None)
                .await?;
            return Ok(());
        };
        if helpers::claim_ref(&volume).is_none() {
            // Unclaimed: bind if it fits.
            if let Some(why) = matching::check_requested_volume(&volume, &claim) {
                self.recorder
                    .event(&*claim, reasons::WARNING, reasons::VOLUME_MISMATCH, why)
                    .await;
                self.update_claim_status(&claim, pvc_phase::PENDING, None)
                    .await?;
                return Ok(());
            }
            return self.bind(&volume, &claim).await;
        }
        if helpers::is_volume_bound_to_claim(&volume, &claim) {
            // Claimed by this claim: finish the binding (adds the UID).
            return self.bind(&volume, &claim).await;
        }
        // Claimed by someone else.
        if !helpers::has_annotation(&claim.metadata, ann::BOUND_BY_CONTROLLER) {
            let msg = format!("volume {:?} already bound to a different claim.", requested);
            self.recorder
                .event(&*claim, reasons::WARNING, reasons::FAILED_BINDING, msg)
                .await;
            self.update_claim_status(&claim, pvc_phase::PENDING, None)
                .await?;
            return Ok(());
        }
        // Only possible if someone removed bind-completed from a claim we bound.
        let other = helpers::claim_ref(&volume)
            .map(helpers::claim_ref_key)
            .unwrap_or_default();
        Err(Error::Invalid(format!("invalid binding of claim {key:?} to volume {requested:?}: volume already claimed by {other:?}")))
    }

    async fn sync_bound_claim(&self, claim: Arc<PersistentVolumeClaim>) -> Result<()> {
        let vname = helpers::claim_volume_name(&claim).to_string();
        if vname.is_empty() {
            self.update_claim_status_with_event(
                &claim,
                pvc_phase::LOST,
                None,
                reasons::WARNING,
                reasons::CLAIM_LOST,
                "Bound claim has lost reference to PersistentVolume. Data on the volume is lost!",
            )
            .await?;
            return Ok(());
        }
        let Some(volume) = self.volume(&vname) else {
            self.update_claim_status_with_event(
                &claim,
                pvc_phase::LOST,
                None,
                reasons::WARNING,
                reasons::CLAIM_LOST,
                "Bound claim has lost its PersistentVolume. Data on the volume is lost!",
            )
            .await?;
            return Ok(());
        };
        match helpers::claim_ref(&volume) {
            // The volume came unbound (or our cache is behind): bind it again.
            None => self.bind(&volume, &claim).await,
            // All is well; bind() writes only what is missing.
            Some(r) if r.uid.as_deref().unwrap_or("") == helpers::uid(&claim.metadata) => {
                self.bind(&volume, &claim).await
            }
            Some(_) => {
                self.update_claim_status_with_event(
                    &claim,
                    pvc_phase::LOST,
                    None,
                    reasons::WARNING,
                    reasons::CLAIM_MISBOUND,
                    "Two claims are bound to the same volume, this one is bound incorrectly",
                )
                .await?;
                Ok(())
            }
        }
    }

    /// Gives a claim with no class the cluster's default class. True when it did.
    async fn assign_default_class(&self, claim: &Arc<PersistentVolumeClaim>) -> Result<bool> {
        if helpers::claim_has_class(claim) {
            return Ok(false);
        }
        let default = {
            let classes = self.classes.read().unwrap();
            helpers::default_class(classes.values().map(|c| &**c))
                .map(|c| helpers::name(&c.metadata).to_string())
        };
        let Some(class) = default else {
            return Ok(false);
        };
        let mut clone = (**claim).clone();
        clone
            .spec
            .get_or_insert_with(Default::default)
            .storage_class_name = Some(class.clone());
        match self.api.update_claim(&clone).await {
            Ok(saved) => {
                self.metrics.retroactive(true);
                tracing::info!(pvc = %helpers::claim_key(claim), class = %class, "assigned default storage class");
                self.store_claim(saved);
                // The update triggers a new sync, which binds or provisions with the class.
                self.claim_queue.add(&helpers::claim_key(claim));
                Ok(true)
            }
            Err(e) => {
                self.metrics.retroactive(false);
                Err(Error::api("assigning default storage class")(e))
            }
        }
    }

    async fn emit_waiting_for_consumer(&self, claim: &Arc<PersistentVolumeClaim>) {
        let pods = self.unscheduled_pods_using(claim);
        let (reason, msg) = match pods.len() {
            0 => (
                reasons::WAIT_FOR_FIRST_CONSUMER,
                "waiting for first consumer to be created before binding".to_string(),
            ),
            1 => (
                reasons::WAIT_FOR_POD_SCHEDULED,
                format!("waiting for pod {} to be scheduled", pods[0]),
            ),
            _ => (
                reasons::WAIT_FOR_POD_SCHEDULED,
                format!("waiting for pods {} to be scheduled", pods.join(",")),
            ),
        };
        self.recorder
            .event(&**claim, reasons::NORMAL, reason, msg)
            .await;
    }

    /// Names of running (not terminated) pods that use the claim and are not scheduled yet.
    fn unscheduled_pods_using(&self, claim: &PersistentVolumeClaim) -> Vec<String> {
        self.pods_using(&helpers::claim_key(claim))
            .into_iter()
            .filter(|p| !helpers::pod_is_scheduled(p))
            .map(|p| helpers::name(&p.metadata).to_string())
            .collect()
    }

    /// Running (not terminated) pods that use the claim with this key, by name.
    pub(crate) fn pods_using(&self, claim_key: &str) -> Vec<Arc<pv_model::k8s::Pod>> {
        let keys: Vec<String> = self
            .pods_by_claim
            .read()
            .unwrap()
            .get(claim_key)
            .into_iter()
            .flatten()
            .cloned()
            .collect();
        let pods = self.pods.read().unwrap();
        keys.iter()
            .filter_map(|k| pods.get(k))
            .filter(|p| !helpers::is_pod_terminated(p))
            .cloned()
            .collect()
    }

    /// " (12 volumes: 7 too small, 3 access modes, 2 class)" — why every volume was rejected; empty
    /// when there are no volumes. Appended to upstream's FailedBinding message.
    pub fn rejection_breakdown(&self, claim: &PersistentVolumeClaim) -> String {
        let delay = self.is_delay_binding(claim);
        let mut counts: std::collections::BTreeMap<matching::VerdictKind, usize> =
            Default::default();
        let mut total = 0;
        for v in self.volumes.read().unwrap().index.iter() {
            total += 1;
            *counts
                .entry(matching::evaluate(claim, v, delay).kind)
                .or_default() += 1;
        }
        if total == 0 {
            return String::new();
        }
        let mut parts: Vec<(usize, &str)> = counts
            .iter()
            .map(|(k, n)| (*n, k.breakdown_label()))
            .collect();
        parts.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(b.1)));
        let list: Vec<String> = parts.iter().map(|(n, l)| format!("{n} {l}")).collect();
        format!(
            " ({total} volume{}: {})",
            if total == 1 { "" } else { "s" },
            list.join(", ")
        )
    }
}
