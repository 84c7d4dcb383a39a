//! The claim syncs: unbound claims find (or get provisioned) a volume; bound claims are kept
//! true. Each carries out its plan (`plan_unbound_claim`, `plan_bound_claim`).

use crate::controller::Controller;
use crate::error::{Error, Result};
use crate::plan::{self, BoundClaimPlan, UnboundClaimPlan};
use pv_model::helpers::{self, pvc_phase};
use pv_model::k8s::PersistentVolumeClaim;
use pv_model::messages;
use pv_model::{csi, reasons};
use std::sync::Arc;

/// Upstream's message when a claim with no class finds no volume.
pub const NO_CLASS_MESSAGE: &str = messages::NO_CLASS;

/// Upstream's WaitForFirstConsumer event message.
pub const WAITING_FOR_FIRST_CONSUMER: &str = messages::WAITING_FOR_FIRST_CONSUMER;

/// What ends the wait for a first consumer, appended to upstream's message with detailed events
/// (`Config::detailed_events`).
pub const FIRST_CONSUMER_HINT: &str = messages::FIRST_CONSUMER_HINT;

/// The reason and message of the event of a claim waiting for its first consumer, given the
/// unscheduled pods that use it: upstream's, and with `detailed` (where no scheduler may run,
/// `up`) what ends the wait after upstream's WaitForFirstConsumer text.
pub fn waiting_for_consumer_event(pods: &[String], detailed: bool) -> (&'static str, String) {
    match pods {
        [] if detailed => {
            (reasons::WAIT_FOR_FIRST_CONSUMER, format!("{WAITING_FOR_FIRST_CONSUMER}; {FIRST_CONSUMER_HINT}"))
        }
        [] => (reasons::WAIT_FOR_FIRST_CONSUMER, WAITING_FOR_FIRST_CONSUMER.to_string()),
        _ => (reasons::WAIT_FOR_POD_SCHEDULED, messages::waiting_for_pods(pods)),
    }
}

impl Controller {
    async fn update_claim_migration_annotations(
        &self,
        claim: Arc<PersistentVolumeClaim>,
    ) -> Result<Arc<PersistentVolumeClaim>> {
        let mut anns = claim.metadata.annotations.clone().unwrap_or_default();
        if !csi::anneal_migration_annotations(&mut anns, true) {
            return Ok(claim);
        }
        let mut clone = (*claim).clone();
        clone.metadata.annotations = Some(anns);
        self.save_claim(&claim, &clone, false, "saving claim migration annotations").await
    }

    /// The claim state machine.
    pub(crate) async fn sync_claim(&self, claim: Arc<PersistentVolumeClaim>) -> Result<()> {
        let claim = self.update_claim_migration_annotations(claim).await?;
        if !pv_model::binding::claim_is_bound(&claim) {
            self.sync_unbound_claim(claim).await
        } else {
            self.sync_bound_claim(claim).await
        }
    }

    async fn sync_unbound_claim(&self, claim: Arc<PersistentVolumeClaim>) -> Result<()> {
        let key = helpers::claim_key(&claim);
        // Decided from the caches alone (the function `pv-controller explain` reports).
        match plan::plan_unbound_claim(&self.caches, &claim) {
            UnboundClaimPlan::Bind { volume, reserve: true } => {
                let vname = helpers::name(&volume.metadata);
                let Some(reservation) = self.caches.reserve(vname, &key) else {
                    return Err(Error::Reserved(vname.to_string()));
                };
                let result = self.bind(&volume, &claim).await;
                drop(reservation);
                // A provisioning of this claim (if one started) is done once it is bound.
                self.metrics.operation_finished(&key, self.clock.now_ms(), result.is_err());
                result
            }
            UnboundClaimPlan::Bind { volume, reserve: false } => self.bind(&volume, &claim).await,
            UnboundClaimPlan::AssignDefaultClass(class) => self.assign_default_class(&claim, class).await,
            // Provisioning runs as an operation; it updates the claim itself.
            UnboundClaimPlan::Provision(provisioning) => self.provision_claim(claim, provisioning).await,
            UnboundClaimPlan::WaitForFirstConsumer { pods } => {
                self.emit_waiting_for_consumer(&claim, &pods).await;
                self.stay_pending(&claim).await
            }
            UnboundClaimPlan::NoClass => {
                // Upstream's text; with detailed events, why each volume was rejected too.
                let why =
                    if self.config.detailed_events { self.caches.rejection_breakdown(&claim) } else { String::new() };
                let (normal, reason) = (reasons::NORMAL, reasons::FAILED_BINDING);
                self.recorder.event_with_detail(&*claim, normal, reason, NO_CLASS_MESSAGE, &why).await;
                self.stay_pending(&claim).await
            }
            // The requested volume does not exist (yet): stay Pending.
            UnboundClaimPlan::VolumeNotFound(_) => self.stay_pending(&claim).await,
            UnboundClaimPlan::VolumeMismatch { volume, verdict } => {
                let msg = messages::cannot_bind_to_requested(helpers::name(&volume.metadata), &verdict.detail);
                self.recorder.event(&*claim, reasons::WARNING, reasons::VOLUME_MISMATCH, msg).await;
                self.stay_pending(&claim).await
            }
            UnboundClaimPlan::ClaimedByOther { volume, other, invalid } => {
                let requested = helpers::name(&volume.metadata);
                // Upstream emits this in both branches below.
                let msg = messages::already_bound_elsewhere(requested);
                self.recorder.event(&*claim, reasons::WARNING, reasons::FAILED_BINDING, msg).await;
                if invalid {
                    // Only possible if someone removed bind-completed from a claim we bound.
                    return Err(Error::Invalid(format!(
                        "invalid binding of claim {key:?} to volume {requested:?}: volume already claimed by {other:?}"
                    )));
                }
                self.stay_pending(&claim).await
            }
        }
    }

    /// Marks a bound claim Lost (a terminal phase) with a Warning, once.
    async fn mark_lost(&self, claim: &Arc<PersistentVolumeClaim>, reason: &'static str, message: &str) -> Result<()> {
        self.update_claim_status_with_event(claim, pvc_phase::LOST, None, reasons::WARNING, reason, message).await?;
        Ok(())
    }

    /// The bound claim's sync: carries out [`plan::plan_bound_claim`]'s decision for the volume
    /// its `volumeName` names in the cache.
    async fn sync_bound_claim(&self, claim: Arc<PersistentVolumeClaim>) -> Result<()> {
        let volume = self.caches.volume(helpers::claim_volume_name(&claim));
        match plan::plan_bound_claim(&claim, volume) {
            BoundClaimPlan::LostReference => self.mark_lost(&claim, reasons::CLAIM_LOST, plan::LOST_REFERENCE).await,
            BoundClaimPlan::LostVolume => self.mark_lost(&claim, reasons::CLAIM_LOST, plan::LOST_VOLUME).await,
            BoundClaimPlan::Misbound(_) => self.mark_lost(&claim, reasons::CLAIM_MISBOUND, plan::MISBOUND).await,
            BoundClaimPlan::Rebind(volume) => self.bind(&volume, &claim).await,
            // bind() writes only what is missing (usually nothing: the pair settles).
            BoundClaimPlan::KeepBound(volume) => {
                self.bind(&volume, &claim).await?;
                // Settled unless a write made a new version of either (which syncs again).
                self.caches.settle_claim(&claim, &volume);
                Ok(())
            }
        }
    }

    async fn stay_pending(&self, claim: &Arc<PersistentVolumeClaim>) -> Result<()> {
        self.update_claim_status(claim, pvc_phase::PENDING, None).await.map(|_| ())
    }

    /// Gives a claim with no class the cluster's default class `class` (the plan chose it).
    async fn assign_default_class(&self, claim: &Arc<PersistentVolumeClaim>, class: String) -> Result<()> {
        let mut clone = (**claim).clone();
        clone.spec.get_or_insert_with(Default::default).storage_class_name = Some(class.clone());
        match self.save_claim(claim, &clone, false, "assigning default storage class").await {
            Ok(_) => {
                self.metrics.retroactive(true);
                tracing::info!(target: crate::PROGRESS, pvc = %helpers::claim_key(claim), class = %class, "assigned default storage class");
                // The update triggers a new sync, which binds or provisions with the class.
                self.claim_queue.add(&helpers::claim_key(claim));
                Ok(())
            }
            Err(e) => {
                self.metrics.retroactive(false);
                Err(e)
            }
        }
    }

    async fn emit_waiting_for_consumer(&self, claim: &Arc<PersistentVolumeClaim>, pods: &[String]) {
        let (reason, msg) = waiting_for_consumer_event(pods, self.config.detailed_events);
        self.recorder.event(&**claim, reasons::NORMAL, reason, msg).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_claim_waiting_for_its_first_consumer_gets_upstreams_text_and_the_hint_only_when_detailed() {
        assert_eq!(
            waiting_for_consumer_event(&[], false),
            ("WaitForFirstConsumer", "waiting for first consumer to be created before binding".to_string())
        );
        let (reason, detailed) = waiting_for_consumer_event(&[], true);
        assert_eq!(reason, "WaitForFirstConsumer");
        assert_eq!(detailed, format!("waiting for first consumer to be created before binding; {FIRST_CONSUMER_HINT}"));
    }

    #[test]
    fn unscheduled_pods_are_named_as_upstream_names_them_either_way() {
        for detailed in [false, true] {
            assert_eq!(
                waiting_for_consumer_event(&["web-0".into()], detailed),
                ("WaitForPodScheduled", "waiting for pod web-0 to be scheduled".to_string())
            );
            assert_eq!(
                waiting_for_consumer_event(&["a".into(), "b".into()], detailed),
                ("WaitForPodScheduled", "waiting for pods a,b to be scheduled".to_string())
            );
        }
    }
}
