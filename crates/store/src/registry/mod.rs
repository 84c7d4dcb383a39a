//! One strategy per kind, as kube-apiserver keeps them (`pkg/registry/<group>/<kind>/strategy.go`):
//! the store's create, update and delete are written once over [`Strategy`], and only a kind's
//! own file decides what that kind adds to a write — its defaults, its validation, what an update
//! may change, what its status write keeps, what marking it deleted means.
//!
//! Adding a kind is adding a file here: its [`ResourceType`] and its `impl Strategy`, listed in
//! [`STRATEGIES`] (and its resource in [`crate::kinds::RESOURCE_TYPES`]).

pub(crate) mod config_map;
pub(crate) mod csi_driver;
pub(crate) mod csi_node;
pub(crate) mod csi_storage_capacity;
pub(crate) mod custom_resource_definition;
pub(crate) mod event;
pub(crate) mod lease;
pub(crate) mod namespace;
pub(crate) mod node;
pub(crate) mod persistent_volume;
pub(crate) mod persistent_volume_claim;
pub(crate) mod pod;
pub(crate) mod secret;
pub(crate) mod service;
pub(crate) mod service_account;
pub(crate) mod storage_class;
pub(crate) mod volume_attachment;
pub(crate) mod volume_attributes_class;

use crate::error::FieldError;
use crate::kinds::ResourceType;
use crate::meta::{meta, meta_mut};
use crate::validation::meta::{validate_meta, validate_meta_update};
use serde_json::Value;

/// What a kind adds to the store's generic create, update and delete. Every hook has the
/// behaviour most kinds share as its default, so a kind's file states only what differs.
pub(crate) trait Strategy: Sync {
    /// The resource served.
    fn resource(&self) -> &'static ResourceType;

    /// Whether injected faults hit writes of the kind.
    fn faulted(&self) -> bool {
        true
    }

    /// Whether a write of the main resource or its status may leave out
    /// `metadata.resourceVersion` and apply to the latest object (upstream's
    /// `AllowUnconditionalUpdate`); a kind that says no answers such a write with 422.
    fn allow_unconditional_update(&self) -> bool {
        true
    }

    /// A new object before anything else (a Namespace's `kubernetes` finalizer).
    fn prepare_for_create(&self, _obj: &mut Value) {}

    /// The status a new object starts with: none for a kind with a status subresource (its
    /// status is written through that subresource only).
    fn reset_status_for_create(&self, obj: &mut Value) {
        if self.resource().status_subresource {
            if let Some(o) = obj.as_object_mut() {
                o.remove("status");
            }
        }
    }

    /// A write of the main resource before defaulting, given the stored object.
    fn prepare_for_update(&self, _old: &Value, _obj: &mut Value) {}

    /// The API's defaults (`SetDefaults_<Kind>`), applied to every write.
    fn default(&self, _obj: &mut Value) {}

    /// The spec's normalisation before validation, given the stored object on an update (a
    /// claim's data sources).
    fn normalize(&self, _old: Option<&Value>, _obj: &mut Value) {}

    /// Validation of a new object: its metadata, then the kind's rules.
    fn validate(&self, obj: &Value, errs: &mut Vec<FieldError>) {
        validate_meta(self.resource(), obj, errs);
        self.validate_spec(obj, errs);
    }

    /// The kind's own rules for an object, on create and on update.
    fn validate_spec(&self, _obj: &Value, _errs: &mut Vec<FieldError>) {}

    /// Validation of a write of the main resource: the create rules, then what the kind
    /// forbids to change.
    fn validate_update(&self, old: &Value, new: &Value, errs: &mut Vec<FieldError>) {
        validate_meta_update(self.resource(), old, new, errs);
        self.validate_spec(new, errs);
        self.validate_spec_update(old, new, errs);
    }

    /// What the kind forbids an update to change.
    fn validate_spec_update(&self, _old: &Value, _new: &Value, _errs: &mut Vec<FieldError>) {}

    /// Validation of a status write (the spec is the stored one).
    fn validate_status_update(&self, old: &Value, new: &Value, errs: &mut Vec<FieldError>) {
        validate_meta_update(self.resource(), old, new, errs);
    }

    /// Whether `metadata.generation` counts changes of the spec.
    fn tracks_generation(&self) -> bool {
        false
    }

    /// Whether an update changes what the generation counts (the `spec`).
    fn spec_changed(&self, old: &Value, new: &Value) -> bool {
        old.get("spec") != new.get("spec")
    }

    /// Metadata a status write keeps from the stored object besides what the server owns.
    fn kept_by_status_update(&self) -> &'static [&'static str] {
        &[]
    }

    /// A new object once stored, at `now`.
    fn created(&self, _obj: &mut Value, _now: &str) {}

    /// An update that changes something, before it is stored, at `now` (after the generation).
    fn updated(&self, _old: &Value, _new: &mut Value, _status: bool, _now: &str) {}

    /// Finalizers a delete adds to an object not yet being deleted (a CustomResourceDefinition's
    /// cleanup of its objects, upstream's `customresourcecleanup.apiextensions.k8s.io`).
    fn finalizers_on_delete(&self) -> &'static [&'static str] {
        &[]
    }

    /// An object that finalizers hold, marked deleted: a grace period of 0 (kinds without
    /// graceful deletion).
    fn mark_deleted(&self, obj: &mut Value) {
        meta_mut(obj).insert("deletionGracePeriodSeconds".into(), Value::from(0));
    }
}

/// Every kind's strategy.
pub(crate) const STRATEGIES: &[&dyn Strategy] = &[
    &persistent_volume::Strategy,
    &persistent_volume_claim::Strategy,
    &pod::Strategy,
    &node::Strategy,
    &namespace::Strategy,
    &service::Strategy,
    &event::Strategy,
    &storage_class::Strategy,
    &csi_driver::Strategy,
    &csi_node::Strategy,
    &volume_attachment::Strategy,
    &csi_storage_capacity::Strategy,
    &volume_attributes_class::Strategy,
    &lease::Strategy,
    &secret::Strategy,
    &config_map::Strategy,
    &service_account::Strategy,
    &custom_resource_definition::Strategy,
];

/// The strategy of a served resource.
pub(crate) fn of(rt: &ResourceType) -> &'static dyn Strategy {
    if rt.is_custom() {
        return crate::custom::strategy(rt);
    }
    *STRATEGIES
        .iter()
        .find(|s| s.resource().plural == rt.plural && s.resource().group == rt.group)
        .unwrap_or_else(|| panic!("no strategy for {}", rt.qualified()))
}

/// An update before it is stored: the generation counts a spec change of a kind that tracks
/// it, then the kind's own step.
pub(crate) fn updated(rt: &ResourceType, old: &Value, new: &mut Value, status: bool, now: &str) {
    let s = of(rt);
    if !status && s.tracks_generation() && s.spec_changed(old, new) {
        let g = meta(old).and_then(|m| m.get("generation")).and_then(Value::as_i64).unwrap_or(1);
        meta_mut(new).insert("generation".into(), Value::from(g + 1));
    }
    s.updated(old, new, status, now);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kinds::RESOURCE_TYPES;

    #[test]
    fn every_served_resource_has_exactly_one_strategy() {
        for rt in RESOURCE_TYPES {
            let n = STRATEGIES.iter().filter(|s| s.resource() == rt).count();
            assert_eq!(n, 1, "{}", rt.qualified());
        }
        assert_eq!(STRATEGIES.len(), RESOURCE_TYPES.len());
    }
}
