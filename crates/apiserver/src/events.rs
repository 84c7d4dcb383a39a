//! `events.k8s.io/v1` Events over the core `events` storage.
//!
//! Both APIs name the same objects; the newer one renames fields. Stored objects are core/v1;
//! writes through `events.k8s.io` are converted in, reads converted out: `note` ↔ `message`,
//! `regarding` ↔ `involvedObject`, `reportingController` ↔ `reportingComponent`,
//! `deprecatedSource|FirstTimestamp|LastTimestamp|Count` ↔ `source|firstTimestamp|
//! lastTimestamp|count`; `reason`, `type`, `action`, `related`, `series`, `eventTime` and
//! `reportingInstance` are shared. A new-style event with a `series` but no count reads in core
//! with `count = series.count` and `lastTimestamp = series.lastObservedTime`, so `kubectl get
//! events` and `describe` show it as they show core events. Those times are `MicroTime`s and
//! the core fields are `Time`s, which hold whole seconds: the fraction is dropped, as
//! `metav1.Time` drops it when it is written.

use serde_json::{Map, Value};

/// Renames shared by both directions: (core name, events.k8s.io name).
const RENAMES: &[(&str, &str)] = &[
    ("message", "note"),
    ("involvedObject", "regarding"),
    ("reportingComponent", "reportingController"),
    ("source", "deprecatedSource"),
    ("firstTimestamp", "deprecatedFirstTimestamp"),
    ("lastTimestamp", "deprecatedLastTimestamp"),
    ("count", "deprecatedCount"),
];

fn rename(obj: &Value, api_version: &str, to_new: bool) -> Value {
    let Some(m) = obj.as_object() else {
        return obj.clone();
    };
    let mut out = Map::new();
    for (k, v) in m {
        let renamed = RENAMES.iter().find_map(|(core, new)| {
            let (from, to) = if to_new { (core, new) } else { (new, core) };
            (*from == k).then_some(*to)
        });
        out.insert(renamed.unwrap_or(k).to_string(), v.clone());
    }
    out.insert("apiVersion".into(), Value::String(api_version.into()));
    out.insert("kind".into(), Value::String("Event".into()));
    Value::Object(out)
}

/// A stored core event as `events.k8s.io/v1` serves it.
pub fn to_v1(core: &Value) -> Value {
    let mut v = rename(core, "events.k8s.io/v1", true);
    if let Some(m) = v.as_object_mut() {
        // Core uses empty strings and zero times for "unset"; the new API omits them.
        m.retain(|_, x| !x.is_null() && x.as_str() != Some(""));
    }
    v
}

/// A `MicroTime` (`2026-01-02T03:04:05.500000Z`) as a `Time` holds it: whole seconds.
fn whole_seconds(t: &Value) -> Value {
    match t.as_str().and_then(|s| s.split_once('.')) {
        Some((secs, frac)) if frac.ends_with('Z') && frac[..frac.len() - 1].bytes().all(|b| b.is_ascii_digit()) => {
            Value::String(format!("{secs}Z"))
        }
        _ => t.clone(),
    }
}

/// An `events.k8s.io/v1` event as stored (core/v1).
pub fn from_v1(new: &Value) -> Value {
    let mut c = rename(new, "v1", false);
    if let Some(m) = c.as_object_mut() {
        let series = m.get("series").cloned();
        if let Some(s) = series {
            if !m.contains_key("count") {
                if let Some(n) = s.get("count") {
                    m.insert("count".into(), n.clone());
                }
            }
            if !m.contains_key("lastTimestamp") {
                if let Some(t) = s.get("lastObservedTime") {
                    m.insert("lastTimestamp".into(), whole_seconds(t));
                }
            }
        }
        if !m.contains_key("firstTimestamp") {
            if let Some(t) = m.get("eventTime").cloned() {
                m.insert("firstTimestamp".into(), whole_seconds(&t));
            }
        }
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn events_round_trip_between_the_two_apis() {
        let new = json!({"apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": "e", "namespace": "default"},
            "regarding": {"kind": "PersistentVolumeClaim", "name": "c"}, "note": "bound",
            "reason": "Bound", "type": "Normal", "reportingController": "pv-controller",
            "eventTime": "2025-01-01T00:00:00.000000Z",
            "series": {"count": 3, "lastObservedTime": "2025-01-01T00:01:00.000000Z"}});
        let core = from_v1(&new);
        assert_eq!(core["apiVersion"], "v1");
        assert_eq!(core["message"], "bound");
        assert_eq!(core["involvedObject"]["name"], "c");
        assert_eq!(core["count"], 3);
        assert_eq!(core["lastTimestamp"], "2025-01-01T00:01:00Z");
        let back = to_v1(&core);
        assert_eq!(back["note"], "bound");
        assert_eq!(back["regarding"]["kind"], "PersistentVolumeClaim");
        assert_eq!(back["deprecatedCount"], 3);
        assert!(back.get("message").is_none());
    }

    #[test]
    fn times_taken_from_micro_times_keep_whole_seconds() {
        let new = json!({"apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": "e", "namespace": "default"}, "reason": "R", "type": "Normal",
            "eventTime": "2026-01-02T03:04:05.000001Z",
            "series": {"count": 4, "lastObservedTime": "2026-01-02T03:09:05.500000Z"}});
        let core = from_v1(&new);
        assert_eq!(core["firstTimestamp"], "2026-01-02T03:04:05Z");
        assert_eq!(core["lastTimestamp"], "2026-01-02T03:09:05Z");
        assert_eq!(core["eventTime"], "2026-01-02T03:04:05.000001Z");
        assert_eq!(core["series"]["lastObservedTime"], "2026-01-02T03:09:05.500000Z");
        let mut given = new.clone();
        given["deprecatedLastTimestamp"] = json!("2026-01-02T03:10:00Z");
        assert_eq!(from_v1(&given)["lastTimestamp"], "2026-01-02T03:10:00Z");
    }
}
