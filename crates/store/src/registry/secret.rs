//! Secrets (`pkg/registry/core/secret`): namespaced; `stringData` merged into `data`, the type
//! defaulted to `Opaque` and fixed once set, each type's keys required, `immutable` honoured.
//!
//! Stored as kube-apiserver stores them without an encryption provider: the object's JSON, values
//! base64-encoded, in the same store as every other kind.

use crate::error::FieldError;
use crate::kinds::ResourceType;
use crate::table::{col, keys, Column, AGE, NAME};
use crate::validation::config;
use serde_json::Value;

pub(crate) const RESOURCE: ResourceType = ResourceType {
    group: "",
    version: "v1",
    kind: "Secret",
    plural: "secrets",
    key: "secrets",
    singular: "secret",
    namespaced: true,
    status_subresource: false,
    short_names: &[],
};

/// upstream's `printSecret` (its Data column is declared a string and sent as a number).
const COLUMNS: &[Column] =
    &[NAME, col("Type", |r| r.f("type")), Column { enc: "integer", ..col("Data", |r| keys(r, &["data"])) }, AGE];

pub(crate) struct Strategy;

impl super::strategy::Strategy for Strategy {
    fn resource(&self) -> &'static ResourceType {
        &RESOURCE
    }

    fn roundtrip(&self, value: &serde_json::Value) -> Result<serde_json::Value, String> {
        crate::typed::through::<k8s_openapi::api::core::v1::Secret>(value)
    }

    fn warnings(&self, _old: Option<&serde_json::Value>, obj: &serde_json::Value) -> Vec<String> {
        crate::validation::warnings::tls_secret(obj)
    }

    fn returns_deleted_object(&self) -> bool {
        false
    }

    fn columns(&self) -> &'static [Column] {
        COLUMNS
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        config::merge_string_data(obj);
    }

    fn prepare_for_update(&self, _old: &Value, obj: &mut Value) {
        config::merge_string_data(obj);
    }

    fn default(&self, obj: &mut Value) {
        config::default_secret(obj);
    }

    fn validate_spec(&self, obj: &Value, errs: &mut Vec<FieldError>) {
        config::validate_secret(obj, errs);
    }

    fn validate_spec_update(&self, old: &Value, new: &Value, errs: &mut Vec<FieldError>) {
        config::validate_secret_update(old, new, errs);
    }
}
