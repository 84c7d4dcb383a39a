//! kube-apiserver's validation and defaulting for the kinds the store serves, one module per
//! kind like upstream's `registry/<kind>/strategy.go` and `apis/<group>/validation`.
//!
//! Three entry points follow the strategy's steps: [`validate`] for a create, [`validate_update`]
//! for a write of the main resource (what may change, against the stored object),
//! [`validate_status_update`] for a status write; [`default`] fills what upstream's defaulting
//! fills. Field paths, error types and messages are kube-apiserver's, so kubectl prints what a
//! Kubernetes user expects and a script can compare the two servers' answers.

pub mod cel;
pub(crate) mod config;
pub mod crd;
mod dispatch;
mod godiff;
pub(crate) mod meta;
pub mod names;
pub(crate) mod other;
pub(crate) mod pod;
pub(crate) mod pv;
pub(crate) mod pvc;
pub(crate) mod rbac;
pub mod schema;
mod selectors;
pub(crate) mod service;
pub mod storage;
pub(crate) mod storage_class;
pub(crate) mod warnings;

use crate::error::FieldError;
use pv_model::quantity::Quantity;
use serde_json::{Map, Value};

pub use dispatch::{default, prepare_create, prepare_update, validate, validate_status_update, validate_update};
pub use other::initial_pod_status;
pub use pv::PV_SOURCES;

const ACCESS_MODES: &[&str] = &pv_model::helpers::ACCESS_MODE_NAMES;
const VOLUME_MODES: &[&str] = &["Block", "Filesystem"];

/// True for a DNS-1123 subdomain (names of PVs, PVCs, classes, nodes).
pub fn is_dns_subdomain(s: &str) -> bool {
    names::dns1123_subdomain(s).is_empty()
}

/// True for a DNS-1123 label (namespace names).
pub fn is_dns_label(s: &str) -> bool {
    names::dns1123_label(s).is_empty()
}

/// The messages for a class name (StorageClass or VolumeAttributesClass): a DNS subdomain.
fn class_name_errors(s: &str) -> Vec<String> {
    names::dns1123_subdomain(s)
}

/// `spec.storageClassName` (a DNS subdomain when set) and `spec.volumeMode` (one of
/// [`VOLUME_MODES`]), which a volume and a claim validate alike.
fn validate_class_and_mode(spec: &Value, errs: &mut Vec<FieldError>) {
    if let Some(c) = spec.get("storageClassName").and_then(Value::as_str).filter(|c| !c.is_empty()) {
        for m in class_name_errors(c) {
            errs.push(FieldError::invalid("spec.storageClassName", c, m));
        }
    }
    if let Some(m) = spec.get("volumeMode").and_then(Value::as_str) {
        if !VOLUME_MODES.contains(&m) {
            errs.push(FieldError::not_supported("spec.volumeMode", m, VOLUME_MODES));
        }
    }
}

fn validate_access_modes(path: &str, modes: Option<&Value>, required_detail: &str, errs: &mut Vec<FieldError>) {
    let list = modes.and_then(Value::as_array).cloned().unwrap_or_default();
    if list.is_empty() {
        errs.push(FieldError::required(path, required_detail));
    }
    let (mut rwop, mut other) = (false, false);
    for m in &list {
        let s = m.as_str().unwrap_or("");
        if !ACCESS_MODES.contains(&s) {
            errs.push(FieldError::not_supported(path, s, ACCESS_MODES));
        } else if s == "ReadWriteOncePod" {
            rwop = true;
        } else {
            other = true;
        }
    }
    if rwop && other {
        errs.push(FieldError::forbidden(path, "may not use ReadWriteOncePod with other access modes"));
    }
}

/// A quantity that must parse and be greater than zero (a volume's capacity, a claim's request).
fn validate_quantity_positive(path: &str, v: &Value, errs: &mut Vec<FieldError>) {
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
        Ok(q) => {
            if q.value() < 0 {
                errs.push(FieldError::invalid_value(path, q.value().to_string(), "must be a valid resource quantity"));
            }
            if !q.is_positive() {
                errs.push(FieldError::invalid(path, s, "must be greater than zero"));
            }
        }
    }
}

pub(crate) fn obj_mut<'a>(v: &'a mut Value, key: &str) -> &'a mut Map<String, Value> {
    let o = v.as_object_mut().expect("object");
    let e = o.entry(key.to_string()).or_insert_with(|| Value::Object(Map::new()));
    if !e.is_object() {
        *e = Value::Object(Map::new());
    }
    e.as_object_mut().expect("object")
}

pub(crate) fn default_if_unset(m: &mut Map<String, Value>, key: &str, value: &str, empty_counts: bool) {
    let unset = match m.get(key) {
        None | Some(Value::Null) => true,
        Some(Value::String(s)) => empty_counts && s.is_empty(),
        _ => false,
    };
    if unset {
        m.insert(key.into(), value.into());
    }
}

/// The `kind` of a stored object's metadata name for error messages.
pub fn object_name(obj: &Value) -> &str {
    obj.get("metadata").and_then(|m| m.get("name")).and_then(Value::as_str).unwrap_or("")
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
            let errs: Vec<FieldError> = errs.into_iter().collect();
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

    fn pvc_type() -> &'static ResourceType {
        ResourceType::by_kind("PersistentVolumeClaim").unwrap()
    }

    fn claim(spec: Value, phase: &str) -> Value {
        json!({"metadata": {"name": "c", "namespace": "d", "resourceVersion": "1"}, "spec": spec, "status": {"phase": phase, "capacity": {"storage": "2Gi"}}})
    }

    fn paths(errs: &[FieldError]) -> Vec<&str> {
        errs.iter().map(|e| e.path.as_str()).collect()
    }

    #[test]
    fn a_claim_may_be_bound_and_classed_once() {
        let base = json!({"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}});
        let old = claim(base.clone(), "Pending");
        let mut bind = old.clone();
        bind["spec"]["volumeName"] = json!("pv-a");
        bind["spec"]["storageClassName"] = json!("gold");
        assert!(validate_update(pvc_type(), &old, &bind).is_empty(), "{:?}", validate_update(pvc_type(), &old, &bind));
        for (field, value) in [
            ("volumeName", json!("pv-c")),
            ("volumeName", Value::Null),
            ("storageClassName", json!("silver")),
            ("storageClassName", Value::Null),
        ] {
            let mut again = bind.clone();
            again["spec"][field] = value.clone();
            assert_eq!(paths(&validate_update(pvc_type(), &bind, &again)), ["spec"], "{field} -> {value}");
        }
    }

    #[test]
    fn only_a_bound_claim_may_change_its_request_and_not_below_its_capacity() {
        let spec = json!({"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "3Gi"}}, "volumeName": "pv-a"});
        let pending = claim(spec.clone(), "Pending");
        let mut grown = pending.clone();
        grown["spec"]["resources"]["requests"]["storage"] = json!("4Gi");
        assert_eq!(paths(&validate_update(pvc_type(), &pending, &grown)), ["spec"]);
        let bound = claim(spec, "Bound");
        let mut b = bound.clone();
        b["spec"]["resources"]["requests"]["storage"] = json!("4Gi");
        assert!(validate_update(pvc_type(), &bound, &b).is_empty());
        b["spec"]["resources"]["requests"]["storage"] = json!("2Gi");
        let errs = validate_update(pvc_type(), &bound, &b);
        assert_eq!(
            errs.iter().map(ToString::to_string).collect::<Vec<_>>(),
            ["spec.resources.requests.storage: Forbidden: field can not be less than status.capacity"]
        );
        let mut limits = bound.clone();
        limits["spec"]["resources"]["limits"] = json!({"storage": "5Gi"});
        assert_eq!(paths(&validate_update(pvc_type(), &bound, &limits)), ["spec"]);
    }

    #[test]
    fn a_volume_keeps_its_mode_and_node_affinity() {
        let affinity = json!({"required": {"nodeSelectorTerms": [{"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": ["n1"]}]}]}});
        let mut old = pv_with(json!({"local": {"path": "/mnt/disk"}}), "Retain");
        old["spec"]["nodeAffinity"] = affinity;
        old["spec"]["volumeMode"] = json!("Filesystem");
        let mut block = old.clone();
        block["spec"]["volumeMode"] = json!("Block");
        assert_eq!(
            validate_update(pv_type(), &old, &block).iter().map(ToString::to_string).collect::<Vec<_>>(),
            ["volumeMode: Invalid value: \"Block\": field is immutable"]
        );
        let mut moved = old.clone();
        moved["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"][0]["values"] =
            json!(["n2"]);
        assert_eq!(paths(&validate_update(pv_type(), &old, &moved)), ["nodeAffinity"]);
    }

    #[test]
    fn valid_input_upstream_accepts_is_accepted() {
        let mut pv = pv_with(json!({"csi": {"driver": "csi.example.com", "volumeHandle": "h"}}), "Recycle");
        pv["spec"]["claimRef"] = json!({"name": "only-a-name"});
        assert!(validate(pv_type(), &pv).is_empty(), "{:?}", validate(pv_type(), &pv));
        let mut empty_policy = pv_with(json!({"nfs": {"server": "s", "path": "/x"}}), "");
        default(pv_type(), &mut empty_policy);
        assert_eq!(empty_policy["spec"]["persistentVolumeReclaimPolicy"], "Retain");
        let sc = ResourceType::by_kind("StorageClass").unwrap();
        let mut class = json!({"metadata": {"name": "c"}, "provisioner": "example.com/x", "reclaimPolicy": ""});
        default(sc, &mut class);
        assert_eq!(class["reclaimPolicy"], "");
        assert!(validate(sc, &class).is_empty());
    }

    #[test]
    fn invalid_volumes_are_refused_field_by_field() {
        let cases = [
            (json!({"nfs": {"server": "s", "path": "rel/x"}}), "spec.nfs.path"),
            (json!({"csi": {"driver": "bad_driver!", "volumeHandle": "h"}}), "spec.csi.driver"),
            (json!({"hostPath": {"path": "/tmp/x", "type": "Bogus"}}), "spec.hostPath.type"),
            (
                json!({"hostPath": {"path": "/tmp/x"}, "nodeAffinity": {"required": {"nodeSelectorTerms": []}}}),
                "spec.nodeAffinity.required.nodeSelectorTerms",
            ),
            (
                json!({"hostPath": {"path": "/tmp/x"}, "volumeAttributesClassName": ""}),
                "spec.volumeAttributesClassName",
            ),
        ];
        for (source, path) in cases {
            let errs = validate(pv_type(), &pv_with(source.clone(), "Retain"));
            assert!(paths(&errs).contains(&path), "{source}: {errs:?}");
        }
        let mut extra = pv_with(json!({"nfs": {"server": "s", "path": "/x"}}), "Retain");
        extra["spec"]["capacity"]["cpu"] = json!("1");
        assert_eq!(
            validate(pv_type(), &extra)[0].to_string(),
            "spec.capacity: Unsupported value: {\"cpu\":\"1\",\"storage\":\"1Gi\"}: supported values: \"storage\""
        );
        let mut mount = pv_with(json!({"hostPath": {"path": "/tmp/x"}}), "Retain");
        mount["metadata"]["annotations"] = json!({"volume.beta.kubernetes.io/mount-options": "ro"});
        assert_eq!(
            paths(&validate(pv_type(), &mount)),
            ["metadata.annotations.volume.beta.kubernetes.io/mount-options"]
        );
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
