//! The protobuf schema of the served kinds, as upstream's Go types define it.
//!
//! `schema.json` is generated from k8s.io/api by reflection (`conformance/protoclient/schema`):
//! for each message, every field's number, its scalar kind or message type, its JSON name, and
//! two facts about the Go field that decide both encodings: whether it is a pointer (the Go
//! marshaller writes it only when set, other fields always) and whether its JSON tag says
//! `omitempty` (a zero value is left out of JSON). Fields embedded with `json:",inline"` are
//! nested messages in protobuf but flattened into the parent in JSON.

use serde::Deserialize;
use std::collections::HashMap;
use std::sync::OnceLock;

/// One field of a message.
#[derive(Debug, Deserialize)]
pub struct Field {
    /// JSON name (empty for inline fields).
    #[serde(default)]
    pub json: String,
    /// Protobuf field number.
    pub num: u32,
    /// `string`, `bool`, `int32`, `int64`, `uint32`, `uint64`, `double`, `float`, `bytes` or
    /// `message`.
    pub kind: String,
    /// Message type (Go package path + `.` + name) when `kind` is `message`.
    #[serde(default, rename = "type")]
    pub ty: String,
    /// A Go pointer: written only when set.
    #[serde(default)]
    pub ptr: bool,
    /// JSON `omitempty`: a zero scalar, empty list or empty map is left out of JSON.
    #[serde(default)]
    pub omit: bool,
    /// Repeated.
    #[serde(default)]
    pub rep: bool,
    /// A map from string keys to `kind` values.
    #[serde(default)]
    pub map: bool,
    /// Embedded: a nested message in protobuf, its fields flattened into the parent in JSON.
    #[serde(default)]
    pub inline: bool,
}

/// Message type name → fields in field-number order.
pub type Schema = HashMap<String, Vec<Field>>;

/// The schema, parsed once.
pub fn schema() -> &'static Schema {
    static SCHEMA: OnceLock<Schema> = OnceLock::new();
    SCHEMA.get_or_init(|| serde_json::from_str(include_str!("schema.json")).expect("schema.json is valid"))
}

/// The Go package of `apiVersion`'s types in k8s.io/api (`core/v1` for `v1`, the group's first
/// label for the others: `storage.k8s.io/v1` is `k8s.io/api/storage/v1`), `meta/v1` for
/// `meta.k8s.io/v1`. Whether it has the kind is the schema's to say.
fn package(api_version: &str) -> String {
    match api_version.split_once('/') {
        None => format!("k8s.io/api/core/{api_version}"),
        Some(("meta.k8s.io", "v1")) => META.to_string(),
        Some((group, version)) => format!("k8s.io/api/{}/{version}", group.split('.').next().unwrap_or(group)),
    }
}

/// The package of `Status`, `DeleteOptions`, `WatchEvent`, `ObjectMeta`.
pub const META: &str = "k8s.io/apimachinery/pkg/apis/meta/v1";

/// The message type of objects of `kind` at `apiVersion`: the group's own type, else the
/// `meta/v1` one (kube-apiserver serves `Status` and takes `DeleteOptions` at every version).
pub fn message_for(api_version: &str, kind: &str) -> Option<String> {
    let s = schema();
    let own = Some(format!("{}.{kind}", package(api_version))).filter(|n| s.contains_key(n));
    own.or_else(|| Some(format!("{META}.{kind}")).filter(|n| s.contains_key(n)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_referenced_message_is_in_the_schema() {
        const SPECIAL: &[&str] = &[
            "k8s.io/apimachinery/pkg/apis/meta/v1.Time",
            "k8s.io/apimachinery/pkg/apis/meta/v1.MicroTime",
            "k8s.io/apimachinery/pkg/apis/meta/v1.FieldsV1",
            "k8s.io/apimachinery/pkg/api/resource.Quantity",
            "k8s.io/apimachinery/pkg/util/intstr.IntOrString",
            "k8s.io/apimachinery/pkg/runtime.RawExtension",
        ];
        for (name, fields) in schema() {
            for f in fields {
                if f.kind == "message" {
                    assert!(schema().contains_key(&f.ty) || SPECIAL.contains(&f.ty.as_str()), "{name}: {}", f.ty);
                }
            }
        }
    }

    #[test]
    fn served_kinds_resolve_to_their_group_types() {
        assert_eq!(message_for("v1", "PersistentVolume").unwrap(), "k8s.io/api/core/v1.PersistentVolume");
        assert_eq!(message_for("events.k8s.io/v1", "Event").unwrap(), "k8s.io/api/events/v1.Event");
        assert_eq!(message_for("v1", "Event").unwrap(), "k8s.io/api/core/v1.Event");
        assert_eq!(message_for("v1", "Status").unwrap(), format!("{META}.Status"));
        assert_eq!(message_for("v1", "DeleteOptions").unwrap(), format!("{META}.DeleteOptions"));
        assert!(message_for("v1", "Secret").is_some());
        assert!(message_for("apiextensions.k8s.io/v1", "CustomResourceDefinition").is_none());
        assert!(message_for("apps/v1", "Deployment").is_none());
    }

    #[test]
    fn every_served_kind_and_its_list_have_a_message() {
        // CustomResourceDefinitions are read and written as JSON (see DIFFERENCES.md).
        for served in crate::resources::built_in().into_iter().filter(|s| s.kind() != "CustomResourceDefinition") {
            let (api_version, kind) = (served.api_version(), served.kind());
            assert!(message_for(&api_version, kind).is_some(), "{api_version} {kind}");
            assert!(message_for(&api_version, &format!("{kind}List")).is_some(), "{api_version} {kind}List");
        }
    }
}
