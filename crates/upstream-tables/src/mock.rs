//! Upstream's `mockVolumePlugin` (framework_test.go): one plugin that provisions, deletes and
//! recycles, answering each call as the case says, with upstream's error texts.

use crate::case::PluginAnswers;
use async_trait::async_trait;
use pv_core::plugin::{PluginError, ProvisionOptions, RecyclerEvents, VolumePlugin};
use pv_model::k8s::PersistentVolume;
use serde_json::json;
use std::sync::Mutex;

/// Upstream's `mockPluginName`.
pub const MOCK_PLUGIN_NAME: &str = "kubernetes.io/mock-volume";

/// The mock plugin of one case.
pub struct MockPlugin {
    answers: PluginAnswers,
    calls: Mutex<(usize, usize, usize)>,
}

impl MockPlugin {
    /// A plugin answering as `answers` says.
    pub fn new(answers: PluginAnswers) -> Self {
        MockPlugin { answers, calls: Mutex::new((0, 0, 0)) }
    }
}

fn answer(list: &[Option<String>], counter: &mut usize, what: &str, none: &str) -> Result<(), PluginError> {
    if list.is_empty() {
        return Err(PluginError::new(format!("Mock plugin error: no {none} configured")));
    }
    let Some(a) = list.get(*counter) else {
        return Err(PluginError::new(format!("Mock plugin error: unexpected {what} call {counter}")));
    };
    *counter += 1;
    match a {
        None => Ok(()),
        Some(e) => Err(PluginError::new(e.clone())),
    }
}

#[async_trait]
impl VolumePlugin for MockPlugin {
    fn name(&self) -> &str {
        MOCK_PLUGIN_NAME
    }
    fn can_provision(&self) -> bool {
        true
    }
    fn supports_mount_options(&self) -> bool {
        false
    }
    fn can_support(&self, _volume: &PersistentVolume) -> bool {
        true
    }
    fn can_delete(&self) -> bool {
        true
    }
    fn can_recycle(&self) -> bool {
        true
    }

    async fn provision(&self, options: &ProvisionOptions) -> Result<PersistentVolume, PluginError> {
        let calls = &self.answers.provision;
        if calls.is_empty() {
            return Err(PluginError::new("Mock plugin error: no provisionCalls configured"));
        }
        let mut counters = self.calls.lock().unwrap();
        let n = counters.0;
        let Some(call) = calls.get(n) else {
            return Err(PluginError::new(format!("Mock plugin error: unexpected provisioner call {n}")));
        };
        let expected = call.parameters.clone().unwrap_or_default();
        if expected != options.parameters {
            return Err(PluginError::new("Mock plugin error: invalid provisioner call"));
        }
        counters.0 += 1;
        if let Some(e) = &call.error {
            return Err(PluginError::new(e.clone()));
        }
        let claim = &options.claim;
        let spec = claim.spec.as_ref();
        let capacity = spec
            .and_then(|s| s.resources.as_ref())
            .and_then(|r| r.requests.as_ref())
            .and_then(|r| r.get("storage"))
            .cloned();
        let pv = json!({
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": { "name": options.pv_name },
            "spec": {
                "capacity": { "storage": capacity },
                "accessModes": spec.and_then(|s| s.access_modes.clone()),
                "persistentVolumeReclaimPolicy": options.reclaim_policy,
                "gcePersistentDisk": { "pdName": "" },
                "volumeMode": spec.and_then(|s| s.volume_mode.clone()),
            },
            "status": { "phase": "Available" },
        });
        serde_json::from_value(pv).map_err(|e| PluginError::new(e.to_string()))
    }

    async fn delete(&self, _volume: &PersistentVolume) -> Result<(), PluginError> {
        let mut counters = self.calls.lock().unwrap();
        answer(&self.answers.delete, &mut counters.1, "deleter", "deleteCalls")
    }

    async fn recycle(&self, _volume: &PersistentVolume, _events: &dyn RecyclerEvents) -> Result<(), PluginError> {
        let mut counters = self.calls.lock().unwrap();
        answer(&self.answers.recycle, &mut counters.2, "recycle", "recycleCalls")
    }
}
