//! [`ClusterApi`] over kube-rs: the controller's writes and reads sent to a real API server.
//!
//! Why a thin adapter: the controller decides *what* to write and reacts to a small set of error
//! kinds (not found, already exists, conflict, invalid, anything else). This module only turns
//! each call into one HTTP request, bounds it with a client-side timeout (a hung request must not
//! hold a worker forever — the key is retried instead), and classifies the answer.

use crate::foreign::OwnWrites;
use crate::lean::Lean;
use async_trait::async_trait;
use k8s_openapi::api::core::v1::{Event, PersistentVolume, PersistentVolumeClaim, Pod};
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::{Api, Client};
use pv_core::{ApiError, ClusterApi};
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::collections::BTreeMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Default bound on one API request.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// Namespace for Events about cluster-scoped objects (PVs), as upstream's recorder uses.
pub(crate) const EVENT_DEFAULT_NAMESPACE: &str = "default";

/// Requests made, by method and HTTP code (`<error>` when there was no answer), for
/// `rest_client_requests_total`. It counts the controller's own calls, not the watches.
#[derive(Debug, Default)]
pub struct RequestCounts {
    host: String,
    counts: Mutex<BTreeMap<(&'static str, String), u64>>,
}

/// A copy of [`RequestCounts`].
#[derive(Debug, Default)]
pub struct RequestSnapshot {
    /// The API server's `host:port`.
    pub host: String,
    /// `(method, code)` → requests.
    pub counts: BTreeMap<(&'static str, String), u64>,
}

impl RequestCounts {
    /// Counters for requests to `host`.
    pub fn new(host: impl Into<String>) -> Self {
        RequestCounts { host: host.into(), counts: Mutex::default() }
    }

    fn record(&self, method: &'static str, code: String) {
        let mut m = self.counts.lock().unwrap_or_else(|e| e.into_inner());
        *m.entry((method, code)).or_default() += 1;
    }

    /// The counts so far.
    pub fn snapshot(&self) -> RequestSnapshot {
        let m = self.counts.lock().unwrap_or_else(|e| e.into_inner());
        RequestSnapshot { host: self.host.clone(), counts: m.clone() }
    }

    /// Requests with a method other than GET (writes).
    pub fn writes(&self) -> u64 {
        let m = self.counts.lock().unwrap_or_else(|e| e.into_inner());
        m.iter().filter(|((method, _), _)| *method != "GET").map(|(_, n)| *n).sum()
    }
}

/// The controller's API calls over a kube-rs [`Client`].
#[derive(Clone)]
pub struct KubeApi {
    client: Client,
    timeout: Duration,
    requests: Arc<RequestCounts>,
    own: Arc<OwnWrites>,
}

impl KubeApi {
    /// An adapter over `client`, each request bounded by [`DEFAULT_REQUEST_TIMEOUT`].
    pub fn new(client: Client) -> Self {
        Self::with_timeout(client, DEFAULT_REQUEST_TIMEOUT)
    }

    /// An adapter whose requests time out after `timeout`.
    pub fn with_timeout(client: Client, timeout: Duration) -> Self {
        KubeApi { client, timeout, requests: Arc::default(), own: Arc::default() }
    }

    /// Counts requests into `requests` (shared with `/metrics`).
    pub fn with_request_counts(mut self, requests: Arc<RequestCounts>) -> Self {
        self.requests = requests;
        self
    }

    /// Remembers the resourceVersions of its writes into `own` (shared with the watches that
    /// notice another binder's).
    pub fn with_own_writes(mut self, own: Arc<OwnWrites>) -> Self {
        self.own = own;
        self
    }

    /// The request counters.
    pub fn request_counts(&self) -> &Arc<RequestCounts> {
        &self.requests
    }

    fn volumes(&self) -> Api<PersistentVolume> {
        Api::all(self.client.clone())
    }

    fn claims(&self, namespace: &str) -> Api<PersistentVolumeClaim> {
        Api::namespaced(self.client.clone(), namespace)
    }

    fn events(&self, event: &Event) -> Api<Event> {
        let ns = event
            .metadata
            .namespace
            .as_deref()
            .or(event.involved_object.namespace.as_deref())
            .filter(|ns| !ns.is_empty())
            .unwrap_or(EVENT_DEFAULT_NAMESPACE);
        Api::namespaced(self.client.clone(), ns)
    }

    /// An object this process wrote: remembered.
    fn own_write<K: kube::Resource>(&self, o: K) -> K {
        self.own.record(o.meta().resource_version.as_deref());
        o
    }

    /// One write of `obj` to `api`'s resource, as kube-rs's `create`, `replace` and
    /// `replace_status` send it, its answer decoded without managedFields ([`crate::lean`]).
    async fn write<K>(&self, api: &Api<K>, write: WriteKind<'_>, obj: &K) -> kube::Result<K>
    where
        K: kube::Resource + Serialize + DeserializeOwned,
    {
        let pp = post_params();
        let body = serde_json::to_vec(obj).map_err(kube::Error::SerdeError)?;
        let r = kube::core::Request::new(api.resource_url());
        let (req, verb) = match write {
            WriteKind::Create => (r.create(&pp, body), "create"),
            WriteKind::Replace(name) => (r.replace(name, &pp, body), "replace"),
            WriteKind::ReplaceStatus(name) => (r.replace_subresource("status", name, &pp, body), "replace_status"),
        };
        let mut req = req.map_err(kube::Error::BuildRequest)?;
        req.extensions_mut().insert(verb);
        Ok(self.client.request::<Lean<K>>(req).await?.object)
    }

    /// Runs one request (`method`, described as `what`) under the timeout and classifies its
    /// error.
    async fn call<T>(
        &self,
        method: Method,
        what: &str,
        fut: impl Future<Output = kube::Result<T>>,
    ) -> Result<T, ApiError> {
        let r = tokio::time::timeout(self.timeout, fut).await;
        let code = match &r {
            Ok(Ok(_)) if method == Method::Post => "201".to_string(),
            Ok(Ok(_)) => "200".to_string(),
            Ok(Err(kube::Error::Api(s))) => s.code.to_string(),
            _ => "<error>".to_string(),
        };
        self.requests.record(method.as_str(), code);
        answer(what, self.timeout, r)
    }
}

/// A request's answer (or none within `timeout`), classified as the controller reacts to it.
pub(crate) fn answer<T>(
    what: &str,
    timeout: Duration,
    r: Result<kube::Result<T>, tokio::time::error::Elapsed>,
) -> Result<T, ApiError> {
    match r {
        Ok(r) => r.map_err(|e| classify(what, e)),
        Err(_) => Err(ApiError::other(format!("{what}: no answer within {timeout:?}"))),
    }
}

/// A write [`KubeApi::write`] sends; names the object it replaces.
#[derive(Clone, Copy)]
enum WriteKind<'a> {
    Create,
    Replace(&'a str),
    ReplaceStatus(&'a str),
}

/// The HTTP method of a request, as `rest_client_requests_total` labels it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Method {
    Get,
    Post,
    Put,
    Delete,
}

impl Method {
    fn as_str(self) -> &'static str {
        match self {
            Method::Get => "GET",
            Method::Post => "POST",
            Method::Put => "PUT",
            Method::Delete => "DELETE",
        }
    }
}

/// Maps a kube-rs error to the kinds the controller distinguishes.
///
/// 409 means two different things: `AlreadyExists` on create, `Conflict` (stale
/// resourceVersion) on update; the Status `reason` tells them apart.
pub fn classify(what: &str, e: kube::Error) -> ApiError {
    match e {
        kube::Error::Api(status) => {
            let msg = format!("{what}: {} ({})", status.message, status.code);
            if status.is_already_exists() {
                ApiError::AlreadyExists(msg)
            } else if status.is_not_found() {
                ApiError::NotFound(msg)
            } else if status.is_conflict() {
                ApiError::Conflict(msg)
            } else if status.is_invalid() {
                ApiError::Invalid(msg)
            } else {
                ApiError::other(msg)
            }
        }
        other => ApiError::caused(what, other),
    }
}

fn name_of<K: kube::Resource>(obj: &K) -> Result<&str, ApiError> {
    obj.meta()
        .name
        .as_deref()
        .filter(|n| !n.is_empty())
        .ok_or_else(|| ApiError::Invalid("metadata.name: Required value".into()))
}

fn namespace_of<K: kube::Resource>(obj: &K) -> &str {
    obj.meta().namespace.as_deref().unwrap_or("default")
}

#[async_trait]
impl ClusterApi for KubeApi {
    async fn get_volume(&self, name: &str) -> Result<PersistentVolume, ApiError> {
        let api = self.volumes();
        self.call(Method::Get, "get persistentvolume", api.get(name)).await.map(trimmed)
    }

    async fn create_volume(&self, volume: &PersistentVolume) -> Result<PersistentVolume, ApiError> {
        let api = self.volumes();
        self.call(Method::Post, "create persistentvolume", self.write(&api, WriteKind::Create, volume))
            .await
            .map(|o| self.own_write(o))
    }

    async fn update_volume(&self, volume: &PersistentVolume) -> Result<PersistentVolume, ApiError> {
        let api = self.volumes();
        let name = name_of(volume)?;
        self.call(Method::Put, "update persistentvolume", self.write(&api, WriteKind::Replace(name), volume))
            .await
            .map(|o| self.own_write(o))
    }

    async fn update_volume_status(&self, volume: &PersistentVolume) -> Result<PersistentVolume, ApiError> {
        let api = self.volumes();
        let name = name_of(volume)?;
        self.call(
            Method::Put,
            "update persistentvolume status",
            self.write(&api, WriteKind::ReplaceStatus(name), volume),
        )
        .await
    }

    async fn delete_volume(&self, name: &str) -> Result<(), ApiError> {
        let api = self.volumes();
        let dp = DeleteParams::default();
        self.call(Method::Delete, "delete persistentvolume", api.delete(name, &dp)).await.map(|_| ())
    }

    async fn get_claim(&self, namespace: &str, name: &str) -> Result<PersistentVolumeClaim, ApiError> {
        let api = self.claims(namespace);
        self.call(Method::Get, "get persistentvolumeclaim", api.get(name)).await.map(trimmed)
    }

    async fn update_claim(&self, claim: &PersistentVolumeClaim) -> Result<PersistentVolumeClaim, ApiError> {
        let api = self.claims(namespace_of(claim));
        let name = name_of(claim)?;
        self.call(Method::Put, "update persistentvolumeclaim", self.write(&api, WriteKind::Replace(name), claim))
            .await
            .map(|o| self.own_write(o))
    }

    async fn update_claim_status(&self, claim: &PersistentVolumeClaim) -> Result<PersistentVolumeClaim, ApiError> {
        let api = self.claims(namespace_of(claim));
        let name = name_of(claim)?;
        self.call(
            Method::Put,
            "update persistentvolumeclaim status",
            self.write(&api, WriteKind::ReplaceStatus(name), claim),
        )
        .await
    }

    async fn create_event(&self, event: &Event) -> Result<Event, ApiError> {
        let api = self.events(event);
        let pp = post_params();
        self.call(Method::Post, "create event", api.create(&pp, event)).await.map(trimmed)
    }

    async fn update_event(&self, event: &Event) -> Result<Event, ApiError> {
        let api = self.events(event);
        let pp = post_params();
        let name = name_of(event)?;
        self.call(Method::Put, "update event", api.replace(name, &pp, event)).await.map(trimmed)
    }

    async fn list_pods(&self, namespace: &str) -> Result<Vec<Pod>, ApiError> {
        let api: Api<Pod> = Api::namespaced(self.client.clone(), namespace);
        let list = self.call(Method::Get, "list pods", api.list(&ListParams::default())).await?;
        Ok(list.items.into_iter().map(trimmed).collect())
    }
}

/// Every write names this project's field manager, so that `managedFields` tell its writes
/// from another binder's.
fn post_params() -> PostParams {
    PostParams { field_manager: Some(pv_model::ownership::FIELD_MANAGER.to_string()), ..Default::default() }
}

/// The object without `metadata.managedFields`, which the controller never reads: on a real
/// cluster they are often larger than the rest of the object, and every cached copy would carry
/// them. An update without managedFields leaves the server's unchanged.
pub(crate) fn trimmed<K: kube::Resource>(mut o: K) -> K {
    o.meta_mut().managed_fields = None;
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::core::Status;

    fn status(code: u16, reason: &str) -> kube::Error {
        let mut s = Status::failure("boom", reason);
        s.code = code;
        kube::Error::Api(Box::new(s))
    }

    #[test]
    fn conflicts_are_told_apart_from_already_exists_by_reason() {
        assert!(matches!(classify("create", status(409, "AlreadyExists")), ApiError::AlreadyExists(_)));
        assert!(matches!(classify("update", status(409, "Conflict")), ApiError::Conflict(_)));
    }

    #[test]
    fn not_found_invalid_and_server_errors_map_to_their_kinds() {
        assert!(classify("get", status(404, "NotFound")).is_not_found());
        assert!(matches!(classify("update", status(422, "Invalid")), ApiError::Invalid(_)));
        assert!(matches!(classify("update", status(500, "InternalError")), ApiError::Other { .. }));
    }

    #[test]
    fn cached_objects_drop_managed_fields_and_keep_the_rest() {
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ManagedFieldsEntry, ObjectMeta};
        let v = PersistentVolume {
            metadata: ObjectMeta {
                name: Some("a".into()),
                resource_version: Some("9".into()),
                managed_fields: Some(vec![ManagedFieldsEntry {
                    manager: Some("kubectl".into()),
                    ..Default::default()
                }]),
                ..Default::default()
            },
            ..Default::default()
        };
        let t = trimmed(v.clone());
        assert!(t.metadata.managed_fields.is_none());
        assert_eq!(ObjectMeta { managed_fields: None, ..v.metadata.clone() }, t.metadata);
    }
}
