//! PersistentVolumeClaims (`pkg/registry/core/persistentvolumeclaim`): namespaced, status
//! through its subresource, data sources normalised before validation.

use crate::error::FieldError;
use crate::kinds::ResourceType;
use crate::table::{access_modes, col, or, wide, Column, AGE, NAME};
use crate::validation::{default_if_unset, obj_mut, pvc};
use serde_json::Value;

pub(crate) const RESOURCE: ResourceType = ResourceType {
    group: "",
    version: "v1",
    kind: "PersistentVolumeClaim",
    plural: "persistentvolumeclaims",
    key: "persistentvolumeclaims",
    singular: "persistentvolumeclaim",
    namespaced: true,
    status_subresource: true,
    short_names: &["pvc"],
};

/// upstream's `printPersistentVolumeClaim`.
const COLUMNS: &[Column] = &[
    NAME,
    col("Status", |r| r.phase_or_terminating()),
    col("Volume", |r| r.f("spec.volumeName")),
    col("Capacity", |r| r.f("status.capacity.storage")),
    col("Access Modes", |r| access_modes(r.o.pointer("/status/accessModes"))),
    col("StorageClass", |r| r.f("spec.storageClassName")),
    col("VolumeAttributesClass", |r| or(r.f("status.currentVolumeAttributesClassName"), "<unset>")),
    AGE,
    wide("VolumeMode", |r| or(r.f("spec.volumeMode"), "<unset>")),
];

pub(crate) struct Strategy;

impl super::strategy::Strategy for Strategy {
    fn resource(&self) -> &'static ResourceType {
        &RESOURCE
    }

    fn roundtrip(&self, value: &serde_json::Value) -> Result<serde_json::Value, String> {
        crate::typed::through::<k8s_openapi::api::core::v1::PersistentVolumeClaim>(value)
    }

    fn warnings(&self, _old: Option<&serde_json::Value>, obj: &serde_json::Value) -> Vec<String> {
        crate::validation::warnings::annotation_warnings(obj, &[crate::validation::warnings::STORAGE_CLASS_ANNOTATION])
    }

    fn columns(&self) -> &'static [Column] {
        COLUMNS
    }

    fn default(&self, obj: &mut Value) {
        default_if_unset(obj_mut(obj, "spec"), "volumeMode", "Filesystem", false);
        default_if_unset(obj_mut(obj, "status"), "phase", "Pending", false);
    }

    fn normalize(&self, old: Option<&Value>, obj: &mut Value) {
        let old_spec = old.and_then(|o| o.get("spec"));
        if let Some(spec) = obj.get_mut("spec") {
            pvc::prepare(spec, old_spec);
        }
    }

    fn validate_spec(&self, obj: &Value, errs: &mut Vec<FieldError>) {
        pvc::validate_pvc(obj, errs);
    }

    fn validate_spec_update(&self, old: &Value, new: &Value, errs: &mut Vec<FieldError>) {
        pvc::validate_pvc_update(old, new, errs);
    }

    fn validate_status_update(&self, old: &Value, new: &Value, errs: &mut Vec<FieldError>) {
        crate::validation::meta::validate_meta_update(&RESOURCE, old, new, errs);
        pvc::validate_pvc_status(new, errs);
    }
}
