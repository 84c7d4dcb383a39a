//! Roles (`pkg/registry/rbac/role`): namespaced; their rules checked as kube-apiserver checks
//! them. Stored, never enforced: `up` authorizes every request, as kube-apiserver with
//! `--authorization-mode=AlwaysAllow` (see `validation/rbac.rs`).

use crate::error::FieldError;
use crate::kinds::ResourceType;
use crate::table::{Column, DEFAULT_CONVERTOR};
use crate::validation::meta::NameRule;
use crate::validation::rbac;
use serde_json::Value;

pub(crate) const RESOURCE: ResourceType = ResourceType {
    group: rbac::GROUP,
    version: "v1",
    kind: "Role",
    plural: "roles",
    key: "roles",
    singular: "role",
    namespaced: true,
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
        crate::typed::through::<k8s_openapi::api::rbac::v1::Role>(value)
    }

    fn returns_deleted_object(&self) -> bool {
        false
    }

    /// kube-apiserver has no printer for roles: its default convertor (Name, Created At).
    fn columns(&self) -> &'static [Column] {
        DEFAULT_CONVERTOR
    }

    fn default(&self, obj: &mut Value) {
        rbac::default_role(obj);
    }

    fn validate(&self, obj: &Value, errs: &mut Vec<FieldError>) {
        rbac::validate_role(&RESOURCE, obj, errs);
    }

    fn validate_update(&self, old: &Value, new: &Value, errs: &mut Vec<FieldError>) {
        rbac::validate_role_update(&RESOURCE, old, new, errs);
    }
}
