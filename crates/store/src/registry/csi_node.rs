//! CSINodes (`pkg/registry/storage/csinode`): cluster-scoped, named after their Node, a driver's
//! node ID and topology keys fixed once registered. The status subresource exists, but its only
//! field (`storageHealth`, behind the alpha `CSIVolumeHealth` gate) is dropped, and a status
//! write keeps the stored metadata (`ResetObjectMetaForStatus`).

use crate::error::FieldError;
use crate::kinds::ResourceType;
use crate::table::{typed, Column, AGE, NAME};
use crate::validation::storage;
use serde_json::Value;

pub(crate) const RESOURCE: ResourceType = ResourceType {
    group: "storage.k8s.io",
    version: "v1",
    kind: "CSINode",
    plural: "csinodes",
    key: "csinodes",
    singular: "csinode",
    namespaced: false,
    status_subresource: true,
    short_names: &[],
};

/// The metadata upstream's `ResetObjectMetaForStatus` keeps from the stored object.
pub(crate) const RESET_FOR_STATUS: &[&str] =
    &["labels", "annotations", "finalizers", "ownerReferences", "deletionTimestamp", "generation"];

/// upstream's `printCSINode`.
const COLUMNS: &[Column] = &[
    NAME,
    typed("Drivers", "integer", |r| {
        r.o.pointer("/spec/drivers").and_then(Value::as_array).map_or(0, Vec::len).to_string()
    }),
    AGE,
];

pub(crate) struct Strategy;

impl super::strategy::Strategy for Strategy {
    fn resource(&self) -> &'static ResourceType {
        &RESOURCE
    }

    fn roundtrip(&self, value: &serde_json::Value) -> Result<serde_json::Value, String> {
        crate::typed::through::<k8s_openapi::api::storage::v1::CSINode>(value)
    }

    fn columns(&self) -> &'static [Column] {
        COLUMNS
    }

    /// kube-apiserver's strategy refuses an update without a resourceVersion (422).
    fn allow_unconditional_update(&self) -> bool {
        false
    }

    fn default(&self, obj: &mut Value) {
        storage::default_csi_node(obj);
    }

    fn validate_spec(&self, obj: &Value, errs: &mut Vec<FieldError>) {
        storage::validate_csi_node(obj, errs);
    }

    fn validate_spec_update(&self, old: &Value, new: &Value, errs: &mut Vec<FieldError>) {
        storage::validate_csi_node_update(old, new, errs);
    }

    fn kept_by_status_update(&self) -> &'static [&'static str] {
        RESET_FOR_STATUS
    }
}
