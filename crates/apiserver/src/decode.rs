//! Request bodies into typed objects, as kube-apiserver decodes them.
//!
//! Every object a write stores passes through the kind's k8s-openapi type: a body is parsed by
//! its content type (JSON, YAML or protobuf; anything else is 415), decoded into the typed
//! object, and what is stored is what that object serializes to. So a field of the wrong type
//! is a 400 at the door (`PersistentVolume in version "v1" cannot be handled as a
//! PersistentVolume: ...`) instead of an object that every typed client then fails to read, and
//! no unknown field survives. Unknown and duplicate fields follow the request's
//! `fieldValidation`: `Strict` fails with `strict decoding error: unknown field "spec.x"`,
//! `Warn` (the default) drops them and answers a `Warning` header per field, `Ignore` drops
//! them silently. Field paths are written as upstream's decoder writes them
//! (`spec.containers[0].bogus`).
//!
//! A field the type requires but the body leaves out decodes as its zero value, as Go's
//! decoder does, so validation (not decoding) reports it, with upstream's 422.
//!
//! [`decode`] is the single entry point for bodies; [`typed`] checks an object that was built
//! on the server (the result of a PATCH).

use crate::decoded::{cannot_handle, check_type_fields, field_problems};
use crate::error::{ApiError, Result};
use crate::resources::Served;
use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};
use std::fmt;

pub use crate::decoded::{Decoded, FieldValidation};

/// Media types a body may have, in upstream's order (its 415 lists them).
pub const BODY_MEDIA_TYPES: &[&str] = &["application/json", "application/yaml", "application/vnd.kubernetes.protobuf"];

/// Decodes a request body of the given content type into an object of the served kind
/// (`definition`: the CustomResourceDefinition of a custom resource). No content type means
/// JSON, as in kube-apiserver.
pub fn decode(
    served: &Served,
    definition: Option<&Value>,
    content_type: &str,
    body: &[u8],
    fv: FieldValidation,
) -> Result<Decoded> {
    let media = content_type.split(';').next().unwrap_or("").trim().to_ascii_lowercase();
    let (value, duplicates) = match media.as_str() {
        "" | "application/json" => {
            crate::shape::scan_json(body)?;
            parse_json(body)?
        }
        "application/yaml" => (parse_yaml(body)?, Vec::new()),
        "application/vnd.kubernetes.protobuf" if !served.custom() => {
            (crate::protobuf::decode(served.kind(), body)?, Vec::new())
        }
        // Custom resources have no protobuf form.
        "application/vnd.kubernetes.protobuf" => {
            return Err(ApiError::UnsupportedMediaType(BODY_MEDIA_TYPES[..2].join(", ")))
        }
        _ => return Err(ApiError::UnsupportedMediaType(BODY_MEDIA_TYPES.join(", "))),
    };
    if !value.is_object() {
        return Err(cannot_handle(served, "the body of the request must be an object".into()));
    }
    match definition {
        Some(def) if served.custom() => crate::custom::check(served, def, value, duplicates, fv),
        _ => check(served, value, duplicates, fv),
    }
}

/// Checks an object built on the server (a patched object) against its type, with the same
/// rules as a body.
pub fn typed(served: &Served, definition: Option<&Value>, value: Value, fv: FieldValidation) -> Result<Decoded> {
    match definition {
        Some(def) if served.custom() => crate::custom::check(served, def, value, Vec::new(), fv),
        _ => check(served, value, Vec::new(), fv),
    }
}

fn check(served: &Served, mut value: Value, duplicates: Vec<String>, fv: FieldValidation) -> Result<Decoded> {
    // A YAML body or a patched object, counted before the typed decode multiplies it.
    crate::shape::check_value(&value)?;
    check_type_fields(served, &mut value)?;
    let object = roundtrip(served, &value).map_err(|e| cannot_handle(served, name_go_struct(served, e)))?;
    if let Some(why) = bad_quantity(served, &value) {
        return Err(cannot_handle(served, why));
    }
    let mut unknown = Vec::new();
    unknown_fields(&value, &object, "", &mut unknown);
    field_problems(served, object, unknown, duplicates, fv)
}

/// The OpenAPI definition of the quantity type.
const QUANTITY_REF: &str = "#/definitions/io.k8s.apimachinery.pkg.api.resource.Quantity";

/// The served OpenAPI v2 definitions, parsed once: they say which fields are quantities.
static DEFINITIONS: std::sync::LazyLock<Map<String, Value>> = std::sync::LazyLock::new(|| {
    let doc: Value = serde_json::from_str(crate::discovery::OPENAPI_V2_JSON).expect("the served OpenAPI v2 document");
    doc.get("definitions").and_then(Value::as_object).cloned().unwrap_or_default()
});

/// Each served definition by the group, version and kind it is for, indexed once.
static BY_GVK: std::sync::LazyLock<std::collections::HashMap<(String, String, String), &'static Value>> =
    std::sync::LazyLock::new(|| {
        let mut m = std::collections::HashMap::new();
        for d in DEFINITIONS.values() {
            for g in d.get("x-kubernetes-group-version-kind").and_then(Value::as_array).into_iter().flatten() {
                let part = |k: &str| g[k].as_str().unwrap_or("").to_string();
                m.insert((part("group"), part("version"), part("kind")), d);
            }
        }
        m
    });

/// The served definition of the kind at `served`'s group and version (every write asks).
fn definition_of(served: &Served) -> Option<&'static Value> {
    BY_GVK.get(&(served.group.to_string(), served.version.to_string(), served.kind().to_string())).copied()
}

/// Go's type error names the struct that holds the field and the field's path without list
/// indexes (`Go struct field ObjectMeta.metadata.name`); the typed decoder gives the path
/// alone. The struct is found by following the path through the served definitions.
fn name_go_struct(served: &Served, message: String) -> String {
    const AT: &str = "Go struct field .";
    let Some(start) = message.find(AT) else { return message };
    let rest = &message[start + AT.len()..];
    let Some(end) = rest.find(" of type ") else { return message };
    let path = &rest[..end];
    let fields: Vec<&str> = path.split('.').map(|f| f.split('[').next().unwrap_or(f)).collect();
    let mut schema = definition_of(served);
    let mut name = String::new();
    let mut named: Vec<&str> = Vec::new();
    for field in &fields {
        // Resolve references, remembering the struct (definition) reached.
        while let Some(r) = schema.and_then(|s| s.get("$ref")).and_then(Value::as_str) {
            let def = r.strip_prefix("#/definitions/").unwrap_or(r);
            name = def.rsplit('.').next().unwrap_or(def).to_string();
            schema = DEFINITIONS.get(def);
        }
        let Some(next) = schema.and_then(|s| s.get("properties")).and_then(|p| p.get(*field)) else { break };
        named.push(field);
        // Go names neither list indexes nor map keys: a map's field ends the path.
        if next.get("additionalProperties").is_some() {
            break;
        }
        schema = Some(next.get("items").unwrap_or(next));
    }
    if named.is_empty() || name.is_empty() {
        return message;
    }
    format!("{}Go struct field {name}.{}{}", &message[..start], named.join("."), &rest[end..])
}

/// The first quantity field of `value` that Go's decoder refuses, with its error: kube-apiserver
/// parses quantities while decoding, so a malformed one is a 400 there, before any validation.
/// Which fields are quantities comes from the served OpenAPI definitions.
fn bad_quantity(served: &Served, value: &Value) -> Option<String> {
    first_bad_quantity(definition_of(served)?, value, 0)
}

fn first_bad_quantity(schema: &Value, value: &Value, depth: usize) -> Option<String> {
    if depth > 64 || value.is_null() {
        return None;
    }
    if let Some(r) = schema.get("$ref").and_then(Value::as_str) {
        if r == QUANTITY_REF {
            return quantity_error(value);
        }
        let def = DEFINITIONS.get(r.strip_prefix("#/definitions/")?)?;
        return first_bad_quantity(def, value, depth + 1);
    }
    if let Some(all) = schema.get("allOf").and_then(Value::as_array) {
        return all.iter().find_map(|s| first_bad_quantity(s, value, depth + 1));
    }
    match value {
        Value::Object(o) => {
            let props = schema.get("properties").and_then(Value::as_object);
            let extra = schema.get("additionalProperties").filter(|a| a.is_object());
            o.iter().find_map(|(k, v)| {
                let s = props.and_then(|p| p.get(k)).or(extra)?;
                first_bad_quantity(s, v, depth + 1)
            })
        }
        Value::Array(items) => {
            let s = schema.get("items")?;
            items.iter().find_map(|v| first_bad_quantity(s, v, depth + 1))
        }
        _ => None,
    }
}

/// Go's `resource.ParseQuantity` error for a quantity, as its JSON decoder reports it.
fn quantity_error(value: &Value) -> Option<String> {
    use pv_model::quantity::{Quantity, QuantityError};
    let text = match value {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        _ => return None, // a wrong type is the typed decoder's error
    };
    match Quantity::parse(&text) {
        Err(QuantityError::Empty | QuantityError::Syntax) => Some(QuantityError::Syntax.to_string()),
        Err(QuantityError::Suffix(_)) => Some("unable to parse quantity's suffix".into()),
        // Go's quantities are arbitrary-precision: leave magnitude to validation.
        Ok(_) | Err(QuantityError::Overflow) => None,
    }
}

/// The object as its k8s-openapi type reads and writes it.
fn roundtrip(served: &Served, value: &Value) -> std::result::Result<Value, String> {
    if served.events_v1 {
        return pv_store::typed::through::<k8s_openapi::api::events::v1::Event>(value);
    }
    pv_store::roundtrip(served.rt, value)
}

/// Paths of fields present (and not null) in `given` that the typed object dropped.
fn unknown_fields(given: &Value, kept: &Value, path: &str, out: &mut Vec<String>) {
    match (given, kept) {
        (Value::Object(g), Value::Object(k)) => {
            for (key, gv) in g {
                let p = if path.is_empty() { key.clone() } else { format!("{path}.{key}") };
                match k.get(key) {
                    Some(kv) => unknown_fields(gv, kv, &p, out),
                    None if !gv.is_null() => out.push(p),
                    None => {}
                }
            }
        }
        (Value::Array(g), Value::Array(k)) if g.len() == k.len() => {
            for (i, (gv, kv)) in g.iter().zip(k).enumerate() {
                unknown_fields(gv, kv, &format!("{path}[{i}]"), out);
            }
        }
        _ => {}
    }
}

/// Parses JSON, keeping the last of duplicate keys (as Go does) and naming each duplicate.
fn parse_json(body: &[u8]) -> Result<(Value, Vec<String>)> {
    let mut dups = Vec::new();
    let mut de = serde_json::Deserializer::from_slice(body);
    let v = TrackedValue { path: String::new(), dups: &mut dups }
        .deserialize(&mut de)
        .and_then(|v| de.end().map(|()| v))
        .map_err(|e| ApiError::BadRequest(format!("the body of the request was in an unknown format: {e}")))?;
    Ok((v, dups))
}

/// Parses a YAML body (one document) as kubectl's YAML library reads it (YAML 1.1 booleans,
/// duplicate keys refused). The flow nesting was bounded before; the parser's own budget allows
/// the same depth for block nesting.
pub(crate) fn parse_yaml(body: &[u8]) -> Result<Value> {
    let options = serde_saphyr::options! {
        budget: serde_saphyr::budget! { max_depth: 128, max_nodes: crate::shape::MAX_BODY_VALUES },
    };
    serde_saphyr::from_slice_with_options(body, options)
        .map_err(|e| ApiError::BadRequest(format!("error decoding YAML: {e}")))
}

/// Builds a [`Value`] while recording the path of every key seen twice in one object.
struct TrackedValue<'a> {
    path: String,
    dups: &'a mut Vec<String>,
}

impl<'de> DeserializeSeed<'de> for TrackedValue<'_> {
    type Value = Value;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> std::result::Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for TrackedValue<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> std::result::Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> std::result::Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_u64<E>(self, v: u64) -> std::result::Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_f64<E>(self, v: f64) -> std::result::Result<Value, E> {
        Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
    }
    fn visit_str<E>(self, v: &str) -> std::result::Result<Value, E> {
        Ok(Value::String(v.to_string()))
    }
    fn visit_string<E>(self, v: String) -> std::result::Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_unit<E>(self) -> std::result::Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E>(self) -> std::result::Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> std::result::Result<Value, A::Error> {
        let mut out = Vec::new();
        loop {
            let path = format!("{}[{}]", self.path, out.len());
            match seq.next_element_seed(TrackedValue { path, dups: &mut *self.dups })? {
                Some(v) => out.push(v),
                None => return Ok(Value::Array(out)),
            }
        }
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> std::result::Result<Value, A::Error> {
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let path = if self.path.is_empty() { key.clone() } else { format!("{}.{key}", self.path) };
            let v = map.next_value_seed(TrackedValue { path: path.clone(), dups: &mut *self.dups })?;
            if out.insert(key, v).is_some() && !self.dups.contains(&path) {
                self.dups.push(path);
            }
        }
        Ok(Value::Object(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources;
    use serde_json::json;

    fn pv_endpoint() -> Served {
        resources::lookup(&pv_store::Store::new(), "", "v1", "persistentvolumes").unwrap()
    }

    fn pv(extra: Value) -> Value {
        let mut v = json!({"metadata": {"name": "a"}, "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "hostPath": {"path": "/x"}}});
        json_patch::merge(&mut v, &extra);
        v
    }

    fn body(v: &Value) -> Vec<u8> {
        serde_json::to_vec(v).unwrap()
    }

    #[test]
    fn unknown_fields_follow_field_validation() {
        let v = pv(json!({"spec": {"bogusField": 42}}));
        let err = decode(&pv_endpoint(), None, "application/json", &body(&v), FieldValidation::Strict).unwrap_err();
        assert_eq!(err.code(), 400);
        assert_eq!(
            err.to_string(),
            "PersistentVolume in version \"v1\" cannot be handled as a PersistentVolume: strict decoding error: unknown field \"spec.bogusField\""
        );
        let warned = decode(&pv_endpoint(), None, "application/json", &body(&v), FieldValidation::Warn).unwrap();
        assert_eq!(warned.warnings, vec!["unknown field \"spec.bogusField\"".to_string()]);
        assert!(warned.object["spec"].get("bogusField").is_none());
        let ignored = decode(&pv_endpoint(), None, "application/json", &body(&v), FieldValidation::Ignore).unwrap();
        assert!(ignored.warnings.is_empty() && ignored.object["spec"].get("bogusField").is_none());
    }

    #[test]
    fn wrong_types_are_bad_requests_naming_the_field() {
        let v = pv(json!({"spec": {"storageClassName": 123}}));
        let err = decode(&pv_endpoint(), None, "application/json", &body(&v), FieldValidation::Ignore).unwrap_err();
        assert_eq!(err.code(), 400);
        assert!(
            err.to_string()
                .ends_with("json: cannot unmarshal number into Go struct field PersistentVolumeSpec.spec.storageClassName of type string"),
            "{err}"
        );
        let v = pv(json!({"spec": {"mountOptions": "ro"}}));
        let err = decode(&pv_endpoint(), None, "application/json", &body(&v), FieldValidation::Ignore).unwrap_err();
        assert!(
            err.to_string()
                .contains("cannot unmarshal string into Go struct field PersistentVolumeSpec.spec.mountOptions"),
            "{err}"
        );
        let v = pv(json!({"metadata": {"name": 7}}));
        let err = decode(&pv_endpoint(), None, "application/json", &body(&v), FieldValidation::Ignore).unwrap_err();
        assert!(err.to_string().contains("Go struct field ObjectMeta.metadata.name of type string"), "{err}");
        let v = pv(json!({"spec": {"claimRef": {"name": 7}}}));
        let err = decode(&pv_endpoint(), None, "application/json", &body(&v), FieldValidation::Ignore).unwrap_err();
        assert!(err.to_string().contains("Go struct field ObjectReference.spec.claimRef.name of type string"), "{err}");
    }

    #[test]
    fn a_malformed_quantity_is_refused_while_decoding_as_upstream() {
        let v = pv(json!({"spec": {"capacity": {"storage": "lots"}}}));
        let err = decode(&pv_endpoint(), None, "application/json", &body(&v), FieldValidation::Ignore).unwrap_err();
        assert_eq!(err.code(), 400);
        assert!(
            err.to_string().ends_with(
                "cannot be handled as a PersistentVolume: quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
            ),
            "{err}"
        );
        let v = pv(json!({"spec": {"capacity": {"storage": "10Gi"}}}));
        assert!(decode(&pv_endpoint(), None, "application/json", &body(&v), FieldValidation::Ignore).is_ok());
    }

    #[test]
    fn duplicate_keys_are_strict_errors_or_warnings() {
        let raw = br#"{"metadata": {"name": "a", "name": "b"}, "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "hostPath": {"path": "/x"}}}"#;
        let err = decode(&pv_endpoint(), None, "application/json", raw, FieldValidation::Strict).unwrap_err();
        assert!(err.to_string().ends_with("strict decoding error: duplicate field \"metadata.name\""), "{err}");
        let warned = decode(&pv_endpoint(), None, "application/json", raw, FieldValidation::Warn).unwrap();
        assert_eq!(warned.object["metadata"]["name"], "b", "the last one wins, as in Go");
        assert_eq!(warned.warnings, vec!["duplicate field \"metadata.name\"".to_string()]);
    }

    #[test]
    fn other_media_types_are_unsupported() {
        let v = body(&pv(json!({})));
        for ct in ["text/plain", "application/x-www-form-urlencoded", "application/xml"] {
            let err = decode(&pv_endpoint(), None, ct, &v, FieldValidation::Warn).unwrap_err();
            assert_eq!(err.code(), 415, "{ct}");
        }
        assert!(decode(&pv_endpoint(), None, "", &v, FieldValidation::Warn).is_ok(), "no content type reads as JSON");
        assert!(decode(&pv_endpoint(), None, "application/json; charset=utf-8", &v, FieldValidation::Warn).is_ok());
    }

    #[test]
    fn missing_required_fields_decode_as_zero_values_for_validation_to_report() {
        let pod = resources::lookup(&pv_store::Store::new(), "", "v1", "pods").unwrap();
        let v = json!({"metadata": {"name": "p", "namespace": "d"}, "spec": {"volumes": [{"name": "v", "persistentVolumeClaim": {}}]}});
        let d = decode(&pod, None, "application/json", &body(&v), FieldValidation::Strict).unwrap();
        assert_eq!(d.object["spec"]["containers"], json!([]));
        assert_eq!(d.object["spec"]["volumes"][0]["persistentVolumeClaim"]["claimName"], "");
    }
}
