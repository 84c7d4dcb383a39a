//! Pods (`pkg/registry/core/pod`): namespaced, a status of their own from creation (Pending,
//! the QoS class), the generation counting spec changes.

use crate::error::FieldError;
use crate::kinds::ResourceType;
use crate::validation::{default_if_unset, obj_mut, other, pod};
use serde_json::Value;

pub(crate) const RESOURCE: ResourceType = ResourceType {
    group: "",
    version: "v1",
    kind: "Pod",
    plural: "pods",
    key: "pods",
    singular: "pod",
    namespaced: true,
    status_subresource: true,
    short_names: &["po"],
};

pub(crate) struct Strategy;

impl super::strategy::Strategy for Strategy {
    fn resource(&self) -> &'static ResourceType {
        &RESOURCE
    }

    fn roundtrip(&self, value: &serde_json::Value) -> Result<serde_json::Value, String> {
        crate::typed::through::<k8s_openapi::api::core::v1::Pod>(value)
    }

    fn reset_status_for_create(&self, obj: &mut Value) {
        let status = other::initial_pod_status(obj);
        if let Some(o) = obj.as_object_mut() {
            o.insert("status".into(), status);
        }
    }

    fn default(&self, obj: &mut Value) {
        other::default_pod(obj);
        default_if_unset(obj_mut(obj, "status"), "phase", "Pending", false);
    }

    fn validate_spec(&self, obj: &Value, errs: &mut Vec<FieldError>) {
        pod::validate_pod(obj, errs);
    }

    fn validate_spec_update(&self, old: &Value, new: &Value, errs: &mut Vec<FieldError>) {
        other::validate_pod_update(old, new, errs);
    }

    fn tracks_generation(&self) -> bool {
        true
    }

    /// A status write keeps the Pod's owner references.
    fn kept_by_status_update(&self) -> &'static [&'static str] {
        &["ownerReferences"]
    }
}
