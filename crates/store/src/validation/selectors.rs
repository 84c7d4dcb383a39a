//! Selectors as upstream checks them: label selectors (a claim's `selector`), node selectors
//! (a volume's `nodeAffinity`) and topology selector terms (a class's `allowedTopologies`).

use super::meta::validate_labels;
use super::names;
use crate::error::FieldError;
use serde_json::{json, Map, Value};

fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| a.iter().map(|x| x.as_str().unwrap_or("").to_string()).collect())
        .unwrap_or_default()
}

fn label_key(key: &str, path: &str, errs: &mut Vec<FieldError>) {
    for m in names::qualified_name(key) {
        errs.push(FieldError::invalid(path, key, m));
    }
}

/// A `metav1.LabelSelector` at `path`.
pub fn validate_label_selector(sel: &Value, path: &str, errs: &mut Vec<FieldError>) {
    if let Some(m) = sel.get("matchLabels").and_then(Value::as_object) {
        let pairs: Vec<(String, String)> =
            m.iter().map(|(k, v)| (k.clone(), v.as_str().unwrap_or("").to_string())).collect();
        validate_labels(&pairs, &format!("{path}.matchLabels"), errs);
    }
    for (i, e) in sel.get("matchExpressions").and_then(Value::as_array).into_iter().flatten().enumerate() {
        let p = format!("{path}.matchExpressions[{i}]");
        let op = e.get("operator").and_then(Value::as_str).unwrap_or("");
        let values = strings(e.get("values"));
        match op {
            "In" | "NotIn" if values.is_empty() => errs.push(FieldError::required(
                format!("{p}.values"),
                "must be specified when `operator` is 'In' or 'NotIn'",
            )),
            "Exists" | "DoesNotExist" if !values.is_empty() => errs.push(FieldError::forbidden(
                format!("{p}.values"),
                "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
            )),
            "In" | "NotIn" | "Exists" | "DoesNotExist" => {}
            other => errs.push(FieldError::invalid(format!("{p}.operator"), other, "not a valid selector operator")),
        }
        label_key(e.get("key").and_then(Value::as_str).unwrap_or(""), &format!("{p}.key"), errs);
        for (j, v) in values.iter().enumerate() {
            for m in names::label_value(v) {
                errs.push(FieldError::invalid(format!("{p}.values[{j}]"), v.as_str(), m));
            }
        }
    }
}

fn node_selector_requirement(rq: &Value, p: &str, errs: &mut Vec<FieldError>) {
    let op = rq.get("operator").and_then(Value::as_str).unwrap_or("");
    let values = strings(rq.get("values"));
    match op {
        "In" | "NotIn" if values.is_empty() => errs
            .push(FieldError::required(format!("{p}.values"), "must be specified when `operator` is 'In' or 'NotIn'")),
        "Exists" | "DoesNotExist" if !values.is_empty() => errs.push(FieldError::forbidden(
            format!("{p}.values"),
            "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
        )),
        "Gt" | "Lt" if values.len() != 1 => errs.push(FieldError::required(
            format!("{p}.values"),
            "must be specified single value when `operator` is 'Lt' or 'Gt'",
        )),
        "In" | "NotIn" | "Exists" | "DoesNotExist" | "Gt" | "Lt" => {}
        other => errs.push(FieldError::invalid(format!("{p}.operator"), other, "not a valid selector operator")),
    }
    label_key(rq.get("key").and_then(Value::as_str).unwrap_or(""), &format!("{p}.key"), errs);
    for (j, v) in values.iter().enumerate() {
        for m in names::label_value(v) {
            errs.push(FieldError::invalid(format!("{p}.values[{j}]"), v.as_str(), m));
        }
    }
}

fn node_field_requirement(rq: &Value, p: &str, errs: &mut Vec<FieldError>) {
    let op = rq.get("operator").and_then(Value::as_str).unwrap_or("");
    let values = strings(rq.get("values"));
    match op {
        "In" | "NotIn" if values.len() != 1 => errs.push(FieldError::required(
            format!("{p}.values"),
            "must be only one value when `operator` is 'In' or 'NotIn' for node field selector",
        )),
        "In" | "NotIn" => {}
        other => errs.push(FieldError::invalid(format!("{p}.operator"), other, "not a valid selector operator")),
    }
    let key = rq.get("key").and_then(Value::as_str).unwrap_or("");
    if key != "metadata.name" {
        errs.push(FieldError::invalid(format!("{p}.key"), key, "not a valid field selector key"));
    } else {
        for (j, v) in values.iter().enumerate() {
            for m in names::dns1123_subdomain(v) {
                errs.push(FieldError::invalid(format!("{p}.values[{j}]"), v.as_str(), m));
            }
        }
    }
}

/// A volume's `nodeAffinity` at `path`: `required` with at least one term, each term's
/// expressions and fields valid.
pub fn validate_node_affinity(na: &Value, path: &str, errs: &mut Vec<FieldError>) {
    let Some(req) = na.get("required").filter(|r| !r.is_null()) else {
        errs.push(FieldError::required(format!("{path}.required"), "must specify required node constraints"));
        return;
    };
    let tp = format!("{path}.required.nodeSelectorTerms");
    let terms = req.get("nodeSelectorTerms").and_then(Value::as_array).cloned().unwrap_or_default();
    if terms.is_empty() {
        errs.push(FieldError::required(tp, "must have at least one node selector term"));
        return;
    }
    for (i, t) in terms.iter().enumerate() {
        for (j, rq) in t.get("matchExpressions").and_then(Value::as_array).into_iter().flatten().enumerate() {
            node_selector_requirement(rq, &format!("{tp}[{i}].matchExpressions[{j}]"), errs);
        }
        for (j, rq) in t.get("matchFields").and_then(Value::as_array).into_iter().flatten().enumerate() {
            node_field_requirement(rq, &format!("{tp}[{i}].matchFields[{j}]"), errs);
        }
    }
}

/// A class's `allowedTopologies`: each term's expressions need values (no repeats) and valid
/// keys, no key twice in a term (the last one counts), no term twice.
pub fn validate_allowed_topologies(list: &[Value], path: &str, errs: &mut Vec<FieldError>) {
    let mut seen: Vec<Vec<(String, Vec<String>)>> = Vec::new();
    for (i, term) in list.iter().enumerate() {
        let ep = format!("{path}[{i}].matchLabelExpressions");
        let mut expr: Vec<(String, Vec<String>)> = Vec::new();
        for (j, rq) in term.get("matchLabelExpressions").and_then(Value::as_array).into_iter().flatten().enumerate() {
            let p = format!("{ep}[{j}]");
            let values = strings(rq.get("values"));
            if values.is_empty() {
                errs.push(FieldError::required(format!("{p}.values"), ""));
            }
            let mut set: Vec<String> = Vec::new();
            for (k, v) in values.iter().enumerate() {
                if set.contains(v) {
                    errs.push(FieldError::duplicate(format!("{p}.values[{k}]"), v.as_str()));
                }
                set.push(v.clone());
            }
            let key = rq.get("key").and_then(Value::as_str).unwrap_or("");
            label_key(key, &format!("{p}.key"), errs);
            if expr.iter().any(|(k, _)| k == key) {
                errs.push(FieldError::duplicate(format!("{p}.key"), key));
            }
            set.sort();
            set.dedup();
            expr.retain(|(k, _)| k != key);
            expr.push((key.to_string(), set));
        }
        expr.sort();
        // Upstream compares each term with a list that starts with one unset term per entry,
        // so a term without expressions is always reported as a repeat.
        if expr.is_empty() || seen.contains(&expr) {
            errs.push(FieldError::duplicate(ep.clone(), ""));
        }
        seen.push(expr);
    }
}

/// A volume node affinity as upstream compares and prints it on update.
pub struct VolumeNodeAffinity;

const BETA_TO_GA: &[(&str, &str)] = &[
    ("failure-domain.beta.kubernetes.io/zone", "topology.kubernetes.io/zone"),
    ("failure-domain.beta.kubernetes.io/region", "topology.kubernetes.io/region"),
    ("beta.kubernetes.io/instance-type", "node.kubernetes.io/instance-type"),
];

impl VolumeNodeAffinity {
    /// The affinity with beta topology keys replaced by their GA names, so that moving from the
    /// one to the other is not a change.
    pub fn masked(na: Option<&Value>) -> Value {
        fn walk(v: &Value) -> Value {
            match v {
                Value::Object(m) => {
                    let mut out = Map::new();
                    for (k, x) in m {
                        if x.is_null() {
                            continue;
                        }
                        let mut x = walk(x);
                        if k == "key" {
                            if let Some(ga) = BETA_TO_GA.iter().find(|(b, _)| Some(*b) == x.as_str()).map(|(_, g)| *g) {
                                x = json!(ga);
                            }
                        }
                        out.insert(k.clone(), x);
                    }
                    Value::Object(out)
                }
                Value::Array(a) => Value::Array(a.iter().map(walk).collect()),
                other => other.clone(),
            }
        }
        na.map(walk).unwrap_or(Value::Null)
    }

    /// The affinity as upstream prints a value of its internal type (Go field names, unset
    /// fields as null).
    pub fn go_json(na: Option<&Value>) -> String {
        let Some(na) = na else { return "null".into() };
        let req = |r: &Value| {
            let list = |v: Option<&Value>| match v.and_then(Value::as_array) {
                None => Value::Null,
                Some(a) => Value::Array(
                    a.iter()
                        .map(|rq| {
                            json!({"Key": rq.get("key").cloned().unwrap_or(json!("")),
                                   "Operator": rq.get("operator").cloned().unwrap_or(json!("")),
                                   "Values": rq.get("values").cloned().unwrap_or(Value::Null)})
                        })
                        .collect(),
                ),
            };
            let terms = match r.get("nodeSelectorTerms").and_then(Value::as_array) {
                None => Value::Null,
                Some(a) => Value::Array(
                    a.iter()
                        .map(|t| json!({"MatchExpressions": list(t.get("matchExpressions")), "MatchFields": list(t.get("matchFields"))}))
                        .collect(),
                ),
            };
            json!({ "NodeSelectorTerms": terms })
        };
        let required = na.get("required").filter(|r| !r.is_null()).map(req).unwrap_or(Value::Null);
        // Go's encoder keeps struct field order; serde_json sorts keys, which is the same here
        // for every level but a requirement ("Key", "Operator", "Values" are sorted too).
        serde_json::to_string(&json!({ "Required": required })).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_affinity_needs_terms_and_valid_requirements() {
        let mut errs = Vec::new();
        validate_node_affinity(&json!({"required": {"nodeSelectorTerms": []}}), "spec.nodeAffinity", &mut errs);
        assert_eq!(
            errs[0].to_string(),
            "spec.nodeAffinity.required.nodeSelectorTerms: Required value: must have at least one node selector term"
        );
        errs.clear();
        let na = json!({"required": {"nodeSelectorTerms": [{"matchExpressions": [{"key": "k", "operator": "Gt", "values": []}],
            "matchFields": [{"key": "spec.x", "operator": "In", "values": ["a"]}]}]}});
        validate_node_affinity(&na, "spec.nodeAffinity", &mut errs);
        let paths: Vec<&str> = errs.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(
            paths,
            [
                "spec.nodeAffinity.required.nodeSelectorTerms[0].matchExpressions[0].values",
                "spec.nodeAffinity.required.nodeSelectorTerms[0].matchFields[0].key"
            ]
        );
    }

    #[test]
    fn moving_a_beta_zone_key_to_ga_is_not_a_change() {
        let beta = json!({"required": {"nodeSelectorTerms": [{"matchExpressions": [{"key": "failure-domain.beta.kubernetes.io/zone", "operator": "In", "values": ["a"]}]}]}});
        let ga = json!({"required": {"nodeSelectorTerms": [{"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["a"]}]}]}});
        assert_eq!(VolumeNodeAffinity::masked(Some(&beta)), VolumeNodeAffinity::masked(Some(&ga)));
    }

    #[test]
    fn topology_terms_may_not_repeat() {
        let mut errs = Vec::new();
        let t = json!({"matchLabelExpressions": [{"key": "zone", "values": ["a"]}]});
        validate_allowed_topologies(
            &[t.clone(), t, json!({"matchLabelExpressions": [{"key": "bad key!", "values": []}]})],
            "allowedTopologies",
            &mut errs,
        );
        let text: Vec<String> = errs.iter().map(|e| format!("{} {}", e.path, e.reason())).collect();
        assert_eq!(
            text,
            [
                "allowedTopologies[1].matchLabelExpressions FieldValueDuplicate",
                "allowedTopologies[2].matchLabelExpressions[0].values FieldValueRequired",
                "allowedTopologies[2].matchLabelExpressions[0].key FieldValueInvalid"
            ]
        );
    }
}
