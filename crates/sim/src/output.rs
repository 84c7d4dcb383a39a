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

fn scalar(v: &Value) -> String {
    match v {
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
    fn yaml_round_trips_and_quotes_ambiguous_strings() {
        let v = json!({"a": "yes", "b": [1, {"c": "on", "d": []}, [true, null]], "e": {}, "f": {"g": "1e3"}, "yes": 1});
        let y = to_yaml(&v);
        assert!(y.contains("a: \"yes\""), "{y}");
        let back: Value = serde_norway::from_str(&y).unwrap();
        assert_eq!(back, v);
    }
}
