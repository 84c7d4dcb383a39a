//! PersistentVolumes (`pkg/registry/core/persistentvolume`): cluster-scoped, status through its
//! subresource, the phase's transition time kept by the server.

use crate::error::FieldError;
use crate::kinds::ResourceType;
use crate::table::{access_modes, col, or, wide, Column, AGE, NAME};
use crate::validation::{default_if_unset, obj_mut, pv};
use serde_json::Value;

pub(crate) const RESOURCE: ResourceType = ResourceType {
    group: "",
    version: "v1",
    kind: "PersistentVolume",
    plural: "persistentvolumes",
    key: "persistentvolumes",
    singular: "persistentvolume",
    namespaced: false,
    status_subresource: true,
    short_names: &["pv"],
};

/// upstream's `printPersistentVolume`.
const COLUMNS: &[Column] = &[
    NAME,
    col("Capacity", |r| r.f("spec.capacity.storage")),
    col("Access Modes", |r| access_modes(r.o.pointer("/spec/accessModes"))),
    col("Reclaim Policy", |r| r.f("spec.persistentVolumeReclaimPolicy")),
    col("Status", |r| r.phase_or_terminating()),
    col("Claim", |r| {
        if r.f("spec.claimRef.name").is_empty() {
            String::new()
        } else {
            format!("{}/{}", r.f("spec.claimRef.namespace"), r.f("spec.claimRef.name"))
        }
    }),
    col("StorageClass", |r| r.f("spec.storageClassName")),
    col("VolumeAttributesClass", |r| or(r.f("spec.volumeAttributesClassName"), "<unset>")),
    col("Reason", |r| r.f("status.reason")),
    AGE,
    wide("VolumeMode", |r| or(r.f("spec.volumeMode"), "<unset>")),
];

pub(crate) struct Strategy;

impl super::strategy::Strategy for Strategy {
    fn resource(&self) -> &'static ResourceType {
        &RESOURCE
    }

    fn roundtrip(&self, value: &serde_json::Value) -> Result<serde_json::Value, String> {
        crate::typed::through::<k8s_openapi::api::core::v1::PersistentVolume>(value)
    }

    fn warnings(&self, _old: Option<&serde_json::Value>, obj: &serde_json::Value) -> Vec<String> {
        crate::validation::warnings::persistent_volume(obj)
    }

    fn columns(&self) -> &'static [Column] {
        COLUMNS
    }

    fn default(&self, obj: &mut Value) {
        let spec = obj_mut(obj, "spec");
        // An empty reclaim policy is defaulted too (the v1 defaulting treats "" as unset).
        default_if_unset(spec, "persistentVolumeReclaimPolicy", "Retain", true);
        default_if_unset(spec, "volumeMode", "Filesystem", false);
        if let Some(hp) = spec.get_mut("hostPath").and_then(Value::as_object_mut) {
            default_if_unset(hp, "type", "", false);
        }
        default_if_unset(obj_mut(obj, "status"), "phase", "Pending", false);
    }

    fn validate_spec(&self, obj: &Value, errs: &mut Vec<FieldError>) {
        pv::validate_pv(obj, errs);
    }

    fn validate_spec_update(&self, old: &Value, new: &Value, errs: &mut Vec<FieldError>) {
        pv::validate_pv_update(old, new, errs);
    }

    /// The first phase transition is the creation.
    fn created(&self, obj: &mut Value, now: &str) {
        obj["status"]["lastPhaseTransitionTime"] = Value::String(now.to_string());
    }

    /// A phase change gets `lastPhaseTransitionTime` = `now`, unless the writer set a new one.
    fn updated(&self, old: &Value, new: &mut Value, _status: bool, now: &str) {
        let old_phase = old.get("status").and_then(|s| s.get("phase"));
        let new_phase = new.get("status").and_then(|s| s.get("phase"));
        let old_t = old.get("status").and_then(|s| s.get("lastPhaseTransitionTime"));
        let new_t = new.get("status").and_then(|s| s.get("lastPhaseTransitionTime"));
        if old_phase != new_phase && (new_t.is_none() || new_t == old_t) {
            if let Some(s) = new.get_mut("status").and_then(Value::as_object_mut) {
                s.insert("lastPhaseTransitionTime".into(), Value::String(now.to_string()));
            }
        }
    }
}
