//! ConfigMaps (`pkg/registry/core/configmap`): namespaced; keys of `data` and `binaryData`
//! checked, never in both, `immutable` honoured.

use crate::error::FieldError;
use crate::kinds::ResourceType;
use crate::table::{col, keys, Column, AGE, NAME};
use crate::validation::config;
use serde_json::Value;

pub(crate) const RESOURCE: ResourceType = ResourceType {
    group: "",
    version: "v1",
    kind: "ConfigMap",
    plural: "configmaps",
    key: "configmaps",
    singular: "configmap",
    namespaced: true,
    status_subresource: false,
    short_names: &["cm"],
};

/// upstream's `printConfigMap`.
const COLUMNS: &[Column] = &[NAME, Column { enc: "integer", ..col("Data", |r| keys(r, &["data", "binaryData"])) }, AGE];

pub(crate) struct Strategy;

impl super::strategy::Strategy for Strategy {
    fn resource(&self) -> &'static ResourceType {
        &RESOURCE
    }

    fn roundtrip(&self, value: &serde_json::Value) -> Result<serde_json::Value, String> {
        crate::typed::through::<k8s_openapi::api::core::v1::ConfigMap>(value)
    }

    fn returns_deleted_object(&self) -> bool {
        false
    }

    fn columns(&self) -> &'static [Column] {
        COLUMNS
    }

    fn default(&self, obj: &mut Value) {
        config::drop_empty(obj, &["data", "binaryData"]);
    }

    fn validate_spec(&self, obj: &Value, errs: &mut Vec<FieldError>) {
        config::validate_config_map(obj, errs);
    }

    fn validate_spec_update(&self, old: &Value, new: &Value, errs: &mut Vec<FieldError>) {
        config::validate_config_map_update(old, new, errs);
    }
}
