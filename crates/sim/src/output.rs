//! The simulation's output: every object of the input kinds as stored, sorted by kind, namespace
//! and name, then every Event in the order it was first emitted, as one `v1` `List`.

use pv_store::Store;
use serde_json::{json, Value};

const OUTPUT_RESOURCES: &[&str] =
    &["namespaces", "nodes", "persistentvolumeclaims", "persistentvolumes", "pods", "storageclasses"];

/// Builds the output List from the store.
pub fn output_list(store: &Store) -> Value {
    let mut objects: Vec<Value> = Vec::new();
    for r in OUTPUT_RESOURCES {
        let (items, _) = store.list(r, &Default::default()).expect("known resource");
        objects.extend(items.iter().map(|o| (**o).clone()));
    }
    let key = |o: &Value| {
        (
            o["kind"].as_str().unwrap_or("").to_string(),
            o["metadata"]["namespace"].as_str().unwrap_or("").to_string(),
            o["metadata"]["name"].as_str().unwrap_or("").to_string(),
        )
    };
    objects.sort_by_key(key);
    let (events, _) = store.list("events", &Default::default()).expect("events");
    let mut events: Vec<Value> = events.iter().map(|e| (**e).clone()).collect();
    events.sort_by_key(|e| {
        let uid_order = e["metadata"]["creationTimestamp"].as_str().unwrap_or("").to_string();
        (uid_order, e["metadata"]["name"].as_str().unwrap_or("").to_string())
    });
    objects.extend(events);
    json!({"apiVersion": "v1", "kind": "List", "items": objects})
}

/// Emits YAML with every string scalar double-quoted, so no reader (YAML 1.1 included) can take
/// `yes`, `no`, `on` or `1e3` for anything but a string.
pub fn to_yaml(v: &Value) -> String {
    let mut out = String::new();
    emit(v, 0, &mut out, false);
    out
}

fn plain_key(k: &str) -> bool {
    !k.is_empty()
        && k.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_./".contains(&b))
        && !matches!(
            k.to_ascii_lowercase().as_str(),
            "y" | "n" | "yes" | "no" | "on" | "off" | "true" | "false" | "null" | "~"
        )
        && !k.starts_with(|c: char| c.is_ascii_digit() || c == '-' || c == '.')
}

/// True when YAML 1.1 (what kubectl's YAML library reads and writes) would take `s`, written
/// plain, for something other than this string: a bool, null, number or timestamp, an indicator,
/// or text that changes meaning (`: `, ` #`, surrounding spaces, line breaks).
fn needs_quotes(s: &str) -> bool {
    const SPECIAL: &[&str] =
        &["y", "n", "yes", "no", "on", "off", "true", "false", "null", "~", ".inf", "-.inf", "+.inf", ".nan"];
    let Some(first) = s.chars().next() else {
        return true;
    };
    if SPECIAL.contains(&s.to_ascii_lowercase().as_str()) {
        return true;
    }
    if "-?:,[]{}#&*!|>'\"%@`".contains(first) || s.ends_with(':') || s.trim() != s {
        return true;
    }
    if s.contains(": ") || s.contains(" #") || s.chars().any(|c| c.is_control()) {
        return true;
    }
    // Numbers in any YAML 1.1 spelling (10, 1e3, 0x1f, 1_000, 1:20) and dates/timestamps.
    let numeric = |c: char| c.is_ascii_hexdigit() || "._:+-xXoO".contains(c);
    if (first.is_ascii_digit() || first == '+' || first == '.') && s.chars().all(numeric) {
        return true;
    }
    let b = s.as_bytes();
    b.len() >= 8 && b[..4].iter().all(u8::is_ascii_digit) && b[4] == b'-'
}

fn scalar(v: &Value) -> String {
    match v {
        Value::String(s) if !needs_quotes(s) => s.clone(),
        // A JSON string is a valid double-quoted YAML string.
        Value::String(s) => serde_json::to_string(s).expect("string"),
        other => other.to_string(),
    }
}

fn emit(v: &Value, indent: usize, out: &mut String, in_list: bool) {
    let pad = " ".repeat(indent);
    match v {
        Value::Object(m) if !m.is_empty() => {
            for (i, (k, val)) in m.iter().enumerate() {
                let key = if plain_key(k) { k.clone() } else { serde_json::to_string(k).expect("key") };
                if !(in_list && i == 0) {
                    out.push_str(&pad);
                }
                out.push_str(&key);
                out.push(':');
                match val {
                    Value::Object(c) if !c.is_empty() => {
                        out.push('\n');
                        emit(val, indent + 2, out, false);
                    }
                    Value::Array(a) if !a.is_empty() => {
                        out.push('\n');
                        emit(val, indent, out, false);
                    }
                    _ => {
                        out.push(' ');
                        out.push_str(&inline(val));
                        out.push('\n');
                    }
                }
            }
        }
        Value::Array(a) if !a.is_empty() => {
            for item in a {
                out.push_str(&pad);
                out.push_str("- ");
                match item {
                    Value::Object(c) if !c.is_empty() => emit(item, indent + 2, out, true),
                    Value::Array(x) if !x.is_empty() => {
                        out.push('\n');
                        emit(item, indent + 2, out, false);
                    }
                    _ => {
                        out.push_str(&inline(item));
                        out.push('\n');
                    }
                }
            }
        }
        other => {
            out.push_str(&pad);
            out.push_str(&inline(other));
            out.push('\n');
        }
    }
}

fn inline(v: &Value) -> String {
    match v {
        Value::Object(m) if m.is_empty() => "{}".into(),
        Value::Array(a) if a.is_empty() => "[]".into(),
        other => scalar(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_strings_are_printed_plain_as_kubectl_does() {
        let v = json!({"metadata": {"name": "pv-5g", "creationTimestamp": "2026-01-01T00:00:00Z",
            "annotations": {"pv.kubernetes.io/bind-completed": "yes"}},
            "spec": {"capacity": {"storage": "5Gi"}, "storageClassName": "", "nfs": {"path": "/exports/a"},
                     "accessModes": ["ReadWriteOnce"]},
            "status": {"phase": "Bound"}, "message": "waiting for first consumer: a pod", "count": "10"});
        let y = to_yaml(&v);
        for plain in ["name: pv-5g", "storage: 5Gi", "path: /exports/a", "- ReadWriteOnce", "phase: Bound"] {
            assert!(y.contains(plain), "{plain:?} in\n{y}");
        }
        for quoted in [
            "creationTimestamp: \"2026-01-01T00:00:00Z\"",
            "bind-completed: \"yes\"",
            "storageClassName: \"\"",
            "message: \"waiting for first consumer: a pod\"",
            "count: \"10\"",
        ] {
            assert!(y.contains(quoted), "{quoted:?} in\n{y}");
        }
        let back: Value = serde_norway::from_str(&y).unwrap();
        assert_eq!(back, v);
    }

    #[test]
    fn strings_that_yaml_would_read_as_something_else_are_quoted() {
        for s in [
            "",
            "yes",
            "No",
            "true",
            "null",
            "~",
            "1",
            "1.5",
            "1e3",
            "0x1F",
            "1_000",
            "12:30",
            ".inf",
            "-x",
            "a: b",
            "a #b",
            " a",
            "a ",
            "line\nbreak",
            "*ref",
            "&a",
            "!tag",
            "%x",
            "@x",
            "`x",
            "{a}",
            "[a]",
            "'a'",
            "\"a\"",
            "a:",
            "2026-01-01",
        ] {
            let v = json!({"k": s, "l": [s]});
            let back: Value = serde_norway::from_str(&to_yaml(&v)).unwrap_or_else(|e| panic!("{s:?}: {e}"));
            assert_eq!(back, v, "{s:?} round-trips");
            assert!(needs_quotes(s), "{s:?} is quoted");
        }
        for s in ["pv-1", "5Gi", "/tmp/x", "kubernetes.io/host-path", "Bound", "a b", "x=y", "1Gi", "v1"] {
            assert!(!needs_quotes(s), "{s:?} is plain");
            let back: Value = serde_norway::from_str(&to_yaml(&json!({"k": s}))).unwrap();
            assert_eq!(back, json!({"k": s}), "{s:?} round-trips");
        }
    }

    #[test]
    fn yaml_round_trips_and_quotes_ambiguous_strings() {
        let v = json!({"a": "yes", "b": [1, {"c": "on", "d": []}, [true, null]], "e": {}, "f": {"g": "1e3"}, "yes": 1});
        let y = to_yaml(&v);
        assert!(y.contains("a: \"yes\""), "{y}");
        let back: Value = serde_norway::from_str(&y).unwrap();
        assert_eq!(back, v);
    }
}
