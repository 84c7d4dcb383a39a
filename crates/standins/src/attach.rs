//! kube-controller-manager's attach-detach controller, standing in (`up --controllers
//! '*,attachdetach'`).
//!
//! Desired: for each pod on a node (not being deleted, not finished) whose Node carries the
//! kubelet's `volumes.kubernetes.io/controller-managed-attach-detach` annotation, each of its
//! claims that is Bound to a CSI volume whose driver requires attaching (a CSIDriver with
//! `attachRequired: false` does not; no CSIDriver does) is attached to that node: a
//! VolumeAttachment named as KCM names it, `csi-` and the SHA-256 of volume handle, driver and
//! node, which the driver's csi-attacher then attaches. Once attached, the volume is listed in
//! the Node's `status.volumesAttached` (`kubernetes.io/csi/<driver>^<handle>`) and each pod
//! gets a SuccessfulAttachVolume event. An attachment no pod needs any more is removed from the
//! Node's status and its VolumeAttachment deleted (csi-attacher detaches, then lets it go). A
//! ReadWriteOnce volume attached (or about to be) on another node is not attached again: the pod
//! gets FailedAttachVolume with KCM's Multi-Attach message.
//!
//! Which attachments are the stand-in's: those listed in a Node's `status.volumesAttached` and
//! those it created and that are not attached yet, as KCM rebuilds its own from Node statuses
//! when it starts. A VolumeAttachment someone else made is left alone.

use crate::{node_of, pod_key};
use pv_explain::Snapshot;
use pv_model::helpers;
use pv_model::k8s::{PersistentVolume, Pod};
use std::collections::{BTreeMap, BTreeSet};

/// The annotation a kubelet puts on its Node when the attach-detach controller attaches for it.
pub const CONTROLLER_MANAGED: &str = "volumes.kubernetes.io/controller-managed-attach-detach";

/// One volume attached to one node, for the pods there that use it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Attachment {
    /// The VolumeAttachment's name.
    pub name: String,
    /// The CSI driver (the VolumeAttachment's `attacher`).
    pub driver: String,
    /// The volume's handle.
    pub handle: String,
    /// The PersistentVolume.
    pub volume: String,
    /// The node.
    pub node: String,
    /// The pods on the node that use it: (namespace, name).
    pub pods: Vec<(String, String)>,
}

impl Attachment {
    /// The volume's name in a Node's `status.volumesAttached`.
    pub fn unique_name(&self) -> String {
        unique_name(&self.driver, &self.handle)
    }
}

/// `kubernetes.io/csi/<driver>^<handle>`: a CSI volume's name in a Node's status.
pub fn unique_name(driver: &str, handle: &str) -> String {
    format!("kubernetes.io/csi/{driver}^{handle}")
}

/// The VolumeAttachment name KCM gives a CSI volume's attachment to a node.
pub fn attachment_name(handle: &str, driver: &str, node: &str) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, format!("{handle}{driver}{node}").as_bytes());
    let hex: String = digest.as_ref().iter().map(|b| format!("{b:02x}")).collect();
    format!("csi-{hex}")
}

/// What the stand-in does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// Create the VolumeAttachment.
    Attach(Attachment),
    /// The VolumeAttachment is attached: list the volume in the Node's status, tell the pods.
    Report(Attachment),
    /// No pod needs it: take it off the Node's status, delete the VolumeAttachment.
    Detach {
        /// The VolumeAttachment's name.
        name: String,
        /// The node.
        node: String,
        /// The volume's name in the Node's status.
        unique_name: String,
    },
    /// A pod's ReadWriteOnce volume is attached to another node (FailedAttachVolume).
    MultiAttach {
        /// The pod: (namespace, name).
        pod: (String, String),
        /// The PersistentVolume.
        volume: String,
        /// KCM's message.
        message: String,
    },
}

impl std::fmt::Display for Step {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let pods = |a: &Attachment| a.pods.iter().map(|(ns, n)| format!("{ns}/{n}")).collect::<Vec<_>>().join(",");
        match self {
            Step::Attach(a) => {
                write!(f, "attach {} ({} to {} by {}, for {})", a.name, a.volume, a.node, a.driver, pods(a))
            }
            Step::Report(a) => write!(f, "report {} on {} (for {})", a.unique_name(), a.node, pods(a)),
            Step::Detach { name, node, unique_name } => write!(f, "detach {name} ({unique_name} from {node})"),
            Step::MultiAttach { pod, volume, message } => {
                write!(f, "multi-attach {}/{} {volume}: {message}", pod.0, pod.1)
            }
        }
    }
}

fn terminated(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_some() || helpers::is_pod_terminated(pod)
}

fn node_status_lists(snapshot: &Snapshot, node: &str, unique: &str) -> bool {
    snapshot
        .nodes
        .iter()
        .find(|n| n.metadata.name.as_deref() == Some(node))
        .and_then(|n| n.status.as_ref())
        .and_then(|s| s.volumes_attached.as_ref())
        .is_some_and(|l| l.iter().any(|a| a.name == unique))
}

/// The CSI volume a pod's claim is bound to, when it is attachable.
fn attachable<'a>(
    snapshot: &'a Snapshot,
    namespace: &str,
    claim: &str,
) -> Option<(&'a PersistentVolume, String, String)> {
    let c = snapshot.claim(namespace, claim)?;
    if c.status.as_ref().and_then(|s| s.phase.as_deref()) != Some("Bound") {
        return None;
    }
    let name = helpers::claim_volume_name(c);
    let pv = snapshot.volumes.iter().find(|v| v.metadata.name.as_deref() == Some(name))?;
    let claim_ref = pv.spec.as_ref()?.claim_ref.as_ref()?;
    if claim_ref.uid.as_deref() != c.metadata.uid.as_deref() {
        return None;
    }
    let csi = pv.spec.as_ref()?.csi.as_ref()?;
    let driver = snapshot.csi_drivers.iter().find(|d| d.metadata.name.as_deref() == Some(csi.driver.as_str()));
    if driver.and_then(|d| d.spec.attach_required) == Some(false) {
        return None;
    }
    Some((pv, csi.driver.clone(), csi.volume_handle.clone()))
}

/// The attachments the pods on managed nodes need, by VolumeAttachment name.
pub fn desired(snapshot: &Snapshot) -> BTreeMap<String, Attachment> {
    let mut out: BTreeMap<String, Attachment> = BTreeMap::new();
    for pod in snapshot.pods.iter().filter(|p| !terminated(p)) {
        let Some(node) = node_of(pod) else { continue };
        let managed = snapshot
            .nodes
            .iter()
            .find(|n| n.metadata.name.as_deref() == Some(node))
            .is_some_and(|n| n.metadata.annotations.as_ref().is_some_and(|a| a.contains_key(CONTROLLER_MANAGED)));
        if !managed {
            continue;
        }
        let (namespace, name) = pod_key(pod);
        for claim in helpers::pod_claim_names(pod) {
            let Some((pv, driver, handle)) = attachable(snapshot, &namespace, &claim) else { continue };
            let va = attachment_name(&handle, &driver, node);
            let a = out.entry(va.clone()).or_insert_with(|| Attachment {
                name: va,
                driver,
                handle,
                volume: helpers::name(&pv.metadata).to_string(),
                node: node.to_string(),
                pods: Vec::new(),
            });
            if !a.pods.contains(&(namespace.clone(), name.clone())) {
                a.pods.push((namespace.clone(), name.clone()));
            }
        }
    }
    out
}

/// True when the volume may be attached to more than one node (ReadWriteMany, ReadOnlyMany).
fn multi_attach_allowed(pv: Option<&PersistentVolume>) -> bool {
    use pv_model::helpers::{volume_access_modes, AccessModes};
    pv.map(volume_access_modes).is_some_and(|m| m.has(AccessModes::RWX) || m.has(AccessModes::ROX))
}

/// The steps over `snapshot`. `created`: VolumeAttachments the stand-in created that may not be
/// listed in a Node's status yet (its own, with those listed there).
pub fn plan(snapshot: &Snapshot, created: &BTreeSet<String>) -> Vec<Step> {
    let want = desired(snapshot);
    let existing: BTreeMap<&str, _> =
        snapshot.attachments.iter().map(|a| (a.metadata.name.as_deref().unwrap_or_default(), a)).collect();
    let mut steps = Vec::new();
    // Where each volume is attached, or is being attached: volume -> nodes.
    let mut on: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for a in snapshot.attachments.iter() {
        if let Some(v) = a.spec.source.persistent_volume_name.as_deref() {
            on.entry(v).or_default().insert(a.spec.node_name.as_str());
        }
    }
    for a in want.values() {
        match existing.get(a.name.as_str()) {
            Some(va) => {
                let attached = va.status.as_ref().is_some_and(|s| s.attached);
                if attached
                    && va.metadata.deletion_timestamp.is_none()
                    && !node_status_lists(snapshot, &a.node, &a.unique_name())
                {
                    steps.push(Step::Report(a.clone()));
                }
            }
            None => {
                let pv = snapshot.volumes.iter().find(|v| v.metadata.name.as_deref() == Some(a.volume.as_str()));
                let elsewhere: Vec<&str> = on
                    .get(a.volume.as_str())
                    .map(|n| n.iter().copied().filter(|n| *n != a.node).collect())
                    .unwrap_or_default();
                if !elsewhere.is_empty() && !multi_attach_allowed(pv) {
                    for p in &a.pods {
                        let message = multi_attach_message(snapshot, &a.volume, &elsewhere, p);
                        steps.push(Step::MultiAttach { pod: p.clone(), volume: a.volume.clone(), message });
                    }
                    continue;
                }
                on.entry(a.volume.as_str()).or_default().insert(a.node.as_str());
                steps.push(Step::Attach(a.clone()));
            }
        }
    }
    // Ours that no pod needs.
    for va in &snapshot.attachments {
        let name = va.metadata.name.as_deref().unwrap_or_default();
        if want.contains_key(name) {
            continue;
        }
        let node = va.spec.node_name.as_str();
        let Some(handle) = va
            .spec
            .source
            .persistent_volume_name
            .as_deref()
            .and_then(|v| snapshot.volumes.iter().find(|p| p.metadata.name.as_deref() == Some(v)))
            .and_then(|p| p.spec.as_ref())
            .and_then(|s| s.csi.as_ref())
            .map(|c| c.volume_handle.clone())
        else {
            continue;
        };
        let unique = unique_name(&va.spec.attacher, &handle);
        if created.contains(name) || node_status_lists(snapshot, node, &unique) {
            steps.push(Step::Detach { name: name.to_string(), node: node.to_string(), unique_name: unique });
        }
    }
    steps
}

/// KCM's FailedAttachVolume message for a volume attached on `elsewhere`: the pods there that
/// use it, when they are in the pod's namespace.
fn multi_attach_message(snapshot: &Snapshot, volume: &str, elsewhere: &[&str], pod: &(String, String)) -> String {
    let mut same_ns = Vec::new();
    let mut other_ns = 0;
    for p in snapshot.pods.iter().filter(|p| !terminated(p)) {
        let Some(node) = node_of(p) else { continue };
        if !elsewhere.contains(&node) {
            continue;
        }
        let (ns, name) = pod_key(p);
        let uses = helpers::pod_claim_names(p)
            .iter()
            .any(|c| snapshot.claim(&ns, c).is_some_and(|c| helpers::claim_volume_name(c) == volume));
        if uses {
            if ns == pod.0 {
                same_ns.push(name);
            } else {
                other_ns += 1;
            }
        }
    }
    let prefix = format!("Multi-Attach error for volume {volume:?} Volume is already ");
    if !same_ns.is_empty() {
        same_ns.sort();
        format!("{prefix}used by pod(s) {}", same_ns.join(", "))
    } else if other_ns > 0 {
        format!("{prefix}used by {other_ns} pod(s) in different namespaces")
    } else {
        format!("{prefix}exclusively attached to one node and can't be attached to another")
    }
}
