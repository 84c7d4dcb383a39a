//! kube-scheduler's volume step, standing in (`up --scheduler`).
//!
//! For each pod no node was assigned to (default scheduler, not being deleted, not finished), in
//! order of creation: the nodes that fit are those `explain pod` finds (the pod's nodeSelector,
//! required node affinity, taints and cordons; its bound volumes' node affinity; for each
//! WaitForFirstConsumer claim a fitting volume there or a class that can provision there, with
//! published capacity; CSI attach limits). Of those it takes a node a claim already names in
//! `selected-node`, else a node whose CSINode lists every CSI driver the pod's volumes need, else
//! the first by name. There, as kube-scheduler's VolumeBinding plugin does, it binds each
//! waiting claim to the fitting volume (the volume's `claimRef`, `bound-by-controller`) or names
//! the node in the claim's `volume.kubernetes.io/selected-node` for provisioning, and once every
//! claim of the pod is Bound it binds the pod to the node (the `binding` subresource). A pod that
//! fits nowhere gets a FailedScheduling event with `explain pod`'s reason.
//!
//! A new Node carries the `node.kubernetes.io/not-ready:NoSchedule` taint (the API server's
//! admission adds it), which KCM's node lifecycle controller lifts once the Node's Ready
//! condition is True; no pod tolerates it by default. `up` runs no node lifecycle controller, so
//! this stand-in lifts it from Ready nodes, as that controller does: a node with no kubelet gets
//! pods once something reports it Ready, on `up` as on a cluster.

use crate::{node_of, pod_key};
use k8s_openapi::jiff::Timestamp;
use pv_explain::pod::{explain_pod, ClaimUse, PodExplanation};
use pv_explain::Snapshot;
use pv_model::annotations as ann;
use pv_model::helpers;
use pv_model::k8s::Pod;
use std::collections::BTreeSet;

/// What the stand-in does for one pod.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// Bind the waiting claim to the volume: the volume's `claimRef` (the binder completes it).
    BindVolume {
        /// The claim's namespace.
        namespace: String,
        /// The claim.
        claim: String,
        /// The volume.
        volume: String,
    },
    /// Provision the waiting claim for the node: its `volume.kubernetes.io/selected-node`.
    SelectNode {
        /// The claim's namespace.
        namespace: String,
        /// The claim.
        claim: String,
        /// The node.
        node: String,
    },
    /// Every claim of the pod is Bound: assign the pod to the node.
    BindPod {
        /// The pod's namespace.
        namespace: String,
        /// The pod.
        pod: String,
        /// The node.
        node: String,
    },
    /// The node is Ready: lift its `node.kubernetes.io/not-ready:NoSchedule` taint.
    LiftNotReadyTaint {
        /// The node.
        node: String,
    },
    /// No node fits the pod: why, in `explain pod`'s words.
    Unschedulable {
        /// The pod's namespace.
        namespace: String,
        /// The pod.
        pod: String,
        /// Why.
        message: String,
    },
}

impl std::fmt::Display for Step {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Step::BindVolume { namespace, claim, volume } => write!(f, "bind-volume {volume} to {namespace}/{claim}"),
            Step::SelectNode { namespace, claim, node } => write!(f, "select-node {node} for {namespace}/{claim}"),
            Step::BindPod { namespace, pod, node } => write!(f, "bind-pod {namespace}/{pod} to {node}"),
            Step::LiftNotReadyTaint { node } => write!(f, "lift-not-ready-taint {node}"),
            Step::Unschedulable { namespace, pod, message } => write!(f, "unschedulable {namespace}/{pod}: {message}"),
        }
    }
}

/// True for a pod the default scheduler would place: no node yet, not being deleted, not
/// finished.
fn waits_for_node(pod: &Pod) -> bool {
    let scheduler = pod.spec.as_ref().and_then(|s| s.scheduler_name.as_deref()).unwrap_or("default-scheduler");
    node_of(pod).is_none()
        && scheduler == "default-scheduler"
        && pod.metadata.deletion_timestamp.is_none()
        && !helpers::is_pod_terminated(pod)
}

/// The steps for every pod that waits for a node, over `snapshot` at `now`. A volume goes to one
/// claim per plan: a pod whose chosen volume an earlier pod took waits for the next plan.
pub fn plan(snapshot: &Snapshot, now: Timestamp) -> Vec<Step> {
    let ready_tainted: Vec<Step> = snapshot
        .nodes
        .iter()
        .filter(|n| {
            ready(n)
                && n.spec.as_ref().and_then(|s| s.taints.as_ref()).is_some_and(|t| t.iter().any(is_not_ready_taint))
        })
        .map(|n| Step::LiftNotReadyTaint { node: helpers::name(&n.metadata).to_string() })
        .collect();
    if !ready_tainted.is_empty() {
        // The pods are placed once the nodes are as the next snapshot shows them.
        return ready_tainted;
    }
    let mut pods: Vec<&Pod> = snapshot.pods.iter().filter(|p| waits_for_node(p)).collect();
    pods.sort_by(|a, b| {
        let t = |p: &Pod| p.metadata.creation_timestamp.as_ref().map(|t| t.0);
        t(a).cmp(&t(b)).then_with(|| pod_key(a).cmp(&pod_key(b)))
    });
    let mut taken = BTreeSet::new();
    let mut steps = Vec::new();
    for pod in pods {
        let (namespace, name) = pod_key(pod);
        let Some(x) = explain_pod(snapshot, &namespace, &name, now) else { continue };
        if x.fitting_nodes.is_empty() {
            steps.push(Step::Unschedulable { namespace, pod: name, message: x.message.clone() });
            continue;
        }
        let node = choose(snapshot, pod, &x);
        let uses = x.nodes.iter().find(|f| f.node == node).map(|f| f.uses.as_slice()).unwrap_or_default();
        if uses.iter().any(|u| matches!(u, ClaimUse::Volume { volume, .. } if taken.contains(volume))) {
            continue;
        }
        let mut waiting = false;
        for u in uses {
            waiting = true;
            match u {
                ClaimUse::Volume { claim, volume } => {
                    taken.insert(volume.clone());
                    steps.push(Step::BindVolume {
                        namespace: namespace.clone(),
                        claim: claim.clone(),
                        volume: volume.clone(),
                    });
                }
                ClaimUse::Provision { claim, .. } => {
                    if selected_node(snapshot, &namespace, claim) != Some(node.as_str()) {
                        steps.push(Step::SelectNode {
                            namespace: namespace.clone(),
                            claim: claim.clone(),
                            node: node.clone(),
                        });
                    }
                }
            }
        }
        if !waiting && x.volumes.iter().all(|v| v.phase == "Bound") {
            steps.push(Step::BindPod { namespace, pod: name, node });
        }
    }
    steps
}

/// The taint a new Node gets until it is Ready.
pub const NOT_READY_TAINT: &str = "node.kubernetes.io/not-ready";

/// True for the not-ready taint that keeps pods off (NoSchedule).
pub fn is_not_ready_taint(t: &k8s_openapi::api::core::v1::Taint) -> bool {
    t.key == NOT_READY_TAINT && t.effect == "NoSchedule"
}

fn ready(node: &pv_model::k8s::Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

fn selected_node<'a>(snapshot: &'a Snapshot, namespace: &str, claim: &str) -> Option<&'a str> {
    snapshot
        .claim(namespace, claim)
        .and_then(|c| helpers::annotation(&c.metadata, ann::SELECTED_NODE))
        .filter(|s| !s.is_empty())
}

/// The node for the pod among those that fit: one a claim already names, else one whose CSINode
/// lists every CSI driver the pod's volumes need, else the first.
fn choose(snapshot: &Snapshot, pod: &Pod, x: &PodExplanation) -> String {
    let namespace = pod_key(pod).0;
    let named = x.volumes.iter().filter_map(|v| selected_node(snapshot, &namespace, &v.claim));
    if let Some(n) = named.into_iter().find(|n| x.fitting_nodes.iter().any(|f| f == n)) {
        return n.to_string();
    }
    let serves_all = |node: &str| {
        let uses = x.nodes.iter().find(|f| f.node == node).map(|f| f.uses.as_slice()).unwrap_or_default();
        let mut drivers: BTreeSet<&str> = uses
            .iter()
            .filter_map(|u| match u {
                ClaimUse::Provision { provisioner, .. } => Some(provisioner.as_str()),
                ClaimUse::Volume { .. } => None,
            })
            .filter(|p| snapshot.csi_drivers.iter().any(|d| d.metadata.name.as_deref() == Some(*p)))
            .collect();
        for v in x.volumes.iter().filter_map(|v| v.volume.as_deref()) {
            let pv = snapshot.volumes.iter().find(|p| p.metadata.name.as_deref() == Some(v));
            if let Some(csi) = pv.and_then(|p| p.spec.as_ref()).and_then(|s| s.csi.as_ref()) {
                drivers.insert(csi.driver.as_str());
            }
        }
        let csinode = snapshot.csi_nodes.iter().find(|c| c.metadata.name.as_deref() == Some(node));
        drivers.iter().all(|d| csinode.is_some_and(|c| c.spec.drivers.iter().any(|cd| cd.name == *d)))
    };
    x.fitting_nodes.iter().find(|n| serves_all(n)).unwrap_or(&x.fitting_nodes[0]).clone()
}
