//! The admission plugins kube-apiserver enables by default that touch storage objects.
//!
//! - **StorageObjectInUseProtection** (mutating, create): every new PersistentVolume gets the
//!   `kubernetes.io/pv-protection` finalizer and every new claim `kubernetes.io/pvc-protection`,
//!   so that neither disappears while in use. Something must take them off again: in a cluster
//!   that is kube-controller-manager's pv-protection and pvc-protection controllers, in `up` the
//!   protection controllers that run beside the binder.
//! - **DefaultStorageClass** (mutating, create): a claim with no class at all (no
//!   `storageClassName`, not even `""`, and no beta class annotation) gets the default class:
//!   the newest class annotated `storageclass.kubernetes.io/is-default-class: "true"` (or the
//!   beta annotation), ties broken by name.
//! - **PersistentVolumeClaimResize** (validating, update): a claim may only grow when it is
//!   Bound and its class allows volume expansion (403 otherwise).
//! - **ServiceAccount**, **Priority**, **DefaultTolerationSeconds** (mutating, create): a new
//!   Pod gets the `default` ServiceAccount, priority 0 and five minutes of toleration for
//!   not-ready and unreachable nodes. (No token volume is mounted: nothing runs `up`'s pods.)
//! - **TaintNodesByCondition** (mutating, create): a new Node is tainted
//!   `node.kubernetes.io/not-ready:NoSchedule`.
//!
//! The store applies them only when built with [`Admission::kube_apiserver`]: `up` serves as a
//! cluster does, while the in-memory store of `simulate` and of tests loads state as given.

use crate::error::StoreError;
use pv_model::quantity::Quantity;
use serde_json::{json, Value};

use pv_model::finalizers;

const IS_DEFAULT_CLASS: &str = "storageclass.kubernetes.io/is-default-class";
const BETA_IS_DEFAULT_CLASS: &str = "storageclass.beta.kubernetes.io/is-default-class";
const BETA_CLASS_ANNOTATION: &str = "volume.beta.kubernetes.io/storage-class";

/// Which admission plugins the store runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Admission {
    /// StorageObjectInUseProtection.
    pub storage_protection: bool,
    /// DefaultStorageClass.
    pub default_storage_class: bool,
    /// PersistentVolumeClaimResize.
    pub claim_resize: bool,
    /// ServiceAccount, Priority and DefaultTolerationSeconds on new Pods (the `default`
    /// ServiceAccount, priority 0, tolerations for not-ready and unreachable nodes).
    pub pod_defaults: bool,
    /// TaintNodesByCondition: new Nodes start tainted `node.kubernetes.io/not-ready`.
    pub node_taints: bool,
}

impl Admission {
    /// None (the in-memory store of `simulate` and tests).
    pub fn none() -> Self {
        Admission::default()
    }

    /// The storage plugins kube-apiserver enables by default.
    pub fn kube_apiserver() -> Self {
        Admission {
            storage_protection: true,
            default_storage_class: true,
            claim_resize: true,
            pod_defaults: true,
            node_taints: true,
        }
    }

    /// The mutating plugins on a new object of `kind`; `classes` are the stored classes.
    pub fn admit_create(&self, kind: &str, obj: &mut Value, classes: &[Value]) {
        match kind {
            "PersistentVolume" if self.storage_protection => add_finalizer(obj, finalizers::PV_PROTECTION),
            "PersistentVolumeClaim" => {
                if self.default_storage_class && !has_class(obj) {
                    if let Some(name) = default_class(classes) {
                        if let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) {
                            spec.insert("storageClassName".into(), json!(name));
                        }
                    }
                }
                if self.storage_protection {
                    add_finalizer(obj, finalizers::PVC_PROTECTION);
                }
            }
            "Pod" if self.pod_defaults => crate::validation::other::admit_pod(obj),
            "Node" if self.node_taints => crate::validation::other::admit_node(obj),
            _ => {}
        }
    }

    /// The validating plugins on an update of the main resource of `kind`.
    pub fn validate_update(&self, kind: &str, old: &Value, new: &Value, classes: &[Value]) -> Result<(), StoreError> {
        if !self.claim_resize || kind != "PersistentVolumeClaim" {
            return Ok(());
        }
        let size = |v: &Value| {
            v.get("spec")
                .and_then(|s| s.get("resources"))
                .and_then(|r| r.get("requests"))
                .and_then(|r| r.get("storage"))
                .and_then(Value::as_str)
                .and_then(|q| Quantity::parse(q).ok())
                .unwrap_or(Quantity::ZERO)
        };
        if size(new) <= size(old) {
            return Ok(());
        }
        let name = new.get("metadata").and_then(|m| m.get("name")).and_then(Value::as_str).unwrap_or("");
        let forbidden = |message: &str| StoreError::Forbidden {
            resource: "persistentvolumeclaims".into(),
            name: name.into(),
            message: message.into(),
        };
        if old.get("status").and_then(|s| s.get("phase")).and_then(Value::as_str) != Some("Bound") {
            return Err(forbidden("Only bound persistent volume claims can be expanded"));
        }
        let (class, old_class) = (claim_class(new), claim_class(old));
        let expandable = !class.is_empty()
            && class == old_class
            && classes.iter().any(|c| {
                c.get("metadata").and_then(|m| m.get("name")).and_then(Value::as_str) == Some(class.as_str())
                    && c.get("allowVolumeExpansion").and_then(Value::as_bool) == Some(true)
            });
        if !expandable {
            return Err(forbidden(
                "only dynamically provisioned pvc can be resized and the storageclass that provisions the pvc must support resize",
            ));
        }
        Ok(())
    }
}

fn add_finalizer(obj: &mut Value, finalizer: &str) {
    let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) else { return };
    let list = meta.entry("finalizers").or_insert_with(|| json!([]));
    if !list.is_array() {
        *list = json!([]);
    }
    let list = list.as_array_mut().expect("array");
    if !list.iter().any(|f| f.as_str() == Some(finalizer)) {
        list.push(json!(finalizer));
    }
}

fn annotation<'a>(obj: &'a Value, key: &str) -> Option<&'a str> {
    obj.get("metadata").and_then(|m| m.get("annotations")).and_then(|a| a.get(key)).and_then(Value::as_str)
}

/// Upstream's `PersistentVolumeClaimHasClass`: the beta annotation, or a `storageClassName`
/// (even empty).
fn has_class(claim: &Value) -> bool {
    annotation(claim, BETA_CLASS_ANNOTATION).is_some()
        || claim.get("spec").and_then(|s| s.get("storageClassName")).is_some_and(|c| !c.is_null())
}

/// Upstream's `GetPersistentVolumeClaimClass`: the beta annotation first, then the field.
fn claim_class(claim: &Value) -> String {
    annotation(claim, BETA_CLASS_ANNOTATION)
        .or_else(|| claim.get("spec").and_then(|s| s.get("storageClassName")).and_then(Value::as_str))
        .unwrap_or("")
        .to_string()
}

/// The default class: newest by creation time, then by name.
fn default_class(classes: &[Value]) -> Option<String> {
    let mut defaults: Vec<(&str, &str)> = classes
        .iter()
        .filter(|c| {
            annotation(c, IS_DEFAULT_CLASS) == Some("true") || annotation(c, BETA_IS_DEFAULT_CLASS) == Some("true")
        })
        .map(|c| {
            let m = c.get("metadata");
            let s = |f: &str| m.and_then(|m| m.get(f)).and_then(Value::as_str).unwrap_or("");
            (s("creationTimestamp"), s("name"))
        })
        .collect();
    // RFC 3339 timestamps in UTC sort as strings.
    defaults.sort_by(|a, b| b.0.cmp(a.0).then(a.1.cmp(b.1)));
    defaults.first().map(|(_, n)| n.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class(name: &str, created: &str, default: bool) -> Value {
        let mut c = json!({"metadata": {"name": name, "creationTimestamp": created}, "provisioner": "x"});
        if default {
            c["metadata"]["annotations"] = json!({IS_DEFAULT_CLASS: "true"});
        }
        c
    }

    #[test]
    fn a_claim_without_class_gets_the_newest_default_and_a_finalizer() {
        let classes = [
            class("old", "2020-01-01T00:00:00Z", true),
            class("new", "2021-01-01T00:00:00Z", true),
            class("plain", "2022-01-01T00:00:00Z", false),
        ];
        let mut claim = json!({"metadata": {"name": "c"}, "spec": {}});
        Admission::kube_apiserver().admit_create("PersistentVolumeClaim", &mut claim, &classes);
        assert_eq!(claim["spec"]["storageClassName"], "new");
        assert_eq!(claim["metadata"]["finalizers"], json!([finalizers::PVC_PROTECTION]));
        let mut empty = json!({"metadata": {"name": "c"}, "spec": {"storageClassName": ""}});
        Admission::kube_apiserver().admit_create("PersistentVolumeClaim", &mut empty, &classes);
        assert_eq!(empty["spec"]["storageClassName"], "");
        let mut none = json!({"metadata": {"name": "c"}, "spec": {}});
        Admission::none().admit_create("PersistentVolumeClaim", &mut none, &classes);
        assert_eq!(none, json!({"metadata": {"name": "c"}, "spec": {}}));
    }

    #[test]
    fn only_a_bound_claim_of_an_expandable_class_may_grow() {
        let mut expandable = class("gold", "2020-01-01T00:00:00Z", false);
        expandable["allowVolumeExpansion"] = json!(true);
        let classes = [expandable, class("fixed", "2020-01-01T00:00:00Z", false)];
        let claim = |class: &str, size: &str, phase: &str| {
            json!({"metadata": {"name": "c"}, "spec": {"storageClassName": class, "resources": {"requests": {"storage": size}}},
                   "status": {"phase": phase}})
        };
        let a = Admission::kube_apiserver();
        let grow = |class: &str, phase: &str| {
            a.validate_update(
                "PersistentVolumeClaim",
                &claim(class, "1Gi", phase),
                &claim(class, "2Gi", phase),
                &classes,
            )
        };
        assert!(grow("gold", "Bound").is_ok());
        let e = grow("fixed", "Bound").unwrap_err().to_string();
        assert!(e.contains("only dynamically provisioned pvc can be resized"), "{e}");
        let e = grow("gold", "Pending").unwrap_err().to_string();
        assert!(e.contains("Only bound persistent volume claims can be expanded"), "{e}");
        assert!(a
            .validate_update(
                "PersistentVolumeClaim",
                &claim("fixed", "2Gi", "Bound"),
                &claim("fixed", "1Gi", "Bound"),
                &classes
            )
            .is_ok());
    }
}
