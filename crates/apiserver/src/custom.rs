//! Custom resources: bodies checked against their definition's schema, and the definitions
//! controller that serves them.
//!
//! A body of a custom resource is JSON or YAML (custom resources have no protobuf form); its
//! type fields are the endpoint's, its unknown fields are pruned (warned about or refused as
//! `fieldValidation` asks), nulls of non-nullable fields dropped, defaults filled, and the
//! schema's rules checked (422 with kube-openapi's messages), as apiextensions-apiserver does
//! (`pv_store::validation::schema`).
//!
//! The definitions controller does what apiextensions-apiserver's controllers do for each
//! CustomResourceDefinition: once one is stored, its versions are served and its status says
//! so (`NamesAccepted`, `Established`, the accepted names); once one is deleted, every object
//! of it is deleted, then its cleanup finalizer removed, and it is served no more.

use crate::decoded::{cannot_handle, check_type_fields, field_problems, Decoded, FieldValidation};
use crate::error::{ApiError, Result};
use crate::resources::Served;
use pv_store::validation::{crd, schema};
use pv_store::{ListOptions, Store, StoreError};
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

const CRDS: &str = "customresourcedefinitions";

/// The fields of `ObjectMeta`: any other field of a custom object's metadata is unknown.
const OBJECT_META: &[&str] = &[
    "name",
    "generateName",
    "namespace",
    "selfLink",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
    "managedFields",
];

/// The `openAPIV3Schema` of the served version, or an empty schema.
pub fn schema_of<'a>(served: &Served, definition: &'a Value) -> Option<&'a Value> {
    pv_store::custom::version_of(definition, served.version)?.pointer("/schema/openAPIV3Schema")
}

/// A custom object's body checked as apiextensions-apiserver decodes and validates it.
pub fn check(
    served: &Served,
    definition: &Value,
    mut value: Value,
    duplicates: Vec<String>,
    fv: FieldValidation,
) -> Result<Decoded> {
    crate::shape::check_value(&value)?;
    // Another kind in the body is invalid, not undecodable, for a custom resource.
    let kind = value.get("kind").and_then(Value::as_str).unwrap_or("").to_string();
    if !kind.is_empty() && kind != served.kind() {
        let name = value.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("").to_string();
        return Err(ApiError::Store(StoreError::Invalid {
            kind: format!("{kind}.{}", served.group),
            name,
            errors: vec![pv_store::FieldError::invalid("kind", kind, format!("must be {}", served.kind()))],
        }));
    }
    check_type_fields(served, &mut value)?;
    if value.get("metadata").is_some_and(|m| !m.is_object() && !m.is_null()) {
        return Err(cannot_handle(served, "metadata must be an object".into()));
    }
    let mut unknown = Vec::new();
    if let Some(m) = value.get_mut("metadata").and_then(Value::as_object_mut) {
        let extra: Vec<String> = m.keys().filter(|k| !OBJECT_META.contains(&k.as_str())).cloned().collect();
        for k in extra {
            m.remove(&k);
            unknown.push(format!("metadata.{k}"));
        }
    }
    if let Some(s) = schema_of(served, definition) {
        schema::prune(&mut value, s, &mut unknown);
        schema::default(&mut value, s);
        let errors = schema::validate(&value, s);
        if !errors.is_empty() {
            let name = value.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("").to_string();
            return Err(ApiError::Store(StoreError::Invalid { kind: served.rt.qualified_kind(), name, errors }));
        }
    }
    field_problems(served, value, unknown, duplicates, fv)
}

/// The definition's `x-kubernetes-validations` rules on a custom object about to be written
/// (`old`: the stored object, for transition rules; None on create). Run once its schema has
/// passed, as apiextensions-apiserver runs them.
pub fn check_rules(served: &Served, definition: &Value, new: &Value, old: Option<&Value>) -> Result<()> {
    let Some(schema) = schema_of(served, definition) else { return Ok(()) };
    let errors = pv_store::validation::cel::validate(new, old, schema);
    if errors.is_empty() {
        return Ok(());
    }
    let name = new.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("").to_string();
    Err(ApiError::Store(StoreError::Invalid { kind: served.rt.qualified_kind(), name, errors }))
}

fn s<'a>(v: &'a Value, pointer: &str) -> &'a str {
    v.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

fn condition_true(crd: &Value, ty: &str) -> bool {
    crd.pointer("/status/conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .any(|c| s(c, "/type") == ty && s(c, "/status") == "True")
}

/// The `KubernetesAPIApprovalPolicyConformant` condition of a definition in a group that
/// Kubernetes protects (`*.k8s.io`, `*.kubernetes.io`): its `api-approved.kubernetes.io`
/// annotation as upstream's API approval controller reads it. None for other groups.
fn approval(crd: &Value) -> Option<(&'static str, &'static str, String)> {
    let group = s(crd, "/spec/group");
    let protected = ["k8s.io", "kubernetes.io"].iter().any(|g| group == *g || group.ends_with(&format!(".{g}")));
    if !protected {
        return None;
    }
    let ann = crd.pointer("/metadata/annotations/api-approved.kubernetes.io").and_then(Value::as_str);
    Some(match ann {
        None => (
            "False",
            "MissingAnnotation",
            "protected groups must have approval annotation \"api-approved.kubernetes.io\", see https://github.com/kubernetes/enhancements/pull/1111".into(),
        ),
        Some(a) if a.starts_with("unapproved") => ("False", "UnapprovedAnnotation", format!("not approved: {a:?}")),
        Some(a) if a.starts_with("http://") || a.starts_with("https://") => ("True", "ApprovedAnnotation", format!("approved in {a}")),
        Some(a) => ("False", "InvalidAnnotation", format!("invalid annotation value: {a:?}")),
    })
}

/// What one definition needs now; true when it must be looked at again later (its objects
/// are still being deleted).
fn reconcile(store: &Store, name: &str) -> std::result::Result<bool, StoreError> {
    let crd = match store.get_latest(CRDS, "", name) {
        Ok(c) => c.value(),
        Err(StoreError::NotFound { .. }) => {
            store.unregister_custom(name);
            return Ok(false);
        }
        Err(e) => return Err(e),
    };
    let deleting = crd.pointer("/metadata/deletionTimestamp").is_some();
    let fins: Vec<&str> = crd
        .pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let now = pv_store::format_time(jiff::Timestamp::now());
    if !deleting {
        store.register_custom(Arc::new(crd.clone()));
        if condition_true(&crd, "Established") && condition_true(&crd, "NamesAccepted") {
            return Ok(false);
        }
        let mut next = crd.clone();
        let names = crd.pointer("/spec/names").cloned().unwrap_or_else(|| json!({}));
        next["status"]["acceptedNames"] = names;
        if let Some((status, reason, message)) = approval(&crd) {
            crd::set_condition(
                &mut next,
                "KubernetesAPIApprovalPolicyConformant",
                status,
                reason,
                &message,
                Some(&now),
            );
        }
        crd::set_condition(&mut next, "NamesAccepted", "True", "NoConflicts", "no conflicts found", Some(&now));
        crd::set_condition(
            &mut next,
            "Established",
            "True",
            "InitialNamesAccepted",
            "the initial names have been accepted",
            Some(&now),
        );
        store.update(CRDS, next, true)?;
        return Ok(false);
    }
    if !fins.contains(&pv_store::custom::CLEANUP_FINALIZER) {
        return Ok(false);
    }
    // Still served while its objects go, for reads and deletes (creates are refused).
    store.register_custom(Arc::new(crd.clone()));
    let key = pv_store::custom::intern_str(name);
    if !condition_true(&crd, "Terminating") || !crd.to_string().contains("InstanceDeletionInProgress") {
        let mut next = crd.clone();
        crd::set_condition(
            &mut next,
            "Terminating",
            "True",
            "InstanceDeletionInProgress",
            "CustomResource deletion is in progress",
            Some(&now),
        );
        store.update(CRDS, next, true)?;
    }
    // Its objects deleted (those finalizers hold only marked); it goes once none is left.
    let left = match store.list(key, &ListOptions::default()) {
        Ok((items, _)) => items,
        Err(StoreError::NotFound { .. }) => Vec::new(),
        Err(e) => return Err(e),
    };
    for o in &left {
        let o = o.value();
        let (ns, n) = (s(&o, "/metadata/namespace"), s(&o, "/metadata/name"));
        match store.delete(key, ns, n, None, None) {
            Ok(_) | Err(StoreError::NotFound { .. }) => {}
            Err(e) => return Err(e),
        }
    }
    let remaining = store.list(key, &ListOptions::default()).map(|(i, _)| i.len()).unwrap_or(0);
    if remaining > 0 {
        return Ok(true);
    }
    store.unregister_custom(name);
    let mut next = store.get_latest(CRDS, "", name)?.value();
    if let Some(list) = next.pointer_mut("/metadata/finalizers").and_then(Value::as_array_mut) {
        list.retain(|f| f != pv_store::custom::CLEANUP_FINALIZER);
    }
    store.update(CRDS, next, false)?;
    Ok(false)
}

/// Serves the custom resources of every stored definition not being deleted (at start, before
/// the first request).
pub fn serve_stored(store: &Store) {
    for o in store.list(CRDS, &ListOptions::default()).map(|(i, _)| i).unwrap_or_default() {
        let crd = o.value();
        if crd.pointer("/metadata/deletionTimestamp").is_none() && condition_true(&crd, "Established") {
            store.register_custom(Arc::new(crd));
        }
    }
}

/// Runs the definitions controller over `store` until `shutdown` turns true: every stored
/// definition at start, then each change.
pub async fn run(store: Arc<Store>, mut shutdown: tokio::sync::watch::Receiver<bool>) {
    let mut again: BTreeSet<String> = BTreeSet::new();
    loop {
        let (items, rv) = match store.list(CRDS, &ListOptions::default()) {
            Ok(l) => l,
            Err(_) => return,
        };
        let mut due: BTreeSet<String> = items.iter().map(|o| s(&o.value(), "/metadata/name").to_string()).collect();
        due.extend(std::mem::take(&mut again));
        let Ok(mut w) = store.watch(CRDS, None, Some(rv)) else { return };
        let mut tick = tokio::time::interval(Duration::from_millis(250));
        loop {
            for name in std::mem::take(&mut due) {
                let st = store.clone();
                let n = name.clone();
                match tokio::task::spawn_blocking(move || reconcile(&st, &n)).await {
                    Ok(Ok(true)) => {
                        again.insert(name);
                    }
                    Ok(Err(e)) => {
                        tracing::warn!(definition = %name, error = %e, "custom resource definition: will retry");
                        again.insert(name);
                    }
                    _ => {}
                }
            }
            tokio::select! {
                ev = w.recv() => match ev {
                    Some(ev) => { due.insert(s(&ev.object.value(), "/metadata/name").to_string()); }
                    None => break,
                },
                _ = tick.tick(), if !again.is_empty() => { due.extend(std::mem::take(&mut again)); }
                _ = shutdown.changed() => return,
            }
            if *shutdown.borrow() {
                return;
            }
        }
    }
}
