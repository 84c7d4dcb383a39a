//! List filtering: label selectors, field selectors and `limit`/`continue` paging.
//!
//! Label selectors follow Kubernetes' grammar (`a=b`, `a==b`, `a!=b`, `a in (x,y)`,
//! `a notin (x)`, `a`, `!a`). Field selectors accept `=`, `==` and `!=` on any dotted path into
//! the object (`metadata.name`, `spec.volumeName`, `involvedObject.uid`, `status.phase`); a
//! missing field reads as the empty string, as kube-apiserver's field sets do. Continue tokens
//! are opaque base64 of the last returned `namespace/name`: paging walks the store's key order.

use crate::error::{ApiError, Result};
use serde_json::Value;

#[derive(Clone, Debug, PartialEq)]
enum LabelReq {
    Eq(String, String),
    Ne(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    NotExists(String),
}

/// A parsed label selector (all requirements must hold).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LabelSelector(Vec<LabelReq>);

/// Splits at commas that are not inside parentheses.
fn split_top(s: &str) -> Vec<&str> {
    let (mut out, mut depth, mut start) = (Vec::new(), 0i32, 0);
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out
}

fn set_values(rest: &str, sel: &str) -> Result<Vec<String>> {
    let inner = rest
        .trim()
        .strip_prefix('(')
        .and_then(|r| r.strip_suffix(')'))
        .ok_or_else(|| ApiError::BadRequest(format!("unable to parse requirement: {sel:?}")))?;
    Ok(inner.split(',').map(|v| v.trim().to_string()).filter(|v| !v.is_empty()).collect())
}

impl LabelSelector {
    /// Parses a selector string; empty selects everything.
    pub fn parse(s: &str) -> Result<Self> {
        let mut reqs = Vec::new();
        for part in split_top(s).into_iter().map(str::trim).filter(|p| !p.is_empty()) {
            let req = if let Some(k) = part.strip_prefix('!') {
                LabelReq::NotExists(k.trim().into())
            } else if let Some((k, v)) = part.split_once("!=") {
                LabelReq::Ne(k.trim().into(), v.trim().into())
            } else if let Some((k, v)) = part.split_once("==") {
                LabelReq::Eq(k.trim().into(), v.trim().into())
            } else if let Some((k, v)) = part.split_once('=') {
                LabelReq::Eq(k.trim().into(), v.trim().into())
            } else if let Some((k, rest)) = part.split_once(" notin ") {
                LabelReq::NotIn(k.trim().into(), set_values(rest, s)?)
            } else if let Some((k, rest)) = part.split_once(" in ") {
                LabelReq::In(k.trim().into(), set_values(rest, s)?)
            } else if part.contains(' ') || part.contains('(') {
                return Err(ApiError::BadRequest(format!("unable to parse requirement: {part:?}")));
            } else {
                LabelReq::Exists(part.into())
            };
            reqs.push(req);
        }
        Ok(LabelSelector(reqs))
    }

    /// True when the object's labels satisfy every requirement.
    pub fn matches(&self, obj: &Value) -> bool {
        let labels = obj.pointer("/metadata/labels");
        let get = |k: &str| labels.and_then(|l| l.get(k)).and_then(Value::as_str);
        self.0.iter().all(|r| match r {
            LabelReq::Eq(k, v) => get(k) == Some(v.as_str()),
            LabelReq::Ne(k, v) => get(k) != Some(v.as_str()),
            LabelReq::In(k, vs) => get(k).is_some_and(|x| vs.iter().any(|v| v == x)),
            LabelReq::NotIn(k, vs) => !get(k).is_some_and(|x| vs.iter().any(|v| v == x)),
            LabelReq::Exists(k) => get(k).is_some(),
            LabelReq::NotExists(k) => get(k).is_none(),
        })
    }
}

/// A parsed field selector.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FieldSelector(Vec<(String, bool, String)>);

/// The string value of a dotted field path (numbers and booleans as text, missing as "").
pub fn field_value(obj: &Value, path: &str) -> String {
    let mut cur = obj;
    for p in path.split('.') {
        match cur.get(p) {
            Some(v) => cur = v,
            None => return String::new(),
        }
    }
    match cur {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

impl FieldSelector {
    /// Parses `a=b,c!=d`.
    pub fn parse(s: &str) -> Result<Self> {
        let mut reqs = Vec::new();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (k, eq, v) = if let Some((k, v)) = part.split_once("!=") {
                (k, false, v)
            } else if let Some((k, v)) = part.split_once("==") {
                (k, true, v)
            } else if let Some((k, v)) = part.split_once('=') {
                (k, true, v)
            } else {
                return Err(ApiError::BadRequest(format!("invalid selector: '{s}'; can't understand '{part}'")));
            };
            reqs.push((k.trim().to_string(), eq, v.trim().to_string()));
        }
        Ok(FieldSelector(reqs))
    }

    /// True when every requirement holds.
    pub fn matches(&self, obj: &Value) -> bool {
        self.0.iter().all(|(k, eq, v)| (field_value(obj, k) == *v) == *eq)
    }

    /// The value required for `metadata.name`, if the selector pins it.
    pub fn pinned_name(&self) -> Option<&str> {
        self.0.iter().find(|(k, eq, _)| k == "metadata.name" && *eq).map(|(_, _, v)| v.as_str())
    }
}

/// Label and field selectors together.
#[derive(Clone, Debug, Default)]
pub struct Selectors {
    /// Label selector.
    pub labels: LabelSelector,
    /// Field selector.
    pub fields: FieldSelector,
}

impl Selectors {
    /// True when both match.
    pub fn matches(&self, obj: &Value) -> bool {
        self.labels.matches(obj) && self.fields.matches(obj)
    }
}

/// `(namespace, name)` of an object: the store's order, and the paging key.
pub fn object_key(obj: &Value) -> (String, String) {
    (field_value(obj, "metadata.namespace"), field_value(obj, "metadata.name"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn label_selectors_cover_the_kubernetes_grammar() {
        let o = json!({"metadata": {"labels": {"app": "db", "tier": "x"}}});
        for (sel, want) in [
            ("app=db", true),
            ("app==db,tier", true),
            ("app!=db", false),
            ("app in (web, db)", true),
            ("app notin (db)", false),
            ("!missing", true),
            ("missing", false),
            ("", true),
        ] {
            assert_eq!(LabelSelector::parse(sel).unwrap().matches(&o), want, "{sel}");
        }
        assert!(LabelSelector::parse("a in x").is_err());
    }

    #[test]
    fn field_selectors_read_dotted_paths() {
        let o = json!({"metadata": {"name": "a"}, "involvedObject": {"kind": "Pod"}, "count": 3});
        let s = FieldSelector::parse("metadata.name=a,involvedObject.kind==Pod,count=3").unwrap();
        assert!(s.matches(&o));
        assert!(!FieldSelector::parse("spec.volumeName!=").unwrap().matches(&o));
        assert_eq!(s.pinned_name(), Some("a"));
        assert!(FieldSelector::parse("nonsense").is_err());
    }
}
