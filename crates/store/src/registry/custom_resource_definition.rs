//! CustomResourceDefinitions (`apiextensions-apiserver/pkg/registry/customresourcedefinition`):
//! cluster-scoped, named `plural.group`, with a status subresource the server writes (its
//! conditions, see the API server's definitions controller). A delete adds the cleanup
//! finalizer and the `Terminating` condition; the definition goes once its objects are gone.

use crate::error::FieldError;
use crate::kinds::ResourceType;
use crate::table::{col, strings_at, wide, Column, NAME};
use crate::validation::crd;
use serde_json::{json, Value};

pub(crate) const RESOURCE: ResourceType = ResourceType {
    group: "apiextensions.k8s.io",
    version: "v1",
    kind: "CustomResourceDefinition",
    plural: "customresourcedefinitions",
    key: "customresourcedefinitions",
    singular: "customresourcedefinition",
    namespaced: false,
    status_subresource: true,
    short_names: &["crd", "crds"],
};

use crate::custom::CLEANUP_FINALIZER;

/// apiextensions-apiserver's printer of CustomResourceDefinitions.
const COLUMNS: &[Column] = &[
    NAME,
    col("Scope", |r| r.f("spec.scope")),
    col("Versions", |r| {
        let vs = r.o.pointer("/spec/versions").and_then(Value::as_array).cloned().unwrap_or_default();
        vs.iter()
            .map(|v| {
                let name = v.get("name").and_then(Value::as_str).unwrap_or("");
                if v.get("storage").and_then(Value::as_bool) == Some(true) {
                    format!("{name}(storage)")
                } else {
                    name.to_string()
                }
            })
            .collect::<Vec<_>>()
            .join(",")
    }),
    Column { ty: "date", ..col("Created At", |r| r.f("metadata.creationTimestamp")) },
    wide("Group", |r| r.f("spec.group")),
    wide("Kind", |r| r.f("spec.names.kind")),
    wide("ShortNames", |r| strings_at(r.o, "/spec/names/shortNames").unwrap_or_default().join(",")),
    Column {
        ty: "boolean",
        enc: "boolean",
        ..wide("Established", |r| {
            let conds = r.o.pointer("/status/conditions").and_then(Value::as_array).cloned().unwrap_or_default();
            conds
                .iter()
                .any(|c| {
                    c.get("type").and_then(Value::as_str) == Some("Established")
                        && c.get("status").and_then(Value::as_str) == Some("True")
                })
                .to_string()
        })
    },
];

pub(crate) struct Strategy;

impl super::strategy::Strategy for Strategy {
    fn resource(&self) -> &'static ResourceType {
        &RESOURCE
    }

    fn roundtrip(&self, value: &serde_json::Value) -> Result<serde_json::Value, String> {
        crate::typed::through::<
            k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
        >(value)
    }

    fn columns(&self) -> &'static [Column] {
        COLUMNS
    }

    fn reset_status_for_create(&self, obj: &mut Value) {
        // PrepareForCreate: a fresh status holding only the storage version.
        let stored: Vec<Value> = crd::storage_version(obj).map(|v| json!(v)).into_iter().collect();
        if let Some(o) = obj.as_object_mut() {
            o.insert(
                "status".into(),
                json!({"conditions": null, "acceptedNames": {"plural": "", "kind": ""}, "storedVersions": stored}),
            );
        }
    }

    fn default(&self, obj: &mut Value) {
        crd::default_crd(obj);
    }

    fn validate_spec(&self, obj: &Value, errs: &mut Vec<FieldError>) {
        crd::validate_crd(obj, errs);
    }

    fn validate_spec_update(&self, old: &Value, new: &Value, errs: &mut Vec<FieldError>) {
        crd::validate_crd_update(old, new, errs);
    }

    fn tracks_generation(&self) -> bool {
        true
    }

    fn finalizers_on_delete(&self) -> &'static [&'static str] {
        &[CLEANUP_FINALIZER]
    }

    fn mark_deleted(&self, obj: &mut Value) {
        crd::set_condition(
            obj,
            "Terminating",
            "True",
            "InstanceDeletionPending",
            "CustomResourceDefinition marked for deletion; CustomResource deletion will begin soon",
            None,
        );
    }
}
