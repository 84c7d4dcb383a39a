//! A kind's typed round trip: the object decoded into its Go-generated type (k8s-openapi's) and
//! encoded back, as kube-apiserver's decoding drops unknown fields and fills missing required
//! ones with their zero value. Each kind's strategy names its type (`registry/`); the
//! API server compares what came back with what was sent.

use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{Map, Value};

/// Decodes into `T` and serializes back. A missing required field is filled with the first
/// zero value its type accepts and the decode retried, as Go leaves it at its zero value.
pub fn through<T: DeserializeOwned + Serialize>(value: &Value) -> std::result::Result<Value, String> {
    let mut value = value.clone();
    for _ in 0..32 {
        let err = match serde_path_to_error::deserialize::<_, T>(&value) {
            Ok(typed) => return serde_json::to_value(&typed).map_err(|e| e.to_string()),
            Err(e) => e,
        };
        let path = go_path(err.path());
        let inner = err.inner().to_string();
        match inner.strip_prefix("missing field `").and_then(|r| r.strip_suffix('`')) {
            Some(field) if fill_zero::<T>(&mut value, err.path(), field) => continue,
            _ => return Err(go_type_error(&path, &inner)),
        }
    }
    Err("too many missing fields".into())
}

/// Inserts a zero value for `field` in the object at `at`: the first of `""`, `[]`, `{}`, `0`,
/// `false` that its type accepts. False when none does.
fn fill_zero<T: DeserializeOwned>(value: &mut Value, at: &serde_path_to_error::Path, field: &str) -> bool {
    let Some(pointer) = json_pointer(at) else { return false };
    let parent = go_path(at);
    let here = if parent.is_empty() { field.to_string() } else { format!("{parent}.{field}") };
    let zeros =
        [Value::from(""), Value::Array(Vec::new()), Value::Object(Map::new()), Value::from(0), Value::from(false)];
    for zero in zeros {
        let Some(obj) = value.pointer_mut(&pointer).and_then(Value::as_object_mut) else { return false };
        obj.insert(field.to_string(), zero);
        match serde_path_to_error::deserialize::<_, T>(&*value) {
            Ok(_) => return true,
            Err(e) if !(go_path(e.path()) == here && e.inner().to_string().starts_with("invalid type")) => return true,
            Err(_) => {}
        }
    }
    if let Some(obj) = value.pointer_mut(&pointer).and_then(Value::as_object_mut) {
        obj.remove(field);
    }
    false
}

fn json_pointer(path: &serde_path_to_error::Path) -> Option<String> {
    use serde_path_to_error::Segment;
    let mut out = String::new();
    for seg in path.iter() {
        match seg {
            Segment::Map { key } => out.push_str(&format!("/{}", key.replace('~', "~0").replace('/', "~1"))),
            Segment::Seq { index } => out.push_str(&format!("/{index}")),
            Segment::Enum { .. } | Segment::Unknown => return None,
        }
    }
    Some(out)
}

/// `spec.containers[0].name`, as upstream prints field paths.
fn go_path(path: &serde_path_to_error::Path) -> String {
    use serde_path_to_error::Segment;
    let mut out = String::new();
    for seg in path.iter() {
        match seg {
            Segment::Seq { index } => out.push_str(&format!("[{index}]")),
            Segment::Map { key } => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(key);
            }
            Segment::Enum { variant } => out.push_str(variant),
            Segment::Unknown => out.push('?'),
        }
    }
    out
}

/// serde's `invalid type: integer `123`, expected a string` in Go's words:
/// `json: cannot unmarshal number into Go struct field .spec.storageClassName of type string`.
fn go_type_error(path: &str, inner: &str) -> String {
    let Some(rest) = inner.strip_prefix("invalid type: ") else {
        return format!("json: {path}: {inner}");
    };
    let (got, expected) = rest.split_once(", expected ").unwrap_or((rest, "?"));
    let got = match got.split_whitespace().next().unwrap_or("") {
        "integer" | "floating" => "number",
        "string" => "string",
        "sequence" => "array",
        "map" => "object",
        "boolean" => "bool",
        other => other,
    };
    let expected = match expected {
        "a string" => "string".to_string(),
        "a boolean" => "bool".to_string(),
        "i32" | "i64" | "u32" | "u64" => format!("int{}", &expected[1..]),
        "a sequence" => "array".to_string(),
        e if e.starts_with("a map") => "object".to_string(),
        e => e.trim_start_matches("a ").trim_start_matches("an ").to_string(),
    };
    format!("json: cannot unmarshal {got} into Go struct field .{path} of type {expected}")
}
