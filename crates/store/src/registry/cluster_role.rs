//! ClusterRoles (`pkg/registry/rbac/clusterrole`): cluster-scoped; their rules checked as kube-apiserver checks
//! them, and an aggregation rule's selectors. Stored, never enforced: `up` authorizes every request, as kube-apiserver with
//! `--authorization-mode=AlwaysAllow` (see `validation/rbac.rs`).

use crate::error::FieldError;
use crate::kinds::ResourceType;
use crate::table::{Column, DEFAULT_CONVERTOR};
use crate::validation::meta::{validate_meta, validate_meta_update, NameRule};
use crate::validation::rbac;
use serde_json::Value;

const NAMESPACED: bool = false;

pub(crate) const RESOURCE: ResourceType = ResourceType {
    group: rbac::GROUP,
    version: "v1",
    kind: "ClusterRole",
    plural: "clusterroles",
    key: "clusterroles",
    singular: "clusterrole",
    namespaced: NAMESPACED,
    status_subresource: false,
    short_names: &[],
};

pub(crate) struct Strategy;

impl super::strategy::Strategy for Strategy {
    fn resource(&self) -> &'static ResourceType {
        &RESOURCE
    }

    fn name_rule(&self) -> NameRule {
        NameRule::PathSegment
    }

    fn roundtrip(&self, value: &serde_json::Value) -> Result<serde_json::Value, String> {
        crate::typed::through::<k8s_openapi::api::rbac::v1::ClusterRole>(value)
    }

    fn returns_deleted_object(&self) -> bool {
        false
    }

    /// kube-apiserver has no printer for roles: its default convertor (Name, Created At).
    fn columns(&self) -> &'static [Column] {
        DEFAULT_CONVERTOR
    }

    /// `rules` has no `omitempty` in upstream's Go type: a role without rules has `"rules": null`.
    fn default(&self, obj: &mut Value) {
        if let Some(o) = obj.as_object_mut() {
            o.entry("rules").or_insert(Value::Null);
        }
    }

    fn validate(&self, obj: &Value, errs: &mut Vec<FieldError>) {
        validate_meta(&RESOURCE, NameRule::PathSegment, obj, errs);
        let mut covered = Vec::new();
        rbac::validate_rules(obj, NAMESPACED, errs, &mut covered);
        rbac::validate_aggregation_rule(obj, errs);
        errs.extend(covered);
    }

    fn validate_update(&self, old: &Value, new: &Value, errs: &mut Vec<FieldError>) {
        validate_meta_update(&RESOURCE, old, new, errs);
        let mut covered = Vec::new();
        rbac::validate_rules(new, NAMESPACED, errs, &mut covered);
        rbac::validate_aggregation_rule(new, errs);
        errs.extend(covered);
    }
}
