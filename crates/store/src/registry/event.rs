//! core/v1 Events (`pkg/registry/core/event`), which `events.k8s.io/v1` Events share: no
//! metadata validation beyond a usable name, and no injected faults (the controller records
//! events best effort; a fault there would test nothing it decides).

use crate::error::FieldError;
use crate::kinds::ResourceType;
use serde_json::Value;

pub(crate) const RESOURCE: ResourceType = ResourceType {
    group: "",
    version: "v1",
    kind: "Event",
    plural: "events",
    key: "events",
    singular: "event",
    namespaced: true,
    status_subresource: false,
    short_names: &["ev"],
};

pub(crate) struct Strategy;

impl super::strategy::Strategy for Strategy {
    fn resource(&self) -> &'static ResourceType {
        &RESOURCE
    }

    fn roundtrip(&self, value: &serde_json::Value) -> Result<serde_json::Value, String> {
        crate::typed::through::<k8s_openapi::api::core::v1::Event>(value)
    }

    fn faulted(&self) -> bool {
        false
    }

    fn validate(&self, obj: &Value, errs: &mut Vec<FieldError>) {
        let name = obj.get("metadata").and_then(|m| m.get("name")).and_then(Value::as_str).unwrap_or("");
        if name.is_empty() {
            errs.push(FieldError::required("metadata.name", "name or generateName is required"));
        }
    }

    fn validate_update(&self, _old: &Value, new: &Value, errs: &mut Vec<FieldError>) {
        self.validate(new, errs);
    }
}
