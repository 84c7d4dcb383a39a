//! `rbac.authorization.k8s.io/v1`'s rules (`pkg/apis/rbac/validation`, `pkg/apis/rbac/v1`'s
//! defaults): policy rules, role references and subjects of Roles, ClusterRoles and their
//! bindings. Paths and messages are kube-apiserver's; the errors 1.37 has declarative validation
//! give (`MarkCoveredByDeclarative`: a rule's verbs, a role reference's and a subject's name, the
//! immutable role reference) go into `covered`, which kube-apiserver reports after all the others
//! (the verbs' with no detail). Nothing here authorizes: `up` serves these objects as
//! kube-apiserver does with `--authorization-mode=AlwaysAllow`, storing them for the clients
//! that apply them.

use super::meta::{validate_meta, validate_meta_update, NameRule};
use super::names;
use super::selectors::validate_label_selector;
use crate::error::FieldError;
use crate::kinds::ResourceType;
use serde_json::{json, Value};

/// The group's name: the `apiGroup` of a role reference and of a user's or group's subject.
pub(crate) const GROUP: &str = "rbac.authorization.k8s.io";

fn strings(v: &Value, key: &str) -> Vec<String> {
    v.get(key)
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).map(str::to_string).collect())
        .unwrap_or_default()
}

/// A list of strings as kube-apiserver prints an invalid one: compact JSON.
fn json_strings(list: &[String]) -> String {
    serde_json::to_string(list).unwrap_or_default()
}

fn str_at<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or("")
}

/// A role's `rules` (upstream's `ValidatePolicyRule` for each); `namespaced` for a Role.
fn validate_rules(obj: &Value, namespaced: bool, errs: &mut Vec<FieldError>, covered: &mut Vec<FieldError>) {
    let Some(rules) = obj.get("rules").and_then(Value::as_array) else { return };
    for (i, rule) in rules.iter().enumerate() {
        let path = format!("rules[{i}]");
        if strings(rule, "verbs").is_empty() {
            covered.push(FieldError::required(format!("{path}.verbs"), ""));
        }
        let urls = strings(rule, "nonResourceURLs");
        if !urls.is_empty() {
            if namespaced {
                errs.push(FieldError::invalid_value(
                    format!("{path}.nonResourceURLs"),
                    json_strings(&urls),
                    "namespaced rules cannot apply to non-resource URLs",
                ));
            }
            if ["apiGroups", "resources", "resourceNames"].iter().any(|k| !strings(rule, k).is_empty()) {
                errs.push(FieldError::invalid_value(
                    format!("{path}.nonResourceURLs"),
                    json_strings(&urls),
                    "rules cannot apply to both regular resources and non-resource URLs",
                ));
            }
            continue;
        }
        if strings(rule, "apiGroups").is_empty() {
            errs.push(FieldError::required(
                format!("{path}.apiGroups"),
                "resource rules must supply at least one api group",
            ));
        }
        if strings(rule, "resources").is_empty() {
            errs.push(FieldError::required(
                format!("{path}.resources"),
                "resource rules must supply at least one resource",
            ));
        }
    }
}

/// A ClusterRole's `aggregationRule`: at least one selector, each a valid label selector.
fn validate_aggregation_rule(obj: &Value, errs: &mut Vec<FieldError>) {
    let Some(rule) = obj.get("aggregationRule").filter(|r| !r.is_null()) else { return };
    let selectors = rule.get("clusterRoleSelectors").and_then(Value::as_array).cloned().unwrap_or_default();
    if selectors.is_empty() {
        errs.push(FieldError::required(
            "aggregationRule.clusterRoleSelectors",
            "at least one clusterRoleSelector required if aggregationRule is non-nil",
        ));
    }
    for (i, sel) in selectors.iter().enumerate() {
        validate_label_selector(sel, &format!("aggregationRule.clusterRoleSelectors[{i}]"), errs);
    }
}

/// A binding's `roleRef` and `subjects`; `namespaced` for a RoleBinding (which may refer to a
/// Role, and whose service account subjects may leave their namespace out).
fn validate_binding(obj: &Value, namespaced: bool, errs: &mut Vec<FieldError>, covered: &mut Vec<FieldError>) {
    let role_ref = obj.get("roleRef").cloned().unwrap_or(Value::Null);
    let group = str_at(&role_ref, "apiGroup");
    if group != GROUP {
        errs.push(FieldError::not_supported("roleRef.apiGroup", group, &[GROUP]));
    }
    let kind = str_at(&role_ref, "kind");
    let kinds: &[&str] = if namespaced { &["Role", "ClusterRole"] } else { &["ClusterRole"] };
    if !kinds.contains(&kind) {
        errs.push(FieldError::not_supported("roleRef.kind", kind, kinds));
    }
    let name = str_at(&role_ref, "name");
    if name.is_empty() {
        covered.push(FieldError::required("roleRef.name", ""));
    } else {
        for m in NameRule::PathSegment.errors(name) {
            errs.push(FieldError::invalid("roleRef.name", name, m));
        }
    }
    let subjects = obj.get("subjects").and_then(Value::as_array).cloned().unwrap_or_default();
    for (i, s) in subjects.iter().enumerate() {
        let path = format!("subjects[{i}]");
        let (name, group) = (str_at(s, "name"), str_at(s, "apiGroup"));
        if name.is_empty() {
            covered.push(FieldError::required(format!("{path}.name"), ""));
        }
        match str_at(s, "kind") {
            "ServiceAccount" => {
                if !name.is_empty() {
                    for m in names::dns1123_subdomain(name) {
                        errs.push(FieldError::invalid(format!("{path}.name"), name, m));
                    }
                }
                if !group.is_empty() {
                    errs.push(FieldError::not_supported(format!("{path}.apiGroup"), group, &[""]));
                }
                if !namespaced && str_at(s, "namespace").is_empty() {
                    errs.push(FieldError::required(format!("{path}.namespace"), ""));
                }
            }
            "User" | "Group" => {
                if group != GROUP {
                    errs.push(FieldError::not_supported(format!("{path}.apiGroup"), group, &[GROUP]));
                }
            }
            other => errs.push(FieldError::not_supported(
                format!("{path}.kind"),
                other,
                &["ServiceAccount", "User", "Group"],
            )),
        }
    }
}

/// A binding's `roleRef` may not change (upstream's `ValidateImmutableField`, covered by
/// declarative validation; the new value printed as JSON of the Go struct).
fn validate_binding_update(old: &Value, new: &Value, covered: &mut Vec<FieldError>) {
    let (o, n) =
        (old.get("roleRef").cloned().unwrap_or(Value::Null), new.get("roleRef").cloned().unwrap_or(Value::Null));
    if o != n {
        let shown = json!({"APIGroup": str_at(&n, "apiGroup"), "Kind": str_at(&n, "kind"), "Name": str_at(&n, "name")});
        covered.push(FieldError::invalid_value("roleRef", shown.to_string(), "field is immutable"));
    }
}

/// The v1 defaults of a binding: its `roleRef.apiGroup`, and each user's and group's subject's
/// `apiGroup` (`SetDefaults_RoleBinding`, `SetDefaults_ClusterRoleBinding`, `SetDefaults_Subject`).
pub(crate) fn default_binding(obj: &mut Value) {
    if let Some(r) = obj.get_mut("roleRef").and_then(Value::as_object_mut) {
        if r.get("apiGroup").and_then(Value::as_str).unwrap_or("").is_empty() {
            r.insert("apiGroup".into(), json!(GROUP));
        }
    }
    if let Some(subjects) = obj.get_mut("subjects").and_then(Value::as_array_mut) {
        for s in subjects.iter_mut().filter_map(Value::as_object_mut) {
            let user_or_group = matches!(s.get("kind").and_then(Value::as_str), Some("User" | "Group"));
            if user_or_group && s.get("apiGroup").and_then(Value::as_str).unwrap_or("").is_empty() {
                s.insert("apiGroup".into(), json!(GROUP));
            }
        }
    }
}

/// upstream's `SubjectsStrings`: a binding's users, groups and service accounts
/// (`namespace/name`), for its Table's wide columns.
pub(crate) fn subjects(obj: &Value, kind: &str) -> String {
    let list = obj.get("subjects").and_then(Value::as_array).cloned().unwrap_or_default();
    let names: Vec<String> = list
        .iter()
        .filter(|s| str_at(s, "kind") == kind)
        .map(|s| {
            if kind == "ServiceAccount" {
                format!("{}/{}", str_at(s, "namespace"), str_at(s, "name"))
            } else {
                str_at(s, "name").to_string()
            }
        })
        .collect();
    names.join(", ")
}

/// A Role or ClusterRole (`rt`) being created: its metadata (names are path segments), its
/// rules, a ClusterRole's aggregation rule, then the declaratively covered errors.
pub(crate) fn validate_role(rt: &ResourceType, obj: &Value, errs: &mut Vec<FieldError>) {
    validate_meta(rt, NameRule::PathSegment, obj, errs);
    role_rules(rt, obj, errs);
}

/// A Role or ClusterRole being updated: as created, and what metadata may not change.
pub(crate) fn validate_role_update(rt: &ResourceType, old: &Value, new: &Value, errs: &mut Vec<FieldError>) {
    validate_meta_update(rt, old, new, errs);
    role_rules(rt, new, errs);
}

fn role_rules(rt: &ResourceType, obj: &Value, errs: &mut Vec<FieldError>) {
    let mut covered = Vec::new();
    validate_rules(obj, rt.namespaced, errs, &mut covered);
    if !rt.namespaced {
        validate_aggregation_rule(obj, errs);
    }
    errs.extend(covered);
}

/// A RoleBinding or ClusterRoleBinding (`rt`) being created.
pub(crate) fn validate_binding_create(rt: &ResourceType, obj: &Value, errs: &mut Vec<FieldError>) {
    validate_meta(rt, NameRule::PathSegment, obj, errs);
    let mut covered = Vec::new();
    validate_binding(obj, rt.namespaced, errs, &mut covered);
    errs.extend(covered);
}

/// A RoleBinding or ClusterRoleBinding being updated: as created, and its `roleRef` unchanged.
pub(crate) fn validate_binding_change(rt: &ResourceType, old: &Value, new: &Value, errs: &mut Vec<FieldError>) {
    validate_meta_update(rt, old, new, errs);
    let mut covered = Vec::new();
    validate_binding(new, rt.namespaced, errs, &mut covered);
    validate_binding_update(old, new, &mut covered);
    errs.extend(covered);
}

/// `rules` has no `omitempty` in upstream's Go types: a role without rules has `"rules": null`.
pub(crate) fn default_role(obj: &mut Value) {
    if let Some(o) = obj.as_object_mut() {
        o.entry("rules").or_insert(Value::Null);
    }
}
