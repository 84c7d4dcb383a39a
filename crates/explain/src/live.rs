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
    // The selected node: whether it exists is part of an in-tree plugin's decision.
    if let Some(node) = helpers::annotation(&snapshot.claims[0].metadata, ann::SELECTED_NODE).filter(|n| !n.is_empty())
    {
        let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(client.clone());
        match call(format!("get node {node}"), &url, nodes.get_opt(node)).await {
            Ok(n) => snapshot.nodes.extend(n),
            Err(e) => notes.push(e.to_string()),
        }
    }
    // Past the binder only when the controller's plan hands the claim to an external provisioner,
    // or leaves it to the scheduler (then: the scheduler's Lease and its events on the pods, and
    // the class's provisioner, whose failed attempt for the scheduler's node may be the answer).
    // What the scheduler said about the pods of the namespace (a claim's consumers).
    let events: Api<Event> = Api::namespaced(client.clone(), namespace);
    let failed = ListParams::default().fields("involvedObject.kind=Pod,reason=FailedScheduling");
    match call(format!("list events in {namespace}"), &url, events.list(&failed)).await {
        Ok(l) => snapshot.events.extend(l.items),
        Err(e) => notes.push(e.to_string()),
    }
    let e = crate::explain_snapshot(&snapshot, namespace, name);
    let provisioner = match e.as_ref() {
        Some(e) if e.next == crate::Next::WaitFirstConsumer => {
            let leases: Api<Lease> = Api::namespaced(client.clone(), "kube-system");
            match call("get lease kube-system/kube-scheduler".into(), &url, leases.get_opt("kube-scheduler")).await {
                Ok(l) => snapshot.leases.extend(l),
                Err(e) => notes.push(e.to_string()),
            }
            crate::provisioner::of_class(&snapshot, &snapshot.claims[0])
        }
        Some(e) => e.external.clone().map(|(p, _)| p),
        None => None,
    };
    if let Some(provisioner) = provisioner {
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
        Ok(l) => snapshot.leases.extend(l.items),
        Err(e) => notes.push(e.to_string()),
    }
    let events: Api<Event> = Api::namespaced(client.clone(), &ns);
    let on_claim = ListParams::default().fields(&format!(
        "involvedObject.kind=PersistentVolumeClaim,involvedObject.uid={}",
        helpers::uid(&claim.metadata)
    ));
    match call(format!("list events in {ns}"), url, events.list(&on_claim)).await {
        Ok(l) => snapshot.events.extend(l.items),
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

/// What `explain pod` and `explain pvc -A` read: which namespace (all when `None`).
#[derive(Clone, Debug)]
pub enum Scope {
    /// One pod: its namespace's claims, pods and events, and the cluster-wide objects.
    Pod(String, String),
    /// Every claim of a namespace, or of all of them.
    Claims(Option<String>),
}

/// Lists `api` into `out`; a failure is a note (the answer leaves that part out), or an error
/// when `required`.
async fn list_into<K>(
    api: Api<K>,
    what: &str,
    url: &str,
    required: bool,
    out: &mut Vec<K>,
    notes: &mut Vec<String>,
) -> Result<bool, LiveError>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    match call(format!("list {what}"), url, api.list(&ListParams::default())).await {
        Ok(l) => {
            out.extend(l.items);
            Ok(true)
        }
        Err(e) if required => Err(e),
        Err(e) => {
            notes.push(e.to_string());
            Ok(false)
        }
    }
}

/// Reads what `explain pod` or `explain pvc -A` looks at: claims, volumes, classes and pods (an
/// error when they cannot be read), and, best effort, nodes, CSIDrivers, CSINodes,
/// VolumeAttachments, CSIStorageCapacities, Leases and Events (a read the credentials may not
/// make is a note, and its part of the answer is left out). `found` is false when the pod does
/// not exist.
pub async fn read_scope(opts: &ClientOptions, scope: &Scope) -> Result<Live, LiveError> {
    let config = connect::load_config(opts).await?;
    let url = config.cluster_url.to_string();
    let client = connect::client(config, opts)?;
    let ns: Option<&str> = match scope {
        Scope::Pod(ns, _) => Some(ns),
        Scope::Claims(ns) => ns.as_deref(),
    };
    let in_ns = |what: &str| match ns {
        Some(ns) => format!("{what} in {ns}"),
        None => format!("{what} in all namespaces"),
    };
    fn scoped<K>(client: &kube::Client, ns: Option<&str>) -> Api<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>,
        <K as kube::Resource>::DynamicType: Default,
    {
        match ns {
            Some(ns) => Api::namespaced(client.clone(), ns),
            None => Api::all(client.clone()),
        }
    }
    let mut s = Snapshot::default();
    let mut notes = Vec::new();
    if let Scope::Pod(ns, name) = scope {
        let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
        match call(format!("get pod {ns}/{name}"), &url, pods.get_opt(name)).await? {
            Some(_) => {}
            None => return Ok(Live { snapshot: s, found: false, url, notes }),
        }
    }
    list_into(
        scoped::<PersistentVolumeClaim>(&client, ns),
        &in_ns("persistentvolumeclaims"),
        &url,
        true,
        &mut s.claims,
        &mut notes,
    )
    .await?;
    list_into(
        Api::<PersistentVolume>::all(client.clone()),
        "persistentvolumes",
        &url,
        true,
        &mut s.volumes,
        &mut notes,
    )
    .await?;
    list_into(Api::<StorageClass>::all(client.clone()), "storageclasses", &url, true, &mut s.classes, &mut notes)
        .await?;
    // Pods everywhere for a pod (the volumes in use on each node count towards its attach limit);
    // the scope's pods otherwise (they say which claims wait for a consumer).
    let pod_ns = if matches!(scope, Scope::Pod(..)) { None } else { ns };
    if !list_into(scoped::<Pod>(&client, pod_ns), "pods", &url, pod_ns.is_some(), &mut s.pods, &mut notes).await? {
        list_into(scoped::<Pod>(&client, ns), &in_ns("pods"), &url, true, &mut s.pods, &mut notes).await?;
    }
    list_into(
        Api::<k8s_openapi::api::core::v1::Node>::all(client.clone()),
        "nodes",
        &url,
        false,
        &mut s.nodes,
        &mut notes,
    )
    .await?;
    let drivers =
        list_into(Api::<CSIDriver>::all(client.clone()), "csidrivers", &url, false, &mut s.csi_drivers, &mut notes)
            .await?;
    s.read_csi = drivers;
    list_into(Api::<CSINode>::all(client.clone()), "csinodes", &url, false, &mut s.csi_nodes, &mut notes).await?;
    list_into(
        Api::<k8s_openapi::api::storage::v1::VolumeAttachment>::all(client.clone()),
        "volumeattachments",
        &url,
        false,
        &mut s.attachments,
        &mut notes,
    )
    .await?;
    list_into(
        Api::<CSIStorageCapacity>::all(client.clone()),
        "csistoragecapacities",
        &url,
        false,
        &mut s.capacities,
        &mut notes,
    )
    .await?;
    list_into(Api::<Lease>::all(client.clone()), "leases", &url, false, &mut s.leases, &mut notes).await?;
    list_into(scoped::<Event>(&client, ns), &in_ns("events"), &url, false, &mut s.events, &mut notes).await?;
    Ok(Live { snapshot: s, found: true, url, notes })
}
