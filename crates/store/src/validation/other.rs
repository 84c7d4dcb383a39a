//! The other kinds the store serves, checked as far as the controller and its users meet
//! them: a Pod's defaults (its spec is checked in [`super::pod`]), the spec fields an update may change, and its
//! status at create (reset as the pod strategy does, with the QoS class); a Node's defaults; a
//! Lease's durations.

use crate::error::FieldError;
use pv_model::quantity::Quantity;
use serde_json::{json, Map, Value};

fn set_if_unset(m: &mut Map<String, Value>, key: &str, value: Value) {
    if m.get(key).is_none_or(Value::is_null) {
        m.insert(key.into(), value);
    }
}

/// The pull policy upstream defaults a container's image to: `Always` for the tag `latest`
/// (also when no tag and no digest is given), `IfNotPresent` otherwise.
fn default_pull_policy(image: &str) -> &'static str {
    let (name, digest) = match image.split_once('@') {
        Some((n, _)) => (n, true),
        None => (image, false),
    };
    let last = name.rsplit('/').next().unwrap_or(name);
    let tag = match last.split_once(':') {
        Some((_, t)) => t,
        None if digest => "",
        None => "latest",
    };
    if tag == "latest" {
        "Always"
    } else {
        "IfNotPresent"
    }
}

/// kube-apiserver's v1 defaults of a Pod (`SetDefaults_PodSpec`, `SetDefaults_Container`, the
/// deprecated `serviceAccount` mirrored from `serviceAccountName`), applied to every write.
pub fn default_pod(obj: &mut Value) {
    let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) else { return };
    set_if_unset(spec, "dnsPolicy", json!("ClusterFirst"));
    set_if_unset(spec, "restartPolicy", json!("Always"));
    set_if_unset(spec, "terminationGracePeriodSeconds", json!(30));
    set_if_unset(spec, "securityContext", json!({}));
    set_if_unset(spec, "schedulerName", json!("default-scheduler"));
    set_if_unset(spec, "enableServiceLinks", json!(true));
    if let Some(sa) = spec.get("serviceAccountName").and_then(Value::as_str).filter(|s| !s.is_empty()) {
        let sa = sa.to_string();
        spec.insert("serviceAccount".into(), json!(sa));
    }
    for list in ["containers", "initContainers"] {
        for c in spec.get_mut(list).and_then(Value::as_array_mut).into_iter().flatten() {
            let Some(c) = c.as_object_mut() else { continue };
            let policy = default_pull_policy(c.get("image").and_then(Value::as_str).unwrap_or(""));
            set_if_unset(c, "imagePullPolicy", json!(policy));
            set_if_unset(c, "terminationMessagePath", json!("/dev/termination-log"));
            set_if_unset(c, "terminationMessagePolicy", json!("File"));
            set_if_unset(c, "resources", json!({}));
            for port in c.get_mut("ports").and_then(Value::as_array_mut).into_iter().flatten() {
                if let Some(p) = port.as_object_mut() {
                    set_if_unset(p, "protocol", json!("TCP"));
                }
            }
        }
    }
    for v in spec.get_mut("volumes").and_then(Value::as_array_mut).into_iter().flatten() {
        if let Some(hp) = v.get_mut("hostPath").and_then(Value::as_object_mut) {
            set_if_unset(hp, "type", json!(""));
        }
    }
}

/// What kube-apiserver's default admission plugins add to a new Pod: the `default`
/// ServiceAccount (ServiceAccount), priority 0 and its preemption policy (Priority, with no
/// global default PriorityClass), and five minutes of toleration for not-ready and unreachable
/// nodes (DefaultTolerationSeconds).
pub fn admit_pod(obj: &mut Value) {
    let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) else { return };
    if spec.get("serviceAccountName").and_then(Value::as_str).is_none_or(str::is_empty) {
        spec.insert("serviceAccountName".into(), json!("default"));
        spec.insert("serviceAccount".into(), json!("default"));
    }
    set_if_unset(spec, "priority", json!(0));
    set_if_unset(spec, "preemptionPolicy", json!("PreemptLowerPriority"));
    let tolerations = spec.entry("tolerations").or_insert_with(|| json!([]));
    if !tolerations.is_array() {
        *tolerations = json!([]);
    }
    let list = tolerations.as_array_mut().expect("an array");
    let tolerates = |list: &[Value], key: &str| {
        list.iter().any(|t| {
            let k = t.get("key").and_then(Value::as_str).unwrap_or("");
            let e = t.get("effect").and_then(Value::as_str).unwrap_or("");
            (k == key || k.is_empty()) && (e == "NoExecute" || e.is_empty())
        })
    };
    for key in ["node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"] {
        if !tolerates(list, key) {
            list.push(json!({"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}));
        }
    }
}

/// The spec fields a Pod update may change (`ValidatePodUpdate`): container and init container
/// images, `activeDeadlineSeconds`, added tolerations, and a negative
/// `terminationGracePeriodSeconds` set to 1. Anything else is refused.
pub fn validate_pod_update(old: &Value, new: &Value, errs: &mut Vec<FieldError>) {
    let (Some(old_spec), Some(new_spec)) = (old.get("spec"), new.get("spec")) else { return };
    let mut masked = new_spec.clone();
    let Some(m) = masked.as_object_mut() else { return };
    for list in ["containers", "initContainers"] {
        let old_list = old_spec.get(list).and_then(Value::as_array);
        if let (Some(new_list), Some(old_list)) = (m.get_mut(list).and_then(Value::as_array_mut), old_list) {
            if new_list.len() == old_list.len() {
                for (n, o) in new_list.iter_mut().zip(old_list) {
                    if let (Some(n), Some(image)) = (n.as_object_mut(), o.get("image")) {
                        n.insert("image".into(), image.clone());
                    }
                }
            }
        }
    }
    match old_spec.get("activeDeadlineSeconds") {
        Some(v) => m.insert("activeDeadlineSeconds".into(), v.clone()),
        None => m.remove("activeDeadlineSeconds"),
    };
    // Tolerations may only be added to.
    let old_tol = old_spec.get("tolerations").and_then(Value::as_array).cloned().unwrap_or_default();
    let new_tol = m.get("tolerations").and_then(Value::as_array).cloned().unwrap_or_default();
    if old_tol.iter().all(|t| new_tol.contains(t)) {
        match old_spec.get("tolerations") {
            Some(v) => m.insert("tolerations".into(), v.clone()),
            None => m.remove("tolerations"),
        };
    }
    let old_grace = old_spec.get("terminationGracePeriodSeconds").and_then(Value::as_i64);
    if old_grace.is_some_and(|g| g < 0) && m.get("terminationGracePeriodSeconds").and_then(Value::as_i64) == Some(1) {
        m.insert("terminationGracePeriodSeconds".into(), json!(old_grace));
    }
    if &masked != old_spec {
        errs.push(FieldError::forbidden(
            "spec",
            "pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)",
        ));
    }
}

/// kube-apiserver's v1 default of a Node's status: `allocatable` is `capacity` when not given.
pub fn default_node(obj: &mut Value) {
    let Some(status) = obj.get_mut("status").and_then(Value::as_object_mut) else { return };
    if status.get("allocatable").is_none_or(Value::is_null) {
        if let Some(capacity) = status.get("capacity").filter(|c| c.is_object()).cloned() {
            status.insert("allocatable".into(), capacity);
        }
    }
}

/// The TaintNodesByCondition admission: a new Node starts with the `node.kubernetes.io/not-ready`
/// NoSchedule taint, until its kubelet reports it Ready.
pub fn admit_node(obj: &mut Value) {
    let Some(o) = obj.as_object_mut() else { return };
    let spec = o.entry("spec").or_insert_with(|| json!({}));
    let Some(spec) = spec.as_object_mut() else { return };
    let taints = spec.entry("taints").or_insert_with(|| json!([]));
    if !taints.is_array() {
        *taints = json!([]);
    }
    let list = taints.as_array_mut().expect("an array");
    if !list.iter().any(|t| t.get("key").and_then(Value::as_str) == Some("node.kubernetes.io/not-ready")) {
        list.push(json!({"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}));
    }
}

/// A Lease's spec: a positive duration, a non-negative transition count, a preferred holder
/// only with a strategy.
pub fn validate_lease(obj: &Value, errs: &mut Vec<FieldError>) {
    let Some(spec) = obj.get("spec").filter(|s| s.is_object()) else { return };
    if let Some(d) = spec.get("leaseDurationSeconds").and_then(Value::as_i64) {
        if d <= 0 {
            errs.push(FieldError::invalid_value("spec.leaseDurationSeconds", d.to_string(), "must be greater than 0"));
        }
    }
    if let Some(t) = spec.get("leaseTransitions").and_then(Value::as_i64) {
        if t < 0 {
            errs.push(FieldError::invalid_value(
                "spec.leaseTransitions",
                t.to_string(),
                "must be greater than or equal to 0",
            ));
        }
    }
    if let Some(s) = spec.get("strategy").and_then(Value::as_str) {
        if s != "OldestEmulationVersion" {
            errs.push(FieldError::not_supported("spec.strategy", s, &["OldestEmulationVersion"]));
        }
    }
    let preferred = spec.get("preferredHolder").and_then(Value::as_str).unwrap_or("");
    let strategy = spec.get("strategy").and_then(Value::as_str).unwrap_or("");
    if !preferred.is_empty() && strategy.is_empty() {
        errs.push(FieldError::forbidden("spec.preferredHolder", "may only be specified if `strategy` is defined"));
    }
}

/// The status a Pod starts with, whatever the request carried: Pending, with its QoS class.
pub fn initial_pod_status(pod: &Value) -> Value {
    json!({"phase": "Pending", "qosClass": qos_class(pod)})
}

/// Upstream's QoS class: BestEffort without any CPU or memory request or limit, Guaranteed when
/// every container limits both and requests what it limits, else Burstable.
fn qos_class(pod: &Value) -> &'static str {
    let spec = pod.get("spec");
    let containers: Vec<&Value> = ["containers", "initContainers"]
        .iter()
        .flat_map(|f| spec.and_then(|s| s.get(*f)).and_then(Value::as_array).into_iter().flatten())
        .collect();
    let mut any = false;
    let mut guaranteed = true;
    for c in &containers {
        let res = |kind: &str, r: &str| {
            c.get("resources")
                .and_then(|x| x.get(kind))
                .and_then(|x| x.get(r))
                .and_then(Value::as_str)
                .and_then(|q| Quantity::parse(q).ok())
                .filter(|q| q.nanos() != 0)
        };
        for r in ["cpu", "memory"] {
            let (req, lim) = (res("requests", r), res("limits", r));
            any |= req.is_some() || lim.is_some();
            match (req, lim) {
                (_, None) => guaranteed = false,
                (Some(q), Some(l)) if q != l => guaranteed = false,
                _ => {}
            }
        }
    }
    if !any {
        "BestEffort"
    } else if guaranteed {
        "Guaranteed"
    } else {
        "Burstable"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn images_without_a_tag_or_tagged_latest_are_always_pulled() {
        assert_eq!(default_pull_policy("busybox"), "Always");
        assert_eq!(default_pull_policy("busybox:latest"), "Always");
        assert_eq!(default_pull_policy("registry:5000/busybox"), "Always");
        assert_eq!(default_pull_policy("registry:5000/busybox:1.36"), "IfNotPresent");
        assert_eq!(default_pull_policy("busybox@sha256:abc"), "IfNotPresent");
    }

    #[test]
    fn a_new_pod_gets_upstreams_defaults_and_admission() {
        let mut pod = json!({"spec": {"containers": [{"name": "c", "image": "busybox"}],
            "tolerations": [{"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"}]}});
        default_pod(&mut pod);
        admit_pod(&mut pod);
        let spec = &pod["spec"];
        assert_eq!(spec["restartPolicy"], "Always");
        assert_eq!(spec["dnsPolicy"], "ClusterFirst");
        assert_eq!(spec["terminationGracePeriodSeconds"], 30);
        assert_eq!(spec["serviceAccountName"], "default");
        assert_eq!(spec["serviceAccount"], "default");
        assert_eq!(spec["priority"], 0);
        assert_eq!(spec["containers"][0]["imagePullPolicy"], "Always");
        assert_eq!(spec["containers"][0]["terminationMessagePath"], "/dev/termination-log");
        let keys: Vec<&str> =
            spec["tolerations"].as_array().unwrap().iter().map(|t| t["key"].as_str().unwrap()).collect();
        assert_eq!(keys, ["node.kubernetes.io/unreachable", "node.kubernetes.io/not-ready"], "one added, none doubled");
    }

    #[test]
    fn a_pod_update_may_change_images_and_add_tolerations_only() {
        let old = json!({"spec": {"containers": [{"name": "c", "image": "a"}], "restartPolicy": "Always", "tolerations": []}});
        let check = |new: Value| {
            let mut errs = Vec::new();
            validate_pod_update(&old, &new, &mut errs);
            errs.iter().map(|e| e.path.clone()).collect::<Vec<_>>()
        };
        assert!(check(json!({"spec": {"containers": [{"name": "c", "image": "b"}], "restartPolicy": "Always",
            "tolerations": [{"key": "k", "operator": "Exists"}]}}))
        .is_empty());
        assert_eq!(
            check(
                json!({"spec": {"containers": [{"name": "c", "image": "a"}], "restartPolicy": "Never", "tolerations": []}})
            ),
            ["spec"]
        );
    }

    #[test]
    fn a_new_node_is_tainted_not_ready_and_allocates_its_capacity() {
        let mut node = json!({"metadata": {"name": "n"}, "status": {"capacity": {"cpu": "2"}}});
        default_node(&mut node);
        admit_node(&mut node);
        assert_eq!(node["status"]["allocatable"], json!({"cpu": "2"}));
        assert_eq!(node["spec"]["taints"], json!([{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}]));
    }

    #[test]
    fn qos_follows_requests_and_limits() {
        let pod = |res: Value| json!({"spec": {"containers": [{"name": "c", "resources": res}]}});
        assert_eq!(qos_class(&pod(json!({}))), "BestEffort");
        assert_eq!(qos_class(&pod(json!({"requests": {"cpu": "1"}}))), "Burstable");
        assert_eq!(qos_class(&pod(json!({"limits": {"cpu": "1", "memory": "1Gi"}}))), "Guaranteed");
    }

    #[test]
    fn lease_durations_must_be_positive() {
        let mut errs = Vec::new();
        validate_lease(&json!({"spec": {"leaseDurationSeconds": 0, "leaseTransitions": -1}}), &mut errs);
        let text: Vec<String> = errs.iter().map(ToString::to_string).collect();
        assert_eq!(
            text,
            [
                "spec.leaseDurationSeconds: Invalid value: 0: must be greater than 0",
                "spec.leaseTransitions: Invalid value: -1: must be greater than or equal to 0"
            ]
        );
    }
}
