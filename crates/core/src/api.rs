//! The API calls the controller makes, as a trait: implemented over kube-rs (real clusters, `up`)
//! and over the in-memory store (simulate, tests).

use async_trait::async_trait;
use pv_model::k8s::{Event, PersistentVolume, PersistentVolumeClaim, Pod};

/// A failed API call, classified the way the controller reacts to it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ApiError {
    /// 404.
    #[error("not found: {0}")]
    NotFound(String),
    /// 409 on create.
    #[error("already exists: {0}")]
    AlreadyExists(String),
    /// 409 on update (stale resourceVersion) or failed precondition.
    #[error("conflict: {0}")]
    Conflict(String),
    /// 422.
    #[error("invalid: {0}")]
    Invalid(String),
    /// Anything else: 5xx, timeouts, transport errors. The request may or may not have applied.
    #[error("{message}")]
    Other {
        /// What failed, in words.
        message: String,
        /// The error underneath (a transport's, a decoder's), when there is one.
        #[source]
        source: Option<Source>,
    },
}

/// The error underneath an [`ApiError::Other`], shared so that the error stays `Clone`; two are
/// equal when they read the same.
#[derive(Clone, Debug)]
pub struct Source(std::sync::Arc<dyn std::error::Error + Send + Sync>);

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for Source {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&*self.0)
    }
}

impl PartialEq for Source {
    fn eq(&self, other: &Self) -> bool {
        self.0.to_string() == other.0.to_string()
    }
}

impl Eq for Source {}

impl ApiError {
    /// Any other failure, with no error underneath.
    pub fn other(message: impl Into<String>) -> Self {
        ApiError::Other { message: message.into(), source: None }
    }
    /// Any other failure, caused by `source`, whose message it has.
    pub fn from_source(source: impl std::error::Error + Send + Sync + 'static) -> Self {
        ApiError::Other { message: source.to_string(), source: Some(Source(std::sync::Arc::new(source))) }
    }
    /// Any other failure, caused by `source`; the message is `what: source`.
    pub fn caused(what: impl std::fmt::Display, source: impl std::error::Error + Send + Sync + 'static) -> Self {
        ApiError::Other { message: format!("{what}: {source}"), source: Some(Source(std::sync::Arc::new(source))) }
    }
    /// True for 404.
    pub fn is_not_found(&self) -> bool {
        matches!(self, ApiError::NotFound(_))
    }
    /// The message, without the classification.
    pub fn message(&self) -> &str {
        match self {
            ApiError::NotFound(m)
            | ApiError::AlreadyExists(m)
            | ApiError::Conflict(m)
            | ApiError::Invalid(m)
            | ApiError::Other { message: m, .. } => m,
        }
    }
    /// True for 409 conflicts.
    pub fn is_conflict(&self) -> bool {
        matches!(self, ApiError::Conflict(_))
    }
}

/// Writes and reads the controller needs beyond its watch caches.
#[async_trait]
pub trait ClusterApi: Send + Sync {
    /// GET a PV.
    async fn get_volume(&self, name: &str) -> Result<PersistentVolume, ApiError>;
    /// POST a PV.
    async fn create_volume(&self, volume: &PersistentVolume) -> Result<PersistentVolume, ApiError>;
    /// PUT a PV (main resource).
    async fn update_volume(&self, volume: &PersistentVolume) -> Result<PersistentVolume, ApiError>;
    /// PUT a PV's status.
    async fn update_volume_status(&self, volume: &PersistentVolume) -> Result<PersistentVolume, ApiError>;
    /// DELETE a PV.
    async fn delete_volume(&self, name: &str) -> Result<(), ApiError>;
    /// GET a PVC.
    async fn get_claim(&self, namespace: &str, name: &str) -> Result<PersistentVolumeClaim, ApiError>;
    /// PUT a PVC (main resource).
    async fn update_claim(&self, claim: &PersistentVolumeClaim) -> Result<PersistentVolumeClaim, ApiError>;
    /// PUT a PVC's status.
    async fn update_claim_status(&self, claim: &PersistentVolumeClaim) -> Result<PersistentVolumeClaim, ApiError>;
    /// POST an Event.
    async fn create_event(&self, event: &Event) -> Result<Event, ApiError>;
    /// PUT an Event (aggregation bumps its count).
    async fn update_event(&self, event: &Event) -> Result<Event, ApiError>;
    /// LIST the Pods of a namespace, from the server rather than a cache: the pvc-protection
    /// controller's check before it lets a claim go, for a pod its watch has not delivered yet.
    async fn list_pods(&self, namespace: &str) -> Result<Vec<Pod>, ApiError>;
}

/// A request as an [`Interceptor`] sees it: its verb (`get`, `create`, `update`, `delete`,
/// `list`) and resource (`persistentvolumes`, `persistentvolumeclaims`, `events`, `pods`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Call {
    /// The request's verb.
    pub verb: &'static str,
    /// The resource it is about.
    pub resource: &'static str,
}

impl Call {
    const fn new(verb: &'static str, resource: &'static str) -> Self {
        Call { verb, resource }
    }

    /// A write of a volume or a claim (not an Event, not a read).
    pub fn writes_an_object(&self) -> bool {
        matches!(self.verb, "create" | "update" | "delete") && self.resource != "events"
    }
}

/// What an [`Intercepted`] API does around each request: tests' fault injection and hooks, kept
/// out of the adapters that run in production.
pub trait Interceptor: Send + Sync {
    /// Before the request: an error is its answer, and the API never sees it.
    fn before(&self, _call: Call) -> Result<(), ApiError> {
        Ok(())
    }
    /// Once the API answered a request `before` let through, before the answer is returned.
    fn after(&self, _call: Call) {}
}

/// An API with an [`Interceptor`] around every request.
pub struct Intercepted<A, I> {
    /// The API requests go to.
    pub inner: A,
    /// What runs around each.
    pub interceptor: I,
}

impl<A, I: Interceptor> Intercepted<A, I> {
    async fn call<T>(&self, call: Call, request: impl std::future::Future<Output = T>) -> Result<T, ApiError> {
        self.interceptor.before(call)?;
        let answer = request.await;
        self.interceptor.after(call);
        Ok(answer)
    }
}

const PVS: &str = "persistentvolumes";
const PVCS: &str = "persistentvolumeclaims";

#[async_trait]
impl<A: ClusterApi, I: Interceptor> ClusterApi for Intercepted<A, I> {
    async fn get_volume(&self, name: &str) -> Result<PersistentVolume, ApiError> {
        self.call(Call::new("get", PVS), self.inner.get_volume(name)).await?
    }
    async fn create_volume(&self, volume: &PersistentVolume) -> Result<PersistentVolume, ApiError> {
        self.call(Call::new("create", PVS), self.inner.create_volume(volume)).await?
    }
    async fn update_volume(&self, volume: &PersistentVolume) -> Result<PersistentVolume, ApiError> {
        self.call(Call::new("update", PVS), self.inner.update_volume(volume)).await?
    }
    async fn update_volume_status(&self, volume: &PersistentVolume) -> Result<PersistentVolume, ApiError> {
        self.call(Call::new("update", PVS), self.inner.update_volume_status(volume)).await?
    }
    async fn delete_volume(&self, name: &str) -> Result<(), ApiError> {
        self.call(Call::new("delete", PVS), self.inner.delete_volume(name)).await?
    }
    async fn get_claim(&self, namespace: &str, name: &str) -> Result<PersistentVolumeClaim, ApiError> {
        self.call(Call::new("get", PVCS), self.inner.get_claim(namespace, name)).await?
    }
    async fn update_claim(&self, claim: &PersistentVolumeClaim) -> Result<PersistentVolumeClaim, ApiError> {
        self.call(Call::new("update", PVCS), self.inner.update_claim(claim)).await?
    }
    async fn update_claim_status(&self, claim: &PersistentVolumeClaim) -> Result<PersistentVolumeClaim, ApiError> {
        self.call(Call::new("update", PVCS), self.inner.update_claim_status(claim)).await?
    }
    async fn create_event(&self, event: &Event) -> Result<Event, ApiError> {
        self.call(Call::new("create", "events"), self.inner.create_event(event)).await?
    }
    async fn update_event(&self, event: &Event) -> Result<Event, ApiError> {
        self.call(Call::new("update", "events"), self.inner.update_event(event)).await?
    }
    async fn list_pods(&self, namespace: &str) -> Result<Vec<Pod>, ApiError> {
        self.call(Call::new("list", "pods"), self.inner.list_pods(namespace)).await?
    }
}
