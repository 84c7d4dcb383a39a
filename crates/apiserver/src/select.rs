//! List filtering: label selectors, field selectors and `limit`/`continue` paging.
//!
//! Label selectors follow Kubernetes' grammar (`a=b`, `a==b`, `a!=b`, `a in (x,y)`,
//! `a notin (x)`, `a`, `!a`), with keys and values checked as label syntax (400 otherwise).
//! Field selectors accept `=`, `==` and `!=` on the fields kube-apiserver selects by for each
//! kind ([`supported_field`]: events by `involvedObject.*`, `reason`, `source`, `type`, ...,
//! pods by `spec.nodeName`, `status.phase`, ..., every kind by `metadata.name` and (namespaced)
//! `metadata.namespace`); any other field is a 400 with upstream's message. A missing field
//! reads as the empty string, as kube-apiserver's field sets do. Continue tokens
//! are opaque base64 of the last returned `namespace/name`: paging walks the store's key order.

use crate::error::{ApiError, Result};
use crate::resources::Served;
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
            check_label_requirement(&req)?;
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

const NAME_PART: &str =
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";

fn label_token_ok(s: &str) -> bool {
    let b = s.as_bytes();
    b.first().is_some_and(u8::is_ascii_alphanumeric)
        && b.last().is_some_and(u8::is_ascii_alphanumeric)
        && b.iter().all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

/// Checks a label key (`[prefix/]name`) and values as kube-apiserver's selector parser does.
fn check_label_requirement(req: &LabelReq) -> Result<()> {
    let (key, values): (&str, Vec<&String>) = match req {
        LabelReq::Eq(k, v) | LabelReq::Ne(k, v) => (k, vec![v]),
        LabelReq::In(k, vs) | LabelReq::NotIn(k, vs) => (k, vs.iter().collect()),
        LabelReq::Exists(k) | LabelReq::NotExists(k) => (k, Vec::new()),
    };
    let (prefix, name) = match key.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    let bad_key = if name.is_empty() || name.len() > 63 || !label_token_ok(name) {
        Some(format!("name part {NAME_PART}"))
    } else if prefix.is_some_and(|p| !pv_store::validation::is_dns_subdomain(p)) {
        Some("prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character".into())
    } else {
        None
    };
    if let Some(why) = bad_key {
        return Err(ApiError::BadRequest(format!("unable to parse requirement: key: Invalid value: {key:?}: {why}")));
    }
    for (i, v) in values.into_iter().enumerate() {
        if !v.is_empty() && (v.len() > 63 || !label_token_ok(v)) {
            return Err(ApiError::BadRequest(format!(
                "unable to parse requirement: values[{i}][{key}]: Invalid value: {v:?}: a valid label must be an empty string or {}",
                NAME_PART.trim_start_matches("must ")
            )));
        }
    }
    Ok(())
}

/// The field label a selector may use on an endpoint, as kube-apiserver converts it (the
/// events.k8s.io names map onto the core Event fields), or upstream's error for one it does
/// not support.
pub fn supported_field(served: &Served, label: &str) -> Result<String> {
    let core = |ok: &[&str]| -> Result<String> {
        if ok.contains(&label) {
            Ok(label.to_string())
        } else {
            Err(ApiError::BadRequest(format!("field label not supported: {label}")))
        }
    };
    if served.events_v1 {
        let mapped = match label {
            "reason" | "type" | "metadata.namespace" | "metadata.name" => label.to_string(),
            "reportingController" => "reportingComponent".into(),
            l => match l.strip_prefix("regarding.") {
                Some(f @ ("kind" | "namespace" | "name" | "uid" | "apiVersion" | "resourceVersion" | "fieldPath")) => {
                    format!("involvedObject.{f}")
                }
                _ => return Err(ApiError::BadRequest(format!("field label not supported: {label}"))),
            },
        };
        return Ok(mapped);
    }
    // A custom resource's own selectable fields are not served (see DIFFERENCES.md).
    let labels = if served.custom() { None } else { pv_store::field_labels(served.rt) };
    match labels {
        Some(l) => match l.renamed.iter().find(|(old, _)| *old == label) {
            Some((_, new)) => Ok(new.to_string()),
            None => core(l.fields),
        },
        None if matches!(label, "metadata.name" | "metadata.namespace") => Ok(label.to_string()),
        None if served.custom() => Err(ApiError::BadRequest(format!("field label not supported: {label}"))),
        None => Err(ApiError::BadRequest(format!(
            "{label:?} is not a known field selector: only \"metadata.name\", \"metadata.namespace\""
        ))),
    }
}

/// The value of a selectable field of a stored object, as upstream's field sets compute it:
/// the events.k8s.io names read as the core Event's, a kind's renamed labels as their new
/// names, and the value as the kind's strategy gives it (`pv_store::selectable_value`: booleans
/// as `true`/`false`, an Event's `source` falling back to its reporting controller, a Pod's
/// `status.podIP` from its first `podIPs` entry); the field's text for any other object.
pub fn selectable_value(obj: &Value, label: &str) -> String {
    let kind = obj.get("kind").and_then(Value::as_str).unwrap_or("");
    let label = match label {
        "reportingController" => "reportingComponent".to_string(),
        l => match l.strip_prefix("regarding.") {
            Some(f) => format!("involvedObject.{f}"),
            None => l.to_string(),
        },
    };
    match pv_store::ResourceType::by_kind(kind) {
        Some(rt) => {
            let renamed = pv_store::field_labels(rt).and_then(|l| l.renamed.iter().find(|(old, _)| *old == label));
            pv_store::selectable_value(rt, obj, renamed.map_or(label.as_str(), |(_, new)| new))
        }
        None => field_value(obj, &label),
    }
}

/// A parsed field selector.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FieldSelector(Vec<(String, bool, String)>);

/// The string value of a dotted field path (numbers and booleans as text, missing as "").
pub use pv_store::table::field_value;

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
        self.0.iter().all(|(k, eq, v)| (selectable_value(obj, k) == *v) == *eq)
    }

    /// Checks every field against what the endpoint supports, converting the names to the
    /// stored object's ([`supported_field`]).
    pub fn for_endpoint(self, served: &Served) -> Result<Self> {
        let reqs = self
            .0
            .into_iter()
            .map(|(k, eq, v)| supported_field(served, &k).map(|k| (k, eq, v)))
            .collect::<Result<Vec<_>>>()?;
        Ok(FieldSelector(reqs))
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
    /// True when neither selects anything: every object matches.
    pub fn is_empty(&self) -> bool {
        self.labels.0.is_empty() && self.fields.0.is_empty()
    }

    /// True when both match.
    pub fn matches(&self, obj: &Value) -> bool {
        self.labels.matches(obj) && self.fields.matches(obj)
    }
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
    fn invalid_label_selectors_are_refused() {
        for bad in ["a b=c", "app=a b", "-x", "app in (a$)", "Bad_Prefix/x=y"] {
            let err = LabelSelector::parse(bad).unwrap_err();
            assert_eq!(err.code(), 400, "{bad}");
            assert!(err.to_string().starts_with("unable to parse requirement"), "{bad}: {err}");
        }
        assert!(LabelSelector::parse("example.com/app=db,tier in (a_b, c.d),!x").is_ok());
    }

    #[test]
    fn field_selectors_take_the_fields_each_kind_supports() {
        let served = |g: &str, p: &str| crate::resources::lookup(&pv_store::Store::new(), g, "v1", p).unwrap();
        let events = served("", "events");
        let sel = |s: &str, on: &Served| FieldSelector::parse(s).unwrap().for_endpoint(on);
        let ev = json!({"kind": "Event", "reason": "ProvisioningSucceeded", "type": "Normal",
                        "involvedObject": {"kind": "PersistentVolumeClaim", "name": "c"},
                        "source": {"component": "persistentvolume-controller"}});
        for ok in [
            "source=persistentvolume-controller",
            "reason=ProvisioningSucceeded,type=Normal",
            "involvedObject.kind=PersistentVolumeClaim",
        ] {
            assert!(sel(ok, &events).unwrap().matches(&ev), "{ok}");
        }
        let v1 = served("events.k8s.io", "events");
        assert!(sel("regarding.name=c,reason=ProvisioningSucceeded", &v1).unwrap().matches(&ev));
        let reported = json!({"kind": "Event", "reportingComponent": "kubelet"});
        assert!(sel("source=kubelet", &events).unwrap().matches(&reported));
        assert_eq!(sel("foo=bar", &events).unwrap_err().to_string(), "field label not supported: foo");
        assert_eq!(sel("count=3", &v1).unwrap_err().code(), 400);
        let pods = served("", "pods");
        let pod = json!({"kind": "Pod", "spec": {"nodeName": "n1"}, "status": {"phase": "Running"}});
        assert!(sel("spec.nodeName=n1,status.phase=Running,spec.hostNetwork=false", &pods).unwrap().matches(&pod));
        assert!(sel("spec.host=n1", &pods).unwrap().matches(&pod));
        assert!(sel("spec.volumes=x", &pods).is_err());
        let pvs = served("", "persistentvolumes");
        assert_eq!(
            sel("spec.storageClassName=x", &pvs).unwrap_err().to_string(),
            "\"spec.storageClassName\" is not a known field selector: only \"metadata.name\", \"metadata.namespace\""
        );
        assert!(sel("metadata.name=a", &pvs).is_ok());
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
