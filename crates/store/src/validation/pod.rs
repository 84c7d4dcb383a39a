//! A Pod's spec as kube-apiserver validates it (`ValidatePodSpec`), for the fields `up` checks:
//! its volumes' names and claims, and its containers. A Pod needs at least one container; every
//! container and init container needs a DNS-1123 label for a name, unique among both lists, and
//! an image. These are also what bounds a Pod's cost: a body of a million empty containers is
//! refused here with kube-apiserver's 422 (when the HTTP layer's size bounds let it through).

use super::names;
use crate::error::FieldError;
use serde_json::Value;
use std::collections::HashSet;

fn list<'a>(spec: &'a Value, field: &str) -> &'a [Value] {
    spec.get(field).and_then(Value::as_array).map_or(&[][..], Vec::as_slice)
}

fn text<'a>(v: &'a Value, field: &str) -> &'a str {
    v.get(field).and_then(Value::as_str).unwrap_or("")
}

/// A Pod's spec: volumes, then containers, then init containers, in upstream's order.
pub fn validate_pod(obj: &Value, errs: &mut Vec<FieldError>) {
    let Some(spec) = obj.get("spec").filter(|s| s.is_object()) else {
        errs.push(FieldError::required("spec", ""));
        return;
    };
    for (i, v) in list(spec, "volumes").iter().enumerate() {
        if text(v, "name").is_empty() {
            errs.push(FieldError::required(format!("spec.volumes[{i}].name"), ""));
        }
        if let Some(pvc) = v.get("persistentVolumeClaim").filter(|x| !x.is_null()) {
            if text(pvc, "claimName").is_empty() {
                errs.push(FieldError::required(format!("spec.volumes[{i}].persistentVolumeClaim.claimName"), ""));
            }
        }
    }
    validate_containers(spec, errs);
}

/// What every kind of container must have: a DNS-1123 label for a name, and an image.
fn validate_container_common(c: &Value, path: &str, errs: &mut Vec<FieldError>) {
    let name = text(c, "name");
    if name.is_empty() {
        errs.push(FieldError::required(format!("{path}.name"), ""));
    } else {
        for m in names::dns1123_label(name) {
            errs.push(FieldError::invalid(format!("{path}.name"), name, m));
        }
    }
    if text(c, "image").is_empty() {
        errs.push(FieldError::required(format!("{path}.image"), ""));
    }
}

/// `spec.containers` (at least one, names unique among them) and `spec.initContainers`
/// (names unique among both lists).
fn validate_containers(spec: &Value, errs: &mut Vec<FieldError>) {
    let containers = list(spec, "containers");
    if containers.is_empty() {
        errs.push(FieldError::required("spec.containers", ""));
    }
    let mut seen: HashSet<&str> = HashSet::new();
    for (i, c) in containers.iter().enumerate() {
        let path = format!("spec.containers[{i}]");
        validate_container_common(c, &path, errs);
        // Upstream compares every name here, the empty one included.
        if !seen.insert(text(c, "name")) {
            errs.push(FieldError::duplicate(format!("{path}.name"), text(c, "name")));
        }
    }
    let mut all: HashSet<&str> = containers.iter().map(|c| text(c, "name")).collect();
    for (i, c) in list(spec, "initContainers").iter().enumerate() {
        let path = format!("spec.initContainers[{i}]");
        validate_container_common(c, &path, errs);
        let name = text(c, "name");
        if all.contains(name) {
            errs.push(FieldError::duplicate(format!("{path}.name"), name));
        } else if !name.is_empty() {
            all.insert(name);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn errors(pod: Value) -> Vec<String> {
        let mut errs = Vec::new();
        validate_pod(&pod, &mut errs);
        errs.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn a_pod_needs_a_container() {
        assert_eq!(errors(json!({"spec": {}})), ["spec.containers: Required value"]);
        assert_eq!(errors(json!({"spec": {"containers": []}})), ["spec.containers: Required value"]);
    }

    #[test]
    fn containers_need_names_and_images() {
        assert_eq!(
            errors(json!({"spec": {"containers": [{}]}})),
            ["spec.containers[0].name: Required value", "spec.containers[0].image: Required value"]
        );
        assert_eq!(
            errors(json!({"spec": {"containers": [{"name": "Web_1", "image": "nginx"}]}})),
            ["spec.containers[0].name: Invalid value: \"Web_1\": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"]
        );
        assert!(errors(json!({"spec": {"containers": [{"name": "web", "image": "nginx"}]}})).is_empty());
    }

    #[test]
    fn container_names_are_unique_across_containers_and_init_containers() {
        let pod = json!({"spec": {
            "containers": [{"name": "a", "image": "i"}, {"name": "a", "image": "i"}],
            "initContainers": [{"name": "a", "image": "i"}, {"name": "b", "image": "i"}, {"name": "b", "image": "i"}],
        }});
        assert_eq!(
            errors(pod),
            [
                "spec.containers[1].name: Duplicate value: \"a\"",
                "spec.initContainers[0].name: Duplicate value: \"a\"",
                "spec.initContainers[2].name: Duplicate value: \"b\"",
            ]
        );
    }
}
