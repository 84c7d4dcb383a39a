//! RoleBindings (`pkg/registry/rbac/rolebinding`): namespaced; their role reference (immutable) and
//! subjects checked and defaulted as kube-apiserver does. Stored, never enforced: `up`
//! authorizes every request, as kube-apiserver with `--authorization-mode=AlwaysAllow` (see
//! `validation/rbac.rs`).

use crate::error::FieldError;
use crate::kinds::ResourceType;
use crate::table::{col, wide, Column, AGE, NAME};
use crate::validation::meta::NameRule;
use crate::validation::rbac;
use serde_json::Value;

pub(crate) const RESOURCE: ResourceType = ResourceType {
    group: rbac::GROUP,
    version: "v1",
    kind: "RoleBinding",
    plural: "rolebindings",
    key: "rolebindings",
    singular: "rolebinding",
    namespaced: true,
    status_subresource: false,
    short_names: &[],
};

/// upstream's `printRoleBinding` (and `printClusterRoleBinding`).
pub(crate) const COLUMNS: &[Column] = &[
    NAME,
    col("Role", |r| format!("{}/{}", r.f("roleRef.kind"), r.f("roleRef.name"))),
    AGE,
    wide("Users", |r| rbac::subjects(r.o, "User")),
    wide("Groups", |r| rbac::subjects(r.o, "Group")),
    wide("ServiceAccounts", |r| rbac::subjects(r.o, "ServiceAccount")),
];

pub(crate) struct Strategy;

impl super::strategy::Strategy for Strategy {
    fn resource(&self) -> &'static ResourceType {
        &RESOURCE
    }

    fn name_rule(&self) -> NameRule {
        NameRule::PathSegment
    }

    fn roundtrip(&self, value: &serde_json::Value) -> Result<serde_json::Value, String> {
        crate::typed::through::<k8s_openapi::api::rbac::v1::RoleBinding>(value)
    }

    fn returns_deleted_object(&self) -> bool {
        false
    }

    fn columns(&self) -> &'static [Column] {
        COLUMNS
    }

    fn default(&self, obj: &mut Value) {
        rbac::default_binding(obj);
    }

    fn validate(&self, obj: &Value, errs: &mut Vec<FieldError>) {
        rbac::validate_binding_create(&RESOURCE, obj, errs);
    }

    fn validate_update(&self, old: &Value, new: &Value, errs: &mut Vec<FieldError>) {
        rbac::validate_binding_change(&RESOURCE, old, new, errs);
    }
}
