//! A Service's ports as kube-apiserver defaults and validates them (`SetDefaults_Service`,
//! `ValidateService`): ports are required unless the Service is headless or an ExternalName;
//! each port is between 1 and 65535, names are DNS-1123 labels, required and unique when there
//! is more than one port, the protocol is TCP, UDP or SCTP, and the target port a valid number
//! or IANA name.

use super::names;
use crate::error::FieldError;
use serde_json::{json, Value};
use std::collections::HashSet;

const PROTOCOLS: &[&str] = &["SCTP", "TCP", "UDP"];
const PORT_RANGE: &str = "must be between 1 and 65535, inclusive";

/// The v1 defaults of a Service's ports: protocol TCP, target port the port.
pub fn default_service(obj: &mut Value) {
    let ports = obj.get_mut("spec").and_then(|s| s.get_mut("ports")).and_then(Value::as_array_mut);
    for p in ports.into_iter().flatten() {
        let Some(p) = p.as_object_mut() else { continue };
        if p.get("protocol").is_none_or(|v| v.is_null() || v == "") {
            p.insert("protocol".into(), json!("TCP"));
        }
        let unset = match p.get("targetPort") {
            None | Some(Value::Null) => true,
            Some(Value::Number(n)) => n.as_i64() == Some(0),
            Some(Value::String(s)) => s.is_empty(),
            _ => false,
        };
        if unset {
            let port = p.get("port").cloned().unwrap_or(json!(0));
            p.insert("targetPort".into(), port);
        }
    }
}

fn valid_port(p: i64) -> bool {
    (1..=65535).contains(&p)
}

/// IANA service name (a named target port): the messages, empty when valid.
fn port_name_errors(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > 15 {
        errs.push("must be no more than 15 characters".to_string());
    }
    if !s.bytes().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-') {
        errs.push("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)".into());
    }
    if !s.bytes().any(|c| c.is_ascii_lowercase()) {
        errs.push("must contain at least one letter (a-z)".into());
    }
    if s.contains("--") {
        errs.push("must not contain consecutive hyphens".into());
    }
    if s.starts_with('-') || s.ends_with('-') {
        errs.push("must not begin or end with a hyphen".into());
    }
    errs
}

/// The Service's ports.
pub fn validate_service(obj: &Value, errs: &mut Vec<FieldError>) {
    let spec = obj.get("spec").cloned().unwrap_or(Value::Null);
    let ports = spec.get("ports").and_then(Value::as_array).map_or(&[][..], Vec::as_slice);
    let headless = spec.get("clusterIP").and_then(Value::as_str) == Some("None");
    let external = spec.get("type").and_then(Value::as_str) == Some("ExternalName");
    if ports.is_empty() && !headless && !external {
        errs.push(FieldError::required("spec.ports", ""));
    }
    let mut names_seen: HashSet<&str> = HashSet::new();
    for (i, p) in ports.iter().enumerate() {
        let path = format!("spec.ports[{i}]");
        let name = p.get("name").and_then(Value::as_str).unwrap_or("");
        if ports.len() > 1 && name.is_empty() {
            errs.push(FieldError::required(format!("{path}.name"), ""));
        } else if !name.is_empty() {
            for m in names::dns1123_label(name) {
                errs.push(FieldError::invalid(format!("{path}.name"), name, m));
            }
            if !names_seen.insert(name) {
                errs.push(FieldError::duplicate(format!("{path}.name"), name));
            }
        }
        let port = p.get("port").and_then(Value::as_i64).unwrap_or(0);
        if !valid_port(port) {
            errs.push(FieldError::invalid_value(format!("{path}.port"), port.to_string(), PORT_RANGE));
        }
        match p.get("protocol").and_then(Value::as_str).unwrap_or("") {
            "" => errs.push(FieldError::required(format!("{path}.protocol"), "")),
            proto if !PROTOCOLS.contains(&proto) => {
                errs.push(FieldError::not_supported(format!("{path}.protocol"), proto, PROTOCOLS))
            }
            _ => {}
        }
        match p.get("targetPort") {
            Some(Value::Number(n)) => {
                let t = n.as_i64().unwrap_or(0);
                if !valid_port(t) {
                    errs.push(FieldError::invalid_value(format!("{path}.targetPort"), t.to_string(), PORT_RANGE));
                }
            }
            Some(Value::String(s)) if s.is_empty() => errs.push(FieldError::required(format!("{path}.targetPort"), "")),
            Some(Value::String(s)) => {
                for m in port_name_errors(s) {
                    errs.push(FieldError::invalid(format!("{path}.targetPort"), s.as_str(), m));
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn errors(mut svc: Value) -> Vec<String> {
        default_service(&mut svc);
        let mut errs = Vec::new();
        validate_service(&svc, &mut errs);
        errs.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn ports_are_required_and_in_range() {
        assert_eq!(errors(json!({"spec": {}})), ["spec.ports: Required value"]);
        assert!(errors(json!({"spec": {"clusterIP": "None"}})).is_empty(), "headless");
        assert_eq!(
            errors(json!({"spec": {"ports": [{"port": -1}]}})),
            [
                "spec.ports[0].port: Invalid value: -1: must be between 1 and 65535, inclusive",
                "spec.ports[0].targetPort: Invalid value: -1: must be between 1 and 65535, inclusive",
            ]
        );
        assert_eq!(
            errors(json!({"spec": {"ports": [{"port": 80, "targetPort": 70000}]}})),
            ["spec.ports[0].targetPort: Invalid value: 70000: must be between 1 and 65535, inclusive"]
        );
        assert!(errors(json!({"spec": {"ports": [{"port": 80, "targetPort": "http"}]}})).is_empty());
    }

    #[test]
    fn several_ports_need_unique_names_and_a_known_protocol() {
        let svc = json!({"spec": {"ports": [
            {"name": "a", "port": 80}, {"name": "a", "port": 81}, {"port": 82, "protocol": "HTTP"}
        ]}});
        assert_eq!(
            errors(svc),
            [
                "spec.ports[1].name: Duplicate value: \"a\"",
                "spec.ports[2].name: Required value",
                "spec.ports[2].protocol: Unsupported value: \"HTTP\": supported values: \"SCTP\", \"TCP\", \"UDP\"",
            ]
        );
    }
}
