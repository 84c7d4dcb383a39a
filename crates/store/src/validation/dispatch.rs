//! The store's validation and defaulting of any served kind, through the kind's strategy
//! (`registry/`): above the kinds' files, which use the rest of `validation/`.

use crate::error::FieldError;
use crate::kinds::ResourceType;
use crate::registry;
use serde_json::Value;

/// Validates an object being created: its metadata, then the kind's rules.
pub fn validate(rt: &ResourceType, obj: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if !obj.is_object() {
        errs.push(FieldError::invalid("", obj.to_string(), "must be an object"));
        return errs;
    }
    registry::of(rt).validate(obj, &mut errs);
    errs
}

/// Validates a write of the main resource against the stored object: the create rules, then
/// what the kind forbids to change.
pub fn validate_update(rt: &ResourceType, old: &Value, new: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    registry::of(rt).validate_update(old, new, &mut errs);
    errs
}

/// Validates a status write (the spec is the stored one).
pub fn validate_status_update(rt: &ResourceType, old: &Value, new: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    registry::of(rt).validate_status_update(old, new, &mut errs);
    errs
}

/// The kind's normalisation of a new object's spec (the claim strategy normalises its data
/// sources), before validation.
pub fn prepare_create(rt: &ResourceType, obj: &mut Value) {
    registry::of(rt).normalize(None, obj);
}

/// The kind's normalisation of an updated object's spec, given the stored one.
pub fn prepare_update(rt: &ResourceType, old: &Value, obj: &mut Value) {
    registry::of(rt).normalize(Some(old), obj);
}

/// Applies kube-apiserver's defaults (reclaim policy Retain, volume mode Filesystem, phase
/// Pending, class defaults, ...).
pub fn default(rt: &ResourceType, obj: &mut Value) {
    if obj.is_object() {
        registry::of(rt).default(obj);
    }
}
