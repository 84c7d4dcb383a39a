//! Pods (`pkg/registry/core/pod`): namespaced, a status of their own from creation (Pending,
//! the QoS class), the generation counting spec changes.

use crate::error::FieldError;
use crate::kinds::ResourceType;
use crate::registry::strategy::FieldLabels;
use crate::table::{col, field_value, or, wide, Column, AGE, NAME};
use crate::validation::{default_if_unset, obj_mut, other, pod};
use serde_json::Value;

pub(crate) const RESOURCE: ResourceType = ResourceType {
    group: "",
    version: "v1",
    kind: "Pod",
    plural: "pods",
    key: "pods",
    singular: "pod",
    namespaced: true,
    status_subresource: true,
    short_names: &["po"],
};

/// upstream's `printPod`, without its readiness gates and container reasons.
const COLUMNS: &[Column] = &[
    NAME,
    col("Ready", |r| {
        let total = r.o.pointer("/spec/containers").and_then(Value::as_array).map_or(0, Vec::len);
        let ready = container_statuses(r.o).iter().filter(|c| c["ready"] == Value::Bool(true)).count();
        format!("{ready}/{total}")
    }),
    col("Status", |r| {
        // upstream's printPod: the status reason over the phase; a pod being deleted is
        // Terminating until it reaches a terminal phase (Unknown when its node is lost).
        let phase = or(r.f("status.phase"), "Pending");
        let reason = r.f("status.reason");
        match (r.deleting(), reason.as_str(), phase.as_str()) {
            (true, "NodeLost", _) => "Unknown".into(),
            (true, _, p) if p != "Succeeded" && p != "Failed" => "Terminating".into(),
            (_, "", _) => phase,
            _ => reason,
        }
    }),
    col("Restarts", |r| {
        container_statuses(r.o).iter().filter_map(|c| c["restartCount"].as_i64()).sum::<i64>().to_string()
    }),
    AGE,
    wide("IP", |r| or(r.f("status.podIP"), "<none>")),
    wide("Node", |r| or(r.f("spec.nodeName"), "<none>")),
];

pub(crate) struct Strategy;

impl super::strategy::Strategy for Strategy {
    fn resource(&self) -> &'static ResourceType {
        &RESOURCE
    }

    fn roundtrip(&self, value: &serde_json::Value) -> Result<serde_json::Value, String> {
        crate::typed::through::<k8s_openapi::api::core::v1::Pod>(value)
    }

    fn categories(&self) -> &'static [&'static str] {
        &["all"]
    }

    fn field_labels(&self) -> Option<FieldLabels> {
        Some(FieldLabels {
            fields: &[
                "metadata.name",
                "metadata.namespace",
                "spec.nodeName",
                "spec.restartPolicy",
                "spec.schedulerName",
                "spec.serviceAccountName",
                "spec.hostNetwork",
                "status.phase",
                "status.podIP",
                "status.podIPs",
                "status.nominatedNodeName",
            ],
            renamed: &[("spec.host", "spec.nodeName")],
        })
    }

    /// `spec.hostNetwork` as `true`/`false`; `status.podIP` from the first `podIPs` entry;
    /// `status.podIPs` matches only the empty value, as upstream's field set has it.
    fn selectable_value(&self, obj: &Value, label: &str) -> String {
        match label {
            "spec.hostNetwork" => (obj.pointer("/spec/hostNetwork") == Some(&Value::Bool(true))).to_string(),
            "status.podIP" => obj
                .pointer("/status/podIPs/0/ip")
                .and_then(Value::as_str)
                .map_or_else(|| field_value(obj, label), str::to_string),
            "status.podIPs" => String::new(),
            _ => field_value(obj, label),
        }
    }

    fn columns(&self) -> &'static [Column] {
        COLUMNS
    }

    fn reset_status_for_create(&self, obj: &mut Value) {
        let status = other::initial_pod_status(obj);
        if let Some(o) = obj.as_object_mut() {
            o.insert("status".into(), status);
        }
    }

    fn default(&self, obj: &mut Value) {
        other::default_pod(obj);
        default_if_unset(obj_mut(obj, "status"), "phase", "Pending", false);
    }

    fn validate_spec(&self, obj: &Value, errs: &mut Vec<FieldError>) {
        pod::validate_pod(obj, errs);
    }

    fn validate_spec_update(&self, old: &Value, new: &Value, errs: &mut Vec<FieldError>) {
        other::validate_pod_update(old, new, errs);
    }

    fn tracks_generation(&self) -> bool {
        true
    }

    /// A status write keeps the Pod's owner references.
    fn kept_by_status_update(&self) -> &'static [&'static str] {
        &["ownerReferences"]
    }
}

/// The pod's `status.containerStatuses`.
fn container_statuses(o: &Value) -> &[Value] {
    o.pointer("/status/containerStatuses").and_then(Value::as_array).map_or(&[], Vec::as_slice)
}
