//! Namespaces (`pkg/registry/core/namespace`): the `kubernetes` finalizer from creation,
//! `spec.finalizers` changed only through `finalize`, Terminating instead of a grace period.

use crate::kinds::ResourceType;
use crate::namespaces;
use crate::registry::strategy::FieldLabels;
use crate::table::{col, or, Column, AGE, NAME};
use crate::validation::meta::NameRule;
use crate::validation::{default_if_unset, obj_mut};
use serde_json::Value;

pub(crate) const RESOURCE: ResourceType = ResourceType {
    group: "",
    version: "v1",
    kind: "Namespace",
    plural: "namespaces",
    key: "namespaces",
    singular: "namespace",
    namespaced: false,
    status_subresource: true,
    short_names: &["ns"],
};

/// upstream's `printNamespace`.
const COLUMNS: &[Column] = &[NAME, col("Status", |r| or(r.f("status.phase"), "Active")), AGE];

pub(crate) struct Strategy;

impl super::strategy::Strategy for Strategy {
    fn resource(&self) -> &'static ResourceType {
        &RESOURCE
    }

    fn name_rule(&self) -> NameRule {
        NameRule::Label
    }

    fn roundtrip(&self, value: &serde_json::Value) -> Result<serde_json::Value, String> {
        crate::typed::through::<k8s_openapi::api::core::v1::Namespace>(value)
    }

    fn field_labels(&self) -> Option<FieldLabels> {
        Some(FieldLabels { fields: &["status.phase", "metadata.name"], renamed: &[] })
    }

    fn columns(&self) -> &'static [Column] {
        COLUMNS
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        namespaces::prepare_for_create(obj);
    }

    fn prepare_for_update(&self, old: &Value, obj: &mut Value) {
        namespaces::keep_spec_finalizers(old, obj);
    }

    fn default(&self, obj: &mut Value) {
        namespaces::set_name_label(obj);
        default_if_unset(obj_mut(obj, "status"), "phase", "Active", false);
    }

    fn mark_deleted(&self, obj: &mut Value) {
        namespaces::mark_terminating(obj);
    }
}
