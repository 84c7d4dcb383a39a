//! PersistentVolume rules (upstream's `ValidatePersistentVolumeSpec`, the mount-options check
//! of `pkg/volume/validation`, and `ValidatePersistentVolumeUpdate`), in upstream's order so a
//! volume with several faults lists them as kube-apiserver does.
//!
//! What upstream does *not* check is left alone on purpose: `claimRef` may name only a claim
//! (the controller fills in the rest), and Recycle is allowed on any source except a hostPath
//! that cleans to `/`.

use super::names;
use super::selectors::{validate_node_affinity, VolumeNodeAffinity};
use super::{class_name_errors, validate_access_modes, validate_class_and_mode, validate_quantity_positive};
use crate::error::FieldError;
use serde_json::Value;

/// Volume source fields of a PV spec, in the order upstream checks them (exactly one may be set).
pub const PV_SOURCES: &[&str] = &[
    "hostPath",
    "gcePersistentDisk",
    "awsElasticBlockStore",
    "glusterfs",
    "flocker",
    "nfs",
    "rbd",
    "quobyte",
    "cephfs",
    "iscsi",
    "cinder",
    "fc",
    "flexVolume",
    "azureFile",
    "vsphereVolume",
    "photonPersistentDisk",
    "portworxVolume",
    "azureDisk",
    "scaleIO",
    "local",
    "storageos",
    "csi",
];

/// Sources whose plugins take mount options; any other may not carry the mount-options
/// annotation.
const MOUNT_OPTION_SOURCES: &[&str] = &[
    "gcePersistentDisk",
    "awsElasticBlockStore",
    "glusterfs",
    "nfs",
    "rbd",
    "quobyte",
    "iscsi",
    "cinder",
    "cephfs",
    "azureFile",
    "vsphereVolume",
    "azureDisk",
    "photonPersistentDisk",
];

const MOUNT_OPTIONS_ANNOTATION: &str = "volume.beta.kubernetes.io/mount-options";
const RECLAIM_POLICIES: &[&str] = &["Delete", "Recycle", "Retain"];
const HOST_PATH_TYPES: &[&str] =
    &["", "BlockDevice", "CharDevice", "Directory", "DirectoryOrCreate", "File", "FileOrCreate", "Socket"];

fn set(v: Option<&Value>) -> Option<&Value> {
    v.filter(|x| !x.is_null())
}

fn s<'a>(v: &'a Value, f: &str) -> &'a str {
    v.get(f).and_then(Value::as_str).unwrap_or("")
}

fn no_backsteps(path: &str, value: &str, errs: &mut Vec<FieldError>) {
    if value.split('/').any(|p| p == "..") {
        errs.push(FieldError::invalid(path, value, "must not contain '..'"));
    }
}

/// Go's `path.Clean(p) == "/"` for an absolute path.
fn cleans_to_root(p: &str) -> bool {
    let mut depth: i32 = 0;
    if !p.starts_with('/') {
        return false;
    }
    for seg in p.split('/') {
        match seg {
            "" | "." => {}
            ".." => depth = (depth - 1).max(0),
            _ => depth += 1,
        }
    }
    depth == 0
}

fn validate_capacity(spec: &Value, errs: &mut Vec<FieldError>) {
    let cap = spec.get("capacity").and_then(Value::as_object);
    if cap.is_none_or(|c| c.is_empty()) {
        errs.push(FieldError::required("spec.capacity", ""));
    }
    if cap.is_none_or(|c| !c.contains_key("storage") || c.len() > 1) {
        let shown = match cap {
            Some(c) if !c.is_empty() => serde_json::to_string(c).unwrap_or_default(),
            Some(_) => "{}".into(),
            None => "null".into(),
        };
        errs.push(FieldError {
            path: "spec.capacity".into(),
            kind: crate::error::FieldErrorKind::NotSupportedValue(shown, vec!["storage".into()]),
            detail: String::new(),
        });
    }
    for (k, q) in cap.into_iter().flatten() {
        validate_quantity_positive(&format!("spec.capacity[{k}]"), q, errs);
    }
}

fn validate_source(name: &str, src: &Value, spec: &Value, errs: &mut Vec<FieldError>) {
    let p = format!("spec.{name}");
    match name {
        "hostPath" => {
            let path = s(src, "path");
            if path.is_empty() {
                errs.push(FieldError::required(format!("{p}.path"), ""));
                return;
            }
            no_backsteps(&format!("{p}.path"), path, errs);
            if let Some(t) = src.get("type").and_then(Value::as_str) {
                if !HOST_PATH_TYPES.contains(&t) {
                    errs.push(FieldError::not_supported(format!("{p}.type"), t, HOST_PATH_TYPES));
                }
            }
        }
        "nfs" => {
            if s(src, "server").is_empty() {
                errs.push(FieldError::required(format!("{p}.server"), ""));
            }
            let path = s(src, "path");
            if path.is_empty() {
                errs.push(FieldError::required(format!("{p}.path"), ""));
            }
            if !path.starts_with('/') {
                errs.push(FieldError::invalid(format!("{p}.path"), path, "must be an absolute path"));
            }
        }
        "local" => {
            let path = s(src, "path");
            if path.is_empty() {
                errs.push(FieldError::required(format!("{p}.path"), ""));
            } else {
                no_backsteps(&format!("{p}.path"), path, errs);
            }
            if set(spec.get("nodeAffinity")).is_none() {
                errs.push(FieldError::required("spec.nodeAffinity", "Local volume requires node affinity"));
            }
        }
        "csi" => {
            let driver = s(src, "driver");
            if driver.is_empty() {
                errs.push(FieldError::required(format!("{p}.driver"), ""));
            } else {
                if driver.len() > 63 {
                    errs.push(FieldError {
                        path: format!("{p}.driver"),
                        kind: crate::error::FieldErrorKind::TooLong(63),
                        detail: String::new(),
                    });
                }
                for m in names::dns1123_subdomain(&driver.to_lowercase()) {
                    errs.push(FieldError::invalid(format!("{p}.driver"), driver, m));
                }
            }
            if s(src, "volumeHandle").is_empty() {
                errs.push(FieldError::required(format!("{p}.volumeHandle"), ""));
            }
            for r in [
                "controllerPublishSecretRef",
                "controllerExpandSecretRef",
                "nodePublishSecretRef",
                "nodeExpandSecretRef",
            ] {
                if let Some(sr) = set(src.get(r)) {
                    let rp = format!("{p}.{r}");
                    let (n, ns) = (s(sr, "name"), s(sr, "namespace"));
                    if n.is_empty() {
                        errs.push(FieldError::required(format!("{rp}.name"), ""));
                    } else {
                        for m in names::dns1123_subdomain(n) {
                            errs.push(FieldError::invalid(format!("{rp}.name"), n, m));
                        }
                    }
                    if ns.is_empty() {
                        errs.push(FieldError::required(format!("{rp}.namespace"), ""));
                    } else {
                        for m in names::dns1123_label(ns) {
                            errs.push(FieldError::invalid(format!("{rp}.namespace"), ns, m));
                        }
                    }
                }
            }
        }
        _ => {}
    }
}

/// The volume source of `obj.spec`: exactly one, each checked as its kind wants (paths under
/// `spec`; an inline volume of a VolumeAttachment is checked with them moved).
pub(super) fn validate_sources(obj: &Value, errs: &mut Vec<FieldError>) {
    let spec = obj.get("spec").unwrap_or(&Value::Null);
    let mut count = 0;
    for name in PV_SOURCES {
        let Some(src) = set(spec.get(*name)) else { continue };
        if count > 0 && *name != "flexVolume" {
            errs.push(FieldError::forbidden(format!("spec.{name}"), "may not specify more than 1 volume type"));
            continue;
        }
        count += 1;
        validate_source(name, src, spec, errs);
    }
    if count == 0 {
        errs.push(FieldError::required("spec", "must specify a volume type"));
    }
}

/// A PV's spec and metadata annotations (create and update share these).
pub fn validate_pv(obj: &Value, errs: &mut Vec<FieldError>) {
    let Some(spec) = obj.get("spec").filter(|s| s.is_object()) else {
        errs.push(FieldError::required("spec", ""));
        return;
    };
    validate_access_modes("spec.accessModes", spec.get("accessModes"), "", errs);
    validate_capacity(spec, errs);
    if let Some(p) = spec.get("persistentVolumeReclaimPolicy").and_then(Value::as_str) {
        if !p.is_empty() && !RECLAIM_POLICIES.contains(&p) {
            errs.push(FieldError::not_supported("spec.persistentVolumeReclaimPolicy", p, RECLAIM_POLICIES));
        }
    }
    if let Some(na) = set(spec.get("nodeAffinity")) {
        validate_node_affinity(na, "spec.nodeAffinity", errs);
    }
    validate_sources(obj, errs);
    let recycle = spec.get("persistentVolumeReclaimPolicy").and_then(Value::as_str) == Some("Recycle");
    if recycle && set(spec.get("hostPath")).is_some_and(|hp| cleans_to_root(s(hp, "path"))) {
        errs.push(FieldError::forbidden(
            "spec.persistentVolumeReclaimPolicy",
            "may not be 'recycle' for a hostPath mount of '/'",
        ));
    }
    validate_class_and_mode(spec, errs);
    if let Some(vac) = spec.get("volumeAttributesClassName").and_then(Value::as_str) {
        if vac.is_empty() {
            errs.push(FieldError::required("spec.volumeAttributesClassName", "an empty string is disallowed"));
        } else {
            for m in class_name_errors(vac) {
                errs.push(FieldError::invalid("spec.volumeAttributesClassName", vac, m));
            }
        }
        if set(spec.get("csi")).is_none() {
            errs.push(FieldError::required("spec.csi", "has to be specified when using volumeAttributesClassName"));
        }
    }
    let has_annotation = obj
        .get("metadata")
        .and_then(|m| m.get("annotations"))
        .and_then(Value::as_object)
        .is_some_and(|a| a.contains_key(MOUNT_OPTIONS_ANNOTATION));
    if has_annotation && !MOUNT_OPTION_SOURCES.iter().any(|src| set(spec.get(*src)).is_some()) {
        errs.push(FieldError::forbidden(
            format!("metadata.annotations.{MOUNT_OPTIONS_ANNOTATION}"),
            "may not specify mount options for this volume type",
        ));
    }
}

/// What an update may not change: the volume source (a CSI volume may gain a
/// `controllerExpandSecretRef`), the volume mode, a node affinity once set, and a
/// `volumeAttributesClassName` once set may not be removed.
pub fn validate_pv_update(old: &Value, new: &Value, errs: &mut Vec<FieldError>) {
    let (os, ns) = (old.get("spec").cloned().unwrap_or_default(), new.get("spec").cloned().unwrap_or_default());
    let source = |spec: &Value, other: &Value| -> Vec<(&'static str, Value)> {
        PV_SOURCES
            .iter()
            .filter_map(|name| {
                let mut v = set(spec.get(*name))?.clone();
                // A CSI volume without a controllerExpandSecretRef may be given one.
                if *name == "csi"
                    && set(other.get("csi")).is_some_and(|c| set(c.get("controllerExpandSecretRef")).is_none())
                {
                    if let Some(o) = v.as_object_mut() {
                        o.remove("controllerExpandSecretRef");
                    }
                }
                Some((*name, v))
            })
            .collect()
    };
    let (old_src, new_src) = (source(&os, &ns), source(&ns, &os));
    if old_src != new_src {
        let diff = super::godiff::pv_source_diff(&os, &ns);
        errs.push(FieldError::forbidden(
            "spec.persistentvolumesource",
            format!("spec.persistentvolumesource is immutable after creation\n{diff}"),
        ));
    }
    let (om, nm) = (set(os.get("volumeMode")), set(ns.get("volumeMode")));
    if om != nm {
        errs.push(match nm.and_then(Value::as_str) {
            Some(m) => FieldError::invalid("volumeMode", m, "field is immutable"),
            None => FieldError::invalid_value("volumeMode", "null", "field is immutable"),
        });
    }
    if let Some(old_na) = set(os.get("nodeAffinity")) {
        let new_na = set(ns.get("nodeAffinity"));
        if VolumeNodeAffinity::masked(Some(old_na)) != VolumeNodeAffinity::masked(new_na) {
            errs.push(FieldError::invalid_value(
                "nodeAffinity",
                VolumeNodeAffinity::go_json(new_na),
                "field is immutable, except for updating from beta label to GA",
            ));
        }
    }
    if set(os.get("volumeAttributesClassName")).is_some() && set(ns.get("volumeAttributesClassName")).is_none() {
        errs.push(FieldError::forbidden(
            "spec.volumeAttributesClassName",
            "update from non-nil value to nil is forbidden",
        ));
    }
}
