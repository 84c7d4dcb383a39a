//! HTTP errors, answered as kube-apiserver does: a `Status` object with the HTTP code, a
//! machine-readable `reason` and `details` (name, group, kind, and for 422 the `causes` kubectl
//! prints as `The PersistentVolume "x" is invalid: spec.capacity: Required value`).

use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use pv_store::{FieldError, FieldErrorKind, StoreError};
use serde_json::{json, Value};

/// Why a request failed.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// The store refused the operation (404, 409, 422, 410, ...).
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The request itself is malformed (400).
    #[error("{0}")]
    BadRequest(String),
    /// No such path or resource (404).
    #[error("the server could not find the requested resource")]
    NoRoute,
    /// A path under a group/version nobody serves: kube-apiserver's mux answers it, in plain
    /// text (404 `404 page not found`).
    #[error("404 page not found")]
    PageNotFound,
    /// Creating into a namespace that does not exist (404 `namespaces "x" not found`).
    #[error("namespaces {0:?} not found")]
    NamespaceNotFound(String),
    /// Missing or wrong bearer token (401).
    #[error("Unauthorized")]
    Unauthorized,
    /// The verb is not allowed on this path (405).
    #[error("the server does not allow this method on the requested resource")]
    MethodNotAllowed,
    /// Unknown patch or body content type (415); carries the accepted media types.
    #[error("the body of the request was in an unknown format - accepted media types include: {0}")]
    UnsupportedMediaType(String),
    /// A continue token whose list is no longer held (410 `Expired`).
    #[error("{0}")]
    Expired(String),
    /// The request body, or what it asks for, is too large (413).
    #[error("{0}")]
    RequestEntityTooLarge(String),
    /// The request is well-formed but cannot be carried out (422 without field causes).
    #[error("{0}")]
    Unprocessable(String),
    /// The request did not finish in time (504).
    #[error("Timeout: {0}")]
    Timeout(String),
    /// A read asked for a resourceVersion newer than the store's (504 with the
    /// `ResourceVersionTooLarge` cause, as kube-apiserver answers).
    #[error("Timeout: Too large resource version: {requested}, current: {current}")]
    TooLargeResourceVersion {
        /// The version asked for.
        requested: u64,
        /// The store's newest delivered version.
        current: u64,
    },
    /// The server cannot answer in any media type the client accepts (406).
    #[error("406: Not Acceptable\n\nAvailable representations: application/json, application/yaml, application/vnd.kubernetes.protobuf")]
    NotAcceptable,
}

/// Result with an [`ApiError`].
pub type Result<T, E = ApiError> = std::result::Result<T, E>;

fn cause_message(e: &FieldError) -> String {
    // The cause message is the error text without its leading `field: `.
    let full = e.to_string();
    full.strip_prefix(&format!("{}: ", e.path)).unwrap_or(&full).to_string()
}

/// Splits `storageclasses.storage.k8s.io` into (`storageclasses`, `storage.k8s.io`).
fn split_resource(q: &str) -> (&str, &str) {
    q.split_once('.').unwrap_or((q, ""))
}

impl ApiError {
    /// A write's refusal decided from what is stored (404, 409, 403, 422), which may rest on
    /// writes not yet durable (`Store::refusal_stands`).
    pub fn is_refusal(&self) -> bool {
        matches!(
            self,
            ApiError::Store(
                StoreError::NotFound { .. }
                    | StoreError::AlreadyExists { .. }
                    | StoreError::Conflict { .. }
                    | StoreError::Forbidden { .. }
                    | StoreError::Invalid { .. }
            ) | ApiError::NamespaceNotFound(_)
        )
    }

    /// HTTP status code.
    pub fn code(&self) -> u16 {
        match self {
            ApiError::Store(e) => e.code(),
            ApiError::BadRequest(_) => 400,
            ApiError::NoRoute | ApiError::NamespaceNotFound(_) | ApiError::PageNotFound => 404,
            ApiError::Unauthorized => 401,
            ApiError::MethodNotAllowed => 405,
            ApiError::UnsupportedMediaType(_) => 415,
            ApiError::Expired(_) => 410,
            ApiError::RequestEntityTooLarge(_) => 413,
            ApiError::Unprocessable(_) => 422,
            ApiError::Timeout(_) | ApiError::TooLargeResourceVersion { .. } => 504,
            ApiError::NotAcceptable => 406,
        }
    }

    /// The `Status` body.
    pub fn status(&self) -> Value {
        let (reason, details) = match self {
            ApiError::Store(e) => (e.reason(), store_details(e)),
            ApiError::BadRequest(_) => ("BadRequest", Value::Null),
            ApiError::NoRoute | ApiError::PageNotFound => ("NotFound", json!({})),
            ApiError::NamespaceNotFound(n) => ("NotFound", json!({"name": n, "kind": "namespaces"})),
            ApiError::Unauthorized => ("Unauthorized", Value::Null),
            ApiError::MethodNotAllowed => ("MethodNotAllowed", json!({})),
            ApiError::UnsupportedMediaType(_) => ("UnsupportedMediaType", Value::Null),
            ApiError::Expired(_) => ("Expired", Value::Null),
            ApiError::RequestEntityTooLarge(_) => ("RequestEntityTooLarge", Value::Null),
            ApiError::Unprocessable(_) => ("Invalid", Value::Null),
            ApiError::Timeout(_) => ("Timeout", Value::Null),
            ApiError::TooLargeResourceVersion { .. } => (
                "Timeout",
                json!({"causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
                       "retryAfterSeconds": 1}),
            ),
            ApiError::NotAcceptable => ("NotAcceptable", json!({})),
        };
        let message = match self {
            ApiError::Store(StoreError::Invalid { kind, name, errors }) => invalid_message(kind, name, errors),
            _ => self.to_string(),
        };
        let mut s = json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": reason, "code": self.code(),
        });
        if reason.is_empty() {
            // kube-apiserver omits an unknown reason (etcd's "request is too large").
            if let Some(o) = s.as_object_mut() {
                o.remove("reason");
            }
        }
        if !details.is_null() {
            s["details"] = details;
        }
        s
    }
}

fn store_details(e: &StoreError) -> Value {
    match e {
        StoreError::NotFound { resource, name }
        | StoreError::AlreadyExists { resource, name }
        | StoreError::Conflict { resource, name, .. }
        | StoreError::Forbidden { resource, name, .. } => {
            let (kind, group) = split_resource(resource);
            let mut d = json!({"name": name, "kind": kind});
            if !group.is_empty() {
                d["group"] = json!(group);
            }
            d
        }
        StoreError::Invalid { kind, name, errors } => {
            let causes: Vec<Value> = errors
                .iter()
                .map(|f| json!({"reason": f.reason(), "message": cause_message(f), "field": f.path}))
                .collect();
            let (kind, group) = group_kind(kind);
            let mut d = json!({"kind": kind, "causes": causes});
            if !name.is_empty() {
                d["name"] = json!(name);
            }
            if !group.is_empty() {
                d["group"] = json!(group);
            }
            d
        }
        _ => Value::Null,
    }
}

/// `(Kind, group)` of a kind as the store names it: `PersistentVolume`, `StorageClass` (group
/// looked up), or an options kind already qualified (`CreateOptions.meta.k8s.io`).
fn group_kind(kind: &str) -> (&str, &str) {
    if let Some((k, g)) = kind.split_once('.') {
        return (k, g);
    }
    (kind, pv_store::ResourceType::by_kind(kind).map_or("", |r| r.group))
}

/// kube-apiserver's message for a 422: `Kind.group "name" is invalid: ERR` with one distinct
/// error, `[ERR1, ERR2]` with more (repeated texts once).
fn invalid_message(kind: &str, name: &str, errors: &[FieldError]) -> String {
    let (k, g) = group_kind(kind);
    let qualified = if g.is_empty() { k.to_string() } else { format!("{k}.{g}") };
    let mut seen: Vec<String> = Vec::new();
    for e in errors {
        let text = e.to_string();
        if !seen.contains(&text) {
            seen.push(text);
        }
    }
    let all = if seen.len() == 1 { seen.remove(0) } else { format!("[{}]", seen.join(", ")) };
    format!("{qualified} {name:?} is invalid: {all}")
}

/// A `Status` for an invalid value outside the store's validation (e.g. a bad selector).
pub fn invalid(kind: &str, name: &str, path: &str, value: &str, detail: &str) -> ApiError {
    ApiError::Store(StoreError::Invalid {
        kind: kind.into(),
        name: name.into(),
        errors: vec![FieldError {
            path: path.into(),
            kind: FieldErrorKind::Invalid(value.into()),
            detail: detail.into(),
        }],
    })
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let code = StatusCode::from_u16(self.code()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        if matches!(self, ApiError::PageNotFound) {
            return (code, [(header::CONTENT_TYPE, "text/plain; charset=utf-8")], "404 page not found\n")
                .into_response();
        }
        let body = serde_json::to_vec(&self.status()).unwrap_or_default();
        (code, [(header::CONTENT_TYPE, "application/json")], body).into_response()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invalid_status_carries_causes_without_the_field_prefix() {
        let e = ApiError::Store(StoreError::Invalid {
            kind: "PersistentVolume".into(),
            name: "x".into(),
            errors: vec![FieldError::required("spec.capacity", "")],
        });
        let s = e.status();
        assert_eq!(s["code"], 422);
        assert_eq!(s["details"]["causes"][0]["message"], "Required value");
        assert_eq!(s["details"]["causes"][0]["field"], "spec.capacity");
        assert_eq!(s["details"]["causes"][0]["reason"], "FieldValueRequired");
    }

    #[test]
    fn invalid_messages_qualify_the_kind_and_bracket_several_errors() {
        let one = ApiError::Store(StoreError::Invalid {
            kind: "StorageClass".into(),
            name: "fast".into(),
            errors: vec![FieldError::required("provisioner", "")],
        });
        let s = one.status();
        assert_eq!(s["message"], "StorageClass.storage.k8s.io \"fast\" is invalid: provisioner: Required value");
        assert_eq!(s["details"]["group"], "storage.k8s.io");
        let two = ApiError::Store(StoreError::Invalid {
            kind: "PersistentVolume".into(),
            name: "v".into(),
            errors: vec![
                FieldError::required("spec.capacity", ""),
                FieldError::required("spec", "must specify a volume type"),
            ],
        });
        assert_eq!(
            two.status()["message"],
            "PersistentVolume \"v\" is invalid: [spec.capacity: Required value, spec: Required value: must specify a volume type]"
        );
        let opts = ApiError::Store(StoreError::Invalid {
            kind: "ListOptions.meta.k8s.io".into(),
            name: String::new(),
            errors: vec![FieldError::required("x", "")],
        });
        let s = opts.status();
        assert_eq!(
            (s["details"]["kind"].as_str(), s["details"]["group"].as_str()),
            (Some("ListOptions"), Some("meta.k8s.io"))
        );
        assert!(s["details"].get("name").is_none(), "{s}");
        assert_eq!(s["message"], "ListOptions.meta.k8s.io \"\" is invalid: x: Required value");
    }

    #[test]
    fn not_found_details_split_the_group() {
        let e = ApiError::Store(StoreError::NotFound {
            resource: "storageclasses.storage.k8s.io".into(),
            name: "fast".into(),
        });
        let s = e.status();
        assert_eq!(s["details"]["group"], "storage.k8s.io");
        assert_eq!(s["details"]["kind"], "storageclasses");
        assert_eq!(s["message"], "storageclasses.storage.k8s.io \"fast\" not found");
    }
}
