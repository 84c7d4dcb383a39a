//! CSIStorageCapacities (`pkg/registry/storage/csistoragecapacity`): namespaced, published by
//! external-provisioner; the node topology and class (the inputs of the CSI `GetCapacity` call)
//! fixed at creation, the capacities free to change.

use crate::error::FieldError;
use crate::kinds::ResourceType;
use crate::table::{Column, DEFAULT_CONVERTOR};
use crate::validation::storage;
use serde_json::Value;

pub(crate) const RESOURCE: ResourceType = ResourceType {
    group: "storage.k8s.io",
    version: "v1",
    kind: "CSIStorageCapacity",
    plural: "csistoragecapacities",
    key: "csistoragecapacities",
    singular: "csistoragecapacity",
    namespaced: true,
    status_subresource: false,
    short_names: &[],
};

pub(crate) struct Strategy;

impl super::strategy::Strategy for Strategy {
    fn resource(&self) -> &'static ResourceType {
        &RESOURCE
    }

    fn roundtrip(&self, value: &serde_json::Value) -> Result<serde_json::Value, String> {
        crate::typed::through::<k8s_openapi::api::storage::v1::CSIStorageCapacity>(value)
    }

    fn warnings(&self, _old: Option<&serde_json::Value>, obj: &serde_json::Value) -> Vec<String> {
        crate::validation::warnings::storage_capacity(obj)
    }

    fn returns_deleted_object(&self) -> bool {
        false
    }

    fn columns(&self) -> &'static [Column] {
        DEFAULT_CONVERTOR
    }

    /// kube-apiserver's strategy refuses an update without a resourceVersion (422).
    fn allow_unconditional_update(&self) -> bool {
        false
    }

    fn validate_spec(&self, obj: &Value, errs: &mut Vec<FieldError>) {
        storage::validate_csi_storage_capacity(obj, errs);
    }

    fn validate_spec_update(&self, old: &Value, new: &Value, errs: &mut Vec<FieldError>) {
        storage::validate_csi_storage_capacity_update(old, new, errs);
    }
}
