//! VolumeAttributesClasses (`pkg/registry/storage/volumeattributesclass`): cluster-scoped, a
//! driver and its parameters fixed at creation (a change is Forbidden, checked before the
//! class's own rules, as upstream orders them).

use crate::error::FieldError;
use crate::kinds::ResourceType;
use crate::table::{col, Column, AGE, NAME};
use crate::validation::meta::validate_meta_update;
use crate::validation::storage;
use serde_json::Value;

pub(crate) const RESOURCE: ResourceType = ResourceType {
    group: "storage.k8s.io",
    version: "v1",
    kind: "VolumeAttributesClass",
    plural: "volumeattributesclasses",
    key: "volumeattributesclasses",
    singular: "volumeattributesclass",
    namespaced: false,
    status_subresource: false,
    short_names: &["vac"],
};

/// upstream's `printVolumeAttributesClass`.
const COLUMNS: &[Column] = &[NAME, col("DriverName", |r| r.f("driverName")), AGE];

pub(crate) struct Strategy;

impl super::strategy::Strategy for Strategy {
    fn resource(&self) -> &'static ResourceType {
        &RESOURCE
    }

    fn roundtrip(&self, value: &serde_json::Value) -> Result<serde_json::Value, String> {
        crate::typed::through::<k8s_openapi::api::storage::v1::VolumeAttributesClass>(value)
    }

    fn columns(&self) -> &'static [Column] {
        COLUMNS
    }

    fn validate_spec(&self, obj: &Value, errs: &mut Vec<FieldError>) {
        storage::validate_volume_attributes_class(obj, errs);
    }

    fn validate_update(&self, old: &Value, new: &Value, errs: &mut Vec<FieldError>) {
        validate_meta_update(&RESOURCE, old, new, errs);
        storage::validate_volume_attributes_class_update(old, new, errs);
    }
}
