//! Label selectors (`matchLabels` and `matchExpressions`), as a claim's `spec.selector` uses them.

use crate::k8s::LabelSelector;
use std::collections::BTreeMap;

/// Why a selector cannot be evaluated.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectorError {
    /// An expression uses an operator Kubernetes does not define.
    #[error("{0:?} is not a valid label selector operator")]
    Operator(String),
    /// `In`/`NotIn` without values, or `Exists`/`DoesNotExist` with values.
    #[error("values set must be {0} for operator {1:?}")]
    Values(&'static str, String),
}

/// Checks that a selector is well formed.
pub fn validate(sel: &LabelSelector) -> Result<(), SelectorError> {
    for e in sel.match_expressions.iter().flatten() {
        let n = e.values.as_ref().map_or(0, Vec::len);
        match e.operator.as_str() {
            "In" | "NotIn" if n == 0 => return Err(SelectorError::Values("non-empty", e.operator.clone())),
            "Exists" | "DoesNotExist" if n > 0 => return Err(SelectorError::Values("empty", e.operator.clone())),
            "In" | "NotIn" | "Exists" | "DoesNotExist" => {}
            other => return Err(SelectorError::Operator(other.to_string())),
        }
    }
    Ok(())
}

/// True when `labels` satisfy every term of the selector. An empty selector matches everything.
pub fn matches(sel: &LabelSelector, labels: Option<&BTreeMap<String, String>>) -> Result<bool, SelectorError> {
    validate(sel)?;
    let get = |k: &str| labels.and_then(|l| l.get(k));
    for (k, v) in sel.match_labels.iter().flatten() {
        if get(k) != Some(v) {
            return Ok(false);
        }
    }
    for e in sel.match_expressions.iter().flatten() {
        let values = e.values.as_deref().unwrap_or(&[]);
        let value = get(&e.key);
        let ok = match e.operator.as_str() {
            "In" => value.is_some_and(|v| values.contains(v)),
            "NotIn" => value.is_none_or(|v| !values.contains(v)),
            "Exists" => value.is_some(),
            "DoesNotExist" => value.is_none(),
            _ => false,
        };
        if !ok {
            return Ok(false);
        }
    }
    Ok(true)
}

/// A short human form: `app=db,tier in (a,b)`.
pub fn describe(sel: &LabelSelector) -> String {
    let mut parts: Vec<String> = sel.match_labels.iter().flatten().map(|(k, v)| format!("{k}={v}")).collect();
    for e in sel.match_expressions.iter().flatten() {
        let vals = e.values.as_deref().unwrap_or(&[]).join(",");
        parts.push(match e.operator.as_str() {
            "Exists" => e.key.clone(),
            "DoesNotExist" => format!("!{}", e.key),
            op => format!("{} {} ({vals})", e.key, op.to_lowercase()),
        });
    }
    parts.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn match_labels_and_expressions_must_all_hold() {
        let sel = LabelSelector {
            match_labels: Some(labels(&[("app", "db")])),
            match_expressions: Some(vec![LabelSelectorRequirement {
                key: "tier".into(),
                operator: "In".into(),
                values: Some(vec!["gold".into(), "silver".into()]),
            }]),
        };
        assert!(matches(&sel, Some(&labels(&[("app", "db"), ("tier", "gold")]))).unwrap());
        assert!(!matches(&sel, Some(&labels(&[("app", "db"), ("tier", "bronze")]))).unwrap());
        assert!(!matches(&sel, Some(&labels(&[("tier", "gold")]))).unwrap());
        assert!(!matches(&sel, None).unwrap());
    }

    #[test]
    fn notin_and_doesnotexist_match_missing_labels() {
        let sel = LabelSelector {
            match_labels: None,
            match_expressions: Some(vec![
                LabelSelectorRequirement { key: "a".into(), operator: "NotIn".into(), values: Some(vec!["x".into()]) },
                LabelSelectorRequirement { key: "b".into(), operator: "DoesNotExist".into(), values: None },
            ]),
        };
        assert!(matches(&sel, None).unwrap());
        assert!(!matches(&sel, Some(&labels(&[("b", "1")]))).unwrap());
    }

    #[test]
    fn unknown_operator_is_an_error() {
        let sel = LabelSelector {
            match_labels: None,
            match_expressions: Some(vec![LabelSelectorRequirement {
                key: "a".into(),
                operator: "Near".into(),
                values: None,
            }]),
        };
        assert!(matches(&sel, None).is_err());
    }
}
