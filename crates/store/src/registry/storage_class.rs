//! StorageClasses (`pkg/registry/storage/storageclass`): cluster-scoped, the provisioner and
//! its parameters fixed at creation.

use crate::error::FieldError;
use crate::kinds::ResourceType;
use crate::validation::{default_if_unset, storage_class};
use serde_json::Value;

pub(crate) const RESOURCE: ResourceType = ResourceType {
    group: "storage.k8s.io",
    version: "v1",
    kind: "StorageClass",
    plural: "storageclasses",
    key: "storageclasses",
    singular: "storageclass",
    namespaced: false,
    status_subresource: false,
    short_names: &["sc"],
};

pub(crate) struct Strategy;

impl super::strategy::Strategy for Strategy {
    fn resource(&self) -> &'static ResourceType {
        &RESOURCE
    }

    fn roundtrip(&self, value: &serde_json::Value) -> Result<serde_json::Value, String> {
        crate::typed::through::<k8s_openapi::api::storage::v1::StorageClass>(value)
    }

    fn warnings(&self, _old: Option<&serde_json::Value>, obj: &serde_json::Value) -> Vec<String> {
        crate::validation::warnings::storage_class(obj)
    }

    fn default(&self, obj: &mut Value) {
        if let Some(o) = obj.as_object_mut() {
            // Only an unset policy is defaulted; an empty one is kept as given.
            default_if_unset(o, "reclaimPolicy", "Delete", false);
            default_if_unset(o, "volumeBindingMode", "Immediate", false);
        }
    }

    fn validate_spec(&self, obj: &Value, errs: &mut Vec<FieldError>) {
        storage_class::validate_storage_class(obj, errs);
    }

    fn validate_spec_update(&self, old: &Value, new: &Value, errs: &mut Vec<FieldError>) {
        storage_class::validate_storage_class_update(old, new, errs);
    }
}
