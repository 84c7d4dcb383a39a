//! kube-apiserver's validation and defaulting for the kinds the controller depends on.
//!
//! The rules are the ones users meet: required capacity and access modes, exactly one volume
//! source, valid quantities and names, the reclaim policies and volume modes Kubernetes knows,
//! claimRef shape, host-path paths without `..`, and a claim's spec immutable except for the fields
//! the controller and users may change. Field paths and messages follow kube-apiserver's so kubectl
//! prints what a Kubernetes user expects.

use crate::error::FieldError;
use crate::kinds::ResourceType;
use pv_model::quantity::Quantity;
use serde_json::{Map, Value};

const ACCESS_MODES: &[&str] = &["ReadOnlyMany", "ReadWriteMany", "ReadWriteOnce", "ReadWriteOncePod"];
const RECLAIM_POLICIES: &[&str] = &["Delete", "Recycle", "Retain"];
const VOLUME_MODES: &[&str] = &["Block", "Filesystem"];
const BINDING_MODES: &[&str] = &["Immediate", "WaitForFirstConsumer"];

/// Volume source fields of a PV spec (exactly one must be set).
pub const PV_SOURCES: &[&str] = &[
    "awsElasticBlockStore",
    "azureDisk",
    "azureFile",
    "cephfs",
    "cinder",
    "csi",
    "fc",
    "flexVolume",
    "flocker",
    "gcePersistentDisk",
    "glusterfs",
    "hostPath",
    "iscsi",
    "local",
    "nfs",
    "photonPersistentDisk",
    "portworxVolume",
    "quobyte",
    "rbd",
    "scaleIO",
    "storageos",
    "vsphereVolume",
];

/// True for a DNS-1123 subdomain (names of PVs, PVCs, classes, nodes).
pub fn is_dns_subdomain(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 253
        && s.split('.').all(|l| {
            !l.is_empty()
                && l.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !l.starts_with('-')
                && !l.ends_with('-')
        })
}

/// True for a DNS-1123 label (namespace names).
pub fn is_dns_label(s: &str) -> bool {
    s.len() <= 63 && !s.contains('.') && is_dns_subdomain(s)
}

fn str_at<'a>(v: &'a Value, path: &[&str]) -> Option<&'a str> {
    let mut cur = v;
    for p in path {
        cur = cur.get(p)?;
    }
    cur.as_str()
}

/// Validates metadata common to every kind.
pub fn validate_meta(rt: &ResourceType, obj: &Value, errs: &mut Vec<FieldError>) {
    let meta = obj.get("metadata");
    let name = meta.and_then(|m| m.get("name")).and_then(Value::as_str).unwrap_or("");
    if name.is_empty() {
        errs.push(FieldError::required("metadata.name", "name or generateName is required"));
    } else {
        let ok = if rt.kind == "Namespace" {
            is_dns_label(name)
        } else if rt.kind == "Event" || rt.kind == "Lease" {
            !name.contains('/') && name.len() <= 253
        } else {
            is_dns_subdomain(name)
        };
        if !ok {
            let what = if rt.kind == "Namespace" {
                "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character"
            } else {
                "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character"
            };
            errs.push(FieldError::invalid("metadata.name", name, what));
        }
    }
    if rt.namespaced {
        let ns = meta.and_then(|m| m.get("namespace")).and_then(Value::as_str).unwrap_or("");
        if ns.is_empty() {
            errs.push(FieldError::required("metadata.namespace", ""));
        } else if !is_dns_label(ns) {
            errs.push(FieldError::invalid(
                "metadata.namespace",
                ns,
                "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-'",
            ));
        }
    }
    if let Some(a) = meta.and_then(|m| m.get("annotations")).and_then(Value::as_object) {
        let total: usize = a.iter().map(|(k, v)| k.len() + v.as_str().map_or(0, str::len)).sum();
        if total > 262_144 {
            errs.push(FieldError {
                path: "metadata.annotations".into(),
                kind: crate::error::FieldErrorKind::TooLong(262_144),
                detail: String::new(),
            });
        }
    }
    for field in ["labels", "annotations"] {
        if let Some(m) = meta.and_then(|m| m.get(field)) {
            match m.as_object() {
                Some(map) => {
                    for (k, v) in map {
                        if !v.is_string() {
                            errs.push(FieldError::invalid(
                                format!("metadata.{field}[{k}]"),
                                v.to_string(),
                                "must be a string",
                            ));
                        }
                    }
                }
                None if m.is_null() => {}
                None => errs.push(FieldError::invalid(
                    format!("metadata.{field}"),
                    m.to_string(),
                    "must be a map of strings",
                )),
            }
        }
    }
}

fn validate_quantity(path: &str, v: Option<&Value>, positive: bool, errs: &mut Vec<FieldError>) {
    let Some(v) = v else { return };
    let s = match v {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        other => {
            errs.push(FieldError::invalid(path, other.to_string(), "must be a quantity"));
            return;
        }
    };
    match Quantity::parse(&s) {
        Err(e) => errs.push(FieldError::invalid(path, s, e.to_string())),
        Ok(q) if positive && !q.is_positive() => errs.push(FieldError::invalid(path, s, "must be greater than zero")),
        Ok(_) => {}
    }
}

fn validate_access_modes(path: &str, modes: Option<&Value>, errs: &mut Vec<FieldError>) {
    let list = modes.and_then(Value::as_array);
    match list {
        None => errs.push(FieldError::required(path, "")),
        Some(l) if l.is_empty() => errs.push(FieldError::required(path, "")),
        Some(l) => {
            let mut rwop = false;
            for m in l {
                let s = m.as_str().unwrap_or("");
                if !ACCESS_MODES.contains(&s) {
                    errs.push(FieldError::not_supported(path, s, ACCESS_MODES));
                }
                rwop |= s == "ReadWriteOncePod";
            }
            if rwop && l.len() > 1 {
                errs.push(FieldError::forbidden(path, "may not use ReadWriteOncePod with other access modes"));
            }
        }
    }
}

fn validate_enum(path: &str, v: Option<&Value>, allowed: &[&str], errs: &mut Vec<FieldError>) {
    if let Some(v) = v {
        let s = v.as_str().unwrap_or("");
        if !allowed.contains(&s) {
            errs.push(FieldError::not_supported(
                path,
                v.as_str().map(str::to_string).unwrap_or_else(|| v.to_string()),
                allowed,
            ));
        }
    }
}

fn validate_class_name(path: &str, v: Option<&Value>, errs: &mut Vec<FieldError>) {
    if let Some(s) = v.and_then(Value::as_str) {
        if !s.is_empty() && !is_dns_subdomain(s) {
            errs.push(FieldError::invalid(
                path,
                s,
                "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.'",
            ));
        }
    }
}

fn validate_selector(path: &str, sel: Option<&Value>, errs: &mut Vec<FieldError>) {
    let Some(sel) = sel.filter(|s| !s.is_null()) else {
        return;
    };
    for (i, e) in sel.get("matchExpressions").and_then(Value::as_array).into_iter().flatten().enumerate() {
        let op = e.get("operator").and_then(Value::as_str).unwrap_or("");
        let n = e.get("values").and_then(Value::as_array).map_or(0, Vec::len);
        let p = format!("{path}.matchExpressions[{i}]");
        match op {
            "In" | "NotIn" if n == 0 => errs.push(FieldError::required(
                format!("{p}.values"),
                "must be specified when `operator` is 'In' or 'NotIn'",
            )),
            "Exists" | "DoesNotExist" if n > 0 => errs.push(FieldError::forbidden(
                format!("{p}.values"),
                "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
            )),
            "In" | "NotIn" | "Exists" | "DoesNotExist" => {}
            other => errs.push(FieldError::invalid(format!("{p}.operator"), other, "not a valid selector operator")),
        }
    }
}

fn validate_pv(obj: &Value, errs: &mut Vec<FieldError>) {
    let Some(spec) = obj.get("spec").filter(|s| s.is_object()) else {
        errs.push(FieldError::required("spec", ""));
        return;
    };
    match spec.get("capacity").and_then(Value::as_object) {
        None => errs.push(FieldError::required("spec.capacity", "")),
        Some(c) => match c.get("storage") {
            None => errs.push(FieldError::not_supported(
                "spec.capacity",
                c.keys().next().cloned().unwrap_or_default(),
                &["storage"],
            )),
            Some(q) => validate_quantity("spec.capacity[storage]", Some(q), true, errs),
        },
    }
    validate_access_modes("spec.accessModes", spec.get("accessModes"), errs);
    let sources: Vec<&str> =
        PV_SOURCES.iter().copied().filter(|s| spec.get(*s).is_some_and(|v| !v.is_null())).collect();
    if sources.is_empty() {
        errs.push(FieldError::required("spec", "must specify a volume type"));
    } else if sources.len() > 1 {
        errs.push(FieldError::forbidden(format!("spec.{}", sources[1]), "may not specify more than 1 volume type"));
    }
    validate_enum(
        "spec.persistentVolumeReclaimPolicy",
        spec.get("persistentVolumeReclaimPolicy"),
        RECLAIM_POLICIES,
        errs,
    );
    validate_enum("spec.volumeMode", spec.get("volumeMode"), VOLUME_MODES, errs);
    validate_class_name("spec.storageClassName", spec.get("storageClassName"), errs);
    let recycle = spec.get("persistentVolumeReclaimPolicy").and_then(Value::as_str) == Some("Recycle");
    if let Some(hp) = spec.get("hostPath").filter(|v| !v.is_null()) {
        let path = hp.get("path").and_then(Value::as_str).unwrap_or("");
        if path.is_empty() {
            errs.push(FieldError::required("spec.hostPath.path", ""));
        } else if path.split('/').any(|seg| seg == "..") {
            errs.push(FieldError::invalid("spec.hostPath.path", path, "must not contain '..'"));
        } else if recycle && path.starts_with('/') && path.split('/').all(|seg| seg.is_empty() || seg == ".") {
            // Recycle is allowed for every source; only a hostPath that cleans to "/" may not.
            errs.push(FieldError::forbidden(
                "spec.persistentVolumeReclaimPolicy",
                "may not be 'recycle' for a hostPath mount of '/'",
            ));
        }
    }
    if sources == ["local"] && spec.get("nodeAffinity").is_none_or(Value::is_null) {
        errs.push(FieldError::required("spec.nodeAffinity", "Local volume requires node affinity"));
    }
    if let Some(nfs) = spec.get("nfs").filter(|v| !v.is_null()) {
        if nfs.get("server").and_then(Value::as_str).unwrap_or("").is_empty() {
            errs.push(FieldError::required("spec.nfs.server", ""));
        }
        if nfs.get("path").and_then(Value::as_str).unwrap_or("").is_empty() {
            errs.push(FieldError::required("spec.nfs.path", ""));
        }
    }
    if let Some(csi) = spec.get("csi").filter(|v| !v.is_null()) {
        if csi.get("driver").and_then(Value::as_str).unwrap_or("").is_empty() {
            errs.push(FieldError::required("spec.csi.driver", ""));
        }
        if csi.get("volumeHandle").and_then(Value::as_str).unwrap_or("").is_empty() {
            errs.push(FieldError::required("spec.csi.volumeHandle", ""));
        }
    }
    if let Some(cr) = spec.get("claimRef").filter(|v| !v.is_null()) {
        if cr.get("name").and_then(Value::as_str).unwrap_or("").is_empty() {
            errs.push(FieldError::required("spec.claimRef.name", ""));
        }
        if cr.get("namespace").and_then(Value::as_str).unwrap_or("").is_empty() {
            errs.push(FieldError::required("spec.claimRef.namespace", ""));
        }
    }
}

fn validate_pvc(obj: &Value, errs: &mut Vec<FieldError>) {
    let Some(spec) = obj.get("spec").filter(|s| s.is_object()) else {
        errs.push(FieldError::required("spec", ""));
        return;
    };
    validate_access_modes("spec.accessModes", spec.get("accessModes"), errs);
    match spec.get("resources").and_then(|r| r.get("requests")).and_then(|r| r.get("storage")) {
        None => errs.push(FieldError::required("spec.resources[storage]", "")),
        Some(q) => validate_quantity("spec.resources[storage]", Some(q), true, errs),
    }
    if let Some(l) = spec.get("resources").and_then(|r| r.get("limits")).and_then(|r| r.get("storage")) {
        validate_quantity("spec.resources.limits[storage]", Some(l), false, errs);
    }
    validate_enum("spec.volumeMode", spec.get("volumeMode"), VOLUME_MODES, errs);
    validate_class_name("spec.storageClassName", spec.get("storageClassName"), errs);
    validate_selector("spec.selector", spec.get("selector"), errs);
}

fn validate_storage_class(obj: &Value, errs: &mut Vec<FieldError>) {
    match obj.get("provisioner").and_then(Value::as_str) {
        None | Some("") => errs.push(FieldError::required("provisioner", "")),
        Some(p) if p.len() > 63 && !p.contains('/') => {
            errs.push(FieldError::invalid("provisioner", p, "must be no more than 63 characters"))
        }
        Some(_) => {}
    }
    validate_enum("reclaimPolicy", obj.get("reclaimPolicy"), &["Delete", "Retain"], errs);
    validate_enum("volumeBindingMode", obj.get("volumeBindingMode"), BINDING_MODES, errs);
    if let Some(p) = obj.get("parameters").filter(|p| !p.is_null()) {
        match p.as_object() {
            Some(m) => {
                for (k, v) in m {
                    if !v.is_string() {
                        errs.push(FieldError::invalid(format!("parameters[{k}]"), v.to_string(), "must be a string"));
                    }
                }
            }
            None => errs.push(FieldError::invalid("parameters", p.to_string(), "must be a map of strings")),
        }
    }
}

fn validate_pod(obj: &Value, errs: &mut Vec<FieldError>) {
    let Some(spec) = obj.get("spec").filter(|s| s.is_object()) else {
        errs.push(FieldError::required("spec", ""));
        return;
    };
    for (i, v) in spec.get("volumes").and_then(Value::as_array).into_iter().flatten().enumerate() {
        if v.get("name").and_then(Value::as_str).unwrap_or("").is_empty() {
            errs.push(FieldError::required(format!("spec.volumes[{i}].name"), ""));
        }
        if let Some(pvc) = v.get("persistentVolumeClaim").filter(|x| !x.is_null()) {
            if pvc.get("claimName").and_then(Value::as_str).unwrap_or("").is_empty() {
                errs.push(FieldError::required(format!("spec.volumes[{i}].persistentVolumeClaim.claimName"), ""));
            }
        }
    }
}

/// Validates an object of the given type (create and update share these rules).
pub fn validate(rt: &ResourceType, obj: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if !obj.is_object() {
        errs.push(FieldError::invalid("", obj.to_string(), "must be an object"));
        return errs;
    }
    validate_meta(rt, obj, &mut errs);
    match rt.kind {
        "PersistentVolume" => validate_pv(obj, &mut errs),
        "PersistentVolumeClaim" => validate_pvc(obj, &mut errs),
        "StorageClass" => validate_storage_class(obj, &mut errs),
        "Pod" => validate_pod(obj, &mut errs),
        _ => {}
    }
    errs
}

fn obj_mut<'a>(v: &'a mut Value, key: &str) -> &'a mut Map<String, Value> {
    let o = v.as_object_mut().expect("object");
    let e = o.entry(key.to_string()).or_insert_with(|| Value::Object(Map::new()));
    if !e.is_object() {
        *e = Value::Object(Map::new());
    }
    e.as_object_mut().expect("object")
}

/// Applies kube-apiserver's defaults (reclaim policy Retain, volume mode Filesystem, phase
/// Pending, class defaults, ...).
pub fn default(rt: &ResourceType, obj: &mut Value) {
    if !obj.is_object() {
        return;
    }
    match rt.kind {
        "PersistentVolume" => {
            let spec = obj_mut(obj, "spec");
            spec.entry("persistentVolumeReclaimPolicy").or_insert_with(|| "Retain".into());
            spec.entry("volumeMode").or_insert_with(|| "Filesystem".into());
            let status = obj_mut(obj, "status");
            status.entry("phase").or_insert_with(|| "Pending".into());
        }
        "PersistentVolumeClaim" => {
            let spec = obj_mut(obj, "spec");
            spec.entry("volumeMode").or_insert_with(|| "Filesystem".into());
            let status = obj_mut(obj, "status");
            status.entry("phase").or_insert_with(|| "Pending".into());
        }
        "StorageClass" => {
            let o = obj.as_object_mut().expect("object");
            o.entry("reclaimPolicy").or_insert_with(|| "Delete".into());
            o.entry("volumeBindingMode").or_insert_with(|| "Immediate".into());
        }
        "Namespace" => {
            crate::namespaces::set_name_label(obj);
            let status = obj_mut(obj, "status");
            status.entry("phase").or_insert_with(|| "Active".into());
        }
        "Pod" => {
            let status = obj_mut(obj, "status");
            status.entry("phase").or_insert_with(|| "Pending".into());
        }
        _ => {}
    }
}

/// Validates a main-resource update against the stored object (immutable fields).
pub fn validate_update(rt: &ResourceType, old: &Value, new: &Value) -> Vec<FieldError> {
    let mut errs = validate(rt, new);
    match rt.kind {
        "PersistentVolumeClaim" => {
            let norm = |spec: Option<&Value>, other: Option<&Value>| -> Value {
                let mut s = spec.cloned().unwrap_or(Value::Null);
                if let Some(o) = s.as_object_mut() {
                    o.remove("resources");
                    o.remove("volumeAttributesClassName");
                    // Binding may set volumeName once; the default class may be set once.
                    let other_vn = other.and_then(|x| x.get("volumeName")).and_then(Value::as_str).unwrap_or("");
                    if other_vn.is_empty() || o.get("volumeName").and_then(Value::as_str).unwrap_or("").is_empty() {
                        o.remove("volumeName");
                    }
                    let other_sc = other.and_then(|x| x.get("storageClassName"));
                    if other_sc.is_none_or(Value::is_null) || o.get("storageClassName").is_none_or(Value::is_null) {
                        o.remove("storageClassName");
                    }
                }
                s
            };
            let (os, ns) = (old.get("spec"), new.get("spec"));
            if norm(os, ns) != norm(ns, os) {
                errs.push(FieldError::forbidden(
                    "spec",
                    "spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims",
                ));
            }
        }
        "PersistentVolume" => {
            let source = |v: &Value| -> Vec<(String, Value)> {
                PV_SOURCES
                    .iter()
                    .filter_map(|s| v.get("spec").and_then(|sp| sp.get(*s)).map(|x| (s.to_string(), x.clone())))
                    .collect()
            };
            if source(old) != source(new) {
                errs.push(FieldError::forbidden(
                    "spec.persistentvolumesource",
                    "spec.persistentvolumesource is immutable after creation",
                ));
            }
        }
        "StorageClass" => {
            for f in ["provisioner", "parameters", "reclaimPolicy", "volumeBindingMode"] {
                if old.get(f) != new.get(f) {
                    errs.push(FieldError::forbidden(f, "updates to this field are forbidden"));
                }
            }
        }
        _ => {}
    }
    errs
}

/// The `kind` of a stored object's metadata name for error messages.
pub fn object_name(obj: &Value) -> &str {
    str_at(obj, &["metadata", "name"]).unwrap_or("")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kinds::ResourceType;
    use serde_json::json;

    fn pv_type() -> &'static ResourceType {
        ResourceType::by_kind("PersistentVolume").unwrap()
    }

    #[test]
    fn pv_without_capacity_modes_or_source_names_each_field() {
        let errs = validate(pv_type(), &json!({"metadata": {"name": "pv1"}, "spec": {}}));
        let text: Vec<String> = errs.iter().map(|e| e.to_string()).collect();
        assert!(text.contains(&"spec.capacity: Required value".to_string()), "{text:?}");
        assert!(text.contains(&"spec.accessModes: Required value".to_string()), "{text:?}");
        assert!(text.iter().any(|t| t.starts_with("spec: Required value")), "{text:?}");
    }

    fn pv_with(source: Value, policy: &str) -> Value {
        let mut spec = json!({"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "persistentVolumeReclaimPolicy": policy});
        for (k, v) in source.as_object().unwrap() {
            spec[k] = v.clone();
        }
        json!({"metadata": {"name": "pv1"}, "spec": spec})
    }

    #[test]
    fn recycle_is_refused_only_for_a_host_path_of_root() {
        for source in [
            json!({"csi": {"driver": "csi.example.com", "volumeHandle": "h"}}),
            json!({"nfs": {"server": "nfs.example.com", "path": "/exports"}}),
            json!({"hostPath": {"path": "/tmp/x"}}),
        ] {
            let errs = validate(pv_type(), &pv_with(source.clone(), "Recycle"));
            assert!(errs.is_empty(), "{source}: {errs:?}");
        }
        for path in ["/", "//", "/./"] {
            let errs = validate(pv_type(), &pv_with(json!({"hostPath": {"path": path}}), "Recycle"));
            let text: Vec<String> = errs.iter().map(|e| e.to_string()).collect();
            assert_eq!(
                text,
                ["spec.persistentVolumeReclaimPolicy: Forbidden: may not be 'recycle' for a hostPath mount of '/'"],
                "{path}"
            );
            assert!(validate(pv_type(), &pv_with(json!({"hostPath": {"path": path}}), "Retain")).is_empty());
        }
    }

    #[test]
    fn a_local_volume_requires_node_affinity() {
        let errs = validate(pv_type(), &pv_with(json!({"local": {"path": "/mnt/disk"}}), "Retain"));
        let text: Vec<String> = errs.iter().map(|e| e.to_string()).collect();
        assert_eq!(text, ["spec.nodeAffinity: Required value: Local volume requires node affinity"]);
        let affinity = json!({"required": {"nodeSelectorTerms": [{"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": ["n1"]}]}]}});
        let mut pv = pv_with(json!({"local": {"path": "/mnt/disk"}}), "Retain");
        pv["spec"]["nodeAffinity"] = affinity;
        assert!(validate(pv_type(), &pv).is_empty(), "{:?}", validate(pv_type(), &pv));
    }

    #[test]
    fn bad_quantities_and_paths_are_invalid() {
        for q in ["1Zi", "-1Gi", "1e999", "0"] {
            let errs = validate(
                pv_type(),
                &json!({"metadata": {"name": "pv1"}, "spec": {"capacity": {"storage": q}, "accessModes": ["ReadWriteOnce"], "hostPath": {"path": "/tmp/x"}}}),
            );
            assert!(errs.iter().any(|e| e.path == "spec.capacity[storage]"), "{q}: {errs:?}");
        }
        let errs = validate(
            pv_type(),
            &json!({"metadata": {"name": "pv1"}, "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "hostPath": {"path": "/tmp/../../etc"}}}),
        );
        assert!(errs.iter().any(|e| e.path == "spec.hostPath.path"), "{errs:?}");
    }

    #[test]
    fn names_must_be_dns_subdomains() {
        let errs = validate(
            pv_type(),
            &json!({"metadata": {"name": "Bad_Name"}, "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "nfs": {"server": "s", "path": "/"}}}),
        );
        assert_eq!(errs.len(), 1);
        assert_eq!(errs[0].path, "metadata.name");
    }

    #[test]
    fn pvc_spec_is_immutable_except_allowed_fields() {
        let rt = ResourceType::by_kind("PersistentVolumeClaim").unwrap();
        let old = json!({"metadata": {"name": "c", "namespace": "d"}, "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}});
        let mut bind = old.clone();
        bind["spec"]["volumeName"] = json!("pv1");
        bind["spec"]["storageClassName"] = json!("gold");
        bind["spec"]["resources"]["requests"]["storage"] = json!("2Gi");
        assert!(validate_update(rt, &old, &bind).is_empty());
        let mut modes = old.clone();
        modes["spec"]["accessModes"] = json!(["ReadWriteMany"]);
        assert_eq!(validate_update(rt, &old, &modes).len(), 1);
        let mut rebind = bind.clone();
        rebind["spec"]["volumeName"] = json!("pv2");
        assert_eq!(validate_update(rt, &bind, &rebind).len(), 1);
    }

    #[test]
    fn defaults_fill_policy_mode_and_phase() {
        let mut pv = json!({"metadata": {"name": "pv1"}, "spec": {}});
        default(pv_type(), &mut pv);
        assert_eq!(pv["spec"]["persistentVolumeReclaimPolicy"], "Retain");
        assert_eq!(pv["spec"]["volumeMode"], "Filesystem");
        assert_eq!(pv["status"]["phase"], "Pending");
    }
}
