//! A decoded body ([`Decoded`]), the `fieldValidation` option ([`FieldValidation`]) and the
//! checks every decoding shares: the type fields, unknown and duplicate fields, and upstream's
//! 400 for a body its type cannot take.
//!
//! A leaf below [`crate::decode`] (built-in types) and [`crate::custom`] (custom resources),
//! which both use it; it uses only [`crate::error`] and [`crate::resources`].

use crate::error::{ApiError, Result};
use crate::resources::Served;
use serde_json::Value;

/// What the server does with unknown and duplicate fields (`fieldValidation`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FieldValidation {
    /// Drop them silently.
    Ignore,
    /// Drop them, with a `Warning` header each.
    #[default]
    Warn,
    /// Refuse the request (400).
    Strict,
}

impl FieldValidation {
    /// From the `fieldValidation` query value (empty: Warn). Other values are refused by the
    /// caller with upstream's `Unsupported value` error.
    pub fn parse(v: &str) -> Option<Self> {
        match v {
            "" | "Warn" => Some(FieldValidation::Warn),
            "Ignore" => Some(FieldValidation::Ignore),
            "Strict" => Some(FieldValidation::Strict),
            _ => None,
        }
    }
}

/// A decoded object and the warnings to send with the answer.
#[derive(Clone, Debug)]
pub struct Decoded {
    /// The object as its type serializes it.
    pub object: Value,
    /// `Warning` header texts (`unknown field "spec.x"`).
    pub warnings: Vec<String>,
}

/// The type fields of a body: missing ones are the endpoint's, others must match it.
pub(crate) fn check_type_fields(served: &Served, value: &mut Value) -> Result<()> {
    let (api_version, kind) = (served.api_version(), served.kind());
    if let Some(o) = value.as_object_mut() {
        if let Some(k) = o.get("kind").and_then(Value::as_str).filter(|k| !k.is_empty() && *k != kind) {
            return Err(ApiError::BadRequest(format!(
                "the kind in the body ({k}) does not match the kind of the resource ({kind})"
            )));
        }
        for (field, value) in [("apiVersion", api_version.as_str()), ("kind", kind)] {
            if o.get(field).is_none_or(|v| v.is_null() || v == "") {
                o.insert(field.into(), Value::String(value.into()));
            }
        }
        if o.get("apiVersion").is_some_and(|v| v.as_str() != Some(&api_version)) {
            let got = o.get("apiVersion").map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_string));
            return Err(ApiError::BadRequest(format!(
                "the API version in the data ({}) does not match the expected API version ({api_version})",
                got.unwrap_or_default()
            )));
        }
    }
    Ok(())
}

/// Unknown and duplicate fields as `fv` asks: refused (Strict), warned about (Warn) or dropped.
pub(crate) fn field_problems(
    served: &Served,
    object: Value,
    unknown: Vec<String>,
    duplicates: Vec<String>,
    fv: FieldValidation,
) -> Result<Decoded> {
    let mut problems: Vec<String> = unknown.into_iter().map(|p| format!("unknown field {p:?}")).collect();
    problems.extend(duplicates.into_iter().map(|p| format!("duplicate field {p:?}")));
    match fv {
        FieldValidation::Strict if !problems.is_empty() => {
            Err(cannot_handle(served, format!("strict decoding error: {}", problems.join(", "))))
        }
        FieldValidation::Warn => Ok(Decoded { object, warnings: problems }),
        _ => Ok(Decoded { object, warnings: Vec::new() }),
    }
}

/// Upstream's 400 for a body its type cannot take.
pub(crate) fn cannot_handle(served: &Served, why: String) -> ApiError {
    let kind = served.kind();
    ApiError::BadRequest(format!("{kind} in version {:?} cannot be handled as a {kind}: {why}", served.version))
}
