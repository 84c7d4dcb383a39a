//! `ClusterApi` over a store in the same process: typed objects in, JSON through the store, typed
//! out. The store is in memory under `simulate` and tests, durable under `up`.

use async_trait::async_trait;
use pv_core::{ApiError, ClusterApi};
use pv_model::k8s::{Event, PersistentVolume, PersistentVolumeClaim, Pod};
use pv_store::{Store, StoreError, Written};
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::sync::Arc;

/// The controller's API over a store in the same process.
///
/// It has no test hooks: the simulation wraps it in `pv_core::Intercepted` for those.
pub struct MemApi {
    store: Arc<Store>,
}

impl MemApi {
    /// An adapter over `store`.
    pub fn new(store: Arc<Store>) -> Self {
        MemApi { store }
    }

    /// The store.
    pub fn store(&self) -> &Arc<Store> {
        &self.store
    }
}

fn map_err(e: StoreError) -> ApiError {
    match e {
        StoreError::NotFound { .. } => ApiError::NotFound(e.to_string()),
        StoreError::AlreadyExists { .. } => ApiError::AlreadyExists(e.to_string()),
        StoreError::Conflict { .. } => ApiError::Conflict(e.to_string()),
        StoreError::Invalid { .. } => ApiError::Invalid(e.to_string()),
        other => ApiError::from_source(other),
    }
}

fn to_value<T: Serialize>(obj: &T) -> Result<serde_json::Value, ApiError> {
    serde_json::to_value(obj).map_err(|e| ApiError::Invalid(e.to_string()))
}

/// Answers a store write once durable. The wait does not hold the task's thread (other tasks
/// keep running and their writes join the same group commit); the simulation's store has no
/// commit to wait for.
async fn durable(store: &Arc<Store>, written: pv_store::Result<Written>) -> Result<Arc<serde_json::Value>, ApiError> {
    written.map_err(map_err)?.durable(store).await.map_err(map_err)
}

fn undecodable(e: serde_json::Error) -> ApiError {
    ApiError::caused("decoding stored object", e)
}

/// The object a write answered with, as its type.
fn from_value<T: DeserializeOwned>(v: &serde_json::Value) -> Result<T, ApiError> {
    T::deserialize(v).map_err(undecodable)
}

/// A stored object, decoded from its text.
fn decode<T: DeserializeOwned>(o: &pv_store::Object) -> Result<T, ApiError> {
    o.decode().map_err(undecodable)
}

impl MemApi {
    async fn update<T: Serialize + DeserializeOwned + Sync>(
        &self,
        resource: &str,
        obj: &T,
        status: bool,
    ) -> Result<T, ApiError> {
        let v = durable(&self.store, self.store.update_written(resource, to_value(obj)?, status)).await?;
        from_value(&v)
    }
}

#[async_trait]
impl ClusterApi for MemApi {
    async fn get_volume(&self, name: &str) -> Result<PersistentVolume, ApiError> {
        decode(&self.store.get("persistentvolumes", "", name).map_err(map_err)?)
    }
    async fn create_volume(&self, volume: &PersistentVolume) -> Result<PersistentVolume, ApiError> {
        let v = durable(&self.store, self.store.create_written("persistentvolumes", to_value(volume)?)).await?;
        from_value(&v)
    }
    async fn update_volume(&self, volume: &PersistentVolume) -> Result<PersistentVolume, ApiError> {
        self.update("persistentvolumes", volume, false).await
    }
    async fn update_volume_status(&self, volume: &PersistentVolume) -> Result<PersistentVolume, ApiError> {
        self.update("persistentvolumes", volume, true).await
    }
    async fn delete_volume(&self, name: &str) -> Result<(), ApiError> {
        durable(&self.store, self.store.delete_written("persistentvolumes", "", name, None, None)).await.map(|_| ())
    }
    async fn get_claim(&self, namespace: &str, name: &str) -> Result<PersistentVolumeClaim, ApiError> {
        decode(&self.store.get("persistentvolumeclaims", namespace, name).map_err(map_err)?)
    }
    async fn update_claim(&self, claim: &PersistentVolumeClaim) -> Result<PersistentVolumeClaim, ApiError> {
        self.update("persistentvolumeclaims", claim, false).await
    }
    async fn update_claim_status(&self, claim: &PersistentVolumeClaim) -> Result<PersistentVolumeClaim, ApiError> {
        self.update("persistentvolumeclaims", claim, true).await
    }
    async fn create_event(&self, event: &Event) -> Result<Event, ApiError> {
        from_value(&*durable(&self.store, self.store.create_written("events", to_value(event)?)).await?)
    }
    async fn update_event(&self, event: &Event) -> Result<Event, ApiError> {
        from_value(&*durable(&self.store, self.store.update_written("events", to_value(event)?, false)).await?)
    }
    async fn list_pods(&self, namespace: &str) -> Result<Vec<Pod>, ApiError> {
        let (items, _) =
            self.store.list("pods", &pv_store::ListOptions { namespace: Some(namespace.into()) }).map_err(map_err)?;
        items.iter().map(decode).collect()
    }
}
