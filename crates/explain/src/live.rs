//! Reading a live cluster into a [`Snapshot`]: read-only `get`/`list` calls, nothing else.
//!
//! The client is configured exactly as `pv-controller run` configures it (`--kubeconfig`, else
//! `KUBECONFIG`, else `~/.kube/config`, else in-cluster; `--context`), through
//! `pv_kube::connect`. Only what the controller's decision for one claim depends on is read: the
//! claim itself, every PersistentVolume and StorageClass, and the Pods of the claim's namespace
//! (they say whether a delayed-binding claim has a consumer waiting). Nodes matter only once
//! provisioning runs, and other claims not at all, so they are not listed, which keeps the RBAC
//! needed to `get pvc`, `list pv,storageclass` and `list pods` in one namespace.

use crate::snapshot::Snapshot;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{Api, ListParams};
use pv_kube::connect::{self, ClientOptions};
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
        return Ok(Live { snapshot: Snapshot::default(), found: false, url });
    };
    let lp = ListParams::default();
    let pvs: Api<PersistentVolume> = Api::all(client.clone());
    let volumes = call("list persistentvolumes".into(), &url, pvs.list(&lp)).await?;
    let scs: Api<StorageClass> = Api::all(client.clone());
    let classes = call("list storageclasses".into(), &url, scs.list(&lp)).await?;
    let pods: Api<Pod> = Api::namespaced(client, namespace);
    let pods = call(format!("list pods in {namespace}"), &url, pods.list(&lp)).await?;
    Ok(Live {
        snapshot: Snapshot {
            volumes: volumes.items,
            claims: vec![claim],
            classes: classes.items,
            pods: pods.items,
            nodes: Vec::new(),
        },
        found: true,
        url,
    })
}
