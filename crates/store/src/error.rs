//! Store errors, shaped like kube-apiserver's `Status` reasons so the HTTP layer maps them 1:1.

use std::fmt;

/// What is wrong with one field, as kube-apiserver's `field.Error` types.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FieldErrorKind {
    /// A required field is missing.
    Required,
    /// The value is not valid.
    Invalid(String),
    /// The value is not among the supported ones.
    NotSupported(String, Vec<String>),
    /// Like `NotSupported`, for a value already written as upstream prints it
    /// (`[]string{"x"}`).
    NotSupportedValue(String, Vec<String>),
    /// The field may not be set or changed.
    Forbidden,
    /// The value is too long (in bytes).
    TooLong(usize),
    /// The value is too long in characters (the declarative `maxLength`).
    TooLongChars(usize),
    /// A value of the wrong type (a schema's `type`), printed as upstream prints it.
    TypeInvalid(String),
    /// A list or map has more items than allowed: how many, and the most.
    TooMany(usize, usize),
    /// Like `Invalid`, for a value already written as upstream prints it (a number, or JSON
    /// for a structure).
    InvalidValue(String),
    /// The value appears twice.
    Duplicate(String),
    /// Like `Duplicate`, for a value already written as upstream prints it (a number).
    DuplicateValue(String),
    /// An invalid value left out of the message, as upstream does for an object or a list
    /// (`Invalid value: <detail>`).
    InvalidNoValue,
    /// A duplicate value left out of the message (an object or a list).
    DuplicateNoValue,
}

/// One validation failure: where and what.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldError {
    /// Field path (`spec.capacity[storage]`).
    pub path: String,
    /// Kind of failure.
    pub kind: FieldErrorKind,
    /// Extra explanation.
    pub detail: String,
}

impl FieldError {
    /// A missing field.
    pub fn required(path: impl Into<String>, detail: impl Into<String>) -> Self {
        FieldError { path: path.into(), kind: FieldErrorKind::Required, detail: detail.into() }
    }
    /// An invalid value.
    pub fn invalid(path: impl Into<String>, value: impl Into<String>, detail: impl Into<String>) -> Self {
        FieldError { path: path.into(), kind: FieldErrorKind::Invalid(value.into()), detail: detail.into() }
    }
    /// A value outside the supported set.
    pub fn not_supported(path: impl Into<String>, value: impl Into<String>, supported: &[&str]) -> Self {
        FieldError {
            path: path.into(),
            kind: FieldErrorKind::NotSupported(value.into(), supported.iter().map(|s| s.to_string()).collect()),
            detail: String::new(),
        }
    }
    /// An invalid value printed as given (numbers, JSON of a structure).
    pub fn invalid_value(path: impl Into<String>, value: impl Into<String>, detail: impl Into<String>) -> Self {
        FieldError { path: path.into(), kind: FieldErrorKind::InvalidValue(value.into()), detail: detail.into() }
    }
    /// A value given twice.
    pub fn duplicate(path: impl Into<String>, value: impl Into<String>) -> Self {
        FieldError { path: path.into(), kind: FieldErrorKind::Duplicate(value.into()), detail: String::new() }
    }
    /// A forbidden field or change.
    pub fn forbidden(path: impl Into<String>, detail: impl Into<String>) -> Self {
        FieldError { path: path.into(), kind: FieldErrorKind::Forbidden, detail: detail.into() }
    }
    /// kube-apiserver's `reason` string for a Status cause.
    pub fn reason(&self) -> &'static str {
        match self.kind {
            FieldErrorKind::Required => "FieldValueRequired",
            FieldErrorKind::Invalid(_) | FieldErrorKind::InvalidValue(_) | FieldErrorKind::InvalidNoValue => {
                "FieldValueInvalid"
            }
            FieldErrorKind::Duplicate(_) | FieldErrorKind::DuplicateValue(_) | FieldErrorKind::DuplicateNoValue => {
                "FieldValueDuplicate"
            }
            FieldErrorKind::NotSupported(..) | FieldErrorKind::NotSupportedValue(..) => "FieldValueNotSupported",
            FieldErrorKind::Forbidden => "FieldValueForbidden",
            FieldErrorKind::TooLong(_) | FieldErrorKind::TooLongChars(_) => "FieldValueTooLong",
            FieldErrorKind::TooMany(..) => "FieldValueTooMany",
            FieldErrorKind::TypeInvalid(_) => "FieldValueTypeInvalid",
        }
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: ", self.path)?;
        match &self.kind {
            FieldErrorKind::Required => write!(f, "Required value")?,
            FieldErrorKind::Invalid(v) => write!(f, "Invalid value: {}", go_quote(v))?,
            FieldErrorKind::InvalidValue(v) => write!(f, "Invalid value: {v}")?,
            FieldErrorKind::Duplicate(v) => write!(f, "Duplicate value: {}", go_quote(v))?,
            FieldErrorKind::DuplicateValue(v) => write!(f, "Duplicate value: {v}")?,
            FieldErrorKind::InvalidNoValue => write!(f, "Invalid value")?,
            FieldErrorKind::DuplicateNoValue => write!(f, "Duplicate value")?,
            FieldErrorKind::NotSupported(v, s) => {
                let quoted: Vec<String> = s.iter().map(|x| go_quote(x)).collect();
                write!(f, "Unsupported value: {}: supported values: {}", go_quote(v), quoted.join(", "))?
            }
            FieldErrorKind::NotSupportedValue(v, s) => {
                let quoted: Vec<String> = s.iter().map(|x| go_quote(x)).collect();
                write!(f, "Unsupported value: {v}: supported values: {}", quoted.join(", "))?
            }
            FieldErrorKind::Forbidden => write!(f, "Forbidden")?,
            FieldErrorKind::TooLong(n) => write!(f, "Too long: may not be more than {n} bytes")?,
            FieldErrorKind::TooLongChars(n) => write!(f, "Too long: may not be more than {n} characters")?,
            FieldErrorKind::TypeInvalid(v) => write!(f, "Invalid value: {}", go_quote(v))?,
            FieldErrorKind::TooMany(n, max) => write!(f, "Too many: {n}: must have at most {max} items")?,
        }
        if !self.detail.is_empty() {
            write!(f, ": {}", self.detail)?;
        }
        Ok(())
    }
}

/// A string quoted as Go's `%q` writes it (what upstream's messages carry).
pub fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => out.push_str(&format!("\\x{:02x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The messages of a list of errors joined as upstream's aggregate error: one alone, several
/// in brackets, repeats once.
pub fn aggregate(errors: &[FieldError]) -> String {
    let mut seen: Vec<String> = Vec::new();
    for e in errors {
        let m = e.to_string();
        if !seen.contains(&m) {
            seen.push(m);
        }
    }
    if seen.len() == 1 {
        seen.remove(0)
    } else {
        format!("[{}]", seen.join(", "))
    }
}

/// Why a store request failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// 404.
    #[error("{resource} {name:?} not found")]
    NotFound {
        /// Resource (plural, with group: `persistentvolumes`, `storageclasses.storage.k8s.io`).
        resource: String,
        /// Object name.
        name: String,
    },
    /// 409 on create.
    #[error("{resource} {name:?} already exists")]
    AlreadyExists {
        /// Resource.
        resource: String,
        /// Object name.
        name: String,
    },
    /// 409 on a stale write or failed precondition.
    #[error("Operation cannot be fulfilled on {resource} {name:?}: {message}")]
    Conflict {
        /// Resource.
        resource: String,
        /// Object name.
        name: String,
        /// Why.
        message: String,
    },
    /// 403: admission refused the request (a create in a namespace being terminated).
    #[error("{resource} {name:?} is forbidden: {message}")]
    Forbidden {
        /// Resource.
        resource: String,
        /// Object name.
        name: String,
        /// Why.
        message: String,
    },
    /// 422.
    #[error("{kind} {} is invalid: {}", go_quote(name), aggregate(errors))]
    Invalid {
        /// Kind qualified by its group, as upstream names it in the message (`PersistentVolume`,
        /// `StorageClass.storage.k8s.io`).
        kind: String,
        /// Object name.
        name: String,
        /// Every failing field.
        errors: Vec<FieldError>,
    },
    /// 410: the requested resourceVersion is older than the watch history.
    #[error("too old resource version: {requested} ({oldest})")]
    Gone {
        /// Requested version.
        requested: u64,
        /// Oldest version still answerable.
        oldest: u64,
    },
    /// 400.
    #[error("{0}")]
    BadRequest(String),
    /// 500 (also what an injected `error` fault returns).
    #[error("Internal error occurred: {0}")]
    Internal(String),
    /// 504: no answer (what an injected `timeout` or `lost-response` fault returns).
    #[error("the server was unable to return a response in the time allotted")]
    Timeout,
    /// The object is larger than the store keeps. kube-apiserver passes etcd's refusal on as
    /// it comes: a 500 with no reason and etcd's message.
    #[error("etcdserver: request is too large")]
    TooLarge,
}

impl StoreError {
    /// HTTP status code kube-apiserver would answer with.
    pub fn code(&self) -> u16 {
        match self {
            StoreError::NotFound { .. } => 404,
            StoreError::AlreadyExists { .. } | StoreError::Conflict { .. } => 409,
            StoreError::Forbidden { .. } => 403,
            StoreError::Invalid { .. } => 422,
            StoreError::Gone { .. } => 410,
            StoreError::BadRequest(_) => 400,
            StoreError::Internal(_) | StoreError::TooLarge => 500,
            StoreError::Timeout => 504,
        }
    }

    /// kube-apiserver's `Status.reason`.
    pub fn reason(&self) -> &'static str {
        match self {
            StoreError::NotFound { .. } => "NotFound",
            StoreError::AlreadyExists { .. } => "AlreadyExists",
            StoreError::Conflict { .. } => "Conflict",
            StoreError::Forbidden { .. } => "Forbidden",
            StoreError::Invalid { .. } => "Invalid",
            StoreError::Gone { .. } => "Expired",
            StoreError::BadRequest(_) => "BadRequest",
            StoreError::Internal(_) => "InternalError",
            StoreError::Timeout => "Timeout",
            StoreError::TooLarge => "",
        }
    }
}
