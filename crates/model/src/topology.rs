//! Which nodes an object may use, by the rules kube-scheduler applies: a volume's
//! `spec.nodeAffinity.required`, a pod's `nodeSelector`, required node affinity, taints and
//! tolerations, and a StorageClass's `allowedTopologies`.
//!
//! Node selector terms are ORed; the requirements of one term are ANDed; a term with no
//! requirement matches no node (as upstream's `MatchNodeSelectorTerms`). `matchFields` knows
//! only `metadata.name`, the one field Kubernetes allows there.

use crate::k8s::{Node, PersistentVolume, Pod, StorageClass};
use k8s_openapi::api::core::v1::{NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, Taint, Toleration};
use std::collections::BTreeMap;

fn requirement_matches(r: &NodeSelectorRequirement, value: Option<&str>) -> bool {
    let values = r.values.as_deref().unwrap_or(&[]);
    let number = |s: &str| s.parse::<i64>().ok();
    match r.operator.as_str() {
        "In" => value.is_some_and(|v| values.iter().any(|x| x == v)),
        "NotIn" => value.is_none_or(|v| !values.iter().any(|x| x == v)),
        "Exists" => value.is_some(),
        "DoesNotExist" => value.is_none(),
        "Gt" | "Lt" => {
            let (Some(v), Some(bound)) = (value.and_then(number), values.first().and_then(|b| number(b))) else {
                return false;
            };
            if r.operator == "Gt" {
                v > bound
            } else {
                v < bound
            }
        }
        _ => false,
    }
}

/// True when `node` satisfies every requirement of `term` (and the term has one at least).
pub fn term_matches(term: &NodeSelectorTerm, node: &Node) -> bool {
    let exprs = term.match_expressions.as_deref().unwrap_or(&[]);
    let fields = term.match_fields.as_deref().unwrap_or(&[]);
    if exprs.is_empty() && fields.is_empty() {
        return false;
    }
    let labels = node.metadata.labels.as_ref();
    exprs.iter().all(|r| requirement_matches(r, labels.and_then(|l| l.get(&r.key)).map(String::as_str)))
        && fields.iter().all(|r| {
            let value = (r.key == "metadata.name").then(|| node.metadata.name.as_deref().unwrap_or(""));
            requirement_matches(r, value)
        })
}

/// True when `node` satisfies one term of `selector` at least.
pub fn selector_matches(selector: &NodeSelector, node: &Node) -> bool {
    selector.node_selector_terms.iter().any(|t| term_matches(t, node))
}

/// True when the volume may be used on `node`: it has no required node affinity, or the node
/// satisfies it.
pub fn volume_allows(volume: &PersistentVolume, node: &Node) -> bool {
    match volume.spec.as_ref().and_then(|s| s.node_affinity.as_ref()).and_then(|a| a.required.as_ref()) {
        None => true,
        Some(sel) => selector_matches(sel, node),
    }
}

/// The volume's required node affinity, described (`topology.kubernetes.io/zone in (a)`), if any.
pub fn describe_volume_affinity(volume: &PersistentVolume) -> Option<String> {
    let sel = volume.spec.as_ref().and_then(|s| s.node_affinity.as_ref()).and_then(|a| a.required.as_ref())?;
    Some(describe_selector(sel))
}

/// A node selector as a person reads it: terms joined by ` or `, requirements by `, `.
pub fn describe_selector(sel: &NodeSelector) -> String {
    let req = |r: &NodeSelectorRequirement| {
        let values = r.values.as_deref().unwrap_or(&[]).join(",");
        match r.operator.as_str() {
            "In" if r.values.as_ref().is_some_and(|v| v.len() == 1) => format!("{}={values}", r.key),
            "In" => format!("{} in ({values})", r.key),
            "NotIn" => format!("{} notin ({values})", r.key),
            "Exists" => r.key.clone(),
            "DoesNotExist" => format!("!{}", r.key),
            "Gt" => format!("{}>{values}", r.key),
            "Lt" => format!("{}<{values}", r.key),
            op => format!("{} {op} ({values})", r.key),
        }
    };
    sel.node_selector_terms
        .iter()
        .map(|t| {
            let parts: Vec<String> =
                t.match_expressions.iter().flatten().chain(t.match_fields.iter().flatten()).map(req).collect();
            parts.join(", ")
        })
        .collect::<Vec<_>>()
        .join(" or ")
}

/// True when `toleration` tolerates `taint`.
pub fn tolerates(toleration: &Toleration, taint: &Taint) -> bool {
    if let Some(effect) = toleration.effect.as_deref().filter(|e| !e.is_empty()) {
        if effect != taint.effect {
            return false;
        }
    }
    let key = toleration.key.as_deref().unwrap_or("");
    match toleration.operator.as_deref().unwrap_or("Equal") {
        // An empty key with Exists tolerates every taint.
        "Exists" => key.is_empty() || key == taint.key,
        _ => key == taint.key && toleration.value.as_deref().unwrap_or("") == taint.value.as_deref().unwrap_or(""),
    }
}

/// Why the pod itself, storage aside, cannot go to `node`: its `nodeSelector`, its required node
/// affinity, a NoSchedule/NoExecute taint it does not tolerate, or the node being unschedulable.
/// `None` when the pod may go there.
pub fn pod_excludes(pod: &Pod, node: &Node) -> Option<String> {
    let spec = pod.spec.as_ref()?;
    let labels: BTreeMap<String, String> = node.metadata.labels.clone().unwrap_or_default();
    for (k, v) in spec.node_selector.iter().flatten() {
        if labels.get(k) != Some(v) {
            return Some(format!("the pod's nodeSelector {k}={v} does not match"));
        }
    }
    let required = spec
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|a| a.required_during_scheduling_ignored_during_execution.as_ref());
    if let Some(sel) = required {
        if !selector_matches(sel, node) {
            return Some(format!("the pod's node affinity ({}) does not match", describe_selector(sel)));
        }
    }
    let tolerations = spec.tolerations.as_deref().unwrap_or(&[]);
    let node_spec = node.spec.as_ref();
    if node_spec.and_then(|s| s.unschedulable) == Some(true) {
        let taint =
            Taint { key: "node.kubernetes.io/unschedulable".into(), effect: "NoSchedule".into(), ..Default::default() };
        if !tolerations.iter().any(|t| tolerates(t, &taint)) {
            return Some("the node is unschedulable (cordoned)".into());
        }
    }
    for taint in node_spec.and_then(|s| s.taints.as_deref()).unwrap_or(&[]) {
        if (taint.effect == "NoSchedule" || taint.effect == "NoExecute")
            && !tolerations.iter().any(|t| tolerates(t, taint))
        {
            let value = taint.value.as_deref().map(|v| format!("={v}")).unwrap_or_default();
            return Some(format!("taint {}{value}:{} is not tolerated", taint.key, taint.effect));
        }
    }
    None
}

/// True when the class may provision for `node`: it has no `allowedTopologies`, or one of its
/// terms matches the node's labels (every expression of the term: the label's value among the
/// listed ones).
pub fn class_allows(class: &StorageClass, node: &Node) -> bool {
    let terms = class.allowed_topologies.as_deref().unwrap_or(&[]);
    if terms.is_empty() {
        return true;
    }
    let labels = node.metadata.labels.as_ref();
    terms.iter().any(|t| {
        t.match_label_expressions
            .iter()
            .flatten()
            .all(|e| labels.and_then(|l| l.get(&e.key)).is_some_and(|v| e.values.iter().any(|x| x == v)))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node(name: &str, labels: serde_json::Value, spec: serde_json::Value) -> Node {
        serde_json::from_value(json!({"metadata": {"name": name, "labels": labels}, "spec": spec})).unwrap()
    }

    fn volume(affinity: serde_json::Value) -> PersistentVolume {
        serde_json::from_value(json!({"metadata": {"name": "v"}, "spec": {"nodeAffinity": {"required": affinity}}}))
            .unwrap()
    }

    #[test]
    fn volume_node_affinity_ors_terms_and_ands_requirements() {
        let v = volume(json!({"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]},
                                  {"key": "disk", "operator": "Exists"}]},
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n9"]}]},
        ]}));
        assert!(volume_allows(&v, &node("n1", json!({"zone": "a", "disk": "ssd"}), json!({}))));
        assert!(!volume_allows(&v, &node("n1", json!({"zone": "a"}), json!({}))));
        assert!(!volume_allows(&v, &node("n1", json!({"zone": "b", "disk": "ssd"}), json!({}))));
        assert!(volume_allows(&v, &node("n9", json!({}), json!({}))));
        assert_eq!(describe_volume_affinity(&v).unwrap(), "zone=a, disk or metadata.name=n9");
        let empty_term = volume(json!({"nodeSelectorTerms": [{}]}));
        assert!(!volume_allows(&empty_term, &node("n1", json!({}), json!({}))), "an empty term matches nothing");
    }

    #[test]
    fn gt_lt_notin_and_doesnotexist() {
        let v = volume(json!({"nodeSelectorTerms": [{"matchExpressions": [
            {"key": "gen", "operator": "Gt", "values": ["3"]},
            {"key": "gen", "operator": "Lt", "values": ["9"]},
            {"key": "zone", "operator": "NotIn", "values": ["x"]},
            {"key": "spot", "operator": "DoesNotExist"},
        ]}]}));
        assert!(volume_allows(&v, &node("n", json!({"gen": "5"}), json!({}))));
        assert!(!volume_allows(&v, &node("n", json!({"gen": "3"}), json!({}))));
        assert!(!volume_allows(&v, &node("n", json!({"gen": "abc"}), json!({}))));
        assert!(!volume_allows(&v, &node("n", json!({"gen": "5", "zone": "x"}), json!({}))));
        assert!(!volume_allows(&v, &node("n", json!({"gen": "5", "spot": ""}), json!({}))));
    }

    #[test]
    fn pods_are_kept_off_by_selectors_taints_and_cordons() {
        let pod = |spec: serde_json::Value| -> Pod {
            serde_json::from_value(json!({"metadata": {"name": "p"}, "spec": spec})).unwrap()
        };
        let plain = pod(json!({"containers": []}));
        let tainted = node("n", json!({}), json!({"taints": [{"key": "gpu", "value": "y", "effect": "NoSchedule"}]}));
        assert!(pod_excludes(&plain, &tainted).unwrap().contains("gpu=y:NoSchedule"));
        let tolerant = pod(json!({"containers": [], "tolerations": [{"key": "gpu", "operator": "Exists"}]}));
        assert_eq!(pod_excludes(&tolerant, &tainted), None);
        let soft = node("n", json!({}), json!({"taints": [{"key": "x", "effect": "PreferNoSchedule"}]}));
        assert_eq!(pod_excludes(&plain, &soft), None);
        let cordoned = node("n", json!({}), json!({"unschedulable": true}));
        assert!(pod_excludes(&plain, &cordoned).unwrap().contains("cordoned"));
        let picky = pod(json!({"containers": [], "nodeSelector": {"zone": "a"}}));
        assert!(pod_excludes(&picky, &node("n", json!({"zone": "b"}), json!({}))).is_some());
        assert_eq!(pod_excludes(&picky, &node("n", json!({"zone": "a"}), json!({}))), None);
    }

    #[test]
    fn allowed_topologies_restrict_provisioning() {
        let class: StorageClass = serde_json::from_value(json!({"metadata": {"name": "c"}, "provisioner": "p",
            "allowedTopologies": [{"matchLabelExpressions": [{"key": "zone", "values": ["a", "b"]}]}]}))
        .unwrap();
        assert!(class_allows(&class, &node("n", json!({"zone": "b"}), json!({}))));
        assert!(!class_allows(&class, &node("n", json!({"zone": "c"}), json!({}))));
        assert!(!class_allows(&class, &node("n", json!({}), json!({}))));
    }
}
