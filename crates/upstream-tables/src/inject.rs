//! Upstream's `VolumeReactor` error injection: each listed error is answered once, to the first
//! request whose verb and resource match (`*` matches any), in the list's order.

use crate::case::ReactorError;
use async_trait::async_trait;
use pv_core::{ApiError, ClusterApi};
use pv_model::k8s::{Event, PersistentVolume, PersistentVolumeClaim, Pod};
use std::sync::{Arc, Mutex};

/// A `ClusterApi` answering the case's errors before passing requests on.
pub struct Injecting {
    inner: Arc<dyn ClusterApi>,
    errors: Mutex<Vec<ReactorError>>,
}

impl Injecting {
    /// `inner`, with `errors` to answer.
    pub fn new(inner: Arc<dyn ClusterApi>, errors: Vec<ReactorError>) -> Self {
        Injecting { inner, errors: Mutex::new(errors) }
    }

    fn inject(&self, verb: &str, resource: &str) -> Result<(), ApiError> {
        let mut errors = self.errors.lock().unwrap();
        let hit = errors
            .iter()
            .position(|e| (e.verb == verb || e.verb == "*") && (e.resource == resource || e.resource == "*"));
        match hit {
            Some(i) => {
                let e = errors.remove(i);
                Err(match e.reason.as_str() {
                    "AlreadyExists" => ApiError::AlreadyExists(e.message),
                    "NotFound" => ApiError::NotFound(e.message),
                    "Conflict" => ApiError::Conflict(e.message),
                    "Invalid" => ApiError::Invalid(e.message),
                    _ => ApiError::other(e.message),
                })
            }
            None => Ok(()),
        }
    }
}

const PV: &str = "persistentvolumes";
const PVC: &str = "persistentvolumeclaims";

#[async_trait]
impl ClusterApi for Injecting {
    async fn get_volume(&self, name: &str) -> Result<PersistentVolume, ApiError> {
        self.inject("get", PV)?;
        self.inner.get_volume(name).await
    }
    async fn create_volume(&self, volume: &PersistentVolume) -> Result<PersistentVolume, ApiError> {
        self.inject("create", PV)?;
        self.inner.create_volume(volume).await
    }
    async fn update_volume(&self, volume: &PersistentVolume) -> Result<PersistentVolume, ApiError> {
        self.inject("update", PV)?;
        self.inner.update_volume(volume).await
    }
    async fn update_volume_status(&self, volume: &PersistentVolume) -> Result<PersistentVolume, ApiError> {
        self.inject("update", PV)?;
        self.inner.update_volume_status(volume).await
    }
    async fn delete_volume(&self, name: &str) -> Result<(), ApiError> {
        self.inject("delete", PV)?;
        self.inner.delete_volume(name).await
    }
    async fn get_claim(&self, namespace: &str, name: &str) -> Result<PersistentVolumeClaim, ApiError> {
        self.inject("get", PVC)?;
        self.inner.get_claim(namespace, name).await
    }
    async fn update_claim(&self, claim: &PersistentVolumeClaim) -> Result<PersistentVolumeClaim, ApiError> {
        self.inject("update", PVC)?;
        self.inner.update_claim(claim).await
    }
    async fn update_claim_status(&self, claim: &PersistentVolumeClaim) -> Result<PersistentVolumeClaim, ApiError> {
        self.inject("update", PVC)?;
        self.inner.update_claim_status(claim).await
    }
    async fn create_event(&self, event: &Event) -> Result<Event, ApiError> {
        self.inner.create_event(event).await
    }
    async fn update_event(&self, event: &Event) -> Result<Event, ApiError> {
        self.inner.update_event(event).await
    }
    async fn list_pods(&self, namespace: &str) -> Result<Vec<Pod>, ApiError> {
        self.inner.list_pods(namespace).await
    }
}
