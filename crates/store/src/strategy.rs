//! What each kind adds to a write, as kube-apiserver's registry strategies
//! (pkg/registry/core/*/strategy.go) keep it: the store's create, update and delete call these at
//! the same points for every kind, and only here does a kind's name decide anything.

use crate::kinds::ResourceType;
use crate::meta::{meta, meta_mut};
use crate::validation;
use serde_json::Value;

/// Whether injected faults hit writes of the kind: not Events, which the controller records best
/// effort (a fault there would test nothing the controller decides).
pub(crate) fn faulted(rt: &ResourceType) -> bool {
    rt.kind != "Event"
}

/// The status a new object starts with: a Pod's initial status (Pending, its QoS class); none
/// for the other kinds with a status subresource, except a Node, whose status its kubelet
/// creates with it.
pub(crate) fn reset_status_for_create(rt: &ResourceType, obj: &mut Value) {
    if rt.kind == "Pod" {
        let status = validation::initial_pod_status(obj);
        obj.as_object_mut().expect("validated object").insert("status".into(), status);
    } else if rt.status_subresource && rt.kind != "Node" {
        obj.as_object_mut().expect("validated object").remove("status");
    }
}

/// A new object before defaulting and validation: a Namespace's `kubernetes` finalizer.
pub(crate) fn prepare_for_create(rt: &ResourceType, obj: &mut Value) {
    if rt.kind == "Namespace" {
        crate::namespaces::prepare_for_create(obj);
    }
}

/// Whether the kind counts `metadata.generation` (a Pod: on every spec change).
pub(crate) fn tracks_generation(rt: &ResourceType) -> bool {
    rt.kind == "Pod"
}

/// A new object once stored: a PersistentVolume's first phase transition, at `now`.
pub(crate) fn created(rt: &ResourceType, obj: &mut Value, now: &str) {
    if rt.kind == "PersistentVolume" {
        obj["status"]["lastPhaseTransitionTime"] = Value::String(now.to_string());
    }
}

/// Metadata a status write keeps from the stored object besides what the server owns: a Pod's
/// owner references.
pub(crate) fn kept_by_status_update(rt: &ResourceType) -> &'static [&'static str] {
    if rt.kind == "Pod" {
        &["ownerReferences"]
    } else {
        &[]
    }
}

/// A write of the main resource before defaulting: a Namespace keeps its `spec.finalizers`
/// (only its `finalize` subresource changes them).
pub(crate) fn prepare_for_update(rt: &ResourceType, old: &Value, obj: &mut Value) {
    if rt.kind == "Namespace" {
        crate::namespaces::keep_spec_finalizers(old, obj);
    }
}

/// An update that changes something, before it is stored: a Pod's generation counts a spec
/// change; a PersistentVolume whose phase changes gets `lastPhaseTransitionTime` = `now`, unless
/// the writer set a new one.
pub(crate) fn updated(rt: &ResourceType, old: &Value, new: &mut Value, status: bool, now: &str) {
    if !status && tracks_generation(rt) && old.get("spec") != new.get("spec") {
        let g = meta(old).and_then(|m| m.get("generation")).and_then(Value::as_i64).unwrap_or(1);
        meta_mut(new).insert("generation".into(), Value::from(g + 1));
    }
    if rt.kind == "PersistentVolume" {
        let old_phase = old.get("status").and_then(|s| s.get("phase"));
        let new_phase = new.get("status").and_then(|s| s.get("phase"));
        let old_t = old.get("status").and_then(|s| s.get("lastPhaseTransitionTime"));
        let new_t = new.get("status").and_then(|s| s.get("lastPhaseTransitionTime"));
        if old_phase != new_phase && (new_t.is_none() || new_t == old_t) {
            if let Some(s) = new.get_mut("status").and_then(Value::as_object_mut) {
                s.insert("lastPhaseTransitionTime".into(), Value::String(now.to_string()));
            }
        }
    }
}

/// An object that finalizers hold, marked deleted: a grace period of 0 (kinds without graceful
/// deletion); a Namespace gets none, as its registry marks it Terminating instead.
pub(crate) fn mark_deleted(rt: &ResourceType, obj: &mut Value) {
    if rt.kind == "Namespace" {
        crate::namespaces::mark_terminating(rt, obj);
    } else {
        meta_mut(obj).insert("deletionGracePeriodSeconds".into(), Value::from(0));
    }
}
