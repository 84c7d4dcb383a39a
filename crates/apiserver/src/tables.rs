//! Server-side printing: `meta.k8s.io/v1` Tables with the columns kubectl shows on a real
//! cluster (kubectl asks with `Accept: application/json;as=Table;v=v1;g=meta.k8s.io` and prints
//! whatever columns come back; `-o wide` shows the priority-1 ones too).

use crate::select::field_value as field;
use jiff::{SignedDuration, Timestamp};
use serde_json::{json, Value};

/// What each row carries besides its cells (`?includeObject=`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IncludeObject {
    /// No object.
    None,
    /// `PartialObjectMetadata` (the default): what kubectl needs for labels and namespaces.
    Metadata,
    /// The full object.
    Object,
}

impl IncludeObject {
    /// From the query parameter.
    pub fn parse(s: Option<&str>) -> Self {
        match s {
            Some("None") => IncludeObject::None,
            Some("Object") => IncludeObject::Object,
            _ => IncludeObject::Metadata,
        }
    }
}

/// True when the Accept header asks for a Table.
pub fn wants_table(accept: &str) -> bool {
    accept.split(',').next().is_some_and(|first| first.contains("as=Table"))
}

/// Kubernetes' short human duration (`5s`, `3m20s`, `2d4h`).
pub fn human_duration(d: SignedDuration) -> String {
    let s = d.as_secs();
    if s < -1 {
        return "<invalid>".into();
    }
    if s < 0 {
        return "0s".into();
    }
    let (m, h) = (s / 60, s / 3600);
    if s < 120 {
        format!("{s}s")
    } else if m < 10 {
        if s % 60 == 0 {
            format!("{m}m")
        } else {
            format!("{m}m{}s", s % 60)
        }
    } else if m < 180 {
        format!("{m}m")
    } else if h < 8 {
        if m % 60 == 0 {
            format!("{h}h")
        } else {
            format!("{h}h{}m", m % 60)
        }
    } else if h < 48 {
        format!("{h}h")
    } else if h < 24 * 8 {
        if h % 24 == 0 {
            format!("{}d", h / 24)
        } else {
            format!("{}d{}h", h / 24, h % 24)
        }
    } else if h < 24 * 365 * 2 {
        format!("{}d", h / 24)
    } else if h < 24 * 365 * 8 {
        let days = h / 24;
        if days % 365 == 0 {
            format!("{}y", days / 365)
        } else {
            format!("{}y{}d", days / 365, days % 365)
        }
    } else {
        format!("{}y", h / 24 / 365)
    }
}

fn age(obj: &Value, path: &str, now: Timestamp) -> String {
    let t = field(obj, path);
    match t.parse::<Timestamp>() {
        Ok(t) => human_duration(now.duration_since(t)),
        Err(_) => "<unknown>".into(),
    }
}

fn or(s: String, default: &str) -> String {
    if s.is_empty() {
        default.into()
    } else {
        s
    }
}

fn access_modes(v: Option<&Value>) -> String {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(|m| match m {
                    "ReadWriteOnce" => "RWO",
                    "ReadOnlyMany" => "ROX",
                    "ReadWriteMany" => "RWX",
                    "ReadWriteOncePod" => "RWOP",
                    other => other,
                })
                .collect::<Vec<_>>()
                .join(",")
        })
        .unwrap_or_default()
}

/// (name, type, priority) of each column.
type Col = (&'static str, &'static str, u8);

fn columns(kind: &str) -> Vec<Col> {
    match kind {
        "PersistentVolume" => vec![
            ("Name", "string", 0),
            ("Capacity", "string", 0),
            ("Access Modes", "string", 0),
            ("Reclaim Policy", "string", 0),
            ("Status", "string", 0),
            ("Claim", "string", 0),
            ("StorageClass", "string", 0),
            ("VolumeAttributesClass", "string", 0),
            ("Reason", "string", 0),
            ("Age", "string", 0),
            ("VolumeMode", "string", 1),
        ],
        "PersistentVolumeClaim" => vec![
            ("Name", "string", 0),
            ("Status", "string", 0),
            ("Volume", "string", 0),
            ("Capacity", "string", 0),
            ("Access Modes", "string", 0),
            ("StorageClass", "string", 0),
            ("VolumeAttributesClass", "string", 0),
            ("Age", "string", 0),
            ("VolumeMode", "string", 1),
        ],
        "StorageClass" => vec![
            ("Name", "string", 0),
            ("Provisioner", "string", 0),
            ("ReclaimPolicy", "string", 0),
            ("VolumeBindingMode", "string", 0),
            ("AllowVolumeExpansion", "string", 0),
            ("Age", "string", 0),
        ],
        "Event" => vec![
            ("Last Seen", "string", 0),
            ("Type", "string", 0),
            ("Reason", "string", 0),
            ("Object", "string", 0),
            ("Subobject", "string", 1),
            ("Source", "string", 1),
            ("Message", "string", 0),
            ("First Seen", "string", 1),
            ("Count", "string", 1),
            ("Name", "string", 1),
        ],
        "Pod" => vec![
            ("Name", "string", 0),
            ("Ready", "string", 0),
            ("Status", "string", 0),
            ("Restarts", "string", 0),
            ("Age", "string", 0),
            ("IP", "string", 1),
            ("Node", "string", 1),
        ],
        "Node" => vec![
            ("Name", "string", 0),
            ("Status", "string", 0),
            ("Roles", "string", 0),
            ("Age", "string", 0),
            ("Version", "string", 0),
        ],
        "Namespace" => vec![("Name", "string", 0), ("Status", "string", 0), ("Age", "string", 0)],
        "Lease" => vec![("Name", "string", 0), ("Holder", "string", 0), ("Age", "string", 0)],
        _ => vec![("Name", "string", 0), ("Age", "string", 0)],
    }
}

fn event_time(o: &Value, now: Timestamp, first: bool) -> String {
    let candidates: &[&str] = if first {
        &["firstTimestamp", "eventTime", "metadata.creationTimestamp"]
    } else {
        &["series.lastObservedTime", "lastTimestamp", "eventTime", "metadata.creationTimestamp"]
    };
    candidates.iter().find(|p| !field(o, p).is_empty()).map(|p| age(o, p, now)).unwrap_or_else(|| "<unknown>".into())
}

fn cells(kind: &str, o: &Value, now: Timestamp) -> Vec<Value> {
    let f = |p: &str| field(o, p);
    let name = f("metadata.name");
    let age_s = age(o, "metadata.creationTimestamp", now);
    let cells: Vec<String> = match kind {
        "PersistentVolume" => {
            let claim = if f("spec.claimRef.name").is_empty() {
                String::new()
            } else {
                format!("{}/{}", f("spec.claimRef.namespace"), f("spec.claimRef.name"))
            };
            vec![
                name,
                f("spec.capacity.storage"),
                access_modes(o.pointer("/spec/accessModes")),
                f("spec.persistentVolumeReclaimPolicy"),
                f("status.phase"),
                claim,
                f("spec.storageClassName"),
                or(f("spec.volumeAttributesClassName"), "<unset>"),
                f("status.reason"),
                age_s,
                or(f("spec.volumeMode"), "<unset>"),
            ]
        }
        "PersistentVolumeClaim" => vec![
            name,
            f("status.phase"),
            f("spec.volumeName"),
            f("status.capacity.storage"),
            access_modes(o.pointer("/status/accessModes")),
            f("spec.storageClassName"),
            or(f("status.currentVolumeAttributesClassName"), "<unset>"),
            age_s,
            or(f("spec.volumeMode"), "<unset>"),
        ],
        "StorageClass" => {
            let shown = if is_default_class(o) { format!("{name} (default)") } else { name };
            vec![
                shown,
                f("provisioner"),
                f("reclaimPolicy"),
                f("volumeBindingMode"),
                or(f("allowVolumeExpansion"), "false"),
                age_s,
            ]
        }
        "Event" => {
            let obj = format!("{}/{}", f("involvedObject.kind").to_lowercase(), f("involvedObject.name"));
            let source = {
                let c = or(f("source.component"), &f("reportingComponent"));
                let h = f("source.host");
                if h.is_empty() {
                    c
                } else {
                    format!("{c}, {h}")
                }
            };
            vec![
                event_time(o, now, false),
                f("type"),
                f("reason"),
                obj,
                f("involvedObject.fieldPath"),
                source,
                f("message").trim().to_string(),
                event_time(o, now, true),
                or(f("count"), &or(f("series.count"), "1")),
                name,
            ]
        }
        "Pod" => {
            let statuses = o.pointer("/status/containerStatuses").and_then(Value::as_array);
            let total = o.pointer("/spec/containers").and_then(Value::as_array).map_or(0, Vec::len);
            let ready = statuses.map_or(0, |s| s.iter().filter(|c| c["ready"] == Value::Bool(true)).count());
            let restarts: i64 = statuses.map_or(0, |s| s.iter().filter_map(|c| c["restartCount"].as_i64()).sum());
            vec![
                name,
                format!("{ready}/{total}"),
                or(f("status.phase"), "Pending"),
                restarts.to_string(),
                age_s,
                or(f("status.podIP"), "<none>"),
                or(f("spec.nodeName"), "<none>"),
            ]
        }
        "Node" => {
            let ready = o
                .pointer("/status/conditions")
                .and_then(Value::as_array)
                .and_then(|c| c.iter().find(|c| c["type"] == "Ready"))
                .map(|c| if c["status"] == "True" { "Ready" } else { "NotReady" })
                .unwrap_or("Unknown");
            vec![name, ready.into(), "<none>".into(), age_s, f("status.nodeInfo.kubeletVersion")]
        }
        "Namespace" => vec![name, or(f("status.phase"), "Active"), age_s],
        "Lease" => vec![name, f("spec.holderIdentity"), age_s],
        _ => vec![name, age_s],
    };
    cells.into_iter().map(Value::String).collect()
}

fn is_default_class(o: &Value) -> bool {
    let ann = o.pointer("/metadata/annotations");
    ["storageclass.kubernetes.io/is-default-class", "storageclass.beta.kubernetes.io/is-default-class"]
        .iter()
        .any(|k| ann.and_then(|a| a.get(*k)).and_then(Value::as_str) == Some("true"))
}

fn row_object(o: &Value, inc: IncludeObject) -> Option<Value> {
    match inc {
        IncludeObject::None => None,
        IncludeObject::Object => Some(o.clone()),
        IncludeObject::Metadata => Some(json!({
            "kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
            "metadata": o.get("metadata").cloned().unwrap_or(Value::Null),
        })),
    }
}

/// A Table of `objects` of `kind`, consistent with `resource_version`.
pub fn table(
    kind: &str,
    objects: &[&Value],
    resource_version: &str,
    inc: IncludeObject,
    continue_token: Option<&str>,
) -> Value {
    let now = Timestamp::now();
    let defs: Vec<Value> = columns(kind)
        .into_iter()
        .map(|(name, ty, prio)| {
            let mut d = json!({"name": name, "type": ty, "format": "", "description": "", "priority": prio});
            if name == "Name" {
                d["format"] = json!("name");
            }
            d
        })
        .collect();
    let rows: Vec<Value> = objects
        .iter()
        .map(|o| {
            let mut r = json!({"cells": cells(kind, o, now)});
            if let Some(obj) = row_object(o, inc) {
                r["object"] = obj;
            }
            r
        })
        .collect();
    let mut meta = json!({"resourceVersion": resource_version});
    if let Some(c) = continue_token {
        meta["continue"] = json!(c);
    }
    json!({"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": meta,
           "columnDefinitions": defs, "rows": rows})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_durations_match_kubernetes() {
        let d = SignedDuration::from_secs;
        assert_eq!(human_duration(d(5)), "5s");
        assert_eq!(human_duration(d(200)), "3m20s");
        assert_eq!(human_duration(d(3600 * 5 + 60)), "5h1m");
        assert_eq!(human_duration(d(86400 * 3 + 3600 * 4)), "3d4h");
    }

    #[test]
    fn pv_rows_show_claim_modes_and_unset_attributes_class() {
        let pv = json!({"metadata": {"name": "v", "creationTimestamp": "2020-01-01T00:00:00Z"},
            "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce", "ReadOnlyMany"],
                     "persistentVolumeReclaimPolicy": "Retain", "claimRef": {"namespace": "ns", "name": "c"},
                     "storageClassName": "fast", "volumeMode": "Filesystem"},
            "status": {"phase": "Bound"}});
        let t = table("PersistentVolume", &[&pv], "7", IncludeObject::Metadata, None);
        let c = &t["rows"][0]["cells"];
        assert_eq!(c[2], "RWO,ROX");
        assert_eq!(c[5], "ns/c");
        assert_eq!(c[7], "<unset>");
        assert_eq!(t["columnDefinitions"].as_array().unwrap().len(), 11);
        assert_eq!(t["rows"][0]["object"]["kind"], "PartialObjectMetadata");
    }

    #[test]
    fn default_storage_class_is_marked() {
        let sc = json!({"metadata": {"name": "std", "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
            "provisioner": "p", "reclaimPolicy": "Delete", "volumeBindingMode": "Immediate"});
        let t = table("StorageClass", &[&sc], "1", IncludeObject::None, None);
        assert_eq!(t["rows"][0]["cells"][0], "std (default)");
        assert_eq!(t["rows"][0]["cells"][4], "false");
    }
}
