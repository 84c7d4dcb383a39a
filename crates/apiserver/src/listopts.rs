//! List, get and watch options, parsed and checked as kube-apiserver checks them before any
//! storage call.
//!
//! Numbers that do not parse are a 400 with Go's `strconv` text; the combinations of
//! `resourceVersion`, `resourceVersionMatch`, `continue` and `sendInitialEvents` that upstream
//! forbids are a 422 naming `ListOptions.meta.k8s.io`; a resourceVersion newer than anything
//! the store has written is a 504 `Timeout` with the `ResourceVersionTooLarge` cause, as
//! kube-apiserver answers once its wait for that version runs out (it waits up to three
//! seconds for its cache; this store has no lagging cache, so it answers at once).
//!
//! `resourceVersionMatch=Exact` asks for the list as it was at that version. The store keeps
//! changes, not old lists: it serves an exact list when nothing in the listed collection has
//! changed since that version (the current list is then exactly the old one), and otherwise
//! answers 410 `Expired`, as kube-apiserver does for a version etcd has compacted away.

use crate::error::{ApiError, Result};
use crate::query::Query;
use pv_store::{FieldError, FieldErrorKind, Store, StoreError};

/// The options of a list or watch that change what is served.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ListOptions {
    /// `resourceVersion` as given ("" when absent).
    pub resource_version: String,
    /// `resourceVersionMatch` as given ("" when absent).
    pub rv_match: String,
    /// `limit` (0: no limit; negative values mean none, as upstream).
    pub limit: usize,
}

/// Go's `strconv` error for a number that does not parse.
fn parse_int(q: &Query, key: &str) -> Result<Option<i64>> {
    match q.get(key).map(String::as_str) {
        None | Some("") => Ok(None),
        Some(v) => v
            .parse::<i64>()
            .map(Some)
            .map_err(|_| ApiError::BadRequest(format!("strconv.ParseInt: parsing {v:?}: invalid syntax"))),
    }
}

fn forbidden(detail: &str) -> FieldError {
    FieldError { path: "resourceVersionMatch".into(), kind: FieldErrorKind::Forbidden, detail: detail.into() }
}

/// Parses and checks the options of a list (`watch` false) or a watch.
pub fn parse(q: &Query, watch: bool) -> Result<ListOptions> {
    let limit = parse_int(q, "limit")?.unwrap_or(0).max(0) as usize;
    parse_int(q, "timeoutSeconds")?;
    let rv = q.get("resourceVersion").cloned().unwrap_or_default();
    let rv_match = q.get("resourceVersionMatch").cloned().unwrap_or_default();
    let cont = q.get("continue").is_some_and(|c| !c.is_empty());
    // A pointer in upstream's options: set whenever the name is given, even empty.
    let initial = q.get("sendInitialEvents");
    let mut errors = Vec::new();
    if watch {
        if initial.is_some() && rv_match != "NotOlderThan" {
            errors.push(forbidden("sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"));
        }
        if !rv_match.is_empty() {
            if initial.is_none() {
                errors.push(forbidden(
                    "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
                ));
            }
            if rv_match != "NotOlderThan" {
                errors.push(FieldError::not_supported("resourceVersionMatch", &rv_match, &["NotOlderThan"]));
            }
            if cont {
                errors.push(forbidden("resourceVersionMatch is forbidden when continue is provided"));
            }
        }
    } else {
        if !rv_match.is_empty() {
            if rv.is_empty() {
                errors.push(forbidden("resourceVersionMatch is forbidden unless resourceVersion is provided"));
            }
            if cont {
                errors.push(forbidden("resourceVersionMatch is forbidden when continue is provided"));
            }
            if rv_match != "Exact" && rv_match != "NotOlderThan" {
                errors.push(FieldError::not_supported(
                    "resourceVersionMatch",
                    &rv_match,
                    &["Exact", "NotOlderThan", ""],
                ));
            }
            if rv_match == "Exact" && rv == "0" {
                errors.push(forbidden("resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\""));
            }
        }
        if initial.is_some() {
            errors.push(FieldError {
                path: "sendInitialEvents".into(),
                kind: FieldErrorKind::Forbidden,
                detail: "sendInitialEvents is forbidden for list".into(),
            });
        }
    }
    if !errors.is_empty() {
        return Err(ApiError::Store(StoreError::Invalid {
            kind: "ListOptions.meta.k8s.io".into(),
            name: String::new(),
            errors,
        }));
    }
    Ok(ListOptions { resource_version: rv, rv_match, limit })
}

/// The resourceVersion a read asks for, as a number (None: absent or "0", any version will
/// do): 400 for one that is not a number.
pub fn requested_version(rv: &str) -> Result<Option<u64>> {
    if rv.is_empty() || rv == "0" {
        return Ok(None);
    }
    parse_version(rv).map(Some).map_err(|why| ApiError::BadRequest(format!("invalid resource version: {why}")))
}

/// A resourceVersion as a number, or the error kube-apiserver's storage layer gives for it
/// (Go's `strconv.ParseUint`: `value out of range` for digits past 2^64 - 1, else `invalid
/// syntax`).
pub fn parse_version(rv: &str) -> std::result::Result<u64, String> {
    rv.parse::<u64>().map_err(|_| {
        let why = if !rv.is_empty() && rv.bytes().all(|b| b.is_ascii_digit()) {
            "value out of range"
        } else {
            "invalid syntax"
        };
        format!("resourceVersion: Invalid value: {rv:?}: strconv.ParseUint: parsing {rv:?}: {why}")
    })
}

/// 504 `ResourceVersionTooLarge` when `rv` is newer than anything the store has delivered.
pub fn check_not_too_large(store: &Store, rv: Option<u64>) -> Result<()> {
    let current = store.delivered_version();
    match rv {
        Some(r) if r > current => Err(ApiError::TooLargeResourceVersion { requested: r, current }),
        _ => Ok(()),
    }
}

/// For `resourceVersionMatch=Exact`: Ok when the collection has not changed since `rv` (so
/// the current list is the list at `rv`), else 410 `Expired`.
pub fn check_exact(store: &Store, resource: &str, namespace: Option<&str>, rv: u64) -> Result<()> {
    let expired = || ApiError::Expired("The resourceVersion for the provided list is too old.".into());
    let mut w = store.watch(resource, namespace, Some(rv)).map_err(|e| match e {
        StoreError::Gone { .. } => expired(),
        e => e.into(),
    })?;
    match w.try_recv() {
        Ok(_) => Err(expired()),
        Err(_) => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(pairs: &[(&str, &str)]) -> Query {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    fn causes(r: Result<ListOptions>) -> Vec<String> {
        match r {
            Err(ApiError::Store(StoreError::Invalid { kind, errors, .. })) => {
                assert_eq!(kind, "ListOptions.meta.k8s.io");
                errors.iter().map(ToString::to_string).collect()
            }
            other => panic!("not a 422: {other:?}"),
        }
    }

    #[test]
    fn list_options_are_checked_as_upstream_checks_them() {
        assert_eq!(
            causes(parse(&q(&[("resourceVersionMatch", "Exact")]), false)),
            ["resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided"]
        );
        assert_eq!(
            causes(parse(&q(&[("resourceVersion", "0"), ("resourceVersionMatch", "Exact")]), false)),
            ["resourceVersionMatch: Forbidden: resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\""]
        );
        assert_eq!(
            causes(parse(&q(&[("resourceVersion", "5"), ("resourceVersionMatch", "Bogus")]), false)),
            ["resourceVersionMatch: Unsupported value: \"Bogus\": supported values: \"Exact\", \"NotOlderThan\", \"\""]
        );
        assert_eq!(
            causes(parse(&q(&[("resourceVersion", "5"), ("resourceVersionMatch", "Exact"), ("continue", "x")]), false)),
            ["resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden when continue is provided"]
        );
        assert_eq!(
            causes(parse(&q(&[("sendInitialEvents", "true")]), true)),
            ["resourceVersionMatch: Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"]
        );
        assert!(parse(&q(&[("sendInitialEvents", "true"), ("resourceVersionMatch", "NotOlderThan")]), true).is_ok());
        let e = parse(&q(&[("limit", "x")]), false).unwrap_err();
        assert_eq!((e.code(), e.to_string()), (400, "strconv.ParseInt: parsing \"x\": invalid syntax".to_string()));
        assert_eq!(parse(&q(&[("limit", "-1")]), false).unwrap().limit, 0);
        assert_eq!(requested_version("abc").unwrap_err().code(), 400);
        assert_eq!(requested_version("0").unwrap(), None);
    }

    #[test]
    fn versions_past_the_store_are_too_large_and_exact_lists_need_an_unchanged_collection() {
        let store = Store::new();
        let lease = |n: &str| {
            serde_json::json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                                                 "metadata": {"name": n, "namespace": "d"}})
        };
        store.create("namespaces", serde_json::json!({"metadata": {"name": "d"}})).unwrap();
        store.create("leases", lease("a")).unwrap();
        let now = store.delivered_version();
        assert!(check_not_too_large(&store, Some(now)).is_ok());
        let e = check_not_too_large(&store, Some(now + 100)).unwrap_err();
        assert_eq!(e.code(), 504);
        assert_eq!(e.status()["details"]["causes"][0]["reason"], "ResourceVersionTooLarge");
        assert!(check_exact(&store, "leases", Some("d"), now).is_ok());
        store.create("leases", lease("b")).unwrap();
        assert_eq!(check_exact(&store, "leases", Some("d"), now).unwrap_err().code(), 410);
        assert!(check_exact(&store, "leases", Some("other"), now).is_ok());
    }
}
