//! The pv-protection and pvc-protection controllers of kube-controller-manager 1.37, for servers
//! that add their finalizers.
//!
//! An API server with the StorageObjectInUseProtection admission (kube-apiserver by default,
//! `up` too) puts `kubernetes.io/pv-protection` on every new volume and
//! `kubernetes.io/pvc-protection` on every new claim. Deleting either then only marks it; the
//! object goes once the finalizer is removed, which is these controllers' job, as in upstream's
//! `pkg/controller/volume/{pv,pvc}protection`:
//! - a claim being deleted loses its finalizer when no scheduled pod (one with a `nodeName`)
//!   mounts it: through a `persistentVolumeClaim` volume, or through a generic ephemeral volume
//!   (the claim `<pod>-<volume>`, controlled by the pod) unless the pod is shut down (deleted with
//!   grace period 0);
//! - a volume being deleted loses its finalizer when it is not Bound;
//! - an object not being deleted that lacks its finalizer gets it (objects made before the
//!   admission was on);
//! - a Bound claim not being deleted carries the condition `Unused` (KEP-5541, the
//!   `PersistentVolumeClaimUnusedSinceTime` feature, beta and on in 1.37): `True` with reason
//!   `NoPodsUsingPVC` and the time it became unused, `False` with reason `PodUsingPVC` while a pod
//!   that has not terminated references it (scheduled or not). Its `lastTransitionTime` is
//!   rewritten only when the status flips.
//!
//! Whether a pod uses a claim is asked first of the pods the watch delivered (indexed by claim),
//! then of a live list of the namespace's pods, so a pod not yet delivered still counts. The
//! live list is made at most once per namespace per batch of queued claims, however many claims
//! of the namespace the batch holds (upstream's kubernetes#109282, #125372).
//!
//! Against a real cluster kube-controller-manager runs them; `up` runs this module beside the
//! binder (or without it), over the same [`ClusterApi`]. Work is a queue of keys; a key whose
//! write fails (a conflict, a server error) is tried again shortly, and every relevant change (a
//! pod appearing, changing or going, a volume leaving Bound) queues the keys it concerns.

use crate::api::ClusterApi;
use crate::cache::ObjectEvent;
use crate::clock::Clock;
use crate::pods::PodIndex;
use crate::queue::{Delayed, WorkQueue};
use crate::runner::{Lane, Runner};
use k8s_openapi::api::core::v1::{ContainerStatus, PersistentVolumeClaimCondition};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use pv_model::finalizers;
use pv_model::k8s::{PersistentVolume, PersistentVolumeClaim, Pod};
use pv_model::ObjectKey;
use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex};

/// The claim condition that says since when no pod uses the claim.
pub const UNUSED_CONDITION: &str = "Unused";
/// Its reason while a pod references the claim (status `False`).
pub const POD_USING_PVC: &str = "PodUsingPVC";
/// Its reason while none does (status `True`).
pub const NO_PODS_USING_PVC: &str = "NoPodsUsingPVC";
const POD_USING_PVC_MESSAGE: &str = "A pod is currently referencing this PVC";
const NO_PODS_USING_PVC_MESSAGE: &str = "No pods are currently referencing this PVC";

/// What the protection controllers look at: a volume by name, or a claim.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Key {
    Volume(String),
    Claim(ObjectKey),
}

/// Which of the two controllers run (kube-controller-manager's
/// `persistentvolume-protection-controller` and `persistentvolumeclaim-protection-controller`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Scope {
    /// pv-protection: volumes.
    pub volumes: bool,
    /// pvc-protection: claims.
    pub claims: bool,
}

impl Scope {
    /// Both, as kube-controller-manager runs them by default.
    pub const ALL: Scope = Scope { volumes: true, claims: true };
}

/// What the pvc-protection controller needs of a pod: enough to answer both of its questions
/// (does the pod keep a claim from deletion, does it make the claim used).
#[derive(Clone, Debug, PartialEq, Eq)]
struct PodUse {
    uid: String,
    /// Has a `nodeName`: kubelet may have started it.
    scheduled: bool,
    /// Upstream's `IsPodTerminated`: Succeeded or Failed, or being deleted with no container
    /// running.
    terminated: bool,
    /// Upstream's `podIsShutDown`: being deleted with grace period 0 (kubelet is done with it,
    /// or it was force-deleted).
    shut_down: bool,
    /// The claims its volumes name, each with whether through a generic ephemeral volume.
    claims: Vec<(String, bool)>,
}

/// No container of the list is running (each is waiting or terminated; an empty list counts).
fn none_running(statuses: &Option<Vec<ContainerStatus>>) -> bool {
    statuses
        .iter()
        .flatten()
        .all(|s| s.state.as_ref().is_some_and(|st| st.terminated.is_some() || st.waiting.is_some()))
}

fn pod_use(pod: &Pod) -> PodUse {
    let meta = &pod.metadata;
    let name = meta.name.as_deref().unwrap_or_default();
    let spec = pod.spec.as_ref();
    let status = pod.status.as_ref();
    let phase = status.and_then(|s| s.phase.as_deref());
    let deleting = meta.deletion_timestamp.is_some();
    let terminated = matches!(phase, Some("Succeeded" | "Failed"))
        || (deleting
            && status.is_none_or(|s| {
                none_running(&s.init_container_statuses)
                    && none_running(&s.container_statuses)
                    && none_running(&s.ephemeral_container_statuses)
            }));
    let claims = spec
        .and_then(|s| s.volumes.as_ref())
        .into_iter()
        .flatten()
        .filter_map(|v| match (&v.persistent_volume_claim, &v.ephemeral) {
            (Some(c), _) => Some((c.claim_name.clone(), false)),
            // Upstream's ephemeral.VolumeClaimName: the pod's name, a dash, the volume's.
            (None, Some(_)) => Some((format!("{name}-{}", v.name), true)),
            _ => None,
        })
        .collect();
    PodUse {
        uid: meta.uid.clone().unwrap_or_default(),
        scheduled: spec.and_then(|s| s.node_name.as_deref()).is_some_and(|n| !n.is_empty()),
        terminated,
        shut_down: deleting && meta.deletion_grace_period_seconds == Some(0),
        claims,
    }
}

/// The claim was made for the pod's ephemeral volume: the pod is its controller.
fn controlled_by(claim: &PersistentVolumeClaim, uid: &str) -> bool {
    claim.metadata.owner_references.iter().flatten().any(|o| o.controller == Some(true) && o.uid == uid)
}

/// Upstream's `podUsesPVCForDeletion`: a scheduled pod names the claim (an ephemeral one only
/// while the pod is not shut down, and only the claim made for it).
fn keeps_from_deletion(pod: &PodUse, claim: &PersistentVolumeClaim) -> bool {
    let name = claim.metadata.name.as_deref().unwrap_or_default();
    pod.scheduled
        && pod
            .claims
            .iter()
            .any(|(c, ephemeral)| c == name && (!ephemeral || (!pod.shut_down && controlled_by(claim, &pod.uid))))
}

/// Upstream's `podUsesPVCForUnusedSince`: a pod that has not terminated names the claim,
/// scheduled or not (an ephemeral one only if the claim was made for it).
fn makes_used(pod: &PodUse, claim: &PersistentVolumeClaim) -> bool {
    let name = claim.metadata.name.as_deref().unwrap_or_default();
    !pod.terminated
        && pod.claims.iter().any(|(c, ephemeral)| c == name && (!ephemeral || controlled_by(claim, &pod.uid)))
}

fn has(finalizers: &Option<Vec<String>>, f: &str) -> bool {
    finalizers.as_ref().is_some_and(|l| l.iter().any(|x| x == f))
}

fn unused_condition(claim: &PersistentVolumeClaim) -> Option<&PersistentVolumeClaimCondition> {
    claim.status.as_ref()?.conditions.as_ref()?.iter().find(|c| c.type_ == UNUSED_CONDITION)
}

/// The `Unused` condition a Bound claim should get now, if it changes (upstream's
/// `updateUnusedCondition`): `False` once a pod uses a claim that has none or says `True`;
/// `True` once none does and it has none or does not say `True`. The time is when it flips.
fn unused_update(claim: &PersistentVolumeClaim, used: bool, now: Time) -> Option<PersistentVolumeClaimCondition> {
    let status = unused_condition(claim).map(|c| c.status.as_str());
    let (status, reason, message) = match (used, status) {
        (true, None | Some("True")) => ("False", POD_USING_PVC, POD_USING_PVC_MESSAGE),
        (false, s) if s != Some("True") => ("True", NO_PODS_USING_PVC, NO_PODS_USING_PVC_MESSAGE),
        _ => return None,
    };
    Some(PersistentVolumeClaimCondition {
        type_: UNUSED_CONDITION.to_string(),
        status: status.to_string(),
        reason: Some(reason.to_string()),
        message: Some(message.to_string()),
        last_transition_time: Some(now),
        last_probe_time: None,
    })
}

/// `claim` with `condition` in place of its `Unused` condition (appended when it has none).
fn with_condition(
    mut claim: PersistentVolumeClaim,
    condition: PersistentVolumeClaimCondition,
) -> PersistentVolumeClaim {
    let conditions = claim.status.get_or_insert_with(Default::default).conditions.get_or_insert_with(Vec::new);
    match conditions.iter_mut().find(|c| c.type_ == UNUSED_CONDITION) {
        Some(c) => *c = condition,
        None => conditions.push(condition),
    }
    claim
}

/// Which use of a claim by a pod a protection sync asks about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Use {
    /// A pod that has not terminated names it: the claim is used (its `Unused` condition).
    MakesUsed,
    /// A scheduled pod that may still run names it: it keeps the claim from deletion.
    KeepsFromDeletion,
}

impl Use {
    fn test(self) -> fn(&PodUse, &PersistentVolumeClaim) -> bool {
        match self {
            Use::MakesUsed => makes_used,
            Use::KeepsFromDeletion => keeps_from_deletion,
        }
    }
}

/// One step of a protection sync, over the object read from the server.
#[derive(Clone, Debug, PartialEq)]
pub enum ProtectionStep {
    /// Find out whether a pod uses the claim so (delivered pods, else the server's list); the
    /// rest is planned again with the answer.
    Ask(Use),
    /// Write the claim's status with this `Unused` condition in place of its own.
    Unused(PersistentVolumeClaimCondition),
    /// Add the finalizer.
    AddFinalizer(&'static str),
    /// Remove the finalizer: the object may go.
    RemoveFinalizer(&'static str),
    /// Keep the finalizer on an object being deleted: a scheduled pod uses the claim.
    Keep,
}

/// What a claim's protection sync has found out so far.
#[derive(Clone, Copy, Debug, Default)]
pub struct Answers {
    /// [`Use::MakesUsed`], once asked.
    pub used: Option<bool>,
    /// [`Use::KeepsFromDeletion`], once asked.
    pub kept: Option<bool>,
}

/// The pv-protection sync's step for a volume, if any (upstream's `processPV`): the finalizer
/// added to a volume not being deleted, removed from one being deleted that is not Bound.
pub fn volume_protection_step(volume: &PersistentVolume) -> Option<ProtectionStep> {
    let bound = volume.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound");
    let deleting = volume.metadata.deletion_timestamp.is_some();
    let protected = has(&volume.metadata.finalizers, finalizers::PV_PROTECTION);
    if deleting && protected && !bound {
        Some(ProtectionStep::RemoveFinalizer(finalizers::PV_PROTECTION))
    } else if !deleting && !protected {
        Some(ProtectionStep::AddFinalizer(finalizers::PV_PROTECTION))
    } else {
        None
    }
}

/// The pvc-protection sync's steps for a claim as it is now, given what has been found out
/// (upstream's `processPVC`): a Bound claim's `Unused` condition kept true, then the finalizer
/// added to a claim not being deleted, removed from one being deleted that no scheduled pod
/// uses. An [`ProtectionStep::Ask`] ends the list.
pub fn claim_protection_steps(claim: &PersistentVolumeClaim, answers: Answers, now: Time) -> Vec<ProtectionStep> {
    let mut steps = Vec::new();
    let deleting = claim.metadata.deletion_timestamp.is_some();
    let bound = claim.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound");
    if !deleting && bound {
        let Some(used) = answers.used else { return vec![ProtectionStep::Ask(Use::MakesUsed)] };
        if let Some(condition) = unused_update(claim, used, now) {
            steps.push(ProtectionStep::Unused(condition));
        }
    }
    let protected = has(&claim.metadata.finalizers, finalizers::PVC_PROTECTION);
    if deleting && protected {
        match answers.kept {
            None => steps.push(ProtectionStep::Ask(Use::KeepsFromDeletion)),
            Some(true) => steps.push(ProtectionStep::Keep),
            Some(false) => steps.push(ProtectionStep::RemoveFinalizer(finalizers::PVC_PROTECTION)),
        }
    } else if !deleting && !protected {
        steps.push(ProtectionStep::AddFinalizer(finalizers::PVC_PROTECTION));
    }
    steps
}

/// `finalizers` with `step`'s change made.
fn change_finalizers(finalizers: &mut Option<Vec<String>>, step: &ProtectionStep) {
    let list = finalizers.get_or_insert_with(Vec::new);
    match step {
        ProtectionStep::AddFinalizer(f) => list.push(f.to_string()),
        ProtectionStep::RemoveFinalizer(f) => list.retain(|x| x != f),
        _ => {}
    }
}

/// The protection controllers' queue as a lane: a key taken with whatever else is queued then.
struct Batches(Arc<Protection>);

impl Batches {
    fn rest(&self, first: Key) -> Vec<Key> {
        let mut taken = vec![first];
        while let Some(k) = self.0.queue.try_get() {
            taken.push(k);
        }
        taken
    }
}

#[async_trait::async_trait]
impl Lane for Batches {
    fn delayed(&self) -> &dyn Delayed {
        &self.0.queue
    }

    async fn try_work(&self) -> bool {
        let Some(first) = self.0.queue.try_get() else { return false };
        self.0.work(self.rest(first)).await;
        true
    }

    async fn work(&self) -> bool {
        let Some(first) = self.0.queue.get().await else { return false };
        self.0.work(self.rest(first)).await;
        true
    }

    fn shutdown(&self) {
        self.0.queue.shutdown();
    }
}

/// A namespace's pods listed from the server at most once for a batch of its claims (upstream's
/// `LazyLivePodList`).
#[derive(Default)]
struct LivePods(Option<Vec<PodUse>>);

/// The two protection controllers.
pub struct Protection {
    api: Arc<dyn ClusterApi>,
    clock: Arc<dyn Clock>,
    scope: Scope,
    /// The pods the watch delivered, by the claims they name.
    pods: Mutex<PodIndex<PodUse>>,
    /// Volumes and claims to look at; a failed look is retried with the queue's backoff.
    queue: WorkQueue<Key>,
}

impl Protection {
    /// Controllers that write through `api` at `clock`'s time, those `scope` selects;
    /// [`Protection::run`] does the work.
    pub fn new(api: Arc<dyn ClusterApi>, clock: Arc<dyn Clock>, scope: Scope) -> Arc<Self> {
        let queue = WorkQueue::new("protection", clock.clone());
        Arc::new(Protection { api, clock, scope, pods: Mutex::default(), queue })
    }

    fn enqueue(&self, key: Key) {
        self.queue.add(&key);
    }

    /// A volume changed: one being deleted with its finalizer, or one that lacks it, is looked at.
    pub fn on_volume(&self, ev: ObjectEvent<PersistentVolume>) {
        if !self.scope.volumes {
            return;
        }
        if let ObjectEvent::Applied(v) = ev {
            if v.metadata.deletion_timestamp.is_some() == has(&v.metadata.finalizers, finalizers::PV_PROTECTION) {
                self.enqueue(Key::Volume(v.metadata.name.unwrap_or_default()));
            }
        }
    }

    /// A claim changed: one being deleted with its finalizer, one that lacks it, and one without
    /// the `Unused` condition are looked at.
    pub fn on_claim(&self, ev: ObjectEvent<PersistentVolumeClaim>) {
        if !self.scope.claims {
            return;
        }
        if let ObjectEvent::Applied(c) = ev {
            let deleting = c.metadata.deletion_timestamp.is_some();
            if deleting == has(&c.metadata.finalizers, finalizers::PVC_PROTECTION) || unused_condition(&c).is_none() {
                self.enqueue(Key::Claim(ObjectKey::of(&c.metadata)));
            }
        }
    }

    /// A pod appeared, changed or went: every claim it names, and every claim it named before
    /// (a pod re-created under its name may name others), is looked at.
    pub fn on_pod(&self, ev: ObjectEvent<Pod>) {
        if !self.scope.claims {
            return;
        }
        let (pod, deleted) = match ev {
            ObjectEvent::Applied(p) => (p, false),
            ObjectEvent::Deleted(p) => (p, true),
        };
        let key = ObjectKey::of(&pod.metadata);
        let now = (!deleted).then(|| pod_use(&pod));
        let now = now.map(|u| {
            let claims = u.claims.iter().map(|(c, _)| c.clone()).collect();
            (u, claims)
        });
        let touched = self.pods.lock().unwrap().set(&key, now);
        for claim in touched {
            self.enqueue(Key::Claim(claim));
        }
    }

    /// Works the queue until `shutdown` completes, on a [`Runner`] of one worker. Dropping this
    /// future (an aborted task) stops the worker at once, and so lets go of the API.
    pub async fn run(self: Arc<Self>, shutdown: impl std::future::Future<Output = ()>) {
        Runner::new(self.clock.clone(), vec![Arc::new(Batches(self.clone()))]).run(1, None, shutdown).await;
    }

    /// Syncs the keys taken at once: the claims of one namespace share one live list of its pods.
    async fn work(&self, taken: Vec<Key>) {
        let mut by_namespace: BTreeMap<String, Vec<ObjectKey>> = BTreeMap::new();
        let mut volumes = Vec::new();
        for k in &taken {
            match k {
                Key::Claim(c) => by_namespace.entry(c.namespace().to_string()).or_default().push(c.clone()),
                Key::Volume(name) => volumes.push(name.clone()),
            }
        }
        let mut failed = HashSet::new();
        for name in volumes {
            if let Err(e) = self.sync_volume(&name).await {
                tracing::debug!(volume = %name, error = %e, "pv-protection: will retry");
                failed.insert(Key::Volume(name));
            }
        }
        for claims in by_namespace.into_values() {
            let mut live = LivePods::default();
            for key in claims {
                if let Err(e) = self.sync_claim(&key, &mut live).await {
                    tracing::debug!(pvc = %key, error = %e, "pvc-protection: will retry");
                    failed.insert(Key::Claim(key));
                }
            }
        }
        for k in &taken {
            if failed.contains(k) {
                self.queue.add_rate_limited(k);
            } else {
                self.queue.forget(k);
            }
            self.queue.done(k);
        }
    }

    async fn sync_volume(&self, name: &str) -> Result<(), crate::ApiError> {
        let mut v = match self.api.get_volume(name).await {
            Err(e) if e.is_not_found() => return Ok(()),
            other => other?,
        };
        let Some(step) = volume_protection_step(&v) else { return Ok(()) };
        change_finalizers(&mut v.metadata.finalizers, &step);
        match step {
            ProtectionStep::RemoveFinalizer(_) => {
                tracing::info!(target: crate::PROGRESS, volume = %name, "removed the pv-protection finalizer: the volume is not bound")
            }
            _ => tracing::info!(target: crate::PROGRESS, volume = %name, "added the pv-protection finalizer"),
        }
        match self.api.update_volume(&v).await {
            Err(e) if e.is_not_found() => Ok(()),
            other => other.map(drop),
        }
    }

    /// Whether a pod uses `claim` so: a delivered pod, else one the server lists now.
    async fn used(
        &self,
        claim: &PersistentVolumeClaim,
        live: &mut LivePods,
        how: Use,
    ) -> Result<bool, crate::ApiError> {
        let test = how.test();
        if self.pods.lock().unwrap().using(&ObjectKey::of(&claim.metadata)).any(|p| test(p, claim)) {
            return Ok(true);
        }
        // The pod watch may not have delivered a pod that uses the claim yet: ask the server, as
        // upstream's controller does. A pod found here reaches `on_pod` through the watch too.
        if live.0.is_none() {
            let ns = claim.metadata.namespace.as_deref().unwrap_or_default();
            live.0 = Some(self.api.list_pods(ns).await?.iter().map(pod_use).collect());
        }
        Ok(live.0.iter().flatten().any(|p| test(p, claim)))
    }

    /// Carries out [`claim_protection_steps`], asking what a step asks and planning the rest with
    /// the answer.
    async fn sync_claim(&self, key: &ObjectKey, live: &mut LivePods) -> Result<(), crate::ApiError> {
        let mut c = match self.api.get_claim(key.namespace(), key.name()).await {
            Err(e) if e.is_not_found() => return Ok(()),
            other => other?,
        };
        let mut answers = Answers::default();
        let now = Time(self.clock.now());
        'plan: loop {
            for step in claim_protection_steps(&c, answers, now.clone()) {
                match step {
                    ProtectionStep::Ask(how) => {
                        let yes = self.used(&c, live, how).await?;
                        match how {
                            Use::MakesUsed => answers.used = Some(yes),
                            Use::KeepsFromDeletion => answers.kept = Some(yes),
                        }
                        continue 'plan;
                    }
                    ProtectionStep::Unused(condition) => {
                        tracing::info!(pvc = %key, unused = %condition.status, "updated the claim's Unused condition");
                        c = match self.api.update_claim_status(&with_condition(c, condition)).await {
                            Err(e) if e.is_not_found() => return Ok(()),
                            other => other?,
                        };
                    }
                    ProtectionStep::Keep => tracing::debug!(pvc = %key, "kept: a scheduled pod uses the claim"),
                    step @ (ProtectionStep::AddFinalizer(_) | ProtectionStep::RemoveFinalizer(_)) => {
                        change_finalizers(&mut c.metadata.finalizers, &step);
                        if let ProtectionStep::RemoveFinalizer(_) = step {
                            tracing::info!(target: crate::PROGRESS, pvc = %key, "removed the pvc-protection finalizer: no pod uses the claim");
                        } else {
                            tracing::info!(target: crate::PROGRESS, pvc = %key, "added the pvc-protection finalizer");
                        }
                        return match self.api.update_claim(&c).await {
                            Err(e) if e.is_not_found() => Ok(()),
                            other => other.map(drop),
                        };
                    }
                }
            }
            return Ok(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    fn pod(spec: Value) -> Pod {
        serde_json::from_value(json!({"metadata": {"name": "p", "namespace": "ns", "uid": "pod-uid"}, "spec": spec}))
            .unwrap()
    }

    fn pvc_volume(claim: &str) -> Value {
        json!({"name": "v", "persistentVolumeClaim": {"claimName": claim}})
    }

    fn ephemeral_volume() -> Value {
        json!({"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {"accessModes": ["ReadWriteOnce"]}}}})
    }

    fn claim(name: &str, owner_uid: Option<&str>) -> PersistentVolumeClaim {
        let owners =
            owner_uid.map(|u| json!([{"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": u, "controller": true}]));
        serde_json::from_value(json!({"metadata": {"name": name, "namespace": "ns", "ownerReferences": owners}}))
            .unwrap()
    }

    fn with_unused(status: &str) -> PersistentVolumeClaim {
        let c = claim("data", None);
        with_condition(
            c,
            unused_update(&claim("data", None), status == "False", Time(jiff::Timestamp::UNIX_EPOCH)).unwrap(),
        )
    }

    fn at(claim: &PersistentVolumeClaim, bound: bool, deleting: bool, protected: bool) -> PersistentVolumeClaim {
        let mut c = claim.clone();
        if bound {
            c.status.get_or_insert_with(Default::default).phase = Some("Bound".into());
        }
        if deleting {
            c.metadata.deletion_timestamp = Some(Time(jiff::Timestamp::UNIX_EPOCH));
        }
        if protected {
            c.metadata.finalizers = Some(vec![finalizers::PVC_PROTECTION.into()]);
        }
        c
    }

    #[test]
    fn a_claims_protection_asks_only_what_it_needs_and_plans_the_rest_with_the_answer() {
        let now = Time(jiff::Timestamp::UNIX_EPOCH);
        let none = Answers::default();
        let c = claim("data", None);
        // Neither bound nor deleting: only the finalizer, nothing asked.
        assert_eq!(
            claim_protection_steps(&at(&c, false, false, false), none, now.clone()),
            [ProtectionStep::AddFinalizer(finalizers::PVC_PROTECTION)]
        );
        assert!(claim_protection_steps(&at(&c, false, false, true), none, now.clone()).is_empty());
        // Bound: whether a pod uses it comes first; then the condition, then the finalizer.
        let bound = at(&c, true, false, false);
        assert_eq!(claim_protection_steps(&bound, none, now.clone()), [ProtectionStep::Ask(Use::MakesUsed)]);
        let steps = claim_protection_steps(&bound, Answers { used: Some(false), kept: None }, now.clone());
        assert!(
            matches!(&steps[..], [ProtectionStep::Unused(u), ProtectionStep::AddFinalizer(_)] if u.status == "True")
        );
        // Being deleted: kept while a scheduled pod uses it, else let go.
        let deleting = at(&c, true, true, true);
        assert_eq!(claim_protection_steps(&deleting, none, now.clone()), [ProtectionStep::Ask(Use::KeepsFromDeletion)]);
        let kept = Answers { used: None, kept: Some(true) };
        assert_eq!(claim_protection_steps(&deleting, kept, now.clone()), [ProtectionStep::Keep]);
        let gone = Answers { used: None, kept: Some(false) };
        assert_eq!(
            claim_protection_steps(&deleting, gone, now),
            [ProtectionStep::RemoveFinalizer(finalizers::PVC_PROTECTION)]
        );
    }

    #[test]
    fn a_volume_keeps_its_finalizer_while_bound_and_not_being_deleted() {
        let v = |phase: &str, deleting: bool, protected: bool| -> PersistentVolume {
            let mut v: PersistentVolume =
                serde_json::from_value(json!({"metadata": {"name": "pv1"}, "status": {"phase": phase}})).unwrap();
            if deleting {
                v.metadata.deletion_timestamp = Some(Time(jiff::Timestamp::UNIX_EPOCH));
            }
            if protected {
                v.metadata.finalizers = Some(vec![finalizers::PV_PROTECTION.into()]);
            }
            v
        };
        let add = Some(ProtectionStep::AddFinalizer(finalizers::PV_PROTECTION));
        let remove = ProtectionStep::RemoveFinalizer(finalizers::PV_PROTECTION);
        assert_eq!(volume_protection_step(&v("Available", false, false)), add);
        assert_eq!(volume_protection_step(&v("Bound", false, true)), None);
        assert_eq!(volume_protection_step(&v("Bound", true, true)), None, "a bound volume stays");
        assert_eq!(volume_protection_step(&v("Released", true, true)), Some(remove.clone()));
        let mut f = Some(vec![finalizers::PV_PROTECTION.to_string(), "other".into()]);
        change_finalizers(&mut f, &remove);
        assert_eq!(f, Some(vec!["other".to_string()]));
    }

    #[test]
    fn only_a_scheduled_pod_keeps_its_claims_from_deletion() {
        let data = claim("data", None);
        assert!(keeps_from_deletion(
            &pod_use(&pod(json!({"nodeName": "n1", "containers": [], "volumes": [pvc_volume("data")]}))),
            &data
        ));
        assert!(!keeps_from_deletion(
            &pod_use(&pod(json!({"containers": [], "volumes": [pvc_volume("data")]}))),
            &data
        ));
        assert!(!keeps_from_deletion(
            &pod_use(&pod(json!({"nodeName": "n1", "containers": [], "volumes": [pvc_volume("other")]}))),
            &data
        ));
    }

    #[test]
    fn a_generic_ephemeral_volume_uses_the_claim_made_for_its_pod() {
        let p = pod_use(&pod(json!({"nodeName": "n1", "containers": [], "volumes": [ephemeral_volume()]})));
        assert_eq!(p.claims, [("p-scratch".to_string(), true)]);
        assert!(keeps_from_deletion(&p, &claim("p-scratch", Some("pod-uid"))));
        assert!(makes_used(&p, &claim("p-scratch", Some("pod-uid"))));
        // A claim of that name that the pod does not control is not the pod's.
        assert!(!keeps_from_deletion(&p, &claim("p-scratch", Some("another-uid"))));
        assert!(!makes_used(&p, &claim("p-scratch", None)));
    }

    #[test]
    fn a_shut_down_pod_keeps_no_ephemeral_claim_but_still_its_named_claims() {
        let mut p =
            pod(json!({"nodeName": "n1", "containers": [], "volumes": [ephemeral_volume(), pvc_volume("data")]}));
        p.metadata.deletion_timestamp = Some(Time(jiff::Timestamp::UNIX_EPOCH));
        p.metadata.deletion_grace_period_seconds = Some(0);
        let p = pod_use(&p);
        assert!(p.shut_down && p.terminated);
        assert!(!keeps_from_deletion(&p, &claim("p-scratch", Some("pod-uid"))));
        assert!(keeps_from_deletion(&p, &claim("data", None)), "upstream keeps a named claim until the pod is gone");
        assert!(!makes_used(&p, &claim("data", None)), "a terminated pod does not make a claim used");
    }

    #[test]
    fn an_unscheduled_pod_makes_a_claim_used_until_it_terminates() {
        let running = pod_use(&pod(json!({"containers": [], "volumes": [pvc_volume("data")]})));
        assert!(makes_used(&running, &claim("data", None)));
        let mut done = pod(json!({"containers": [], "volumes": [pvc_volume("data")]}));
        done.status = Some(serde_json::from_value(json!({"phase": "Succeeded"})).unwrap());
        assert!(!makes_used(&pod_use(&done), &claim("data", None)));
        let mut deleting = pod(json!({"nodeName": "n1", "containers": [], "volumes": [pvc_volume("data")]}));
        deleting.metadata.deletion_timestamp = Some(Time(jiff::Timestamp::UNIX_EPOCH));
        deleting.status = Some(serde_json::from_value(json!({"containerStatuses": [{"name": "c", "image": "i", "imageID": "", "ready": true, "restartCount": 0, "state": {"running": {}}}]})).unwrap());
        assert!(makes_used(&pod_use(&deleting), &claim("data", None)), "a container still runs");
    }

    #[test]
    fn the_unused_condition_flips_with_use_and_keeps_its_time_otherwise() {
        let now = Time(jiff::Timestamp::from_second(1_800_000_000).unwrap());
        let fresh = claim("data", None);
        let unused = unused_update(&fresh, false, now.clone()).unwrap();
        assert_eq!((unused.status.as_str(), unused.reason.as_deref()), ("True", Some(NO_PODS_USING_PVC)));
        assert_eq!(unused.message.as_deref(), Some("No pods are currently referencing this PVC"));
        assert_eq!(unused.last_transition_time, Some(now.clone()));
        let used = unused_update(&fresh, true, now.clone()).unwrap();
        assert_eq!((used.status.as_str(), used.reason.as_deref()), ("False", Some(POD_USING_PVC)));
        assert_eq!(used.message.as_deref(), Some("A pod is currently referencing this PVC"));
        assert!(unused_update(&with_unused("True"), false, now.clone()).is_none(), "still unused: no write");
        assert!(unused_update(&with_unused("False"), true, now.clone()).is_none(), "still used: no write");
        assert_eq!(unused_update(&with_unused("True"), true, now.clone()).unwrap().status, "False");
        assert_eq!(unused_update(&with_unused("False"), false, now).unwrap().status, "True");
    }

    #[test]
    fn the_condition_replaces_its_earlier_self_and_keeps_others() {
        let mut c = with_unused("True");
        c.status
            .as_mut()
            .unwrap()
            .conditions
            .as_mut()
            .unwrap()
            .insert(0, serde_json::from_value(json!({"type": "Resizing", "status": "True"})).unwrap());
        let c =
            with_condition(c, unused_update(&with_unused("True"), true, Time(jiff::Timestamp::UNIX_EPOCH)).unwrap());
        let types: Vec<_> =
            c.status.unwrap().conditions.unwrap().iter().map(|c| (c.type_.clone(), c.status.clone())).collect();
        assert_eq!(types, [("Resizing".into(), "True".into()), ("Unused".into(), "False".into())]);
    }
}
