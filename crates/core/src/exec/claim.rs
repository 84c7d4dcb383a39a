//! The claim syncs: unbound claims find (or get provisioned) a volume; bound claims are kept
//! true. Each carries out its plan (`plan_unbound_claim`, `plan_bound_claim`).

use crate::controller::Controller;
use crate::error::{Error, Result};
use crate::plan::{self, BoundClaimPlan, UnboundClaimPlan};
use pv_model::annotations as ann;
use pv_model::helpers::{self, pvc_phase};
use pv_model::k8s::PersistentVolumeClaim;
use pv_model::{csi, reasons};
use std::sync::Arc;

/// Upstream's message when a claim with no class finds no volume.
pub const NO_CLASS_MESSAGE: &str = "no persistent volumes available for this claim and no storage class is set";

/// Upstream's WaitForFirstConsumer event message.
pub const WAITING_FOR_FIRST_CONSUMER: &str = "waiting for first consumer to be created before binding";

/// What ends the wait for a first consumer, appended to upstream's message with detailed events
/// (`Config::detailed_events`). Where no scheduler runs (`pv-controller up`), a user can do what
/// the scheduler would.
pub const FIRST_CONSUMER_HINT: &str = "a scheduler ends the wait when it places a pod that uses the claim, by \
     setting annotation volume.kubernetes.io/selected-node=NODE on the claim (then a volume is provisioned \
     for that node) or by pre-binding a matching volume (claim spec.volumeName); with no scheduler, do \
     either by hand";

/// The reason and message of the event of a claim waiting for its first consumer, given the
/// unscheduled pods that use it: upstream's, and with `detailed` (where no scheduler may run,
/// `up`) what ends the wait after upstream's WaitForFirstConsumer text.
pub fn waiting_for_consumer_event(pods: &[String], detailed: bool) -> (&'static str, String) {
    match pods {
        [] if detailed => {
            (reasons::WAIT_FOR_FIRST_CONSUMER, format!("{WAITING_FOR_FIRST_CONSUMER}; {FIRST_CONSUMER_HINT}"))
        }
        [] => (reasons::WAIT_FOR_FIRST_CONSUMER, WAITING_FOR_FIRST_CONSUMER.to_string()),
        [pod] => (reasons::WAIT_FOR_POD_SCHEDULED, format!("waiting for pod {pod} to be scheduled")),
        _ => (reasons::WAIT_FOR_POD_SCHEDULED, format!("waiting for pods {} to be scheduled", pods.join(","))),
    }
}

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
        self.save_claim(&claim, &clone, false, "saving claim migration annotations").await
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

    /// Whether a volume is promised to a claim other than `claim`: a bind of it is in flight on
    /// another worker. Read once per decision; the binder and the FailedBinding breakdown skip
    /// such volumes alike.
    pub(crate) fn reserved_for_others(&self, claim: &PersistentVolumeClaim) -> impl Fn(&str) -> bool {
        let key = helpers::claim_key(claim);
        let reserved = self.reservations.lock().unwrap().clone();
        move |v| reserved.get(v).is_some_and(|c| *c != key)
    }

    async fn sync_unbound_claim(&self, claim: Arc<PersistentVolumeClaim>) -> Result<()> {
        let key = helpers::claim_key(&claim);
        // Decided from the caches alone (the function `pv-controller explain` reports).
        match plan::plan_unbound_claim(self, &claim) {
            UnboundClaimPlan::Bind(volume) if helpers::claim_volume_name(&claim).is_empty() => {
                // Reserve the volume so concurrent workers do not pick it for another claim.
                let vname = helpers::name(&volume.metadata).to_string();
                {
                    let mut r = self.reservations.lock().unwrap();
                    if r.get(&vname).is_some_and(|c| *c != key) {
                        return Err(Error::Reserved(vname));
                    }
                    r.insert(vname.clone(), key.clone());
                }
                let result = self.bind(&volume, &claim).await;
                self.reservations.lock().unwrap().remove(&vname);
                // A provisioning of this claim (if one started) is done once it is bound.
                self.metrics.operation_finished(&key, self.clock.now_ms(), result.is_err());
                result
            }
            UnboundClaimPlan::Bind(volume) => self.bind(&volume, &claim).await,
            UnboundClaimPlan::AssignDefaultClass(class) => self.assign_default_class(&claim, class).await,
            // Provisioning runs as an operation; it updates the claim itself.
            UnboundClaimPlan::Provision(provisioning) => self.provision_claim(claim, provisioning).await,
            UnboundClaimPlan::WaitForFirstConsumer { pods } => {
                self.emit_waiting_for_consumer(&claim, &pods).await;
                self.stay_pending(&claim).await
            }
            UnboundClaimPlan::NoClass => {
                // Upstream's text; with detailed events, why each volume was rejected too.
                let why = if self.config.detailed_events { self.rejection_breakdown(&claim) } else { String::new() };
                let (normal, reason) = (reasons::NORMAL, reasons::FAILED_BINDING);
                self.recorder.event_with_detail(&*claim, normal, reason, NO_CLASS_MESSAGE, &why).await;
                self.stay_pending(&claim).await
            }
            // The requested volume does not exist (yet): stay Pending.
            UnboundClaimPlan::VolumeNotFound(_) => self.stay_pending(&claim).await,
            UnboundClaimPlan::VolumeMismatch { volume, verdict } => {
                // Upstream: "Cannot bind to requested volume %q: %s".
                let msg = format!(
                    "Cannot bind to requested volume {:?}: {}",
                    helpers::name(&volume.metadata),
                    verdict.detail
                );
                self.recorder.event(&*claim, reasons::WARNING, reasons::VOLUME_MISMATCH, msg).await;
                self.stay_pending(&claim).await
            }
            UnboundClaimPlan::ClaimedByOther { volume, other } => {
                let requested = helpers::name(&volume.metadata);
                // Upstream emits this in both branches below.
                let msg = format!("volume {requested:?} already bound to a different claim.");
                self.recorder.event(&*claim, reasons::WARNING, reasons::FAILED_BINDING, msg).await;
                if helpers::has_annotation(&claim.metadata, ann::BOUND_BY_CONTROLLER) {
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
        let volume = self.volume(helpers::claim_volume_name(&claim));
        match plan::plan_bound_claim(&claim, volume) {
            BoundClaimPlan::LostReference => self.mark_lost(&claim, reasons::CLAIM_LOST, plan::LOST_REFERENCE).await,
            BoundClaimPlan::LostVolume => self.mark_lost(&claim, reasons::CLAIM_LOST, plan::LOST_VOLUME).await,
            BoundClaimPlan::Misbound => self.mark_lost(&claim, reasons::CLAIM_MISBOUND, plan::MISBOUND).await,
            // bind() writes only what is missing.
            BoundClaimPlan::Rebind(volume) | BoundClaimPlan::KeepBound(volume) => self.bind(&volume, &claim).await,
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
                tracing::info!(pvc = %helpers::claim_key(claim), class = %class, "assigned default storage class");
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

    /// Names of running (not terminated) pods that use the claim and are not scheduled yet.
    pub(crate) fn unscheduled_pods_using(&self, claim: &PersistentVolumeClaim) -> Vec<String> {
        self.pods_using(&helpers::claim_key(claim))
            .into_iter()
            .filter(|p| !helpers::pod_is_scheduled(p))
            .map(|p| helpers::name(&p.metadata).to_string())
            .collect()
    }

    /// Running (not terminated) pods that use the claim with this key, by name.
    pub(crate) fn pods_using(&self, claim_key: &str) -> Vec<Arc<pv_model::k8s::Pod>> {
        let keys: Vec<pv_model::ObjectKey> =
            self.pods_by_claim.read().unwrap().get(claim_key).into_iter().flatten().cloned().collect();
        let pods = self.pods.read().unwrap();
        keys.iter().filter_map(|k| pods.get(k)).filter(|p| !helpers::is_pod_terminated(p)).cloned().collect()
    }

    /// " (12 volumes: 7 too small, 3 access modes, 2 class)" — why every volume was rejected; empty
    /// when there are no volumes. Appended to upstream's FailedBinding message with detailed
    /// events (`Config::detailed_events`).
    pub fn rejection_breakdown(&self, claim: &PersistentVolumeClaim) -> String {
        let delay = plan::is_delay_binding(self, claim);
        let is_reserved = self.reserved_for_others(claim);
        let counts = self.volumes.read().unwrap().index.verdict_counts(claim, delay, &is_reserved);
        let total: usize = counts.values().sum();
        if total == 0 {
            return String::new();
        }
        let mut parts: Vec<(usize, &str)> = counts.iter().map(|(k, n)| (*n, k.breakdown_label())).collect();
        parts.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(b.1)));
        let list: Vec<String> = parts.iter().map(|(n, l)| format!("{n} {l}")).collect();
        format!(" ({total} volume{}: {})", if total == 1 { "" } else { "s" }, list.join(", "))
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
