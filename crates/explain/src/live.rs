//! Reading a live cluster into a [`Snapshot`]: read-only `get`/`list` calls, nothing else.
//!
//! The client is configured exactly as `pv-controller run` configures it (`--kubeconfig`, else
//! `KUBECONFIG`, else `~/.kube/config`, else in-cluster; `--context`), through
//! `pv_kube::connect`. Only what the controller's decision for one claim depends on is read: the
//! claim itself, every PersistentVolume and StorageClass, and the Pods of the claim's namespace
//! (they say whether a delayed-binding claim has a consumer waiting). Nodes matter only once
//! provisioning runs, and other claims not at all, so they are not listed, which keeps the RBAC
//! needed to `get pvc`, `list pv,storageclass` and `list pods` in one namespace.
//!
//! Past the binder, only for a claim that waits for an external provisioner: `get csidriver`,
//! `list leases` of the provisioner's Lease name in every namespace, `list events` on the claim,
//! `get csinode` of the selected node and `list csistoragecapacities` when the driver publishes
//! them. Those reads are best effort: one the credentials may not make (RBAC) is reported as a
//! note and its part of the answer left unknown.

use crate::snapshot::Snapshot;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Event, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::{CSIDriver, CSINode, CSIStorageCapacity, StorageClass};
use kube::api::{Api, ListParams};
use pv_kube::connect::{self, ClientOptions};
use pv_model::annotations as ann;
use pv_model::helpers;
use std::time::Duration;

/// Why the cluster could not be read.
#[derive(Debug, thiserror::Error)]
pub enum LiveError {
    /// No usable client configuration.
    #[error(transparent)]
    Connect(#[from] connect::Error),
    /// A request failed or timed out.
    #[error("{what} on {url}: {message}")]
    Request {
        /// The request.
        what: String,
        /// Server URL.
        url: String,
        /// What went wrong.
        message: String,
    },
}

/// What was read from the cluster.
pub struct Live {
    /// The objects.
    pub snapshot: Snapshot,
    /// The claim was found.
    pub found: bool,
    /// The server URL (for messages).
    pub url: String,
    /// Reads past the binder that failed (their part of the answer is unknown), for stderr.
    pub notes: Vec<String>,
}

const TIMEOUT: Duration = Duration::from_secs(30);

/// The namespace of the kubeconfig's context (or the service account's), `default` otherwise.
pub async fn default_namespace(opts: &ClientOptions) -> Result<String, LiveError> {
    Ok(connect::load_config(opts).await?.default_namespace)
}

async fn call<T>(
    what: String,
    url: &str,
    fut: impl std::future::Future<Output = Result<T, kube::Error>>,
) -> Result<T, LiveError> {
    let err = |message: String| LiveError::Request { what: what.clone(), url: url.to_string(), message };
    match tokio::time::timeout(TIMEOUT, fut).await {
        Err(_) => Err(err(format!("no answer within {TIMEOUT:?}"))),
        Ok(Err(kube::Error::Api(s))) => Err(err(format!("HTTP {} {}: {}", s.code, s.reason, s.message))),
        Ok(Err(e)) => Err(err(connect::transport_failure(&e))),
        Ok(Ok(v)) => Ok(v),
    }
}

/// Reads the claim `namespace/name` and what its explanation depends on.
pub async fn read(opts: &ClientOptions, namespace: &str, name: &str) -> Result<Live, LiveError> {
    let config = connect::load_config(opts).await?;
    let url = config.cluster_url.to_string();
    let client = connect::client(config, opts)?;
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), namespace);
    let claim = call(format!("get persistentvolumeclaim {namespace}/{name}"), &url, claims.get_opt(name)).await?;
    let Some(claim) = claim else {
        return Ok(Live { snapshot: Snapshot::default(), found: false, url, notes: Vec::new() });
    };
    let lp = ListParams::default();
    let pvs: Api<PersistentVolume> = Api::all(client.clone());
    let volumes = call("list persistentvolumes".into(), &url, pvs.list(&lp)).await?;
    let scs: Api<StorageClass> = Api::all(client.clone());
    let classes = call("list storageclasses".into(), &url, scs.list(&lp)).await?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let pods = call(format!("list pods in {namespace}"), &url, pods.list(&lp)).await?;
    let mut snapshot = Snapshot {
        volumes: volumes.items,
        claims: vec![claim],
        classes: classes.items,
        pods: pods.items,
        ..Default::default()
    };
    let mut notes = Vec::new();
    // Past the binder only when the controller's plan hands the claim to an external provisioner.
    let external = crate::explain_snapshot(&snapshot, namespace, name).and_then(|e| e.external);
    if let Some((provisioner, _)) = external {
        read_past_binder(&client, &url, &mut snapshot, &provisioner, &mut notes).await;
    }
    Ok(Live { snapshot, found: true, url, notes })
}

/// What [`crate::provisioner::check`] looks at, read into `snapshot`; a failed read becomes a note.
async fn read_past_binder(
    client: &kube::Client,
    url: &str,
    snapshot: &mut Snapshot,
    provisioner: &str,
    notes: &mut Vec<String>,
) {
    let claim = snapshot.claims[0].clone();
    let ns = claim.metadata.namespace.clone().unwrap_or_default();
    let lp = ListParams::default();
    let drivers: Api<CSIDriver> = Api::all(client.clone());
    match call(format!("get csidriver {provisioner}"), url, drivers.get_opt(provisioner)).await {
        Ok(d) => {
            snapshot.read_csi = true;
            snapshot.csi_drivers.extend(d);
        }
        Err(e) => notes.push(e.to_string()),
    }
    let lease = crate::provisioner::lease_name(provisioner);
    let leases: Api<Lease> = Api::all(client.clone());
    let by_name = ListParams::default().fields(&format!("metadata.name={lease}"));
    match call(format!("list leases named {lease}"), url, leases.list(&by_name)).await {
        Ok(l) => snapshot.leases = l.items,
        Err(e) => notes.push(e.to_string()),
    }
    let events: Api<Event> = Api::namespaced(client.clone(), &ns);
    let on_claim = ListParams::default().fields(&format!(
        "involvedObject.kind=PersistentVolumeClaim,involvedObject.uid={}",
        helpers::uid(&claim.metadata)
    ));
    match call(format!("list events in {ns}"), url, events.list(&on_claim)).await {
        Ok(l) => snapshot.events = l.items,
        Err(e) => notes.push(e.to_string()),
    }
    if let Some(node) = helpers::annotation(&claim.metadata, ann::SELECTED_NODE).filter(|n| !n.is_empty()) {
        let csinodes: Api<CSINode> = Api::all(client.clone());
        match call(format!("get csinode {node}"), url, csinodes.get_opt(node)).await {
            Ok(n) => snapshot.csi_nodes.extend(n),
            Err(e) => notes.push(e.to_string()),
        }
    }
    if snapshot.csi_drivers.iter().any(|d| d.spec.storage_capacity == Some(true)) {
        let caps: Api<CSIStorageCapacity> = Api::all(client.clone());
        match call("list csistoragecapacities".into(), url, caps.list(&lp)).await {
            Ok(l) => snapshot.capacities = l.items,
            Err(e) => notes.push(e.to_string()),
        }
    }
}
