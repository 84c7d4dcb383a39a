//! Namespace lifecycle, as kube-apiserver and its namespace controller give it.
//!
//! A namespace is created with the `kubernetes` finalizer in `spec.finalizers` and the
//! `kubernetes.io/metadata.name` label. Deleting it marks it (deletionTimestamp, phase
//! `Terminating`) instead of removing it; from then on nothing new may be created in it (403
//! `unable to create new content in namespace NS because it is being terminated`). A sweep
//! ([`Store::sweep_namespace`]) deletes its contents; once nothing is left in it, the sweep
//! removes the `kubernetes` finalizer (the `finalize` subresource), and the namespace goes
//! when no finalizer holds it. `default`, `kube-system` and `kube-public` may not be deleted.
//!
//! Upstream runs the sweep in kube-controller-manager's namespace controller; here the API
//! server runs it after each write that can make progress (deleting the namespace, deleting or
//! updating an object in it), so a terminating namespace finishes as soon as its last object
//! is gone.

use crate::error::StoreError;
use crate::kinds::{ResourceType, RESOURCE_TYPES};
use crate::object::Object;
use crate::store::Part;
use crate::{ListOptions, Result, Store};
use serde_json::{json, Map, Value};
use std::collections::HashMap;
use std::sync::Arc;

/// The finalizer the namespace lifecycle owns.
pub const FINALIZER: &str = "kubernetes";

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
pub(crate) fn mark_terminating(rt: &ResourceType, obj: &mut Value) {
    if rt.kind == "Namespace" {
        if let Some(o) = obj.as_object_mut() {
            let status = o.entry("status").or_insert_with(|| json!({}));
            if !status.is_object() {
                *status = json!({});
            }
            status["phase"] = json!(TERMINATING);
        }
    }
}

fn is_terminating(ns: &Value) -> bool {
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

impl Store {
    /// Moves a terminating namespace on: deletes what is still in it and, once it is empty,
    /// removes its `kubernetes` finalizer (which deletes it when no other finalizer holds it).
    /// Does nothing for a namespace that is not terminating. Returns true when the namespace
    /// is gone or no longer holds the finalizer.
    pub fn sweep_namespace(&self, ns: &str) -> Result<bool> {
        let namespace = match self.get("namespaces", "", ns) {
            Ok(n) => n.value(),
            Err(StoreError::NotFound { .. }) => return Ok(true),
            Err(e) => return Err(e),
        };
        if !is_terminating(&namespace) {
            return Ok(false);
        }
        let mut left = 0;
        let opts = ListOptions { namespace: Some(ns.to_string()) };
        for rt in RESOURCE_TYPES.iter().filter(|r| r.namespaced) {
            let (items, _) = self.list(rt.plural, &opts)?;
            for o in items {
                let o = o.value();
                left += 1;
                if o.pointer("/metadata/deletionTimestamp").is_some() {
                    continue;
                }
                let name = o.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("");
                match self.delete(rt.plural, ns, name, None, None) {
                    Ok(_) | Err(StoreError::NotFound { .. }) => {}
                    Err(e) => return Err(e),
                }
            }
        }
        if left > 0 {
            // Objects deleted outright are gone now; those with finalizers hold the namespace.
            let remaining: usize = RESOURCE_TYPES
                .iter()
                .filter(|r| r.namespaced)
                .map(|rt| self.list(rt.plural, &opts).map(|(i, _)| i.len()))
                .sum::<Result<usize>>()?;
            if remaining > 0 {
                return Ok(false);
            }
        }
        let mut fin = namespace;
        let list: Vec<Value> = fin
            .pointer("/spec/finalizers")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter(|f| *f != FINALIZER).cloned().collect())
            .unwrap_or_default();
        if fin.pointer("/spec/finalizers").is_none() && list.is_empty() {
            return Ok(true);
        }
        fin["spec"]["finalizers"] = Value::Array(list);
        fin["metadata"]["resourceVersion"] = json!("");
        match self.update_inner("namespaces", fin, Part::Finalize, false) {
            Ok(_) | Err(StoreError::NotFound { .. }) => Ok(true),
            Err(e) => Err(e),
        }
    }

    /// Writes a namespace's `spec.finalizers` (the `finalize` subresource).
    pub fn finalize_namespace(&self, obj: Value, dry_run: bool) -> Result<Arc<Value>> {
        self.update_inner("namespaces", obj, Part::Finalize, dry_run)
    }
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
