//! Content negotiation: how the client wants objects back ([`Format`], from the `Accept` header
//! and the query).
//!
//! Below the verbs, the list writer, watch and discovery, which all use it; it uses only
//! [`crate::error`], [`crate::query`], the Table row option of [`crate::tables`] and the
//! protobuf media type.

use crate::error::{ApiError, Result};
use crate::query::Query;
use crate::tables::IncludeObject;
use std::collections::HashMap;

/// How the client wants objects back.
#[derive(Clone, Copy, Debug, Default)]
pub struct Format {
    /// Some: as a Table, with this row object.
    pub table: Option<IncludeObject>,
    /// Objects in protobuf (Tables are JSON only).
    pub protobuf: bool,
    /// Objects in YAML.
    pub yaml: bool,
    /// Some: only the metadata, as `PartialObjectMetadata` of this `meta.k8s.io` version.
    pub partial: Option<&'static str>,
}

/// One `Accept` entry: the media type and its `as`/`v`/`g` parameters.
pub(crate) fn accept_entry(entry: &str) -> (String, HashMap<String, String>) {
    let mut parts = entry.split(';');
    let media = parts.next().unwrap_or("").trim().to_ascii_lowercase();
    let params = parts
        .filter_map(|p| p.split_once('='))
        .map(|(k, v)| (k.trim().to_string(), v.trim().trim_matches('"').to_string()))
        .collect();
    (media, params)
}

impl Format {
    /// From the Accept header and query: the first entry the server can produce, as
    /// kube-apiserver negotiates (JSON, YAML or protobuf, optionally as a `meta.k8s.io` Table
    /// or PartialObjectMetadata); 406 when it can produce none of them.
    pub fn new(accept: &str, q: &Query) -> Result<Self> {
        if accept.trim().is_empty() {
            return Ok(Format::default());
        }
        for entry in accept.split(',') {
            let (media, params) = accept_entry(entry);
            let (json, yaml, proto) = match media.as_str() {
                "application/json" | "application/*" | "*/*" | "*" => (true, false, false),
                "application/yaml" => (false, true, false),
                m if m == crate::protobuf::MEDIA_TYPE => (false, false, true),
                _ => continue,
            };
            let group_ok = params.get("g").is_none_or(|g| g == "meta.k8s.io");
            let version = match params.get("v").map(String::as_str) {
                None | Some("v1") => "v1",
                Some("v1beta1") => "v1beta1",
                Some(_) => continue,
            };
            let mut f = Format { yaml, protobuf: proto, ..Format::default() };
            match params.get("as").map(String::as_str) {
                None => {}
                Some("Table") if group_ok && !yaml => {
                    let include = q.get("includeObject").map_or("", String::as_str);
                    if !matches!(include, "" | "Metadata" | "Object" | "None") {
                        return Err(ApiError::BadRequest(format!(
                            "Unable to convert to Table as requested: includeObject: Invalid value: {include:?}: must be 'Metadata', 'Object', 'None', or empty"
                        )));
                    }
                    f.table = Some(IncludeObject::parse(Some(include)));
                    f.protobuf = false;
                }
                Some("PartialObjectMetadata" | "PartialObjectMetadataList") if group_ok && json => {
                    f.partial = Some(version);
                }
                Some(_) => continue,
            }
            return Ok(f);
        }
        Err(ApiError::NotAcceptable)
    }

    /// The media type of an answer in this format.
    pub fn media_type(&self) -> &'static str {
        if self.protobuf {
            crate::protobuf::MEDIA_TYPE
        } else if self.yaml {
            "application/yaml"
        } else {
            "application/json"
        }
    }
}
