//! StorageClass rules (upstream's `pkg/apis/storage/validation`): a provisioner that is a
//! qualified name, parameter keys that are not empty, a known reclaim policy (an empty one is
//! allowed and kept) and binding mode, valid allowed topologies; on update the provisioner,
//! parameters, reclaim policy and binding mode never change.

use super::selectors::validate_allowed_topologies;
use crate::error::FieldError;
use serde_json::Value;

const RECLAIM_POLICIES: &[&str] = &["Delete", "Retain"];
const BINDING_MODES: &[&str] = &["Immediate", "WaitForFirstConsumer"];
const MAX_PARAMETERS: usize = 512;
const MAX_PARAMETERS_SIZE: usize = 256 * 1024;

/// A class.
pub fn validate_storage_class(obj: &Value, errs: &mut Vec<FieldError>) {
    super::storage::validate_provisioner(
        obj.get("provisioner").and_then(Value::as_str).unwrap_or(""),
        "provisioner",
        errs,
    );
    if let Some(p) = obj.get("parameters").filter(|p| !p.is_null()) {
        match p.as_object() {
            Some(m) if m.len() > MAX_PARAMETERS => errs.push(FieldError {
                path: "parameters".into(),
                kind: crate::error::FieldErrorKind::TooLong(MAX_PARAMETERS),
                detail: String::new(),
            }),
            Some(m) => {
                let mut size = 0;
                for (k, v) in m {
                    if k.is_empty() {
                        errs.push(FieldError::invalid("parameters", "", "field can not be empty."));
                    }
                    size += k.len() + v.as_str().map_or(0, str::len);
                }
                if size > MAX_PARAMETERS_SIZE {
                    errs.push(FieldError {
                        path: "parameters".into(),
                        kind: crate::error::FieldErrorKind::TooLong(MAX_PARAMETERS_SIZE),
                        detail: String::new(),
                    });
                }
            }
            None => errs.push(FieldError::invalid("parameters", p.to_string(), "must be a map of strings")),
        }
    }
    if let Some(p) = obj.get("reclaimPolicy").and_then(Value::as_str) {
        if !p.is_empty() && !RECLAIM_POLICIES.contains(&p) {
            errs.push(FieldError::not_supported("reclaimPolicy", p, RECLAIM_POLICIES));
        }
    }
    match obj.get("volumeBindingMode").and_then(Value::as_str) {
        None => errs.push(FieldError::required("volumeBindingMode", "")),
        Some(m) if !BINDING_MODES.contains(&m) => {
            errs.push(FieldError::not_supported("volumeBindingMode", m, BINDING_MODES))
        }
        Some(_) => {}
    }
    if let Some(list) = obj.get("allowedTopologies").and_then(Value::as_array) {
        validate_allowed_topologies(list, "allowedTopologies", errs);
    }
}

/// What a class update may not change, in the order of the API type's fields; kube-apiserver 1.37
/// checks these declaratively (`+k8s:immutable`) and prints no value: `Invalid value: null: field
/// is immutable`.
pub fn validate_storage_class_update(old: &Value, new: &Value, errs: &mut Vec<FieldError>) {
    let norm =
        |v: Option<&Value>| v.filter(|x| !x.is_null() && !matches!(x, Value::Object(o) if o.is_empty())).cloned();
    for f in ["provisioner", "parameters", "reclaimPolicy", "volumeBindingMode"] {
        if norm(old.get(f)) != norm(new.get(f)) {
            errs.push(FieldError::invalid_value(f, "null".to_string(), "field is immutable"));
        }
    }
}
