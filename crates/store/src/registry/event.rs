//! core/v1 Events (`pkg/registry/core/event`), which `events.k8s.io/v1` Events share: no
//! metadata validation beyond a usable name, and no injected faults (the controller records
//! events best effort; a fault there would test nothing it decides).

use crate::error::FieldError;
use crate::kinds::ResourceType;
use crate::registry::strategy::FieldLabels;
use crate::table::{age, col, field_value, or, wide, Column, NAME};
use crate::validation::meta::NameRule;
use jiff::Timestamp;
use serde_json::Value;

pub(crate) const RESOURCE: ResourceType = ResourceType {
    group: "",
    version: "v1",
    kind: "Event",
    plural: "events",
    key: "events",
    singular: "event",
    namespaced: true,
    status_subresource: false,
    short_names: &["ev"],
};

/// upstream's `printEvent`.
const COLUMNS: &[Column] = &[
    col("Last Seen", |r| event_time(r.o, r.now, false)),
    col("Type", |r| r.f("type")),
    col("Reason", |r| r.f("reason")),
    col("Object", |r| format!("{}/{}", r.f("involvedObject.kind").to_lowercase(), r.f("involvedObject.name"))),
    wide("Subobject", |r| r.f("involvedObject.fieldPath")),
    wide("Source", |r| {
        let c = or(r.f("source.component"), &r.f("reportingComponent"));
        let h = r.f("source.host");
        if h.is_empty() {
            c
        } else {
            format!("{c}, {h}")
        }
    }),
    col("Message", |r| r.f("message").trim().to_string()),
    wide("First Seen", |r| event_time(r.o, r.now, true)),
    Column { enc: "integer", ..wide("Count", |r| or(r.f("count"), &or(r.f("series.count"), "1"))) },
    Column { priority: 1, ..NAME },
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
        crate::typed::through::<k8s_openapi::api::core::v1::Event>(value)
    }

    fn returns_deleted_object(&self) -> bool {
        false
    }

    fn field_labels(&self) -> Option<FieldLabels> {
        Some(FieldLabels {
            fields: &[
                "involvedObject.kind",
                "involvedObject.namespace",
                "involvedObject.name",
                "involvedObject.uid",
                "involvedObject.apiVersion",
                "involvedObject.resourceVersion",
                "involvedObject.fieldPath",
                "reason",
                "reportingComponent",
                "source",
                "type",
                "metadata.namespace",
                "metadata.name",
            ],
            renamed: &[],
        })
    }

    /// `source` is the source's component, or the reporting controller when there is none.
    fn selectable_value(&self, obj: &Value, label: &str) -> String {
        match label {
            "source" => Some(field_value(obj, "source.component"))
                .filter(|s| !s.is_empty())
                .unwrap_or_else(|| field_value(obj, "reportingComponent")),
            _ => field_value(obj, label),
        }
    }

    fn columns(&self) -> &'static [Column] {
        COLUMNS
    }

    fn faulted(&self) -> bool {
        false
    }

    fn validate(&self, obj: &Value, errs: &mut Vec<FieldError>) {
        let name = obj.get("metadata").and_then(|m| m.get("name")).and_then(Value::as_str).unwrap_or("");
        if name.is_empty() {
            errs.push(FieldError::required("metadata.name", "name or generateName is required"));
        }
    }

    fn validate_update(&self, _old: &Value, new: &Value, errs: &mut Vec<FieldError>) {
        self.validate(new, errs);
    }
}

/// The age of the event's first or last occurrence, from the first of its times that is set.
fn event_time(o: &Value, now: Timestamp, first: bool) -> String {
    let candidates: &[&str] = if first {
        &["firstTimestamp", "eventTime", "metadata.creationTimestamp"]
    } else {
        &["series.lastObservedTime", "lastTimestamp", "eventTime", "metadata.creationTimestamp"]
    };
    candidates
        .iter()
        .find(|p| !field_value(o, p).is_empty())
        .map(|p| age(o, p, now))
        .unwrap_or_else(|| "<unknown>".into())
}
