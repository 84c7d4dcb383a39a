//! PersistentVolumeClaim rules: upstream's `ValidatePersistentVolumeClaimSpec`, the data source
//! normalisation of the claim strategy, and `ValidatePersistentVolumeClaimUpdate`.
//!
//! A claim's spec is immutable but for what binding and expansion need: `volumeName` may be set
//! once (never changed or cleared after), `storageClassName` may be set once when it was unset
//! (never changed or cleared), and only a Bound claim may change `resources.requests` (not below
//! `status.capacity`) and `volumeAttributesClassName`. Whether a Bound claim may *grow* is the
//! PersistentVolumeClaimResize admission's question, answered in `admission`.

use super::godiff;
use super::selectors::validate_label_selector;
use super::{class_name_errors, names, validate_access_modes, validate_class_and_mode, validate_quantity_positive};
use crate::error::FieldError;
use pv_model::quantity::Quantity;
use serde_json::{json, Value};

const BETA_CLASS_ANNOTATION: &str = "volume.beta.kubernetes.io/storage-class";

fn set(v: Option<&Value>) -> Option<&Value> {
    v.filter(|x| !x.is_null())
}

fn s<'a>(v: &'a Value, f: &str) -> &'a str {
    v.get(f).and_then(Value::as_str).unwrap_or("")
}

/// The claim strategy's preparation of `dataSource` / `dataSourceRef`: with neither in the
/// stored claim and no `dataSourceRef` given, a `dataSource` that is neither a claim nor a
/// VolumeSnapshot is dropped (as old clients expect); then each of the two is filled from the
/// other when only one is given.
pub fn prepare(spec: &mut Value, old_spec: Option<&Value>) {
    let Some(o) = spec.as_object_mut() else { return };
    let in_use = old_spec.is_some_and(|s| set(s.get("dataSource")).is_some() || set(s.get("dataSourceRef")).is_some());
    if !in_use && set(o.get("dataSourceRef")).is_none() {
        if let Some(ds) = set(o.get("dataSource")) {
            let group = s(ds, "apiGroup");
            let kind = s(ds, "kind");
            let ok = (kind == "PersistentVolumeClaim" && group.is_empty())
                || (kind == "VolumeSnapshot" && group == "snapshot.storage.k8s.io");
            if !ok {
                o.remove("dataSource");
            }
        }
    }
    let ds = set(o.get("dataSource")).cloned();
    let dsr = set(o.get("dataSourceRef")).cloned();
    let copy = |from: &Value| {
        let mut r = json!({"kind": s(from, "kind"), "name": s(from, "name")});
        if let Some(g) = set(from.get("apiGroup")) {
            r["apiGroup"] = g.clone();
        }
        r
    };
    match (ds, dsr) {
        (Some(ds), None) => {
            o.insert("dataSourceRef".into(), copy(&ds));
        }
        (None, Some(dsr)) if s(&dsr, "namespace").is_empty() => {
            o.insert("dataSource".into(), copy(&dsr));
        }
        _ => {}
    }
}

fn validate_data_source(ds: &Value, path: &str, reference: bool, errs: &mut Vec<FieldError>) {
    if s(ds, "name").is_empty() {
        errs.push(FieldError::required(format!("{path}.name"), ""));
    }
    let kind = s(ds, "kind");
    if kind.is_empty() {
        errs.push(FieldError::required(format!("{path}.kind"), ""));
    }
    let group = s(ds, "apiGroup");
    if group.is_empty() && kind != "PersistentVolumeClaim" {
        errs.push(FieldError::invalid(
            path,
            kind,
            "must be 'PersistentVolumeClaim' when referencing the default apiGroup",
        ));
    }
    if !group.is_empty() {
        for m in names::dns1123_subdomain(group) {
            errs.push(FieldError::invalid(format!("{path}.apiGroup"), group, m));
        }
    }
    if reference {
        let ns = s(ds, "namespace");
        if !ns.is_empty() {
            for m in names::dns1123_label(ns) {
                errs.push(FieldError::invalid(format!("{path}.namespace"), ns, m));
            }
        }
    }
}

/// A claim's spec.
pub fn validate_pvc(obj: &Value, errs: &mut Vec<FieldError>) {
    let Some(spec) = obj.get("spec").filter(|s| s.is_object()) else {
        errs.push(FieldError::required("spec", ""));
        return;
    };
    if let Some(sel) = set(spec.get("selector")) {
        validate_label_selector(sel, "spec.selector", errs);
    }
    validate_access_modes("spec.accessModes", spec.get("accessModes"), "at least 1 access mode is required", errs);
    match set(spec.get("resources").and_then(|r| r.get("requests")).and_then(|r| r.get("storage"))) {
        None => errs.push(FieldError::required("spec.resources[storage]", "")),
        Some(q) => validate_quantity_positive("spec.resources[storage]", q, errs),
    }
    validate_class_and_mode(spec, errs);
    let ds = set(spec.get("dataSource"));
    let dsr = set(spec.get("dataSourceRef"));
    if let Some(ds) = ds {
        validate_data_source(ds, "spec.dataSource", false, errs);
    }
    if let Some(dsr) = dsr {
        validate_data_source(dsr, "spec.dataSourceRef", true, errs);
    }
    match (ds, dsr) {
        (Some(_), Some(r)) if !s(r, "namespace").is_empty() => errs.push(FieldError::invalid(
            "spec",
            "spec.dataSource",
            "may not be specified when dataSourceRef.namespace is specified",
        )),
        (Some(d), Some(r))
            if s(d, "kind") != s(r, "kind")
                || s(d, "name") != s(r, "name")
                || set(d.get("apiGroup")) != set(r.get("apiGroup")) =>
        {
            errs.push(FieldError::invalid("spec", "spec.dataSource", "must match dataSourceRef"))
        }
        _ => {}
    }
    if let Some(vac) = spec.get("volumeAttributesClassName").and_then(Value::as_str).filter(|v| !v.is_empty()) {
        for m in class_name_errors(vac) {
            errs.push(FieldError::invalid("spec.volumeAttributesClassName", vac, m));
        }
    }
}

fn storage(v: &Value, path: &[&str]) -> Option<Quantity> {
    let mut cur = v;
    for p in path {
        cur = cur.get(p)?;
    }
    match cur {
        Value::String(s) => Quantity::parse(s).ok(),
        Value::Number(n) => Quantity::parse(&n.to_string()).ok(),
        _ => None,
    }
}

/// Drops what Go's semantic equality does not see: nulls, empty lists and maps; and writes
/// quantities in one form so `1Gi` equals `1024Mi`.
fn semantic(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(_, x)| !x.is_null())
                .map(|(k, x)| (k.clone(), semantic(x)))
                .filter(|(_, x)| {
                    !matches!(x, Value::Object(o) if o.is_empty()) && !matches!(x, Value::Array(a) if a.is_empty())
                })
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(semantic).collect()),
        other => other.clone(),
    }
}

fn semantic_spec(spec: &Value) -> Value {
    let mut s = semantic(spec);
    for part in ["requests", "limits"] {
        if let Some(m) = s.get_mut("resources").and_then(|r| r.get_mut(part)).and_then(Value::as_object_mut) {
            for (_, q) in m.iter_mut() {
                if let Some(parsed) = q.as_str().and_then(|x| Quantity::parse(x).ok()) {
                    *q = json!(parsed.to_string());
                }
            }
        }
    }
    s
}

/// What a claim update may change (see the module note). The new claim carries the stored
/// status (the strategy keeps it).
pub fn validate_pvc_update(old: &Value, new: &Value, errs: &mut Vec<FieldError>) {
    let empty = json!({});
    let old_spec = old.get("spec").unwrap_or(&empty);
    let new_spec = new.get("spec").unwrap_or(&empty);
    let mut old_clone = old_spec.clone();
    let mut new_clone = new_spec.clone();
    let (Some(oc), Some(nc)) = (old_clone.as_object_mut(), new_clone.as_object_mut()) else { return };
    if s(old_spec, "volumeName").is_empty() {
        match set(new_spec.get("volumeName")) {
            Some(v) => oc.insert("volumeName".into(), v.clone()),
            None => oc.remove("volumeName"),
        };
    }
    let annotation = |o: &Value| {
        o.get("metadata")
            .and_then(|m| m.get("annotations"))
            .and_then(|a| a.get(BETA_CLASS_ANNOTATION))
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    let (old_ann, new_ann) = (annotation(old), annotation(new));
    let old_sc = set(old_spec.get("storageClassName")).and_then(Value::as_str);
    let new_sc = set(new_spec.get("storageClassName")).and_then(Value::as_str);
    let from_annotation = old_ann.is_some()
        && old_sc.is_none()
        && new_sc.is_some_and(|n| Some(n) == old_ann.as_deref())
        && (new_ann.is_none() || new_ann == old_ann);
    if from_annotation {
        nc.remove("storageClassName");
    } else {
        if new_ann.as_deref().unwrap_or("") != old_ann.as_deref().unwrap_or("") {
            errs.push(FieldError::invalid(
                format!("metadata.annotations.{BETA_CLASS_ANNOTATION}"),
                new_ann.unwrap_or_default(),
                "field is immutable",
            ));
        }
        // Setting a class on a claim that had none is allowed (once).
        if let (Some(n), None) = (new_sc, old_sc) {
            if old_ann.is_none() || old_ann.as_deref() == Some(n) {
                match set(old_spec.get("storageClassName")) {
                    Some(v) => nc.insert("storageClassName".into(), v.clone()),
                    None => nc.remove("storageClassName"),
                };
            }
        }
    }
    let bound = new.get("status").and_then(|s| s.get("phase")).and_then(Value::as_str) == Some("Bound");
    if bound {
        if let Some(req) = nc.get_mut("resources").and_then(|r| r.get_mut("requests")).and_then(Value::as_object_mut) {
            match old_spec.get("resources").and_then(|r| r.get("requests")).and_then(|r| r.get("storage")) {
                Some(q) => req.insert("storage".into(), q.clone()),
                None => req.remove("storage"),
            };
        }
        match set(oc.get("volumeAttributesClassName")) {
            Some(v) => nc.insert("volumeAttributesClassName".into(), v.clone()),
            None => nc.remove("volumeAttributesClassName"),
        };
    }
    if semantic_spec(&old_clone) != semantic_spec(&new_clone) {
        errs.push(FieldError::forbidden(
            "spec",
            format!(
                "spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims\n{}",
                godiff::pvc_spec_diff(&old_clone, &new_clone)
            ),
        ));
    }
    let old_size = storage(old_spec, &["resources", "requests", "storage"]);
    let new_size = storage(new_spec, &["resources", "requests", "storage"]);
    let status_size = storage(old, &["status", "capacity", "storage"]);
    if let (Some(o), Some(n)) = (&old_size, &new_size) {
        if n < o && n <= status_size.as_ref().unwrap_or(&Quantity::ZERO) {
            errs.push(FieldError::forbidden(
                "spec.resources.requests.storage",
                "field can not be less than status.capacity",
            ));
        }
    }
    let (om, nm) = (set(old_spec.get("volumeMode")), set(new_spec.get("volumeMode")));
    if om != nm {
        errs.push(match nm.and_then(Value::as_str) {
            Some(m) => FieldError::invalid("volumeMode", m, "field is immutable"),
            None => FieldError::invalid_value("volumeMode", "null", "field is immutable"),
        });
    }
    let (ov, nv) = (set(old_spec.get("volumeAttributesClassName")), set(new_spec.get("volumeAttributesClassName")));
    let applied = set(old.get("status").and_then(|s| s.get("currentVolumeAttributesClassName"))).is_some();
    if ov != nv && applied {
        match nv.and_then(Value::as_str) {
            None => errs.push(FieldError::forbidden(
                "spec.volumeAttributesClassName",
                "update to nil is forbidden when status.currentVolumeAttributesClassName is not nil",
            )),
            Some("") => errs.push(FieldError::forbidden(
                "spec.volumeAttributesClassName",
                "update to empty string is forbidden when status.currentVolumeAttributesClassName is not nil",
            )),
            Some(_) => {}
        }
    }
}

/// A claim's status update: quantities in `status.capacity` may not be negative.
pub fn validate_pvc_status(new: &Value, errs: &mut Vec<FieldError>) {
    let empty = serde_json::Map::new();
    let cap = new.get("status").and_then(|s| s.get("capacity")).and_then(Value::as_object).unwrap_or(&empty);
    for (k, q) in cap {
        if let Some(parsed) = q.as_str().and_then(|x| Quantity::parse(x).ok()) {
            if parsed.value() < 0 {
                errs.push(FieldError::invalid_value(
                    format!("status.capacity[{k}]"),
                    parsed.value().to_string(),
                    "must be a valid resource quantity",
                ));
            }
        }
    }
}
