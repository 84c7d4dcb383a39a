//! CSIDrivers (`pkg/registry/storage/csidriver`): cluster-scoped, every optional field defaulted,
//! `attachRequired` and the lifecycle modes fixed at creation. The generation is not set on
//! create; a change of the spec counts it up from none.

use crate::error::FieldError;
use crate::kinds::ResourceType;
use crate::meta::{meta, meta_mut};
use crate::table::{col, field_value, flag, or, strings_at, typed, Column, AGE, NAME};
use crate::validation::storage;
use serde_json::Value;

pub(crate) const RESOURCE: ResourceType = ResourceType {
    group: "storage.k8s.io",
    version: "v1",
    kind: "CSIDriver",
    plural: "csidrivers",
    key: "csidrivers",
    singular: "csidriver",
    namespaced: false,
    status_subresource: false,
    short_names: &[],
};

/// upstream's `printCSIDriver`.
const COLUMNS: &[Column] = &[
    NAME,
    typed("AttachRequired", "boolean", |r| flag(r, "spec.attachRequired", true)),
    typed("PodInfoOnMount", "boolean", |r| flag(r, "spec.podInfoOnMount", false)),
    typed("StorageCapacity", "boolean", |r| flag(r, "spec.storageCapacity", false)),
    col("TokenRequests", |r| {
        let audiences = r.o.pointer("/spec/tokenRequests").and_then(Value::as_array).filter(|a| !a.is_empty());
        match audiences {
            Some(a) => a.iter().map(|t| field_value(t, "audience")).collect::<Vec<_>>().join(","),
            None => "<unset>".into(),
        }
    }),
    typed("RequiresRepublish", "boolean", |r| flag(r, "spec.requiresRepublish", false)),
    col("Modes", |r| or(strings_at(r.o, "/spec/volumeLifecycleModes").unwrap_or_default().join(","), "<none>")),
    AGE,
];

pub(crate) struct Strategy;

impl super::strategy::Strategy for Strategy {
    fn resource(&self) -> &'static ResourceType {
        &RESOURCE
    }

    fn roundtrip(&self, value: &serde_json::Value) -> Result<serde_json::Value, String> {
        crate::typed::through::<k8s_openapi::api::storage::v1::CSIDriver>(value)
    }

    fn warnings(&self, old: Option<&serde_json::Value>, obj: &serde_json::Value) -> Vec<String> {
        crate::validation::storage::csi_driver_warnings(old, obj)
    }

    fn columns(&self) -> &'static [Column] {
        COLUMNS
    }

    /// kube-apiserver's strategy refuses an update without a resourceVersion (422).
    fn allow_unconditional_update(&self) -> bool {
        false
    }

    fn default(&self, obj: &mut Value) {
        storage::default_csi_driver(obj);
    }

    fn validate_spec(&self, obj: &Value, errs: &mut Vec<FieldError>) {
        storage::validate_csi_driver(obj, errs);
    }

    fn validate_spec_update(&self, old: &Value, new: &Value, errs: &mut Vec<FieldError>) {
        storage::validate_csi_driver_update(old, new, errs);
    }

    fn updated(&self, old: &Value, new: &mut Value, status: bool, _now: &str) {
        if !status && storage::csi_driver_spec_changed(old, new) {
            let g = meta(old).and_then(|m| m.get("generation")).and_then(Value::as_i64).unwrap_or(0);
            meta_mut(new).insert("generation".into(), Value::from(g + 1));
        }
    }
}
