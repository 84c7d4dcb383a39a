//! Nodes (`pkg/registry/core/node`): cluster-scoped; the status a kubelet creates them with is
//! kept.

use crate::kinds::ResourceType;
use crate::registry::strategy::FieldLabels;
use crate::table::{col, field_value, Column, AGE, NAME};
use crate::validation::other;
use serde_json::Value;

pub(crate) const RESOURCE: ResourceType = ResourceType {
    group: "",
    version: "v1",
    kind: "Node",
    plural: "nodes",
    key: "nodes",
    singular: "node",
    namespaced: false,
    status_subresource: true,
    short_names: &["no"],
};

/// upstream's `printNode`.
const COLUMNS: &[Column] = &[
    NAME,
    col("Status", |r| {
        r.o.pointer("/status/conditions")
            .and_then(Value::as_array)
            .and_then(|c| c.iter().find(|c| c["type"] == "Ready"))
            .map(|c| if c["status"] == "True" { "Ready" } else { "NotReady" })
            .unwrap_or("Unknown")
            .into()
    }),
    col("Roles", |_| "<none>".into()),
    AGE,
    col("Version", |r| r.f("status.nodeInfo.kubeletVersion")),
];

pub(crate) struct Strategy;

impl super::strategy::Strategy for Strategy {
    fn resource(&self) -> &'static ResourceType {
        &RESOURCE
    }

    fn roundtrip(&self, value: &serde_json::Value) -> Result<serde_json::Value, String> {
        crate::typed::through::<k8s_openapi::api::core::v1::Node>(value)
    }

    fn returns_deleted_object(&self) -> bool {
        false
    }

    fn field_labels(&self) -> Option<FieldLabels> {
        Some(FieldLabels { fields: &["metadata.name", "spec.unschedulable"], renamed: &[] })
    }

    /// `spec.unschedulable` as `true`/`false`.
    fn selectable_value(&self, obj: &Value, label: &str) -> String {
        match label {
            "spec.unschedulable" => (obj.pointer("/spec/unschedulable") == Some(&Value::Bool(true))).to_string(),
            _ => field_value(obj, label),
        }
    }

    fn columns(&self) -> &'static [Column] {
        COLUMNS
    }

    /// A kubelet creates its Node with its status.
    fn reset_status_for_create(&self, _obj: &mut Value) {}

    fn default(&self, obj: &mut Value) {
        other::default_node(obj);
    }
}
