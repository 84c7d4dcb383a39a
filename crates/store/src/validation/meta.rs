//! `metadata` rules every kind shares, on create and on update: the name as the kind wants it,
//! the namespace, labels and annotations (keys are qualified names, label values short and
//! plain), finalizer names, owner references, a non-negative generation; on update also the
//! fields that never change (name, namespace, uid, creationTimestamp) and no new finalizers on
//! an object being deleted. Paths and messages are kube-apiserver's.

use super::names;
use crate::error::{go_quote, FieldError};
use crate::kinds::ResourceType;
use serde_json::{Map, Value};

/// Total size of all annotations (keys and values), as upstream bounds it.
const ANNOTATIONS_LIMIT: usize = 262_144;

fn str_map(meta: Option<&Map<String, Value>>, field: &str) -> Vec<(String, String)> {
    meta.and_then(|m| m.get(field))
        .and_then(Value::as_object)
        .map(|m| m.iter().map(|(k, v)| (k.clone(), v.as_str().unwrap_or("").to_string())).collect())
        .unwrap_or_default()
}

/// How a kind's names are checked, as upstream's `ValidateNameFunc` of that kind (the kind's
/// strategy names it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NameRule {
    /// A DNS subdomain (most kinds).
    Subdomain,
    /// A DNS label (Namespaces).
    Label,
    /// Only a path segment: not `.` or `..`, no `/` or `%` (Events, RBAC's kinds).
    PathSegment,
}

impl NameRule {
    /// What is wrong with `name` under this rule.
    pub fn errors(self, name: &str) -> Vec<String> {
        match self {
            NameRule::Subdomain => names::dns1123_subdomain(name),
            NameRule::Label => names::dns1123_label(name),
            NameRule::PathSegment => path_segment_errors(name),
        }
    }
}

fn path_segment_errors(name: &str) -> Vec<String> {
    if name == "." || name == ".." {
        return vec![format!("may not be '{name}'")];
    }
    let mut errs = Vec::new();
    for bad in ["/", "%"] {
        if name.contains(bad) {
            errs.push(format!("may not contain '{bad}'"));
        }
    }
    errs
}

/// Labels: every key a qualified name, every value a label value (errors at `path`).
pub fn validate_labels(labels: &[(String, String)], path: &str, errs: &mut Vec<FieldError>) {
    for (k, v) in labels {
        for m in names::qualified_name(k) {
            errs.push(FieldError::invalid(path, k.as_str(), m));
        }
        for m in names::label_value(v) {
            errs.push(FieldError::invalid(path, v.as_str(), m));
        }
    }
}

fn validate_common(meta: Option<&Map<String, Value>>, errs: &mut Vec<FieldError>) {
    if let Some(g) = meta.and_then(|m| m.get("generation")).and_then(Value::as_i64) {
        if g < 0 {
            errs.push(FieldError::invalid_value(
                "metadata.generation",
                g.to_string(),
                "must be greater than or equal to 0",
            ));
        }
    }
    validate_labels(&str_map(meta, "labels"), "metadata.labels", errs);
    let annotations = str_map(meta, "annotations");
    for (k, _) in &annotations {
        for m in names::qualified_name(&k.to_lowercase()) {
            errs.push(FieldError::invalid("metadata.annotations", k.as_str(), m));
        }
    }
    if annotations.iter().map(|(k, v)| k.len() + v.len()).sum::<usize>() > ANNOTATIONS_LIMIT {
        errs.push(FieldError {
            path: "metadata.annotations".into(),
            kind: crate::error::FieldErrorKind::TooLong(ANNOTATIONS_LIMIT),
            detail: String::new(),
        });
    }
    validate_owner_references(meta.and_then(|m| m.get("ownerReferences")), errs);
}

fn validate_owner_references(refs: Option<&Value>, errs: &mut Vec<FieldError>) {
    let Some(list) = refs.and_then(Value::as_array) else { return };
    let mut first_controller: Option<String> = None;
    for (i, r) in list.iter().enumerate() {
        let p = format!("metadata.ownerReferences[{i}]");
        let s = |f: &str| r.get(f).and_then(Value::as_str).unwrap_or("").to_string();
        let api_version = s("apiVersion");
        if api_version.is_empty() {
            errs.push(FieldError::required(format!("{p}.apiVersion"), "must not be empty"));
        } else {
            let version = match api_version.split('/').collect::<Vec<_>>().as_slice() {
                [v] => Some(*v),
                [_, v] => Some(*v),
                _ => None,
            };
            if version.is_none_or(str::is_empty) {
                errs.push(FieldError::invalid(
                    format!("{p}.apiVersion"),
                    api_version.as_str(),
                    "must be <group>/<version> or <version>",
                ));
            }
        }
        for f in ["kind", "name", "uid"] {
            if s(f).is_empty() {
                errs.push(FieldError::required(format!("{p}.{f}"), "must not be empty"));
            }
        }
        if api_version == "v1" && s("kind") == "Event" {
            errs.push(FieldError::invalid_value(
                p.clone(),
                serde_json::to_string(r).unwrap_or_default(),
                "/v1, Kind=Event is disallowed from being an owner",
            ));
        }
        if r.get("controller").and_then(Value::as_bool) == Some(true) {
            let this = format!("{}/{}", s("kind"), s("name"));
            match &first_controller {
                Some(first) => errs.push(FieldError::invalid_value(
                    "metadata.ownerReferences",
                    serde_json::to_string(list).unwrap_or_default(),
                    format!("Only one reference can have Controller set to true. Found \"true\" in references for {first} and {this}"),
                )),
                None => first_controller = Some(this),
            }
        }
    }
}

fn validate_finalizers(meta: Option<&Map<String, Value>>, errs: &mut Vec<FieldError>) {
    let list: Vec<&str> = meta
        .and_then(|m| m.get("finalizers"))
        .and_then(Value::as_array)
        .map(|a| a.iter().map(|f| f.as_str().unwrap_or("")).collect())
        .unwrap_or_default();
    for f in &list {
        for m in names::qualified_name(f) {
            errs.push(FieldError::invalid("metadata.finalizers", *f, m));
        }
    }
    if list.contains(&"orphan") && list.contains(&"foregroundDeletion") {
        errs.push(FieldError::invalid_value(
            "metadata.finalizers",
            serde_json::to_string(&list).unwrap_or_default(),
            "finalizer orphan and foregroundDeletion cannot be both set",
        ));
    }
}

/// Kinds of the Kubernetes API proper also refuse a finalizer without a `/` unless it is one of
/// the standard ones (`kubernetes`, `orphan`, `foregroundDeletion`); Leases,
/// CustomResourceDefinitions and custom resources are checked by the generic rules only.
fn validate_kube_finalizers(rt: &ResourceType, meta: Option<&Map<String, Value>>, errs: &mut Vec<FieldError>) {
    if rt.kind == "Lease" || rt.group == "apiextensions.k8s.io" || rt.is_custom() {
        return;
    }
    let list = meta.and_then(|m| m.get("finalizers")).and_then(Value::as_array).cloned().unwrap_or_default();
    for (i, f) in list.iter().enumerate() {
        let f = f.as_str().unwrap_or("");
        if !f.contains('/') && !["kubernetes", "orphan", "foregroundDeletion"].contains(&f) {
            errs.push(FieldError::invalid(
                format!("metadata.finalizers[{i}]"),
                f,
                "name is neither a standard finalizer name nor is it fully qualified",
            ));
        }
    }
}

/// `metadata` of an object being created.
pub fn validate_meta(rt: &ResourceType, names: NameRule, obj: &Value, errs: &mut Vec<FieldError>) {
    let meta = obj.get("metadata").and_then(Value::as_object);
    let get = |f: &str| meta.and_then(|m| m.get(f)).and_then(Value::as_str).unwrap_or("");
    let name = get("name");
    // The prefix is checked as a name whose trailing dash is masked (upstream's
    // maskTrailingDash), before the generated name itself.
    let generate_name = get("generateName");
    if !generate_name.is_empty() {
        let masked = match generate_name.strip_suffix('-') {
            Some(rest) if !rest.is_empty() => format!("{rest}a"),
            _ => generate_name.to_string(),
        };
        for m in names.errors(&masked) {
            errs.push(FieldError::invalid("metadata.generateName", generate_name, m));
        }
    }
    if name.is_empty() {
        errs.push(FieldError::required("metadata.name", "name or generateName is required"));
    } else {
        for m in names.errors(name) {
            errs.push(FieldError::invalid("metadata.name", name, m));
        }
    }
    let ns = get("namespace");
    if rt.namespaced {
        if ns.is_empty() {
            errs.push(FieldError::required("metadata.namespace", ""));
        } else {
            for m in NameRule::Label.errors(ns) {
                errs.push(FieldError::invalid("metadata.namespace", ns, m));
            }
        }
    }
    validate_common(meta, errs);
    validate_finalizers(meta, errs);
    validate_kube_finalizers(rt, meta, errs);
}

/// `metadata` of an update: the create rules (but finalizer names, which upstream checks
/// only on create) and the fields an update may not change.
pub fn validate_meta_update(rt: &ResourceType, old: &Value, new: &Value, errs: &mut Vec<FieldError>) {
    let om = old.get("metadata").and_then(Value::as_object);
    let nm = new.get("metadata").and_then(Value::as_object);
    let get = |m: Option<&Map<String, Value>>, f: &str| m.and_then(|m| m.get(f)).cloned().unwrap_or(Value::Null);
    let strings = |m: Option<&Map<String, Value>>, f: &str| -> Vec<String> {
        m.and_then(|m| m.get(f))
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).map(str::to_string).collect())
            .unwrap_or_default()
    };
    if !get(om, "deletionTimestamp").is_null() {
        let old_f = strings(om, "finalizers");
        let mut extra: Vec<String> = strings(nm, "finalizers").into_iter().filter(|f| !old_f.contains(f)).collect();
        extra.sort();
        extra.dedup();
        if !extra.is_empty() {
            let quoted: Vec<String> = extra.iter().map(|f| go_quote(f)).collect();
            errs.push(FieldError::forbidden(
                "metadata.finalizers",
                format!(
                    "no new finalizers can be added if the object is being deleted, found new finalizers []string{{{}}}",
                    quoted.join(", ")
                ),
            ));
        }
    }
    let (og, ng) = (get(om, "generation").as_i64().unwrap_or(0), get(nm, "generation").as_i64().unwrap_or(0));
    if ng < og {
        errs.push(FieldError::invalid_value("metadata.generation", ng.to_string(), "must not be decremented"));
    }
    for f in ["name", "namespace"] {
        let (o, n) = (get(om, f), get(nm, f));
        if o.as_str().unwrap_or("") != n.as_str().unwrap_or("") {
            errs.push(FieldError::invalid(format!("metadata.{f}"), n.as_str().unwrap_or(""), "field is immutable"));
        }
    }
    validate_common(nm, errs);
    validate_kube_finalizers(rt, nm, errs);
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn errs_of(obj: Value) -> Vec<String> {
        let mut errs = Vec::new();
        validate_meta(ResourceType::by_kind("PersistentVolume").unwrap(), NameRule::Subdomain, &obj, &mut errs);
        errs.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn label_and_annotation_keys_and_values_are_checked() {
        let e = errs_of(
            json!({"metadata": {"name": "a", "labels": {"bad key": "ok", "k": "bad value"}, "annotations": {"a/b/c": "x"}}}),
        );
        assert_eq!(e.len(), 3, "{e:?}");
        assert!(e[0].starts_with("metadata.labels: Invalid value: \"bad key\": name part must consist"), "{e:?}");
        assert!(e[1].starts_with("metadata.labels: Invalid value: \"bad value\": a valid label must be"), "{e:?}");
        assert!(e[2].starts_with("metadata.annotations: Invalid value: \"a/b/c\": a valid label key"), "{e:?}");
    }

    #[test]
    fn finalizers_and_owner_references_are_checked() {
        let e = errs_of(json!({"metadata": {"name": "a", "finalizers": ["bad finalizer"],
            "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "p"}]}}));
        assert_eq!(
            e,
            [
                "metadata.ownerReferences[0].uid: Required value: must not be empty",
                "metadata.finalizers: Invalid value: \"bad finalizer\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
                "metadata.finalizers[0]: Invalid value: \"bad finalizer\": name is neither a standard finalizer name nor is it fully qualified"
            ]
        );
    }

    #[test]
    fn an_update_may_not_add_finalizers_while_deleting() {
        let old =
            json!({"metadata": {"name": "a", "deletionTimestamp": "2020-01-01T00:00:00Z", "finalizers": ["a/x"]}});
        let new = json!({"metadata": {"name": "a", "deletionTimestamp": "2020-01-01T00:00:00Z", "finalizers": ["a/x", "b/y"]}});
        let mut errs = Vec::new();
        validate_meta_update(ResourceType::by_kind("PersistentVolume").unwrap(), &old, &new, &mut errs);
        assert_eq!(
            errs[0].to_string(),
            "metadata.finalizers: Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{\"b/y\"}"
        );
    }
}
