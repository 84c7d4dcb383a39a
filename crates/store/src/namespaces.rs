//! Namespace lifecycle, as kube-apiserver and its namespace controller give it.
//!
//! A namespace is created with the `kubernetes` finalizer in `spec.finalizers` and the
//! `kubernetes.io/metadata.name` label. Deleting it marks it (deletionTimestamp, phase
//! `Terminating`) instead of removing it; from then on nothing new may be created in it (403
//! `unable to create new content in namespace NS because it is being terminated`). A sweep
//! ([`Store::sweep_namespace`](crate::Store::sweep_namespace)) deletes its contents; once nothing is left in it, the sweep
//! removes the `kubernetes` finalizer (the `finalize` subresource), and the namespace goes
//! when no finalizer holds it. `default`, `kube-system` and `kube-public` may not be deleted.
//!
//! Upstream runs the sweep in kube-controller-manager's namespace controller; here the
//! [`NamespaceFinisher`](crate::NamespaceFinisher) runs it in the process that owns the store,
//! whenever the store publishes a change that can move a terminating namespace on, whoever
//! wrote it, and for every Terminating namespace at start-up.

use crate::error::StoreError;
use crate::kinds::ResourceType;
use crate::object::Object;
use crate::Result;
use serde_json::{json, Map, Value};
use std::collections::HashMap;

/// The finalizer the namespace lifecycle owns.
pub use pv_model::finalizers::NAMESPACE as FINALIZER;

/// The label every namespace carries with its own name.
pub const NAME_LABEL: &str = "kubernetes.io/metadata.name";

/// Namespaces that may not be deleted.
pub const IMMORTAL: &[&str] = &["default", "kube-system", "kube-public"];

const TERMINATING: &str = "Terminating";

/// Adds the `kubernetes` finalizer to a new namespace.
pub(crate) fn prepare_for_create(obj: &mut Value) {
    let Some(o) = obj.as_object_mut() else { return };
    let spec = o.entry("spec").or_insert_with(|| json!({}));
    if !spec.is_object() {
        *spec = json!({});
    }
    let fin = spec.as_object_mut().unwrap().entry("finalizers").or_insert_with(|| json!([]));
    if !fin.is_array() {
        *fin = json!([]);
    }
    let list = fin.as_array_mut().unwrap();
    if !list.iter().any(|f| f == FINALIZER) {
        list.push(json!(FINALIZER));
    }
}

/// Sets the `kubernetes.io/metadata.name` label (create and update).
pub(crate) fn set_name_label(obj: &mut Value) {
    let name = obj.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("").to_string();
    if name.is_empty() {
        return;
    }
    let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) else { return };
    let labels = meta.entry("labels").or_insert_with(|| Value::Object(Map::new()));
    if !labels.is_object() {
        *labels = Value::Object(Map::new());
    }
    labels.as_object_mut().unwrap().insert(NAME_LABEL.into(), Value::String(name));
}

/// A main-resource update of a namespace keeps `spec.finalizers` (only `finalize` changes it).
pub(crate) fn keep_spec_finalizers(old: &Value, new: &mut Value) {
    let Some(o) = new.as_object_mut() else { return };
    let spec = o.entry("spec").or_insert_with(|| json!({}));
    if !spec.is_object() {
        *spec = json!({});
    }
    let s = spec.as_object_mut().unwrap();
    match old.pointer("/spec/finalizers") {
        Some(f) => s.insert("finalizers".into(), f.clone()),
        None => s.remove("finalizers"),
    };
}

/// A namespace marked for deletion is Terminating.
pub(crate) fn mark_terminating(obj: &mut Value) {
    if let Some(o) = obj.as_object_mut() {
        let status = o.entry("status").or_insert_with(|| json!({}));
        if !status.is_object() {
            *status = json!({});
        }
        status["phase"] = json!(TERMINATING);
    }
}

pub(crate) fn is_terminating(ns: &Value) -> bool {
    ns.pointer("/status/phase").and_then(Value::as_str) == Some(TERMINATING)
}

/// Refuses a create in a namespace being terminated, as upstream's NamespaceLifecycle admission.
pub(crate) fn admit_create(
    objects: &HashMap<&'static str, HashMap<(String, String), Object>>,
    rt: &ResourceType,
    ns: &str,
    name: &str,
) -> Result<()> {
    if !rt.namespaced || ns.is_empty() {
        return Ok(());
    }
    let terminating = objects
        .get("namespaces")
        .and_then(|m| m.get(&(String::new(), ns.to_string())))
        .is_some_and(|n| is_terminating(&n.value()));
    if terminating {
        return Err(StoreError::Forbidden {
            resource: rt.qualified(),
            name: name.into(),
            message: format!("unable to create new content in namespace {ns} because it is being terminated"),
        });
    }
    Ok(())
}

/// Refuses to delete the namespaces the cluster itself needs.
pub(crate) fn admit_delete(rt: &ResourceType, name: &str) -> Result<()> {
    if rt.kind == "Namespace" && IMMORTAL.contains(&name) {
        return Err(StoreError::Forbidden {
            resource: rt.qualified(),
            name: name.into(),
            message: "this namespace may not be deleted".into(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::Store;
    use serde_json::json;

    fn claim(ns: &str, name: &str) -> serde_json::Value {
        json!({"metadata": {"name": name, "namespace": ns},
               "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}})
    }

    #[test]
    fn namespaces_get_the_finalizer_and_name_label() {
        let s = Store::new();
        let n = s.create("namespaces", json!({"metadata": {"name": "demo"}})).unwrap();
        assert_eq!(n["spec"]["finalizers"], json!(["kubernetes"]));
        assert_eq!(n["metadata"]["labels"]["kubernetes.io/metadata.name"], "demo");
        assert_eq!(n["status"]["phase"], "Active");
    }

    #[test]
    fn deleting_a_namespace_terminates_it_deletes_its_contents_then_removes_it() {
        let s = Store::new();
        s.create("namespaces", json!({"metadata": {"name": "demo"}})).unwrap();
        s.create("persistentvolumeclaims", claim("demo", "a")).unwrap();
        let mut held = claim("demo", "held");
        held["metadata"]["finalizers"] = json!(["example.com/hold"]);
        let held = s.create("persistentvolumeclaims", held).unwrap();
        s.create("persistentvolumeclaims", claim("other", "c")).unwrap();

        let marked = s.delete("namespaces", "", "demo", None, None).unwrap();
        assert_eq!(marked["status"]["phase"], "Terminating");
        assert!(marked["metadata"]["deletionTimestamp"].is_string());
        let err = s.create("persistentvolumeclaims", claim("demo", "new")).unwrap_err();
        assert_eq!(err.code(), 403);
        assert_eq!(
            err.to_string(),
            "persistentvolumeclaims \"new\" is forbidden: unable to create new content in namespace demo because it is being terminated"
        );

        assert!(!s.sweep_namespace("demo").unwrap(), "a finalizer still holds a claim");
        assert_eq!(s.get("persistentvolumeclaims", "demo", "a").unwrap_err().code(), 404);
        assert!(s.get("namespaces", "", "demo").is_ok());
        assert!(s.get("persistentvolumeclaims", "other", "c").is_ok());

        let mut released = s.get("persistentvolumeclaims", "demo", "held").unwrap().value();
        released["metadata"]["finalizers"] = json!([]);
        assert_eq!(held["metadata"]["name"], "held");
        s.update("persistentvolumeclaims", released, false).unwrap();
        assert!(s.sweep_namespace("demo").unwrap());
        assert_eq!(s.get("namespaces", "", "demo").unwrap_err().code(), 404);
    }

    fn lease(ns: &str, name: &str) -> serde_json::Value {
        json!({"metadata": {"name": name, "namespace": ns}, "spec": {}})
    }

    #[test]
    fn a_burst_of_deletes_queues_the_namespace_once_and_a_held_namespace_waits() {
        let s = Store::new();
        s.create("namespaces", json!({"metadata": {"name": "demo"}})).unwrap();
        for i in 0..500 {
            s.create("leases", lease("demo", &format!("l{i}"))).unwrap();
        }
        let mut held = claim("demo", "held");
        held["metadata"]["finalizers"] = json!(["example.com/hold"]);
        s.create("persistentvolumeclaims", held).unwrap();
        assert!(s.finish.queued().is_empty(), "nothing terminates yet");
        s.delete("namespaces", "", "demo", None, None).unwrap();
        assert!(!s.sweep_namespace("demo").unwrap());
        assert_eq!(s.finish.queued(), vec!["demo".to_string()], "500 deletes, one entry");
        assert_eq!(s.list("leases", &crate::ListOptions::default()).unwrap().0.len(), 0);
        let before = s.resource_version();
        assert!(!s.sweep_namespace("demo").unwrap(), "held by the claim's finalizer");
        assert_eq!(s.resource_version(), before, "a held namespace is left as it is");
    }

    #[test]
    fn an_object_that_slips_into_a_terminating_namespace_is_deleted_too() {
        let s = Store::new();
        s.create("namespaces", json!({"metadata": {"name": "demo"}})).unwrap();
        let mut held = claim("demo", "held");
        held["metadata"]["finalizers"] = json!(["example.com/hold"]);
        s.create("persistentvolumeclaims", held).unwrap();
        s.delete("namespaces", "", "demo", None, None).unwrap();
        assert!(!s.sweep_namespace("demo").unwrap());
        // `load` skips admission, as a create racing with the namespace's deletion would.
        s.load("leases", lease("demo", "late")).unwrap();
        assert!(!s.sweep_namespace("demo").unwrap());
        assert_eq!(s.get("leases", "demo", "late").unwrap_err().code(), 404);
        let mut released = s.get("persistentvolumeclaims", "demo", "held").unwrap().value();
        released["metadata"]["finalizers"] = json!([]);
        s.update("persistentvolumeclaims", released, false).unwrap();
        assert!(s.sweep_namespace("demo").unwrap());
        assert_eq!(s.get("namespaces", "", "demo").unwrap_err().code(), 404);
    }

    #[test]
    fn terminating_namespaces_loaded_at_start_are_queued() {
        let s = Store::new();
        s.create("namespaces", json!({"metadata": {"name": "demo"}})).unwrap();
        s.create("namespaces", json!({"metadata": {"name": "kept"}})).unwrap();
        s.create("leases", lease("demo", "l")).unwrap();
        s.delete("namespaces", "", "demo", None, None).unwrap();
        let objects = ["namespaces", "leases"]
            .iter()
            .flat_map(|r| s.list(r, &crate::ListOptions::default()).unwrap().0.into_iter().map(|o| (r.to_string(), o)))
            .collect();
        let snapshot = crate::Snapshot { rv: s.resource_version(), objects };
        let restarted = Store::builder().backend(Box::new(NoDisk), snapshot).build();
        assert_eq!(restarted.finish.queued(), vec!["demo".to_string()]);
        assert!(restarted.sweep_namespace("demo").unwrap());
        assert_eq!(restarted.get("leases", "demo", "l").unwrap_err().code(), 404);
        assert_eq!(restarted.get("namespaces", "", "demo").unwrap_err().code(), 404);
    }

    /// A backend that keeps nothing.
    struct NoDisk;

    impl crate::Backend for NoDisk {
        fn commit(&self, _: u64, _: &crate::Mutation<'_>) -> Result<(), String> {
            Ok(())
        }
    }

    #[test]
    fn the_cluster_namespaces_may_not_be_deleted() {
        let s = Store::new();
        s.create("namespaces", json!({"metadata": {"name": "default"}})).unwrap();
        let err = s.delete("namespaces", "", "default", None, None).unwrap_err();
        assert_eq!(err.code(), 403);
        assert_eq!(err.to_string(), "namespaces \"default\" is forbidden: this namespace may not be deleted");
    }

    #[test]
    fn an_update_keeps_the_namespace_finalizer() {
        let s = Store::new();
        let n = s.create("namespaces", json!({"metadata": {"name": "demo"}})).unwrap();
        let mut u = (*n).clone();
        u["spec"]["finalizers"] = json!([]);
        u["metadata"]["labels"] = json!({"a": "b"});
        let u = s.update("namespaces", u, false).unwrap();
        assert_eq!(u["spec"]["finalizers"], json!(["kubernetes"]));
        assert_eq!(u["metadata"]["labels"]["kubernetes.io/metadata.name"], "demo");
    }
}
