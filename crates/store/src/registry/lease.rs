//! Leases (`pkg/registry/coordination/lease`): namespaced, durations validated.

use crate::error::FieldError;
use crate::kinds::ResourceType;
use crate::table::{col, Column, AGE, NAME};
use crate::validation::other;
use serde_json::Value;

pub(crate) const RESOURCE: ResourceType = ResourceType {
    group: "coordination.k8s.io",
    version: "v1",
    kind: "Lease",
    plural: "leases",
    key: "leases",
    singular: "lease",
    namespaced: true,
    status_subresource: false,
    short_names: &[],
};

/// upstream's `printLease`.
const COLUMNS: &[Column] = &[NAME, col("Holder", |r| r.f("spec.holderIdentity")), AGE];

pub(crate) struct Strategy;

impl super::strategy::Strategy for Strategy {
    fn resource(&self) -> &'static ResourceType {
        &RESOURCE
    }

    fn roundtrip(&self, value: &serde_json::Value) -> Result<serde_json::Value, String> {
        crate::typed::through::<k8s_openapi::api::coordination::v1::Lease>(value)
    }

    fn returns_deleted_object(&self) -> bool {
        false
    }

    fn columns(&self) -> &'static [Column] {
        COLUMNS
    }

    fn allow_unconditional_update(&self) -> bool {
        false
    }

    fn validate_spec(&self, obj: &Value, errs: &mut Vec<FieldError>) {
        other::validate_lease(obj, errs);
    }
}
