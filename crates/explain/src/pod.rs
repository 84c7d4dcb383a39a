//! `explain pod`: what, on the storage side, keeps a pod from being scheduled or started.
//!
//! A pod waits on its volumes in ways that are spread over many objects: a claim that does not
//! exist or is not bound, a bound volume pinned by its node affinity to nodes the pod may not go
//! to, a WaitForFirstConsumer claim that no node can serve (no fitting volume there, a class that
//! cannot provision there, no published capacity), a node past its CSI attach limit, a
//! ReadWriteOncePod claim another pod holds, a ReadWriteOnce volume still attached elsewhere
//! (Multi-Attach), a VolumeAttachment that failed, a `selected-node` left behind for a node that
//! is gone. [`explain_pod`] walks them node by node, the way kube-scheduler's volume plugins
//! (VolumeBinding, VolumeRestrictions, NodeVolumeLimits) and, once the pod is placed, the
//! attach-detach controller do, and gives one verdict with the nodes that fit.
//!
//! Each claim's own state comes from the controller's plan (`crate::explain`), so a claim the pod
//! waits for is described exactly as `explain pvc` describes it. Nothing here writes.

use crate::analyze::{explain, Explanation};
use crate::snapshot::Snapshot;
use k8s_openapi::api::storage::v1::VolumeAttachment;
use k8s_openapi::jiff::Timestamp;
use pv_model::annotations as ann;
use pv_model::helpers;
use pv_model::k8s::{Node, PersistentVolume, PersistentVolumeClaim, Pod, StorageClass};
use pv_model::quantity::Quantity;
use pv_model::{matching, topology, VerdictKind};
use std::collections::{BTreeMap, BTreeSet};

/// The pod's verdict: what stops it, on the storage side, or `ok`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum PodVerdict {
    /// Nothing on the storage side stops the pod.
    Ok,
    /// A claim the pod names does not exist.
    ClaimNotFound,
    /// A generic ephemeral volume's claim has not been created yet.
    EphemeralClaimMissing,
    /// A claim of the ephemeral volume's name exists but was not created for this pod.
    EphemeralClaimNotOwned,
    /// A claim the pod uses is being deleted.
    ClaimBeingDeleted,
    /// A claim the pod uses is Lost.
    ClaimLost,
    /// A claim the pod uses is bound to a volume that does not exist.
    VolumeMissing,
    /// A claim of an Immediate class is not bound yet: the scheduler waits for it.
    UnboundImmediateClaim,
    /// A ReadWriteOncePod claim is in use by another pod.
    ReadWriteOncePodConflict,
    /// There is no Node at all.
    NoNodes,
    /// The pod's own constraints (node selector, affinity, taints) exclude every node.
    NoNodeForPod,
    /// A bound volume's node affinity excludes every node the pod may go to.
    VolumeNodeAffinityConflict,
    /// A claim's `selected-node` names a node that does not exist.
    SelectedNodeGone,
    /// A claim's `selected-node` names a node the pod may not go to.
    SelectedNodeConflict,
    /// A WaitForFirstConsumer claim has no fitting volume and no provisioning on any node.
    NoVolumeToBind,
    /// The driver publishes capacity, and none of it fits the claim on any node.
    InsufficientCapacity,
    /// Every node that fits otherwise is at its CSI attach limit.
    AttachLimit,
    /// Each claim can be met on some node, but no node meets all of them.
    DisjointNodes,
    /// The pod is on a node and a claim is still being bound or provisioned.
    ClaimPending,
    /// The pod is on a node and a ReadWriteOnce volume is in use or attached on another node.
    MultiAttach,
    /// Attaching a volume to the pod's node failed.
    AttachError,
    /// The pod's node does not exist.
    NodeGone,
}

impl PodVerdict {
    /// Every verdict, in the order the README lists them.
    pub const ALL: [PodVerdict; 22] = [
        PodVerdict::Ok,
        PodVerdict::ClaimNotFound,
        PodVerdict::EphemeralClaimMissing,
        PodVerdict::EphemeralClaimNotOwned,
        PodVerdict::ClaimBeingDeleted,
        PodVerdict::ClaimLost,
        PodVerdict::VolumeMissing,
        PodVerdict::UnboundImmediateClaim,
        PodVerdict::ReadWriteOncePodConflict,
        PodVerdict::NoNodes,
        PodVerdict::NoNodeForPod,
        PodVerdict::VolumeNodeAffinityConflict,
        PodVerdict::SelectedNodeGone,
        PodVerdict::SelectedNodeConflict,
        PodVerdict::NoVolumeToBind,
        PodVerdict::InsufficientCapacity,
        PodVerdict::AttachLimit,
        PodVerdict::DisjointNodes,
        PodVerdict::ClaimPending,
        PodVerdict::MultiAttach,
        PodVerdict::AttachError,
        PodVerdict::NodeGone,
    ];

    /// The stable code (`verdict` of the JSON output).
    pub fn as_str(&self) -> &'static str {
        match self {
            PodVerdict::Ok => "ok",
            PodVerdict::ClaimNotFound => "claim-not-found",
            PodVerdict::EphemeralClaimMissing => "ephemeral-claim-missing",
            PodVerdict::EphemeralClaimNotOwned => "ephemeral-claim-not-owned",
            PodVerdict::ClaimBeingDeleted => "claim-being-deleted",
            PodVerdict::ClaimLost => "claim-lost",
            PodVerdict::VolumeMissing => "volume-missing",
            PodVerdict::UnboundImmediateClaim => "unbound-immediate-claim",
            PodVerdict::ReadWriteOncePodConflict => "read-write-once-pod-conflict",
            PodVerdict::NoNodes => "no-nodes",
            PodVerdict::NoNodeForPod => "no-node-for-pod",
            PodVerdict::VolumeNodeAffinityConflict => "volume-node-affinity-conflict",
            PodVerdict::SelectedNodeGone => "selected-node-gone",
            PodVerdict::SelectedNodeConflict => "selected-node-conflict",
            PodVerdict::NoVolumeToBind => "no-volume-to-bind",
            PodVerdict::InsufficientCapacity => "insufficient-capacity",
            PodVerdict::AttachLimit => "attach-limit",
            PodVerdict::DisjointNodes => "disjoint-nodes",
            PodVerdict::ClaimPending => "claim-pending",
            PodVerdict::MultiAttach => "multi-attach",
            PodVerdict::AttachError => "attach-error",
            PodVerdict::NodeGone => "node-gone",
        }
    }

    /// True when the scheduler cannot place the pod for this reason (it records FailedScheduling).
    pub fn blocks_scheduling(&self) -> bool {
        !matches!(
            self,
            PodVerdict::Ok
                | PodVerdict::ClaimPending
                | PodVerdict::MultiAttach
                | PodVerdict::AttachError
                | PodVerdict::NodeGone
        )
    }
}

/// What happens next for the pod (`next` of the JSON output).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PodNext {
    /// The scheduler can place it on one of `fittingNodes`.
    Schedule,
    /// It is on its node and its volumes are ready: the kubelet mounts them and starts it.
    Start,
    /// A claim must be bound or provisioned first (its own explanation says what happens).
    WaitClaim,
    /// Nothing: it stays as it is until someone changes something (the hint says what).
    None,
}

impl PodNext {
    /// The name `--output json` uses.
    pub fn as_str(&self) -> &'static str {
        match self {
            PodNext::Schedule => "schedule",
            PodNext::Start => "start",
            PodNext::WaitClaim => "wait-claim",
            PodNext::None => "none",
        }
    }
}

/// One volume of the pod that is backed by a claim.
#[derive(Clone, Debug)]
pub struct PodVolume {
    /// The pod's name for the volume.
    pub name: String,
    /// The claim's name.
    pub claim: String,
    /// A generic ephemeral volume (the claim is `<pod>-<volume>`).
    pub ephemeral: bool,
    /// The claim's phase, `-` when it does not exist.
    pub phase: String,
    /// The claim's `spec.volumeName`.
    pub volume: Option<String>,
    /// The claim's reason code (as in `explain pvc`; `not-found` when it does not exist).
    pub reason: String,
    /// The claim's explanation, one sentence.
    pub message: String,
    /// The claim's explanation, whole (None when it does not exist).
    pub explanation: Option<Explanation>,
}

/// One node and why the pod fits there or not.
#[derive(Clone, Debug)]
pub struct NodeFit {
    /// Node name.
    pub node: String,
    /// The pod can go there, as far as storage (and its own constraints) are concerned.
    pub fits: bool,
    /// Why not (empty when it fits), each with the verdict it leads to.
    pub reasons: Vec<(PodVerdict, String)>,
    /// What each WaitForFirstConsumer claim would get there.
    pub uses: Vec<ClaimUse>,
}

/// What a WaitForFirstConsumer claim gets on a node: what a scheduler's volume step does there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClaimUse {
    /// A fitting volume the node may use: the scheduler binds the claim to it.
    Volume {
        /// The claim's name (in the pod's namespace).
        claim: String,
        /// The volume's name.
        volume: String,
    },
    /// No such volume: the claim is provisioned for the node (its `selected-node`).
    Provision {
        /// The claim's name (in the pod's namespace).
        claim: String,
        /// The class's provisioner.
        provisioner: String,
    },
}

impl std::fmt::Display for ClaimUse {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ClaimUse::Volume { claim, volume } => write!(f, "{claim}: volume {volume}"),
            ClaimUse::Provision { claim, provisioner } => write!(f, "{claim}: provisioned by {provisioner}"),
        }
    }
}

/// The answer to "why does this pod not start".
#[derive(Clone, Debug)]
pub struct PodExplanation {
    /// `namespace/name`.
    pub pod: String,
    /// `spec.nodeName`, when scheduled.
    pub node: Option<String>,
    /// `status.phase` (`Pending` when unset).
    pub phase: String,
    /// The pod's claim-backed volumes.
    pub volumes: Vec<PodVolume>,
    /// Node by node (for a scheduled pod, its node only).
    pub nodes: Vec<NodeFit>,
    /// The verdict.
    pub verdict: PodVerdict,
    /// The nodes that fit.
    pub fitting_nodes: Vec<String>,
    /// What happens next.
    pub next: PodNext,
    /// One sentence (or two) for a person.
    pub message: String,
    /// What to change.
    pub hint: Option<String>,
    /// The scheduler's latest FailedScheduling message for the pod.
    pub scheduler: Option<String>,
}

/// What a claim asks of a node.
enum Need<'a> {
    /// Bound to this volume: its node affinity.
    Bound(&'a PersistentVolumeClaim, &'a PersistentVolume),
    /// WaitForFirstConsumer and unbound: a fitting volume there, or provisioning there.
    Delayed(&'a PersistentVolumeClaim, &'a StorageClass),
    /// Neither: it gives no node constraint (a pending claim of a scheduled pod, say).
    Free,
}

fn ns_name(pod: &Pod) -> (String, String) {
    (pod.metadata.namespace.clone().unwrap_or_else(|| "default".into()), helpers::name(&pod.metadata).to_string())
}

/// The claim-backed volumes of `pod`: (volume name, claim name, ephemeral).
fn pod_claims(pod: &Pod) -> Vec<(String, String, bool)> {
    let pod_name = helpers::name(&pod.metadata);
    let mut out = Vec::new();
    for v in pod.spec.as_ref().and_then(|s| s.volumes.as_ref()).into_iter().flatten() {
        if let Some(pvc) = &v.persistent_volume_claim {
            out.push((v.name.clone(), pvc.claim_name.clone(), false));
        } else if v.ephemeral.is_some() {
            out.push((v.name.clone(), format!("{pod_name}-{}", v.name), true));
        }
    }
    out
}

fn uses_claim(pod: &Pod, ns: &str, claim: &str) -> bool {
    pod.metadata.namespace.as_deref().unwrap_or("default") == ns && pod_claims(pod).iter().any(|(_, c, _)| c == claim)
}

fn node_name(pod: &Pod) -> Option<&str> {
    pod.spec.as_ref().and_then(|s| s.node_name.as_deref()).filter(|n| !n.is_empty())
}

fn same_pod(a: &Pod, b: &Pod) -> bool {
    a.metadata.namespace == b.metadata.namespace && a.metadata.name == b.metadata.name
}

/// The CSI driver of a volume, if it is a CSI volume.
fn csi_driver(v: &PersistentVolume) -> Option<&str> {
    v.spec.as_ref().and_then(|s| s.csi.as_ref()).map(|c| c.driver.as_str())
}

/// The latest FailedScheduling message recorded for the pod, with its age.
pub fn scheduler_message(snapshot: &Snapshot, pod: &Pod) -> Option<String> {
    let (ns, name) = ns_name(pod);
    let uid = helpers::uid(&pod.metadata);
    snapshot
        .events
        .iter()
        .filter(|e| e.reason.as_deref() == Some("FailedScheduling"))
        .filter(|e| {
            let o = &e.involved_object;
            o.kind.as_deref() == Some("Pod")
                && match o.uid.as_deref().filter(|u| !u.is_empty() && !uid.is_empty()) {
                    Some(u) => u == uid,
                    None => o.namespace.as_deref() == Some(ns.as_str()) && o.name.as_deref() == Some(name.as_str()),
                }
        })
        .max_by_key(|e| crate::provisioner::event_time(e))
        .and_then(|e| e.message.clone())
}

/// True when a scheduler runs on the cluster: kube-scheduler's leader Lease was renewed within
/// the last minutes, or a scheduler recorded an event in the last hour.
pub fn scheduler_runs(snapshot: &Snapshot, now: Timestamp) -> bool {
    let lease = snapshot.leases.iter().any(|l| {
        l.metadata.name.as_deref() == Some("kube-scheduler")
            && l.spec
                .as_ref()
                .and_then(|s| s.renew_time.as_ref())
                .is_some_and(|t| now.as_second() - t.0.as_second() < 300)
    });
    let events = snapshot.events.iter().any(|e| {
        let from_scheduler = e.reporting_component.as_deref() == Some("default-scheduler")
            || e.source.as_ref().and_then(|s| s.component.as_deref()) == Some("default-scheduler")
            || matches!(e.reason.as_deref(), Some("FailedScheduling") | Some("Scheduled"));
        from_scheduler && crate::provisioner::event_time(e).is_some_and(|t| now.as_second() - t.as_second() < 3600)
    });
    lease || events
}

/// Explains pod `namespace/name` over `snapshot` at `now`; `None` when it does not exist.
pub fn explain_pod(snapshot: &Snapshot, namespace: &str, name: &str, now: Timestamp) -> Option<PodExplanation> {
    let pod = snapshot.pods.iter().find(|p| {
        p.metadata.namespace.as_deref().unwrap_or("default") == namespace && p.metadata.name.as_deref() == Some(name)
    })?;
    let (synced, _) = snapshot.after_first_volume_syncs();
    let view = synced.view(crate::plugins());
    let mut x = PodExplanation {
        pod: format!("{namespace}/{name}"),
        node: node_name(pod).map(str::to_string),
        phase: pod.status.as_ref().and_then(|s| s.phase.clone()).unwrap_or_else(|| "Pending".into()),
        volumes: Vec::new(),
        nodes: Vec::new(),
        verdict: PodVerdict::Ok,
        fitting_nodes: Vec::new(),
        next: PodNext::Schedule,
        message: String::new(),
        hint: None,
        scheduler: scheduler_message(snapshot, pod),
    };
    let scheduler = scheduler_runs(snapshot, now);
    let mut needs = Vec::new();
    // Pod-level failures, in the order the scheduler's PreFilter meets them.
    let mut blocking: Option<(PodVerdict, String, Option<String>)> = None;
    let mut block = |v: PodVerdict, msg: String, hint: Option<String>| {
        if blocking.is_none() {
            blocking = Some((v, msg, hint));
        }
    };
    for (vol, claim_name, ephemeral) in pod_claims(pod) {
        let claim = synced.claim(namespace, &claim_name);
        let Some(claim) = claim else {
            x.volumes.push(PodVolume {
                name: vol.clone(),
                claim: claim_name.clone(),
                ephemeral,
                phase: "-".into(),
                volume: None,
                reason: "not-found".into(),
                message: "the claim does not exist".into(),
                explanation: None,
            });
            if ephemeral {
                block(
                    PodVerdict::EphemeralClaimMissing,
                    format!(
                        "The claim {claim_name} of the pod's ephemeral volume {vol} does not exist yet; the \
                         ephemeral volume controller creates it from the pod's volumeClaimTemplate."
                    ),
                    Some(
                        "check that kube-controller-manager's ephemeral-volume-controller runs (its events on \
                         the pod say why it did not create the claim)"
                            .into(),
                    ),
                );
            } else {
                block(
                    PodVerdict::ClaimNotFound,
                    format!("The pod's volume {vol} names claim {claim_name}, which does not exist in {namespace}."),
                    Some(format!(
                        "create the claim {namespace}/{claim_name}, or fix the pod's volume {vol} to name an existing \
                         claim"
                    )),
                );
            }
            continue;
        };
        let mut e = explain(&view, &synced.volumes, claim);
        if e.next == crate::Next::WaitExternalProvisioner || e.next == crate::Next::WaitFirstConsumer {
            crate::add_past_binder(snapshot, claim, &mut e, now);
        }
        let pv = pv_model::binding::claim_is_bound(claim)
            .then(|| synced.volumes.iter().find(|v| helpers::name(&v.metadata) == helpers::claim_volume_name(claim)))
            .flatten();
        x.volumes.push(PodVolume {
            name: vol.clone(),
            claim: claim_name.clone(),
            ephemeral,
            phase: e.phase.clone(),
            volume: e.volume_name.clone(),
            reason: e.reason.to_string(),
            message: e.message.clone(),
            explanation: Some(e.clone()),
        });
        let key = format!("{namespace}/{claim_name}");
        let owned = claim
            .metadata
            .owner_references
            .iter()
            .flatten()
            .any(|o| o.controller == Some(true) && o.kind == "Pod" && o.uid == helpers::uid(&pod.metadata));
        if ephemeral && !owned {
            block(
                PodVerdict::EphemeralClaimNotOwned,
                format!("The claim {key} of the pod's ephemeral volume {vol} was not created for this pod (pod is not owner)."),
                Some(format!(
                    "delete the claim {key} that took the ephemeral volume's name (its data goes with it), or rename \
                     the pod or its volume"
                )),
            );
            continue;
        }
        // A claim in deletion stops a pod from being placed; one already running keeps it.
        if claim.metadata.deletion_timestamp.is_some() && x.node.is_none() {
            block(
                PodVerdict::ClaimBeingDeleted,
                format!("The claim {key} is being deleted; the scheduler does not place a pod on a claim in deletion."),
                Some(format!(
                    "wait until {key} is gone and create it again, or point the pod's volume {vol} at another claim"
                )),
            );
            continue;
        }
        if e.phase == "Lost" {
            block(
                PodVerdict::ClaimLost,
                format!("The claim {key} is Lost: {}", e.message),
                Some(format!("restore volume {} or give the pod a new claim", helpers::claim_volume_name(claim))),
            );
            continue;
        }
        if pv_model::binding::claim_is_bound(claim) {
            match pv {
                Some(v) => needs.push(Need::Bound(claim, v)),
                None => block(
                    PodVerdict::VolumeMissing,
                    format!(
                        "The claim {key} is bound to volume {}, which does not exist.",
                        helpers::claim_volume_name(claim)
                    ),
                    Some(format!(
                        "restore the volume {} (with spec.claimRef to {key}), or give the pod a new claim",
                        helpers::claim_volume_name(claim)
                    )),
                ),
            }
            continue;
        }
        // Unbound.
        let class_name = helpers::claim_class(claim);
        let class = synced.classes.iter().find(|k| helpers::name(&k.metadata) == class_name);
        let delayed = class.is_some_and(helpers::is_delay_binding_class);
        match class {
            Some(c) if delayed && x.node.is_none() => needs.push(Need::Delayed(claim, c)),
            _ if x.node.is_some() => needs.push(Need::Free),
            _ => block(
                PodVerdict::UnboundImmediateClaim,
                format!(
                    "The pod has an unbound immediate PersistentVolumeClaim, {key}: the scheduler waits until it is \
                     bound. {}",
                    e.message
                ),
                e.hint.clone().or_else(|| Some(format!("see `pv-controller explain pvc {key}`"))),
            ),
        }
    }
    // ReadWriteOncePod: another scheduled pod already uses the claim.
    for v in x.volumes.iter().filter(|_| x.node.is_none()) {
        let Some(claim) = synced.claim(namespace, &v.claim) else { continue };
        if !helpers::claim_access_modes(claim).has(helpers::AccessModes::RWOP) {
            continue;
        }
        if let Some(other) = synced.pods.iter().find(|p| {
            !same_pod(p, pod)
                && !helpers::is_pod_terminated(p)
                && node_name(p).is_some()
                && uses_claim(p, namespace, &v.claim)
        }) {
            block(
                PodVerdict::ReadWriteOncePodConflict,
                format!(
                    "The claim {namespace}/{} is ReadWriteOncePod and pod {} on node {} already uses it: every node is \
                     unavailable due to PersistentVolumeClaim with ReadWriteOncePod access mode already in-use by \
                     another pod.",
                    v.claim,
                    helpers::name(&other.metadata),
                    node_name(other).unwrap_or("")
                ),
                Some(format!(
                    "delete pod {} (or let it finish) first, or give this pod a claim of its own",
                    helpers::name(&other.metadata)
                )),
            );
        }
    }
    if let Some((v, msg, hint)) = blocking {
        x.verdict = v;
        x.message = msg;
        x.hint = hint;
        x.next = match v {
            PodVerdict::UnboundImmediateClaim | PodVerdict::EphemeralClaimMissing => PodNext::WaitClaim,
            _ => PodNext::None,
        };
        if v == PodVerdict::UnboundImmediateClaim {
            // The claim's own next says whether anything is under way.
            let stuck = x
                .volumes
                .iter()
                .any(|pv| pv.explanation.as_ref().is_some_and(|e| e.phase == "Pending" && e.next == crate::Next::None));
            if stuck {
                x.next = PodNext::None;
            }
        }
        return Some(x);
    }
    match x.node.clone() {
        Some(n) => scheduled(&synced, pod, &n, &needs, &mut x),
        None => unscheduled(&synced, pod, &needs, scheduler, &mut x),
    }
    Some(x)
}

/// Why `need` cannot be met on `node` (`Err`), or what it uses there.
fn fit(snapshot: &Snapshot, need: &Need, node: &Node) -> Result<Option<ClaimUse>, (PodVerdict, String)> {
    let node_name = helpers::name(&node.metadata);
    match need {
        Need::Free => Ok(None),
        Need::Bound(claim, v) => {
            if topology::volume_allows(v, node) {
                Ok(None)
            } else {
                Err((
                    PodVerdict::VolumeNodeAffinityConflict,
                    format!(
                        "volume {} of claim {} is pinned to nodes with {}",
                        helpers::name(&v.metadata),
                        helpers::name(&claim.metadata),
                        topology::describe_volume_affinity(v).unwrap_or_default()
                    ),
                ))
            }
        }
        Need::Delayed(claim, class) => {
            let cname = helpers::name(&claim.metadata);
            if let Some(sel) = helpers::annotation(&claim.metadata, ann::SELECTED_NODE).filter(|s| !s.is_empty()) {
                if sel != node_name {
                    let gone = !snapshot.nodes.iter().any(|n| helpers::name(&n.metadata) == sel);
                    let v = if gone { PodVerdict::SelectedNodeGone } else { PodVerdict::SelectedNodeConflict };
                    let what = if gone { " (no such node)" } else { "" };
                    return Err((v, format!("claim {cname} is being provisioned for node {sel}{what}")));
                }
            }
            // A fitting volume that the node may use (the scheduler's static binding).
            let fitting = fitting_volumes(snapshot, claim);
            if let Some(v) = fitting.iter().find(|v| topology::volume_allows(v, node)) {
                return Ok(Some(ClaimUse::Volume { claim: cname.into(), volume: helpers::name(&v.metadata).into() }));
            }
            // Provisioning there.
            let provisioner = class.provisioner.as_str();
            let pinned = fitting;
            let pinned = if pinned.is_empty() {
                String::new()
            } else {
                let names: Vec<&str> = pinned.iter().map(|v| helpers::name(&v.metadata)).collect();
                format!(" ({} fits but is pinned elsewhere)", names.join(", "))
            };
            if provisioner == "kubernetes.io/no-provisioner" {
                return Err((
                    PodVerdict::NoVolumeToBind,
                    format!(
                        "no volume fits claim {cname} here{pinned}, and class {} cannot provision",
                        helpers::name(&class.metadata)
                    ),
                ));
            }
            if !topology::class_allows(class, node) {
                return Err((
                    PodVerdict::NoVolumeToBind,
                    format!(
                        "no volume fits claim {cname} here{pinned}, and class {}'s allowedTopologies exclude the node",
                        helpers::name(&class.metadata)
                    ),
                ));
            }
            if let Some(why) = capacity_short(snapshot, claim, class, node) {
                return Err((PodVerdict::InsufficientCapacity, format!("claim {cname}: {why}")));
            }
            Ok(Some(ClaimUse::Provision { claim: cname.into(), provisioner: provisioner.into() }))
        }
    }
}

/// Volumes that fit the claim by every rule but node affinity (class, size, modes, selector,
/// volume mode, free), as the scheduler looks for them.
fn fitting_volumes<'a>(snapshot: &'a Snapshot, claim: &PersistentVolumeClaim) -> Vec<&'a PersistentVolume> {
    snapshot.volumes.iter().filter(|v| matching::evaluate(claim, v, false).kind == VerdictKind::Match).collect()
}

/// When the class's driver publishes capacity, why none of it fits the claim on `node`.
fn capacity_short(
    snapshot: &Snapshot,
    claim: &PersistentVolumeClaim,
    class: &StorageClass,
    node: &Node,
) -> Option<String> {
    let driver =
        snapshot.csi_drivers.iter().find(|d| d.metadata.name.as_deref() == Some(class.provisioner.as_str()))?;
    if driver.spec.storage_capacity != Some(true) {
        return None;
    }
    let class_name = helpers::name(&class.metadata);
    let want = helpers::claim_request(claim);
    let labels = node.metadata.labels.as_ref();
    let here: Vec<Quantity> = snapshot
        .capacities
        .iter()
        .filter(|c| c.storage_class_name == class_name)
        .filter(|c| c.node_topology.as_ref().is_some_and(|t| pv_model::selector::matches(t, labels).unwrap_or(false)))
        .filter_map(|c| c.maximum_volume_size.as_ref().or(c.capacity.as_ref()))
        .filter_map(|q| Quantity::parse(&q.0).ok())
        .collect();
    match here.iter().max() {
        Some(l) if *l >= want => None,
        Some(l) => {
            Some(format!("the driver publishes at most {l} for class {class_name} here, the claim asks for {want}"))
        }
        None => Some(format!("the driver publishes no capacity for class {class_name} on this node")),
    }
}

/// Volumes of `driver` in use on `node` (by other pods there, or attached there), by name.
fn attached_on(snapshot: &Snapshot, pod: &Pod, node: &str, driver: &str) -> BTreeSet<String> {
    let mut used = BTreeSet::new();
    for p in &snapshot.pods {
        if same_pod(p, pod) || helpers::is_pod_terminated(p) || node_name(p) != Some(node) {
            continue;
        }
        let ns = p.metadata.namespace.as_deref().unwrap_or("default");
        for (_, c, _) in pod_claims(p) {
            let Some(claim) = snapshot.claim(ns, &c) else { continue };
            let vname = helpers::claim_volume_name(claim);
            if snapshot.volumes.iter().any(|v| helpers::name(&v.metadata) == vname && csi_driver(v) == Some(driver)) {
                used.insert(vname.to_string());
            }
        }
    }
    for a in snapshot.attachments.iter().filter(|a| a.spec.node_name == node && a.spec.attacher == driver) {
        if let Some(pv) = &a.spec.source.persistent_volume_name {
            used.insert(pv.clone());
        }
    }
    used
}

/// The attach limit check on `node` for the pod's CSI volumes (bound ones, and WaitForFirstConsumer
/// claims that would be provisioned there).
fn attach_limit(
    snapshot: &Snapshot,
    pod: &Pod,
    node: &Node,
    new: &BTreeMap<String, BTreeSet<String>>,
) -> Option<String> {
    let name = helpers::name(&node.metadata);
    let csinode = snapshot.csi_nodes.iter().find(|c| c.metadata.name.as_deref() == Some(name))?;
    for (driver, volumes) in new {
        let Some(limit) = csinode
            .spec
            .drivers
            .iter()
            .find(|d| &d.name == driver)
            .and_then(|d| d.allocatable.as_ref())
            .and_then(|a| a.count)
        else {
            continue;
        };
        let used = attached_on(snapshot, pod, name, driver);
        let adds = volumes.iter().filter(|v| !used.contains(*v)).count();
        if used.len() + adds > limit as usize {
            return Some(format!(
                "{} of {limit} volumes of driver {driver} are in use here and the pod adds {adds}",
                used.len()
            ));
        }
    }
    None
}

/// The CSI volumes the pod would add on a node: by driver, volume names (a claim to be
/// provisioned counts as one, named after the claim).
fn new_csi_volumes(snapshot: &Snapshot, needs: &[Need], uses: &[ClaimUse]) -> BTreeMap<String, BTreeSet<String>> {
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for n in needs {
        match n {
            Need::Bound(_, v) => {
                if let Some(d) = csi_driver(v) {
                    out.entry(d.to_string()).or_default().insert(helpers::name(&v.metadata).to_string());
                }
            }
            Need::Delayed(claim, class) => {
                let cname = helpers::name(&claim.metadata);
                let provisioned = uses.iter().any(|u| matches!(u, ClaimUse::Provision { claim, .. } if claim == cname));
                let is_csi =
                    snapshot.csi_drivers.iter().any(|d| d.metadata.name.as_deref() == Some(class.provisioner.as_str()));
                if provisioned && is_csi {
                    out.entry(class.provisioner.clone()).or_default().insert(format!("claim {cname}"));
                }
            }
            Need::Free => {}
        }
    }
    out
}

fn unscheduled(snapshot: &Snapshot, pod: &Pod, needs: &[Need], scheduler: bool, x: &mut PodExplanation) {
    if snapshot.nodes.is_empty() {
        x.verdict = PodVerdict::NoNodes;
        x.next = PodNext::None;
        x.message = "There is no Node: nothing can run the pod.".into();
        x.hint = Some("add nodes (or start the kubelets that register them)".into());
        return;
    }
    // Per claim: the nodes (among those the pod itself may use) where it can be met.
    let mut allowed_by_pod = Vec::new();
    for node in &snapshot.nodes {
        let name = helpers::name(&node.metadata).to_string();
        let mut f = NodeFit { node: name.clone(), fits: true, reasons: Vec::new(), uses: Vec::new() };
        if let Some(why) = topology::pod_excludes(pod, node) {
            f.reasons.push((PodVerdict::NoNodeForPod, why));
        } else {
            allowed_by_pod.push(name.clone());
        }
        for need in needs {
            match fit(snapshot, need, node) {
                Ok(Some(u)) => f.uses.push(u),
                Ok(None) => {}
                Err(r) => f.reasons.push(r),
            }
        }
        if f.reasons.is_empty() {
            let new = new_csi_volumes(snapshot, needs, &f.uses);
            if let Some(why) = attach_limit(snapshot, pod, node, &new) {
                f.reasons.push((PodVerdict::AttachLimit, why));
            }
        }
        f.fits = f.reasons.is_empty();
        x.nodes.push(f);
    }
    x.fitting_nodes = x.nodes.iter().filter(|f| f.fits).map(|f| f.node.clone()).collect();
    if !x.fitting_nodes.is_empty() {
        x.verdict = PodVerdict::Ok;
        x.next = PodNext::Schedule;
        x.message = format!(
            "Nothing on the storage side stops the pod: its volumes can be used on {} of {} nodes ({}).",
            x.fitting_nodes.len(),
            x.nodes.len(),
            x.fitting_nodes.join(", ")
        );
        if x.scheduler.is_some() {
            x.message.push_str(" The scheduler's own message (below) names what else stops it.");
        } else if !scheduler {
            x.hint = Some(
                "no scheduler seems to run (no kube-scheduler Lease, no scheduling event): on pv-controller up, start \
                 it with --scheduler, which places pods where their volumes fit, or set a WaitForFirstConsumer \
                 claim's volume.kubernetes.io/selected-node to a fitting node by hand"
                    .into(),
            );
        }
        return;
    }
    x.next = PodNext::None;
    if allowed_by_pod.is_empty() {
        x.verdict = PodVerdict::NoNodeForPod;
        x.message = format!(
            "The pod's own constraints (node selector, affinity, taints) exclude all {} nodes; storage is not what \
             stops it.",
            x.nodes.len()
        );
        x.hint = Some("change the pod's nodeSelector, affinity or tolerations, or label/untaint a node".into());
        return;
    }
    // Storage reasons on the nodes the pod may use.
    let storage: Vec<&NodeFit> = x.nodes.iter().filter(|f| allowed_by_pod.contains(&f.node)).collect();
    // Disjoint: each need alone is met on some allowed node, but never all at once.
    let met_alone = |i: usize| -> Vec<String> {
        snapshot
            .nodes
            .iter()
            .filter(|n| allowed_by_pod.iter().any(|a| a == helpers::name(&n.metadata)))
            .filter(|n| fit(snapshot, &needs[i], n).is_ok())
            .map(|n| helpers::name(&n.metadata).to_string())
            .collect()
    };
    let constrained: Vec<usize> = (0..needs.len()).filter(|i| !matches!(needs[*i], Need::Free)).collect();
    let alone: Vec<Vec<String>> = constrained.iter().map(|i| met_alone(*i)).collect();
    let only_storage = storage.iter().all(|f| f.reasons.iter().all(|(v, _)| *v != PodVerdict::AttachLimit));
    if constrained.len() > 1 && alone.iter().all(|a| !a.is_empty()) && only_storage {
        x.verdict = PodVerdict::DisjointNodes;
        let parts: Vec<String> = constrained
            .iter()
            .zip(&alone)
            .map(|(i, a)| {
                let claim = match &needs[*i] {
                    Need::Bound(c, _) | Need::Delayed(c, _) => helpers::name(&c.metadata),
                    Need::Free => "",
                };
                format!("claim {claim} only on {}", a.join(", "))
            })
            .collect();
        x.message = format!(
            "Each of the pod's claims can be used on some node, but no node serves them all: {}.",
            parts.join("; ")
        );
        x.hint =
            Some("give the pod claims whose volumes can meet on one node (same zone or node), or move the data".into());
        return;
    }
    // The reason that rules out the most of the allowed nodes (ties: the first in the verdicts' order).
    let mut count: BTreeMap<PodVerdict, usize> = BTreeMap::new();
    for f in &storage {
        let mut seen = BTreeSet::new();
        for (v, _) in &f.reasons {
            if seen.insert(*v) {
                *count.entry(*v).or_default() += 1;
            }
        }
    }
    let verdict = count
        .iter()
        .filter(|(v, _)| **v != PodVerdict::NoNodeForPod)
        .max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0)))
        .map(|(v, _)| *v)
        .unwrap_or(PodVerdict::NoNodeForPod);
    x.verdict = verdict;
    let first: Option<String> =
        storage.iter().flat_map(|f| f.reasons.iter()).find(|(v, _)| *v == verdict).map(|(_, s)| s.clone());
    let first = first.unwrap_or_default();
    let n = storage.len();
    let excluded_by_pod = x.nodes.len() - n;
    let others = if excluded_by_pod > 0 {
        format!(" ({excluded_by_pod} other node(s) are excluded by the pod's own constraints)")
    } else {
        String::new()
    };
    let sel_claim = needs.iter().find_map(|need| match need {
        Need::Delayed(c, _) => helpers::annotation(&c.metadata, ann::SELECTED_NODE)
            .filter(|s| !s.is_empty())
            .map(|s| (helpers::name(&c.metadata).to_string(), s.to_string())),
        _ => None,
    });
    let ns = &pod.metadata.namespace.clone().unwrap_or_else(|| "default".into());
    (x.message, x.hint) = match verdict {
        PodVerdict::VolumeNodeAffinityConflict => (
            format!("{n} node(s) didn't match PersistentVolume's node affinity{others}: {first}."),
            Some(
                "let the pod go to a node the volume allows (its nodeSelector/affinity, or a node in that zone), or \
                 move the data to a volume that node can use"
                    .into(),
            ),
        ),
        PodVerdict::SelectedNodeGone | PodVerdict::SelectedNodeConflict => {
            let (c, s) = sel_claim.unwrap_or_default();
            let why = if verdict == PodVerdict::SelectedNodeGone {
                format!("node {s}, which no longer exists")
            } else {
                format!("node {s}, where the pod can no longer go")
            };
            (
                format!(
                    "The claim {c} still carries volume.kubernetes.io/selected-node for {why}: the scheduler only \
                     places the pod there{others}."
                ),
                Some(format!(
                    "remove the stale annotation so that the scheduler picks a node again: `kubectl annotate pvc -n {ns} \
                     {c} {}-`",
                    ann::SELECTED_NODE
                )),
            )
        }
        PodVerdict::NoVolumeToBind => (
            format!("{n} node(s) didn't find available persistent volumes to bind{others}: {first}."),
            Some(
                "create a PV that fits the claim on a node the pod may use (class, size, access modes, node \
                 affinity), or use a class that can provision there"
                    .into(),
            ),
        ),
        PodVerdict::InsufficientCapacity => (
            format!("{n} node(s) did not have enough free storage{others}: {first}."),
            Some("ask for less, or free room in the storage backend (its CSIStorageCapacity objects)".into()),
        ),
        PodVerdict::AttachLimit => (
            format!("{n} node(s) exceed max volume count{others}: {first}."),
            Some(
                "free attachments on a node (pods using the driver's volumes there), or add nodes; the limit is the \
                 CSINode's allocatable.count"
                    .into(),
            ),
        ),
        _ => (format!("No node fits{others}: {first}."), None),
    };
}

fn scheduled(snapshot: &Snapshot, pod: &Pod, node: &str, needs: &[Need], x: &mut PodExplanation) {
    x.fitting_nodes = vec![node.to_string()];
    x.next = PodNext::Start;
    let Some(n) = snapshot.nodes.iter().find(|n| helpers::name(&n.metadata) == node) else {
        x.verdict = PodVerdict::NodeGone;
        x.next = PodNext::None;
        x.fitting_nodes.clear();
        x.message = format!("The pod is bound to node {node}, which does not exist.");
        x.hint = Some("delete the pod so that its controller creates it again and the scheduler places it".into());
        return;
    };
    let mut f = NodeFit { node: node.to_string(), fits: true, reasons: Vec::new(), uses: Vec::new() };
    for need in needs {
        if let Err(r) = fit(snapshot, need, n) {
            f.reasons.push(r);
        }
    }
    let ns = pod.metadata.namespace.clone().unwrap_or_else(|| "default".into());
    // Attachments: an error on this node, or a ReadWriteOnce volume held on another.
    for need in needs {
        let Need::Bound(claim, v) = need else { continue };
        let vname = helpers::name(&v.metadata);
        let here: Vec<&VolumeAttachment> = snapshot
            .attachments
            .iter()
            .filter(|a| a.spec.source.persistent_volume_name.as_deref() == Some(vname))
            .collect();
        if let Some(err) = here
            .iter()
            .filter(|a| a.spec.node_name == node)
            .find_map(|a| a.status.as_ref().and_then(|s| s.attach_error.as_ref()))
        {
            f.reasons.push((
                PodVerdict::AttachError,
                format!("attaching volume {vname} to {node} failed: {}", err.message.as_deref().unwrap_or("")),
            ));
        }
        let modes = helpers::claim_access_modes(claim);
        let rwo_only = modes.short() == "RWO";
        if !rwo_only || csi_driver(v).is_none() {
            continue;
        }
        let attach_required = snapshot
            .csi_drivers
            .iter()
            .find(|d| Some(d.metadata.name.as_deref().unwrap_or("")) == csi_driver(v))
            .is_none_or(|d| d.spec.attach_required != Some(false));
        if !attach_required {
            continue;
        }
        let elsewhere_pod = snapshot.pods.iter().find(|p| {
            !same_pod(p, pod)
                && !helpers::is_pod_terminated(p)
                && node_name(p).is_some_and(|m| m != node)
                && uses_claim(p, &ns, helpers::name(&claim.metadata))
        });
        let elsewhere_va =
            here.iter().find(|a| a.spec.node_name != node && a.status.as_ref().is_some_and(|s| s.attached));
        if let Some(p) = elsewhere_pod {
            f.reasons.push((
                PodVerdict::MultiAttach,
                format!(
                    "Multi-Attach: volume {vname} (ReadWriteOnce) is used by pod {} on node {}",
                    helpers::name(&p.metadata),
                    node_name(p).unwrap_or("")
                ),
            ));
        } else if let Some(a) = elsewhere_va {
            let detach = a
                .status
                .as_ref()
                .and_then(|s| s.detach_error.as_ref())
                .and_then(|e| e.message.clone())
                .map(|m| format!(" (detaching failed: {m})"))
                .unwrap_or_default();
            f.reasons.push((
                PodVerdict::MultiAttach,
                format!(
                    "Multi-Attach: volume {vname} (ReadWriteOnce) is still attached to node {}{detach}",
                    a.spec.node_name
                ),
            ));
        }
    }
    // Multi-Attach and attach errors keep the pod from starting, not from being on this node.
    f.fits = f.reasons.iter().all(|(v, _)| !v.blocks_scheduling());
    let first = f.reasons.first().cloned();
    x.nodes = vec![f];
    if let Some((v, why)) = first {
        x.verdict = v;
        x.next = PodNext::None;
        if v.blocks_scheduling() {
            x.fitting_nodes.clear();
        }
        x.message = format!("The pod is on node {node}, but {why}.");
        x.hint = Some(match v {
            PodVerdict::MultiAttach => "wait for the other pod to stop and the volume to detach (a node that is gone \
                                        detaches it after 6 minutes), or delete the other pod; a volume used from \
                                        several nodes needs ReadWriteMany"
                .into(),
            PodVerdict::AttachError => "fix what the error says (the driver's csi-attacher logs and the storage \
                                        backend); the attacher retries on its own"
                .into(),
            PodVerdict::VolumeNodeAffinityConflict => {
                "the pod was placed past the volume's node affinity (spec.nodeName set by hand?): delete it so that \
                 the scheduler places it"
                    .into()
            }
            _ => "remove the stale annotation, or delete the pod so that the scheduler places it again".into(),
        });
        return;
    }
    // A claim still being bound or provisioned.
    if let Some(v) = x.volumes.iter().find(|v| v.phase != "Bound") {
        x.verdict = PodVerdict::ClaimPending;
        x.next = PodNext::WaitClaim;
        let e = v.explanation.as_ref();
        x.message = format!(
            "The pod is on node {node} and waits for claim {ns}/{}: {}",
            v.claim,
            e.map(|e| e.message.as_str()).unwrap_or("")
        );
        x.hint = e.and_then(|e| e.hint.clone());
        if e.is_some_and(|e| e.next == crate::Next::None) {
            x.next = PodNext::None;
        }
        return;
    }
    x.verdict = PodVerdict::Ok;
    x.message =
        format!("The pod is on node {node} and its volumes are bound there: nothing on the storage side stops it.");
}
