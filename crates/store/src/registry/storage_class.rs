//! StorageClasses (`pkg/registry/storage/storageclass`): cluster-scoped, the provisioner and
//! its parameters fixed at creation.

use crate::error::FieldError;
use crate::kinds::ResourceType;
use crate::table::{col, name_col, or, Column, AGE};
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

/// upstream's `printStorageClass`.
const COLUMNS: &[Column] = &[
    name_col("Name", |r| {
        let name = r.f("metadata.name");
        if is_default_class(r.o) {
            format!("{name} (default)")
        } else {
            name
        }
    }),
    col("Provisioner", |r| r.f("provisioner")),
    col("ReclaimPolicy", |r| r.f("reclaimPolicy")),
    col("VolumeBindingMode", |r| r.f("volumeBindingMode")),
    Column { enc: "boolean", ..col("AllowVolumeExpansion", |r| or(r.f("allowVolumeExpansion"), "false")) },
    AGE,
];

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

    fn columns(&self) -> &'static [Column] {
        COLUMNS
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

/// Whether the class is annotated the default one (with the annotation or its beta form).
fn is_default_class(o: &Value) -> bool {
    let ann = o.pointer("/metadata/annotations");
    ["storageclass.kubernetes.io/is-default-class", "storageclass.beta.kubernetes.io/is-default-class"]
        .iter()
        .any(|k| ann.and_then(|a| a.get(*k)).and_then(Value::as_str) == Some("true"))
}
