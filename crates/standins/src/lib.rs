//! Stand-ins on `up` for the two parts of a cluster that a CSI driver's test loop needs beside
//! the sidecars, and that `up` does not otherwise run: kube-scheduler's volume step (with the
//! pod's binding to its node) and kube-controller-manager's attach-detach controller. Both are
//! off unless asked for (`up --scheduler`, `up --controllers '*,attachdetach'`).
//!
//! Each is a pure plan over a [`pv_explain::Snapshot`] of the store ([`schedule::plan`],
//! [`attach::plan`]) and one loop ([`run()`]) that reads the store whenever it changed, carries the
//! steps out through the store's own write paths (the same rules as a client's writes) and
//! records events under the component names the real ones use.
//!
//! They are stand-ins, not copies: the scheduler stand-in places a pod where `explain pod` says
//! its volumes fit (and where its own nodeSelector, affinity and taints allow), not by
//! kube-scheduler's scores; nothing here is a kubelet.

pub mod attach;
pub mod run;
pub mod schedule;

pub use run::{run, StandIns};

use pv_model::helpers;
use pv_model::k8s::Pod;

/// `namespace`, `name` of a pod.
fn pod_key(pod: &Pod) -> (String, String) {
    (pod.metadata.namespace.clone().unwrap_or_else(|| "default".into()), helpers::name(&pod.metadata).to_string())
}

/// The pod's node, when it has one.
fn node_of(pod: &Pod) -> Option<&str> {
    pod.spec.as_ref().and_then(|s| s.node_name.as_deref()).filter(|n| !n.is_empty())
}
