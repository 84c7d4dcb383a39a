//! CustomResourceDefinitions (`apiextensions-apiserver/pkg/apis/apiextensions/validation`,
//! `v1/defaults.go`): the names, the group, the scope, the versions (exactly one stored, each
//! with a structural schema) and the printer columns; the defaults of the names and of the
//! conversion; the status conditions the server sets.
//!
//! The schemas are checked as far as serving needs (the root is an object, every node typed
//! or preserving unknown fields); CEL rules are not compiled here.

use super::names;
use crate::error::FieldError;
use serde_json::{json, Map, Value};

fn s<'a>(v: &'a Value, pointer: &str) -> &'a str {
    v.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

fn versions(obj: &Value) -> &[Value] {
    obj.pointer("/spec/versions").and_then(Value::as_array).map_or(&[], Vec::as_slice)
}

/// The name of the version marked `storage: true`.
pub fn storage_version(obj: &Value) -> Option<String> {
    versions(obj).iter().find(|v| v.get("storage").and_then(Value::as_bool) == Some(true)).map(|v| s(v, "/name").into())
}

/// `SetDefaults_CustomResourceDefinitionSpec`: the singular and list names, no conversion.
pub fn default_crd(obj: &mut Value) {
    let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) else { return };
    if let Some(names) = spec.get_mut("names").and_then(Value::as_object_mut) {
        let kind = names.get("kind").and_then(Value::as_str).unwrap_or("").to_string();
        if names.get("singular").and_then(Value::as_str).is_none_or(str::is_empty) {
            names.insert("singular".into(), json!(kind.to_lowercase()));
        }
        if names.get("listKind").and_then(Value::as_str).is_none_or(str::is_empty) && !kind.is_empty() {
            names.insert("listKind".into(), json!(format!("{kind}List")));
        }
    }
    if spec.get("conversion").is_none_or(Value::is_null) {
        spec.insert("conversion".into(), json!({"strategy": "None"}));
    }
}

/// `SetCRDCondition`: the condition of `type` set, its transition time moved only when its
/// status changes. `now` defaults to the object's deletion timestamp.
pub fn set_condition(obj: &mut Value, ty: &str, status: &str, reason: &str, message: &str, now: Option<&str>) {
    let now = now.map(str::to_string).unwrap_or_else(|| s(obj, "/metadata/deletionTimestamp").to_string());
    let Some(o) = obj.as_object_mut() else { return };
    let st = o.entry("status").or_insert_with(|| Value::Object(Map::new()));
    let Some(st) = st.as_object_mut() else { return };
    let conds = st.entry("conditions").or_insert_with(|| Value::Array(Vec::new()));
    if !conds.is_array() {
        *conds = Value::Array(Vec::new());
    }
    let Some(conds) = conds.as_array_mut() else { return };
    match conds.iter_mut().find(|c| c.get("type").and_then(Value::as_str) == Some(ty)) {
        Some(c) => {
            if c.get("status").and_then(Value::as_str) != Some(status) {
                c["lastTransitionTime"] = json!(now);
            }
            c["status"] = json!(status);
            c["reason"] = json!(reason);
            c["message"] = json!(message);
        }
        None => conds.push(
            json!({"type": ty, "status": status, "lastTransitionTime": now, "reason": reason, "message": message}),
        ),
    }
}

const PRINTER_TYPES: &[&str] = &["boolean", "date", "integer", "number", "string"];
const PRINTER_FORMATS: &[&str] =
    &["byte", "date", "date-time", "double", "float", "int32", "int64", "name", "password"];

/// `ValidateCustomResourceDefinition` past the metadata (as far as this server serves).
pub fn validate_crd(obj: &Value, errs: &mut Vec<FieldError>) {
    let (group, plural) = (s(obj, "/spec/group"), s(obj, "/spec/names/plural"));
    let name = s(obj, "/metadata/name");
    if !name.is_empty() && name != format!("{plural}.{group}") {
        errs.push(FieldError::invalid("metadata.name", name, "must be spec.names.plural+\".\"+spec.group"));
    }
    if group.is_empty() {
        errs.push(FieldError::required("spec.group", ""));
    } else if let Some(e) = Some(names::dns1123_subdomain(group)).filter(|e| !e.is_empty()) {
        errs.push(FieldError::invalid("spec.group", group, e.join(",")));
    } else if !group.contains('.') {
        errs.push(FieldError::invalid("spec.group", group, "should be a domain with at least one dot"));
    }
    match s(obj, "/spec/scope") {
        "" => errs.push(FieldError::required("spec.scope", "")),
        "Cluster" | "Namespaced" => {}
        other => errs.push(FieldError::not_supported("spec.scope", other, &["Cluster", "Namespaced"])),
    }
    let vs = versions(obj);
    if vs.is_empty() {
        errs.push(FieldError::required("spec.versions", "must have exactly one version marked as storage version"));
    }
    let mut seen: Vec<&str> = Vec::new();
    for (i, v) in vs.iter().enumerate() {
        let path = format!("spec.versions[{i}]");
        let vname = s(v, "/name");
        if vname.is_empty() {
            errs.push(FieldError::required(format!("{path}.name"), ""));
        } else if let Some(e) = Some(names::dns1123_label(vname)).filter(|e| !e.is_empty()) {
            errs.push(FieldError::invalid(format!("{path}.name"), vname, e.join(",")));
        }
        seen.push(vname);
        match v.pointer("/schema/openAPIV3Schema") {
            None => errs.push(FieldError::required(format!("{path}.schema.openAPIV3Schema"), "")),
            Some(schema) => {
                let root = format!("{path}.schema.openAPIV3Schema");
                if s(schema, "/type") != "object" && schema.get("x-kubernetes-preserve-unknown-fields").is_none() {
                    errs.push(FieldError::required(format!("{root}.type"), "must not be empty at the root"));
                }
                structural(schema, &root, errs);
            }
        }
        for (j, c) in v.get("additionalPrinterColumns").and_then(Value::as_array).into_iter().flatten().enumerate() {
            let cp = format!("{path}.additionalPrinterColumns[{j}]");
            if s(c, "/name").is_empty() {
                errs.push(FieldError::required(format!("{cp}.name"), ""));
            }
            let ty = s(c, "/type");
            let types = format!("must be one of {}", PRINTER_TYPES.join(","));
            if ty.is_empty() {
                errs.push(FieldError::required(format!("{cp}.type"), types));
            } else if !PRINTER_TYPES.contains(&ty) {
                errs.push(FieldError::invalid(format!("{cp}.type"), ty, types));
            }
            let format = s(c, "/format");
            if !format.is_empty() && !PRINTER_FORMATS.contains(&format) {
                errs.push(FieldError::invalid(
                    format!("{cp}.format"),
                    format,
                    format!("must be one of {}", PRINTER_FORMATS.join(",")),
                ));
            }
            if s(c, "/jsonPath").is_empty() {
                errs.push(FieldError::required(format!("{cp}.JSONPath"), ""));
            }
        }
    }
    let mut unique = seen.clone();
    unique.sort_unstable();
    unique.dedup();
    if unique.len() != seen.len() {
        errs.push(FieldError::invalid_value("spec.versions", "[...]", "must contain unique version names"));
    }
    let storage = vs.iter().filter(|v| v.get("storage").and_then(Value::as_bool) == Some(true)).count();
    if !vs.is_empty() && storage != 1 {
        errs.push(FieldError::invalid_value(
            "spec.versions",
            "[...]",
            "must have exactly one version marked as storage version",
        ));
    }
    for (f, label) in [("plural", true), ("singular", true), ("kind", false), ("listKind", false)] {
        let v = s(obj, &format!("/spec/names/{f}"));
        if v.is_empty() {
            errs.push(FieldError::required(format!("spec.names.{f}"), ""));
            continue;
        }
        let e = names::dns1123_label(&if label { v.to_string() } else { v.to_lowercase() });
        if !e.is_empty() {
            let why = if label {
                e.join(",")
            } else {
                format!("may have mixed case, but should otherwise match: {}", e.join(","))
            };
            errs.push(FieldError::invalid(format!("spec.names.{f}"), v, why));
        }
    }
    if !s(obj, "/spec/names/kind").is_empty() && s(obj, "/spec/names/kind") == s(obj, "/spec/names/listKind") {
        errs.push(FieldError::invalid(
            "spec.names.listKind",
            s(obj, "/spec/names/listKind"),
            "kind and listKind may not be the same",
        ));
    }
}

/// A structural schema: every node says its type, or that it keeps unknown fields, or is
/// `x-kubernetes-int-or-string`.
fn structural(schema: &Value, path: &str, errs: &mut Vec<FieldError>) {
    for (k, sub) in schema.get("properties").and_then(Value::as_object).into_iter().flatten() {
        let p = format!("{path}.properties[{k}]");
        let typed = sub.get("type").is_some()
            || sub.get("x-kubernetes-int-or-string").and_then(Value::as_bool) == Some(true)
            || sub.get("x-kubernetes-preserve-unknown-fields").and_then(Value::as_bool) == Some(true);
        if !typed {
            errs.push(FieldError::required(format!("{p}.type"), "must not be empty for specified object fields"));
        }
        structural(sub, &p, errs);
    }
    if let Some(items) = schema.get("items") {
        structural(items, &format!("{path}.items"), errs);
    }
    if let Some(extra) = schema.get("additionalProperties").filter(|v| v.is_object()) {
        structural(extra, &format!("{path}.additionalProperties"), errs);
    }
}

/// What an update may not change: the scope and, once stored, the group and names' plural.
pub fn validate_crd_update(old: &Value, new: &Value, errs: &mut Vec<FieldError>) {
    for (ptr, path) in [("/spec/scope", "spec.scope"), ("/spec/group", "spec.group")] {
        if s(old, ptr) != s(new, ptr) {
            errs.push(FieldError::invalid(path, s(new, ptr), "field is immutable"));
        }
    }
}
