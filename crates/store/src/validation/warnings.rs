//! The `Warning` headers kube-apiserver's storage strategies attach to accepted writes: the
//! deprecated Recycle reclaim policy, the beta storage-class and mount-options annotations,
//! deprecated volume plugins and deprecated node labels in a volume's node affinity or a
//! class's allowed topologies or a CSIStorageCapacity's node topology; a CSIDriver that requests
//! tokens without `serviceAccountTokenInSecrets`. They are sent on create and update of the main resource (not
//! on status writes), for the object as written, in upstream's order and wording. Each kind's
//! strategy ([`crate::registry`]) says which of them its writes get.

use serde_json::Value;

const DEPRECATED_NODE_LABELS: &[(&str, &str)] = &[
    ("beta.kubernetes.io/arch", "deprecated since v1.14; use \"kubernetes.io/arch\" instead"),
    ("beta.kubernetes.io/os", "deprecated since v1.14; use \"kubernetes.io/os\" instead"),
    (
        "failure-domain.beta.kubernetes.io/region",
        "deprecated since v1.17; use \"topology.kubernetes.io/region\" instead",
    ),
    ("failure-domain.beta.kubernetes.io/zone", "deprecated since v1.17; use \"topology.kubernetes.io/zone\" instead"),
    ("beta.kubernetes.io/instance-type", "deprecated since v1.17; use \"node.kubernetes.io/instance-type\" instead"),
    ("app.kubernetes.io/created-by", "deprecated since v1.9"),
    ("scheduler.alpha.kubernetes.io/preferAvoidPods", "deprecated since v1.22; use Taints and Tolerations instead"),
    ("node-role.kubernetes.io/master", "use \"node-role.kubernetes.io/control-plane\" instead"),
];

pub(crate) const STORAGE_CLASS_ANNOTATION: (&str, &str) =
    ("volume.beta.kubernetes.io/storage-class", "deprecated since v1.8; use \"storageClassName\" attribute instead");
const MOUNT_OPTIONS_ANNOTATION: (&str, &str) =
    ("volume.beta.kubernetes.io/mount-options", "deprecated since v1.31; use \"mountOptions\" attribute instead");

const DEPRECATED_PLUGINS: &[(&str, &str)] = &[
    ("cephfs", "deprecated in v1.28, non-functional in v1.31+"),
    ("photonPersistentDisk", "deprecated in v1.11, non-functional in v1.16+"),
    ("scaleIO", "deprecated in v1.16, non-functional in v1.22+"),
    ("storageOS", "deprecated in v1.22, non-functional in v1.25+"),
    ("glusterfs", "deprecated in v1.25, non-functional in v1.26+"),
    ("rbd", "deprecated in v1.28, non-functional in v1.31+"),
];

fn node_label_message(key: &str) -> Option<&'static str> {
    DEPRECATED_NODE_LABELS.iter().find(|(k, _)| *k == key).map(|(_, m)| *m)
}

pub(crate) fn annotation_warnings(obj: &Value, which: &[(&str, &str)]) -> Vec<String> {
    let annotations = obj.pointer("/metadata/annotations");
    which
        .iter()
        .filter(|(k, _)| annotations.and_then(|a| a.get(*k)).is_some())
        .map(|(k, m)| format!("metadata.annotations[{k}]: {m}"))
        .collect()
}

fn items(v: Option<&Value>) -> &[Value] {
    v.and_then(Value::as_array).map_or(&[], Vec::as_slice)
}

pub(crate) fn persistent_volume(pv: &Value) -> Vec<String> {
    let mut out = annotation_warnings(pv, &[STORAGE_CLASS_ANNOTATION, MOUNT_OPTIONS_ANNOTATION]);
    let spec = pv.get("spec").unwrap_or(&Value::Null);
    if spec.get("persistentVolumeReclaimPolicy").and_then(Value::as_str) == Some("Recycle") {
        out.push(
            "spec.persistentVolumeReclaimPolicy: The Recycle reclaim policy is deprecated. Instead, the recommended approach is to use dynamic provisioning."
                .into(),
        );
    }
    for (i, term) in items(spec.pointer("/nodeAffinity/required/nodeSelectorTerms")).iter().enumerate() {
        for (j, expr) in items(term.get("matchExpressions")).iter().enumerate() {
            let key = expr.get("key").and_then(Value::as_str).unwrap_or("");
            if let Some(m) = node_label_message(key) {
                out.push(format!(
                    "spec.nodeAffinity.required.nodeSelectorTerms[{i}].matchExpressions[{j}].key: {key} is {m}"
                ));
            }
        }
    }
    for (plugin, m) in DEPRECATED_PLUGINS {
        if spec.get(*plugin).is_some_and(|v| !v.is_null()) {
            out.push(format!("spec.{plugin}: {m}"));
        }
    }
    out
}

pub(crate) fn storage_class(sc: &Value) -> Vec<String> {
    let mut out = Vec::new();
    for (i, topo) in items(sc.get("allowedTopologies")).iter().enumerate() {
        for (j, expr) in items(topo.get("matchLabelExpressions")).iter().enumerate() {
            let key = expr.get("key").and_then(Value::as_str).unwrap_or("");
            if let Some(m) = node_label_message(key) {
                out.push(format!("allowedTopologies[{i}].matchLabelExpressions[{j}].key: {m}"));
            }
        }
    }
    out
}

/// A CSIStorageCapacity's node topology (upstream's `GetWarningsForNodeSelector`): deprecated
/// node labels in its expressions, then in its labels.
pub(crate) fn storage_capacity(csc: &Value) -> Vec<String> {
    let mut out = Vec::new();
    for (i, expr) in items(csc.pointer("/nodeTopology/matchExpressions")).iter().enumerate() {
        let key = expr.get("key").and_then(Value::as_str).unwrap_or("");
        if let Some(m) = node_label_message(key) {
            out.push(format!("nodeTopology.matchExpressions[{i}].key: {key} is {m}"));
        }
    }
    for key in csc.pointer("/nodeTopology/matchLabels").and_then(Value::as_object).into_iter().flat_map(|m| m.keys()) {
        if let Some(m) = node_label_message(key) {
            out.push(format!("nodeTopology.matchLabels.{key}: {m}"));
        }
    }
    out
}

/// A `kubernetes.io/tls` Secret whose certificate or key holds no PEM block: upstream warns
/// (`tls: failed to find any PEM data in certificate input`) and stores it.
pub(crate) fn tls_secret(obj: &Value) -> Vec<String> {
    use base64::Engine;
    if obj.get("type").and_then(Value::as_str) != Some("kubernetes.io/tls") {
        return Vec::new();
    }
    let pem = |k: &str| {
        let b64 = obj.get("data").and_then(|d| d.get(k)).and_then(Value::as_str).unwrap_or("");
        let bytes = base64::engine::general_purpose::STANDARD.decode(b64).unwrap_or_default();
        String::from_utf8_lossy(&bytes).contains("-----BEGIN ")
    };
    if !pem("tls.crt") {
        vec!["tls: failed to find any PEM data in certificate input".into()]
    } else if !pem("tls.key") {
        vec!["tls: failed to find any PEM data in key input".into()]
    } else {
        Vec::new()
    }
}

#[cfg(test)]
mod tests {
    use crate::kinds::ResourceType;
    use serde_json::{json, Value};

    fn for_write(kind: &str, old: Option<&Value>, obj: &Value) -> Vec<String> {
        crate::registry::warnings(ResourceType::by_kind(kind).unwrap(), old, obj)
    }

    #[test]
    fn volumes_warn_about_recycle_beta_annotations_plugins_and_node_labels() {
        let pv = json!({"metadata": {"annotations": {"volume.beta.kubernetes.io/mount-options": "ro"}},
                        "spec": {"persistentVolumeReclaimPolicy": "Recycle", "rbd": {"image": "x"},
                                 "nodeAffinity": {"required": {"nodeSelectorTerms": [
                                     {"matchExpressions": [{"key": "failure-domain.beta.kubernetes.io/zone"}]}]}}}});
        assert_eq!(
            for_write("PersistentVolume", None, &pv),
            [
                "metadata.annotations[volume.beta.kubernetes.io/mount-options]: deprecated since v1.31; use \"mountOptions\" attribute instead",
                "spec.persistentVolumeReclaimPolicy: The Recycle reclaim policy is deprecated. Instead, the recommended approach is to use dynamic provisioning.",
                "spec.nodeAffinity.required.nodeSelectorTerms[0].matchExpressions[0].key: failure-domain.beta.kubernetes.io/zone is deprecated since v1.17; use \"topology.kubernetes.io/zone\" instead",
                "spec.rbd: deprecated in v1.28, non-functional in v1.31+",
            ]
        );
        let retain = json!({"spec": {"persistentVolumeReclaimPolicy": "Retain", "hostPath": {"path": "/x"}}});
        assert!(for_write("PersistentVolume", None, &retain).is_empty());
        let claim = json!({"metadata": {"annotations": {"volume.beta.kubernetes.io/storage-class": "gold"}}});
        assert_eq!(for_write("PersistentVolumeClaim", None, &claim).len(), 1);
        let sc = json!({"allowedTopologies": [{"matchLabelExpressions": [{"key": "beta.kubernetes.io/os"}]}]});
        assert_eq!(
            for_write("StorageClass", None, &sc),
            ["allowedTopologies[0].matchLabelExpressions[0].key: deprecated since v1.14; use \"kubernetes.io/os\" instead"]
        );
        let csc = json!({"nodeTopology": {"matchLabels": {"beta.kubernetes.io/os": "linux", "kubernetes.io/hostname": "x"},
                                          "matchExpressions": [{"key": "failure-domain.beta.kubernetes.io/zone", "operator": "Exists"}]}});
        assert_eq!(
            for_write("CSIStorageCapacity", None, &csc),
            [
                "nodeTopology.matchExpressions[0].key: failure-domain.beta.kubernetes.io/zone is deprecated since v1.17; use \"topology.kubernetes.io/zone\" instead",
                "nodeTopology.matchLabels.beta.kubernetes.io/os: deprecated since v1.14; use \"kubernetes.io/os\" instead",
            ]
        );
    }

    #[test]
    fn a_driver_asking_for_tokens_is_told_where_to_keep_them_once() {
        let plain = json!({"spec": {"attachRequired": true}});
        let tokens = json!({"spec": {"attachRequired": true, "tokenRequests": [{"audience": "a"}]}});
        assert_eq!(for_write("CSIDriver", None, &tokens).len(), 1);
        assert_eq!(for_write("CSIDriver", Some(&plain), &tokens).len(), 1);
        assert!(for_write("CSIDriver", Some(&tokens), &tokens).is_empty());
        assert!(for_write("CSIDriver", None, &plain).is_empty());
    }
}
