//! A custom resource against its definition's structural schema, as apiextensions-apiserver
//! applies it to every write: unknown fields pruned ([`prune`]; the decoder warns about them or
//! refuses them, as `fieldValidation` asks), nulls of fields that are not nullable dropped,
//! defaults filled ([`default`]), then the OpenAPI rules checked ([`validate`]) with
//! kube-openapi's messages (`spec.replicas in body should be greater than or equal to 1`).
//!
//! Covered: `type` (with `x-kubernetes-int-or-string`), `enum`, `required`, `minimum` and
//! `maximum` (and their exclusive forms), `multipleOf`, `minLength`/`maxLength`, `pattern`,
//! `format` (`date-time`, `date`, `byte`, `uuid`, `int32`, `int64`), `minItems`/`maxItems`,
//! `minProperties`/`maxProperties`, `nullable`, `properties`, `additionalProperties`, `items`,
//! `x-kubernetes-preserve-unknown-fields` and `x-kubernetes-embedded-resource`.

use crate::error::{FieldError, FieldErrorKind};
use serde_json::Value;

fn flag(schema: &Value, key: &str) -> bool {
    schema.get(key).and_then(Value::as_bool) == Some(true)
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// Drops what the schema does not know, recording each dropped field's path (`spec.x`), and
/// the nulls of fields that are neither nullable nor defaulted. At the root, `apiVersion`,
/// `kind` and `metadata` are the server's and are kept.
pub fn prune(value: &mut Value, schema: &Value, unknown: &mut Vec<String>) {
    prune_at(value, schema, "", true, unknown);
}

fn prune_at(value: &mut Value, schema: &Value, path: &str, root: bool, unknown: &mut Vec<String>) {
    match value {
        Value::Object(o) => {
            let props = schema.get("properties").and_then(Value::as_object);
            let extra = schema.get("additionalProperties").filter(|a| a.is_object());
            let keep_unknown = flag(schema, "x-kubernetes-preserve-unknown-fields");
            let embedded = root || flag(schema, "x-kubernetes-embedded-resource");
            let keys: Vec<String> = o.keys().cloned().collect();
            for k in keys {
                if embedded && matches!(k.as_str(), "apiVersion" | "kind" | "metadata") {
                    continue;
                }
                let sub = props.and_then(|p| p.get(&k)).or(extra);
                match sub {
                    Some(sub) => {
                        let v = o.get_mut(&k).expect("key");
                        if v.is_null() && !flag(sub, "nullable") && sub.get("default").is_none() {
                            o.remove(&k);
                            continue;
                        }
                        prune_at(v, sub, &join(path, &k), false, unknown);
                    }
                    None if keep_unknown => {}
                    None => {
                        o.remove(&k);
                        unknown.push(join(path, &k));
                    }
                }
            }
        }
        Value::Array(items) => {
            if let Some(sub) = schema.get("items") {
                for (i, v) in items.iter_mut().enumerate() {
                    prune_at(v, sub, &format!("{path}[{i}]"), false, unknown);
                }
            }
        }
        _ => {}
    }
}

/// Fills every missing (or null, not nullable) field that has a `default`, recursively.
pub fn default(value: &mut Value, schema: &Value) {
    match value {
        Value::Object(o) => {
            if let Some(props) = schema.get("properties").and_then(Value::as_object) {
                for (k, sub) in props {
                    let Some(d) = sub.get("default") else { continue };
                    let missing = match o.get(k) {
                        None => true,
                        Some(Value::Null) => !flag(sub, "nullable"),
                        Some(_) => false,
                    };
                    if missing {
                        o.insert(k.clone(), d.clone());
                    }
                }
                for (k, sub) in props {
                    if let Some(v) = o.get_mut(k) {
                        default(v, sub);
                    }
                }
            }
            if let Some(extra) = schema.get("additionalProperties").filter(|a| a.is_object()) {
                for v in o.values_mut() {
                    default(v, extra);
                }
            }
        }
        Value::Array(items) => {
            if let Some(sub) = schema.get("items") {
                for v in items {
                    default(v, sub);
                }
            }
        }
        _ => {}
    }
}

/// The rules of `schema` checked on a custom object (its `metadata` is the store's to check).
pub fn validate(value: &Value, schema: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if let (Some(o), Some(props)) = (value.as_object(), schema.get("properties").and_then(Value::as_object)) {
        // The root: its own fields but metadata, apiVersion and kind.
        for r in schema.get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str) {
            if o.get(r).is_none_or(Value::is_null) {
                errs.push(FieldError::required(r, ""));
            }
        }
        for (k, v) in o {
            if matches!(k.as_str(), "apiVersion" | "kind" | "metadata") {
                continue;
            }
            if let Some(sub) = props.get(k) {
                check(v, sub, k, &mut errs);
            }
        }
    }
    errs
}

fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(n) if n.as_f64().is_some_and(|f| f.fract() == 0.0) => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// A JSON value as Go's `%v` prints it in kube-openapi's messages (a whole float without
/// its `.0`).
fn go_value(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Number(n) => match n.as_f64() {
            Some(f) if !n.is_i64() && !n.is_u64() && f.fract() == 0.0 && f.abs() < 1e15 => format!("{}", f as i64),
            _ => n.to_string(),
        },
        other => other.to_string(),
    }
}

fn type_invalid(path: &str, actual: &str, detail: String) -> FieldError {
    FieldError { path: path.into(), kind: FieldErrorKind::TypeInvalid(actual.into()), detail }
}

/// The value of a field error for a scalar: a string quoted, anything else as JSON.
fn shown(v: &Value) -> FieldErrorKind {
    match v {
        Value::String(s) => FieldErrorKind::Invalid(s.clone()),
        other => FieldErrorKind::InvalidValue(other.to_string()),
    }
}

fn invalid(path: &str, v: &Value, detail: String) -> FieldError {
    FieldError { path: path.into(), kind: shown(v), detail }
}

fn check(v: &Value, schema: &Value, path: &str, errs: &mut Vec<FieldError>) {
    if v.is_null() {
        if !flag(schema, "nullable") && schema.get("type").is_some() {
            let want = schema["type"].as_str().unwrap_or("");
            errs.push(type_invalid(path, "null", format!("{path} in body must be of type {want}: \"null\"")));
        }
        return;
    }
    let actual = json_type(v);
    if flag(schema, "x-kubernetes-int-or-string") {
        if !matches!(actual, "integer" | "string") {
            errs.push(type_invalid(
                path,
                actual,
                format!("{path} in body must be of type integer,string: \"{actual}\""),
            ));
            return;
        }
    } else if let Some(want) = schema.get("type").and_then(Value::as_str) {
        let ok = want == actual || (want == "number" && actual == "integer");
        if !ok {
            errs.push(type_invalid(path, actual, format!("{path} in body must be of type {want}: \"{actual}\"")));
            return;
        }
    }
    if let Some(options) = schema.get("enum").and_then(Value::as_array) {
        if !options.contains(v) {
            let supported: Vec<String> =
                options.iter().map(|o| o.as_str().map_or_else(|| o.to_string(), str::to_string)).collect();
            let value = v.as_str().map_or_else(|| v.to_string(), str::to_string);
            let kind = if v.is_string() {
                FieldErrorKind::NotSupported(value, supported)
            } else {
                FieldErrorKind::NotSupportedValue(value, supported)
            };
            errs.push(FieldError { path: path.into(), kind, detail: String::new() });
        }
    }
    match v {
        Value::String(s) => check_string(s, v, schema, path, errs),
        Value::Number(n) => check_number(n.as_f64().unwrap_or(0.0), v, schema, path, errs),
        Value::Array(items) => {
            check_count(items.len(), schema, ["maxItems", "minItems", "items"], path, errs);
            if let Some(sub) = schema.get("items") {
                for (i, item) in items.iter().enumerate() {
                    check(item, sub, &format!("{path}[{i}]"), errs);
                }
            }
        }
        Value::Object(o) => {
            check_count(o.len(), schema, ["maxProperties", "minProperties", "properties"], path, errs);
            for r in schema.get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str) {
                if o.get(r).is_none_or(Value::is_null) {
                    errs.push(FieldError::required(join(path, r), ""));
                }
            }
            let props = schema.get("properties").and_then(Value::as_object);
            let extra = schema.get("additionalProperties").filter(|a| a.is_object());
            for (k, item) in o {
                if let Some(sub) = props.and_then(|p| p.get(k)).or(extra) {
                    check(item, sub, &join(path, k), errs);
                }
            }
        }
        _ => {}
    }
}

/// The most and the fewest items (or properties) a list (or object) of `n` may hold.
fn check_count(n: usize, schema: &Value, [max_key, min_key, what]: [&str; 3], path: &str, errs: &mut Vec<FieldError>) {
    if let Some(max) = schema.get(max_key).and_then(Value::as_u64).filter(|m| n as u64 > *m) {
        errs.push(FieldError {
            path: path.into(),
            kind: FieldErrorKind::TooMany(n, max as usize),
            detail: String::new(),
        });
    }
    if let Some(min) = schema.get(min_key).and_then(Value::as_u64).filter(|m| (n as u64) < *m) {
        errs.push(invalid(path, &Value::from(n), format!("{path} in body should have at least {min} {what}")));
    }
}

fn check_string(s: &str, v: &Value, schema: &Value, path: &str, errs: &mut Vec<FieldError>) {
    let chars = s.chars().count() as u64;
    if let Some(max) = schema.get("maxLength").and_then(Value::as_u64) {
        if chars > max {
            errs.push(FieldError {
                path: path.into(),
                kind: FieldErrorKind::TooLong(max as usize),
                detail: String::new(),
            });
        }
    }
    if let Some(min) = schema.get("minLength").and_then(Value::as_u64) {
        if chars < min {
            errs.push(invalid(path, v, format!("{path} in body should be at least {min} chars long")));
        }
    }
    if let Some(p) = schema.get("pattern").and_then(Value::as_str) {
        if regex::Regex::new(p).is_ok_and(|re| !re.is_match(s)) {
            errs.push(invalid(path, v, format!("{path} in body should match '{p}'")));
        }
    }
    if let Some(format) = schema.get("format").and_then(Value::as_str) {
        if !format_ok(format, s) {
            errs.push(FieldError {
                path: path.into(),
                kind: FieldErrorKind::TypeInvalid(s.into()),
                detail: format!("{path} in body must be of type {format}: {s:?}"),
            });
        }
    }
}

/// The string formats kube-openapi checks that custom resources use.
fn format_ok(format: &str, s: &str) -> bool {
    match format {
        "date-time" => s.parse::<jiff::Timestamp>().is_ok(),
        "date" => s.parse::<jiff::civil::Date>().is_ok() && s.len() == 10,
        "byte" => {
            use base64::Engine;
            base64::engine::general_purpose::STANDARD.decode(s).is_ok()
        }
        "uuid" => {
            let hex: Vec<&str> = s.split('-').collect();
            hex.iter().map(|h| h.len()).eq([8, 4, 4, 4, 12])
                && hex.iter().all(|h| h.bytes().all(|b| b.is_ascii_hexdigit()))
        }
        _ => true,
    }
}

fn check_number(x: f64, v: &Value, schema: &Value, path: &str, errs: &mut Vec<FieldError>) {
    let num = |k: &str| schema.get(k).and_then(Value::as_f64);
    let shown_bound = |k: &str| go_value(&schema[k]);
    if let Some(min) = num("minimum") {
        if flag(schema, "exclusiveMinimum") && x <= min {
            errs.push(invalid(path, v, format!("{path} in body should be greater than {}", shown_bound("minimum"))));
        } else if x < min {
            errs.push(invalid(
                path,
                v,
                format!("{path} in body should be greater than or equal to {}", shown_bound("minimum")),
            ));
        }
    }
    if let Some(max) = num("maximum") {
        if flag(schema, "exclusiveMaximum") && x >= max {
            errs.push(invalid(path, v, format!("{path} in body should be less than {}", shown_bound("maximum"))));
        } else if x > max {
            errs.push(invalid(
                path,
                v,
                format!("{path} in body should be less than or equal to {}", shown_bound("maximum")),
            ));
        }
    }
    if let Some(m) = num("multipleOf").filter(|m| *m > 0.0) {
        if (x / m).fract() != 0.0 {
            errs.push(invalid(
                path,
                v,
                format!("{path} in body should be a multiple of {}", shown_bound("multipleOf")),
            ));
        }
    }
    if let Some(format) = schema.get("format").and_then(Value::as_str) {
        let fits = match format {
            "int32" => x >= f64::from(i32::MIN) && x <= f64::from(i32::MAX),
            _ => true,
        };
        if !fits {
            errs.push(invalid(path, v, format!("{path} in body must be of type {format}: {:?}", go_value(v))));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({"type": "object", "properties": {"spec": {"type": "object", "required": ["image"], "properties": {
            "image": {"type": "string", "pattern": "^[a-z]+$"},
            "replicas": {"type": "integer", "minimum": 1, "maximum": 10, "default": 1},
            "color": {"type": "string", "enum": ["red", "blue"]},
            "when": {"type": "string", "format": "date-time"},
            "tags": {"type": "array", "maxItems": 2, "items": {"type": "string"}},
            "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
        }}}})
    }

    fn texts(errs: &[FieldError]) -> Vec<String> {
        errs.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn unknown_fields_are_pruned_where_the_schema_does_not_keep_them() {
        let mut v = json!({"apiVersion": "x/v1", "kind": "K", "metadata": {"name": "a"}, "top": 1,
                           "spec": {"image": "a", "bogus": 2, "free": {"any": {"thing": 1}}}});
        let mut unknown = Vec::new();
        prune(&mut v, &schema(), &mut unknown);
        assert_eq!(unknown, ["spec.bogus", "top"]);
        assert_eq!(v["spec"]["free"], json!({"any": {"thing": 1}}));
        assert_eq!(v["metadata"]["name"], "a");
    }

    #[test]
    fn defaults_fill_missing_fields() {
        let mut v = json!({"spec": {"image": "a"}});
        default(&mut v, &schema());
        assert_eq!(v["spec"]["replicas"], 1);
    }

    #[test]
    fn violations_carry_kube_openapi_messages() {
        let v = json!({"spec": {"replicas": 0, "color": "green", "image": "A1", "when": "yesterday", "tags": ["a", "b", "c"]}});
        let got = texts(&validate(&v, &schema()));
        for want in [
            "spec.replicas: Invalid value: 0: spec.replicas in body should be greater than or equal to 1",
            "spec.color: Unsupported value: \"green\": supported values: \"red\", \"blue\"",
            "spec.image: Invalid value: \"A1\": spec.image in body should match '^[a-z]+$'",
            "spec.when: Invalid value: \"yesterday\": spec.when in body must be of type date-time: \"yesterday\"",
            "spec.tags: Too many: 3: must have at most 2 items",
        ] {
            assert!(got.iter().any(|g| g == want), "missing {want:?} in {got:#?}");
        }
        let wrong = texts(&validate(&json!({"spec": {"image": "a", "replicas": "two"}}), &schema()));
        assert_eq!(
            wrong,
            ["spec.replicas: Invalid value: \"string\": spec.replicas in body must be of type integer: \"string\""]
        );
        assert_eq!(texts(&validate(&json!({"spec": {}}), &schema())), ["spec.image: Required value"]);
    }
}
