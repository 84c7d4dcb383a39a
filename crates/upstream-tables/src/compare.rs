//! Compares objects as upstream's `CheckVolumes` / `CheckClaims` do (every field, the
//! resourceVersion aside), after removing what a real API server adds and upstream's fake one
//! does not (uid, creationTimestamp, generation, managedFields, lastPhaseTransitionTime), and
//! events as upstream's `checkEvents` does (each expected text a prefix of the one emitted, in
//! order, none more).

use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// An object without the fields upstream's comparison cannot see. `keep_uid`: the expected
/// object has a uid, so it is compared.
pub fn normalize(v: &Value, keep_uid: bool) -> Value {
    let mut v = v.clone();
    if let Some(o) = v.as_object_mut() {
        o.remove("apiVersion");
        o.remove("kind");
        if let Some(m) = o.get_mut("metadata").and_then(Value::as_object_mut) {
            for f in ["resourceVersion", "creationTimestamp", "generation", "managedFields"] {
                m.remove(f);
            }
            if !keep_uid {
                m.remove("uid");
            }
        }
        if let Some(s) = o.get_mut("status").and_then(Value::as_object_mut) {
            s.remove("lastPhaseTransitionTime");
        }
        if let Some(r) = o.get_mut("spec").and_then(|s| s.get_mut("claimRef")).and_then(Value::as_object_mut) {
            r.remove("resourceVersion");
        }
    }
    prune(&mut v);
    v
}

/// Drops nulls and empty maps and lists: Go's omitempty makes no difference between them.
fn prune(v: &mut Value) -> bool {
    match v {
        Value::Null => false,
        Value::Object(m) => {
            m.retain(|_, x| prune(x));
            !m.is_empty()
        }
        Value::Array(a) => {
            for x in a.iter_mut() {
                prune(x);
            }
            !a.is_empty()
        }
        _ => true,
    }
}

fn name_of(v: &Value) -> String {
    v.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default().to_string()
}

/// Differences between the expected objects of one kind and those found, by name.
pub fn objects(kind: &str, expected: &[Value], got: &[Value]) -> Vec<String> {
    let exp: BTreeMap<String, &Value> = expected.iter().map(|v| (name_of(v), v)).collect();
    let found: BTreeMap<String, &Value> = got.iter().map(|v| (name_of(v), v)).collect();
    let mut out = Vec::new();
    for (name, e) in &exp {
        let keep_uid = e.pointer("/metadata/uid").is_some();
        match found.get(name) {
            None => out.push(format!("{kind} {name}: expected, missing")),
            Some(g) => {
                let (e, g) = (normalize(e, keep_uid), normalize(g, keep_uid));
                let mut diffs = Vec::new();
                diff("", &e, &g, &mut diffs);
                out.extend(diffs.into_iter().map(|d| format!("{kind} {name}: {d}")));
            }
        }
    }
    for name in found.keys().filter(|n| !exp.contains_key(*n)) {
        out.push(format!("{kind} {name}: not expected, present"));
    }
    out
}

fn diff(path: &str, e: &Value, g: &Value, out: &mut Vec<String>) {
    match (e, g) {
        (Value::Object(a), Value::Object(b)) => {
            let keys: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
            let empty = Value::Object(Map::new());
            for k in keys {
                let p = format!("{path}.{k}");
                match (a.get(k), b.get(k)) {
                    (Some(x), Some(y)) => diff(&p, x, y, out),
                    (Some(x), None) => out.push(format!("{p}: expected {x}, absent")),
                    (None, Some(y)) => out.push(format!("{p}: not expected, {y}")),
                    (None, None) => diff(&p, &empty, &empty, out),
                }
            }
        }
        _ if e == g => {}
        _ => out.push(format!("{}: expected {e}, got {g}", if path.is_empty() { "." } else { path })),
    }
}

/// Differences between the expected event prefixes and the events emitted (`Type Reason Message`).
/// As upstream's `checkEvents`, which reads as many events as it expects: an event emitted after
/// those is not seen (its check for unexpected events never finds one).
pub fn events(expected: &[String], got: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    for (i, e) in expected.iter().enumerate() {
        match got.get(i) {
            None => out.push(format!("event {e:?} not emitted")),
            Some(g) if !g.starts_with(e.as_str()) => out.push(format!("event {i}: expected {e:?}, got {g:?}")),
            Some(_) => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn server_fields_are_not_compared_but_everything_else_is() {
        let expected = json!({"metadata": {"name": "pv-1", "resourceVersion": "1"}, "spec": {"claimRef": {"name": "c", "resourceVersion": "7"}}, "status": {"phase": "Bound"}});
        let got = json!({"apiVersion": "v1", "kind": "PersistentVolume",
            "metadata": {"name": "pv-1", "uid": "u", "resourceVersion": "42", "creationTimestamp": "2026-01-01T00:00:00Z", "annotations": {}},
            "spec": {"claimRef": {"name": "c"}}, "status": {"phase": "Bound", "lastPhaseTransitionTime": "2026-01-01T00:00:00Z"}});
        assert!(objects("volume", std::slice::from_ref(&expected), std::slice::from_ref(&got)).is_empty());
        let mut changed = got;
        changed["status"]["phase"] = json!("Released");
        assert_eq!(
            objects("volume", &[expected], &[changed]),
            vec![r#"volume pv-1: .status.phase: expected "Bound", got "Released""#]
        );
    }

    #[test]
    fn a_uid_the_expected_object_names_is_compared() {
        let expected = json!({"metadata": {"name": "c", "uid": "uid-1"}});
        let got = json!({"metadata": {"name": "c", "uid": "generated"}});
        assert_eq!(objects("claim", &[expected], &[got]).len(), 1);
    }

    #[test]
    fn missing_and_unexpected_objects_are_reported() {
        let a = json!({"metadata": {"name": "a"}});
        let b = json!({"metadata": {"name": "b"}});
        assert_eq!(
            objects("volume", &[a], &[b]),
            vec!["volume a: expected, missing", "volume b: not expected, present"]
        );
    }

    #[test]
    fn events_compare_by_prefix_in_order_and_only_as_many_as_expected() {
        let got = vec!["Warning ClaimLost Bound claim has lost".to_string(), "Normal Other x".to_string()];
        assert!(events(&["Warning ClaimLost".into()], &got).is_empty());
        assert_eq!(events(&["Normal Other".into()], &got).len(), 1);
        assert_eq!(events(&["Warning ClaimLost".into(), "Normal Other".into(), "Normal Third".into()], &got).len(), 1);
    }
}
