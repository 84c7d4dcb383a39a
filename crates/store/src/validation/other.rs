//! The other kinds the store serves, checked as far as the controller and its users meet
//! them: a Pod's claim volumes and its status at create (reset as the pod strategy does, with
//! the QoS class), a Lease's durations.

use crate::error::FieldError;
use pv_model::quantity::Quantity;
use serde_json::{json, Value};

/// A Pod's volumes.
pub fn validate_pod(obj: &Value, errs: &mut Vec<FieldError>) {
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
