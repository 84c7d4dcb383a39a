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
    /// HTTP status code.
    pub fn code(&self) -> u16 {
        match self {
            ApiError::Store(e) => e.code(),
            ApiError::BadRequest(_) => 400,
            ApiError::NoRoute | ApiError::NamespaceNotFound(_) => 404,
            ApiError::Unauthorized => 401,
            ApiError::MethodNotAllowed => 405,
            ApiError::UnsupportedMediaType(_) => 415,
            ApiError::Expired(_) => 410,
            ApiError::RequestEntityTooLarge(_) => 413,
            ApiError::Unprocessable(_) => 422,
            ApiError::Timeout(_) => 504,
        }
    }

    /// The `Status` body.
    pub fn status(&self) -> Value {
        let (reason, details) = match self {
            ApiError::Store(e) => (e.reason(), store_details(e)),
            ApiError::BadRequest(_) => ("BadRequest", Value::Null),
            ApiError::NoRoute => ("NotFound", Value::Null),
            ApiError::NamespaceNotFound(n) => ("NotFound", json!({"name": n, "kind": "namespaces"})),
            ApiError::Unauthorized => ("Unauthorized", Value::Null),
            ApiError::MethodNotAllowed => ("MethodNotAllowed", Value::Null),
            ApiError::UnsupportedMediaType(_) => ("UnsupportedMediaType", Value::Null),
            ApiError::Expired(_) => ("Expired", Value::Null),
            ApiError::RequestEntityTooLarge(_) => ("RequestEntityTooLarge", Value::Null),
            ApiError::Unprocessable(_) => ("Invalid", Value::Null),
            ApiError::Timeout(_) => ("Timeout", Value::Null),
        };
        let mut s = json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": self.to_string(), "reason": reason, "code": self.code(),
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
        | StoreError::Conflict { resource, name, .. } => {
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
            let mut d = json!({"name": name, "kind": kind, "causes": causes});
            if let Some(g) = pv_store::ResourceType::by_kind(kind).map(|r| r.group) {
                if !g.is_empty() {
                    d["group"] = json!(g);
                }
            }
            d
        }
        _ => Value::Null,
    }
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
