//! Secrets, ConfigMaps and ServiceAccounts (`pkg/apis/core/validation`: `ValidateSecret`,
//! `ValidateConfigMap`, `ValidateServiceAccount` and their updates): data keys, the size limit,
//! the keys each Secret type requires, and what `immutable` freezes.
//!
//! A Secret's `stringData` is write-only: upstream's conversion merges it into `data` (each
//! value base64-encoded, replacing a key of the same name) before anything else sees the
//! object, so it is never stored nor returned ([`merge_string_data`]).

use super::names;
use crate::error::{FieldError, FieldErrorKind};
use base64::Engine;
use serde_json::{Map, Value};

/// Upstream's `MaxSecretSize`: the sum of a Secret's (or ConfigMap's) values, in bytes.
pub const MAX_SIZE: usize = 1024 * 1024;

const CONFIG_KEY_FMT: &str = "[-._a-zA-Z0-9]+";
const CONFIG_KEY_MSG: &str = "a valid config key must consist of alphanumeric characters, '-', '_' or '.'";
const IMMUTABLE: &str = "field is immutable when `immutable` is set";
/// The value Secret errors print in place of the contents.
const REDACTED: &str = "<secret contents redacted>";

/// upstream's `IsConfigMapKey`.
fn config_key_errors(key: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if key.len() > 253 {
        errs.push(names::max_len_error(253));
    }
    let valid = !key.is_empty() && key.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_'));
    if !valid {
        errs.push(names::regex_error(CONFIG_KEY_MSG, CONFIG_KEY_FMT, &["key.name", "KEY_NAME", "key-name"]));
    }
    match key {
        "." => errs.push("must not be '.'".into()),
        ".." => errs.push("must not be '..'".into()),
        k if k.starts_with("..") => errs.push("must not start with '..'".into()),
        _ => {}
    }
    errs
}

fn map<'a>(obj: &'a Value, field: &str) -> Option<&'a Map<String, Value>> {
    obj.get(field).and_then(Value::as_object)
}

/// The bytes a base64 value of `data` or `binaryData` holds (the decoder has checked it).
fn decoded(v: &Value) -> Vec<u8> {
    let s = v.as_str().unwrap_or("");
    base64::engine::general_purpose::STANDARD.decode(s).unwrap_or_default()
}

fn decoded_len(v: &Value) -> usize {
    let s = v.as_str().unwrap_or("").trim_end_matches('=');
    s.len() * 3 / 4
}

/// A Secret's `stringData` merged into its `data`, as upstream's v1 conversion does.
pub fn merge_string_data(obj: &mut Value) {
    let Some(o) = obj.as_object_mut() else { return };
    let Some(Value::Object(strings)) = o.remove("stringData") else { return };
    if strings.is_empty() {
        return;
    }
    let data = o.entry("data").or_insert_with(|| Value::Object(Map::new()));
    if !data.is_object() {
        *data = Value::Object(Map::new());
    }
    let data = data.as_object_mut().expect("object");
    for (k, v) in strings {
        let text = v.as_str().unwrap_or("");
        data.insert(k, Value::String(base64::engine::general_purpose::STANDARD.encode(text)));
    }
}

/// Empty maps of `fields` left out, as Go's `omitempty` writes them.
pub fn drop_empty(obj: &mut Value, fields: &[&str]) {
    if let Some(o) = obj.as_object_mut() {
        for f in fields {
            if o.get(*f).is_some_and(|v| v.is_null() || v.as_object().is_some_and(Map::is_empty)) {
                o.remove(*f);
            }
        }
    }
}

/// A ServiceAccount's `secrets` references keep only their names, as kube-apiserver stores them.
pub fn trim_secret_references(obj: &mut Value) {
    for r in obj.get_mut("secrets").and_then(Value::as_array_mut).into_iter().flatten() {
        if let Some(o) = r.as_object_mut() {
            o.retain(|k, _| k == "name");
        }
    }
}

/// `SetDefaults_Secret`: the type `Opaque` when none is given.
pub fn default_secret(obj: &mut Value) {
    drop_empty(obj, &["data"]);
    if let Some(o) = obj.as_object_mut() {
        if o.get("type").and_then(Value::as_str).is_none_or(str::is_empty) {
            o.insert("type".into(), Value::String("Opaque".into()));
        }
    }
}

/// The byte at a serde_json error's line and column.
fn byte_at(bytes: &[u8], line: usize, column: usize) -> Option<u8> {
    let text = std::str::from_utf8(bytes).ok()?;
    let l = text.split('\n').nth(line.checked_sub(1)?)?;
    l.as_bytes().get(column.checked_sub(1)?).copied()
}

/// Go's `json.Unmarshal` error for a body that is not a JSON object, as close as its texts go.
fn json_error(bytes: &[u8]) -> Option<String> {
    match serde_json::from_slice::<Map<String, Value>>(bytes) {
        Ok(_) => None,
        Err(e) if e.is_eof() => Some("unexpected end of JSON input".into()),
        Err(e) => {
            let first = bytes.iter().copied().find(|b| !b.is_ascii_whitespace());
            let at = byte_at(bytes, e.line(), e.column()).map(|b| b as char).unwrap_or(' ');
            let text = e.to_string();
            let looking = if text.starts_with("key must be a string") {
                Some("looking for beginning of object key string")
            } else if text.starts_with("expected `:`") {
                Some("after object key")
            } else if text.starts_with("expected `,` or `}`") {
                Some("after object key:value pair")
            } else if text.starts_with("expected value") {
                Some("looking for beginning of value")
            } else {
                None
            };
            Some(match first {
                Some(b'{') => match looking {
                    Some(l) => format!("invalid character '{at}' {l}"),
                    None => "invalid JSON object".into(),
                },
                None => "unexpected end of JSON input".into(),
                Some(b) if serde_json::from_slice::<Value>(bytes).is_ok() => {
                    let what = match b {
                        b'[' => "array",
                        b'"' => "string",
                        b't' | b'f' => "bool",
                        b'n' => return None,
                        _ => "number",
                    };
                    format!("json: cannot unmarshal {what} into Go value of type map[string]interface {{}}")
                }
                Some(b) => format!("invalid character '{}' looking for beginning of value", b as char),
            })
        }
    }
}

/// `ValidateSecret` past the metadata.
pub fn validate_secret(obj: &Value, errs: &mut Vec<FieldError>) {
    let data = map(obj, "data");
    let mut size = 0;
    for (k, v) in data.into_iter().flatten() {
        for m in config_key_errors(k) {
            errs.push(FieldError::invalid(format!("data[{k}]"), k.as_str(), m));
        }
        size += decoded_len(v);
    }
    if size > MAX_SIZE {
        errs.push(FieldError { path: "data".into(), kind: FieldErrorKind::TooLong(MAX_SIZE), detail: String::new() });
    }
    let has = |k: &str| data.is_some_and(|d| d.contains_key(k));
    let required = |k: &str| FieldError::required(format!("data[{k}]"), "");
    match obj.get("type").and_then(Value::as_str).unwrap_or("") {
        "kubernetes.io/service-account-token" => {
            let name = obj.pointer("/metadata/annotations/kubernetes.io~1service-account.name").and_then(Value::as_str);
            if name.is_none_or(str::is_empty) {
                errs.push(FieldError::required("metadata.annotations[kubernetes.io/service-account.name]", ""));
            }
        }
        t @ ("kubernetes.io/dockercfg" | "kubernetes.io/dockerconfigjson") => {
            let key = if t == "kubernetes.io/dockercfg" { ".dockercfg" } else { ".dockerconfigjson" };
            match data.and_then(|d| d.get(key)) {
                None => errs.push(required(key)),
                Some(v) => {
                    if let Some(why) = json_error(&decoded(v)) {
                        errs.push(FieldError::invalid(format!("data[{key}]"), REDACTED, why));
                    }
                }
            }
        }
        "kubernetes.io/basic-auth" if !has("username") && !has("password") => {
            errs.push(required("username"));
            errs.push(required("password"));
        }
        "kubernetes.io/ssh-auth" if data.and_then(|d| d.get("ssh-privatekey")).is_none_or(|v| decoded_len(v) == 0) => {
            errs.push(required("ssh-privatekey"));
        }
        "kubernetes.io/tls" => {
            for k in ["tls.crt", "tls.key"] {
                if !has(k) {
                    errs.push(required(k));
                }
            }
        }
        _ => {}
    }
}

/// What `immutable: true` freezes, checked on an update of a Secret or ConfigMap: `immutable`
/// itself and each of `fields`.
fn validate_immutable(old: &Value, new: &Value, fields: &[&str], errs: &mut Vec<FieldError>) {
    if old.get("immutable").and_then(Value::as_bool) != Some(true) {
        return;
    }
    if new.get("immutable").and_then(Value::as_bool) != Some(true) {
        errs.push(FieldError::forbidden("immutable", IMMUTABLE));
    }
    for f in fields {
        let empty = |v: Option<&Value>| v.is_none_or(|v| v.is_null() || v.as_object().is_some_and(Map::is_empty));
        let (a, b) = (old.get(*f), new.get(*f));
        if a != b && !(empty(a) && empty(b)) {
            errs.push(FieldError::forbidden(*f, IMMUTABLE));
        }
    }
}

/// What `ValidateSecretUpdate` adds to the create rules: the type, and `immutable`.
pub fn validate_secret_update(old: &Value, new: &Value, errs: &mut Vec<FieldError>) {
    let ty = |o: &Value| o.get("type").and_then(Value::as_str).unwrap_or("").to_string();
    if ty(old) != ty(new) {
        errs.push(FieldError::invalid("type", ty(new), "field is immutable"));
    }
    validate_immutable(old, new, &["data"], errs);
}

/// `ValidateConfigMap` past the metadata.
pub fn validate_config_map(obj: &Value, errs: &mut Vec<FieldError>) {
    let (data, binary) = (map(obj, "data"), map(obj, "binaryData"));
    let mut size = 0;
    for (k, v) in data.into_iter().flatten() {
        for m in config_key_errors(k) {
            errs.push(FieldError::invalid(format!("data[{k}]"), k.as_str(), m));
        }
        if binary.is_some_and(|b| b.contains_key(k)) {
            errs.push(FieldError::invalid(format!("data[{k}]"), k.as_str(), "duplicate of key present in binaryData"));
        }
        // (upstream reports a key in both maps once, on `data`)
        size += v.as_str().map_or(0, str::len);
    }
    for (k, v) in binary.into_iter().flatten() {
        for m in config_key_errors(k) {
            errs.push(FieldError::invalid(format!("binaryData[{k}]"), k.as_str(), m));
        }
        size += decoded_len(v);
    }
    if size > MAX_SIZE {
        // Upstream names the whole object by an empty path, which prints as `[]`.
        errs.push(FieldError { path: "[]".into(), kind: FieldErrorKind::TooLong(MAX_SIZE), detail: String::new() });
    }
}

/// What `ValidateConfigMapUpdate` adds to the create rules: `immutable`.
pub fn validate_config_map_update(old: &Value, new: &Value, errs: &mut Vec<FieldError>) {
    validate_immutable(old, new, &["data", "binaryData"], errs);
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn secret_errors(obj: Value) -> Vec<String> {
        let mut errs = Vec::new();
        validate_secret(&obj, &mut errs);
        errs.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn string_data_is_merged_into_data_and_wins() {
        let mut s = json!({"data": {"a": "eA==", "b": "eQ=="}, "stringData": {"b": "hello", "c": ""}});
        merge_string_data(&mut s);
        assert_eq!(s, json!({"data": {"a": "eA==", "b": "aGVsbG8=", "c": ""}}));
    }

    #[test]
    fn typed_secrets_require_their_keys() {
        let tls = secret_errors(json!({"type": "kubernetes.io/tls", "data": {"tls.crt": ""}}));
        assert_eq!(tls, ["data[tls.key]: Required value"]);
        let basic = secret_errors(json!({"type": "kubernetes.io/basic-auth", "data": {}}));
        assert_eq!(basic, ["data[username]: Required value", "data[password]: Required value"]);
        assert!(secret_errors(json!({"type": "kubernetes.io/basic-auth", "data": {"password": ""}})).is_empty());
        let sa = secret_errors(json!({"type": "kubernetes.io/service-account-token", "metadata": {}}));
        assert_eq!(sa, ["metadata.annotations[kubernetes.io/service-account.name]: Required value"]);
        let docker =
            secret_errors(json!({"type": "kubernetes.io/dockerconfigjson", "data": {".dockerconfigjson": "e30="}}));
        assert!(docker.is_empty(), "{docker:?}");
        let bad =
            secret_errors(json!({"type": "kubernetes.io/dockerconfigjson", "data": {".dockerconfigjson": "bm9wZQ=="}}));
        assert_eq!(bad.len(), 1);
        assert!(bad[0].contains("<secret contents redacted>") && bad[0].contains("invalid character 'n'"), "{bad:?}");
    }

    #[test]
    fn keys_are_config_keys() {
        let errs = secret_errors(json!({"data": {"a/b": "", "..x": ""}}));
        assert_eq!(errs.len(), 2, "{errs:?}");
        assert!(errs.iter().any(|e| e.contains("must not start with '..'")), "{errs:?}");
        assert!(
            errs.iter().any(|e| e.starts_with("data[a/b]: Invalid value: \"a/b\": a valid config key")),
            "{errs:?}"
        );
    }

    #[test]
    fn immutable_freezes_data_and_itself() {
        let old = json!({"immutable": true, "data": {"a": "eA=="}});
        let mut errs = Vec::new();
        validate_config_map_update(&old, &json!({"immutable": false, "data": {"a": "eQ=="}}), &mut errs);
        let texts: Vec<String> = errs.iter().map(ToString::to_string).collect();
        assert_eq!(
            texts,
            [
                "immutable: Forbidden: field is immutable when `immutable` is set",
                "data: Forbidden: field is immutable when `immutable` is set"
            ]
        );
        let mut errs = Vec::new();
        validate_config_map_update(&old, &old.clone(), &mut errs);
        assert!(errs.is_empty());
    }

    #[test]
    fn config_map_keys_may_not_be_in_both_maps() {
        let mut errs = Vec::new();
        validate_config_map(&json!({"data": {"k": "v"}, "binaryData": {"k": "dg=="}}), &mut errs);
        let texts: Vec<String> = errs.iter().map(ToString::to_string).collect();
        assert_eq!(texts, ["data[k]: Invalid value: \"k\": duplicate of key present in binaryData"]);
    }
}
