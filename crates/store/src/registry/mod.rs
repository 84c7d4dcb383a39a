//! One strategy per kind, as kube-apiserver keeps them (`pkg/registry/<group>/<kind>/strategy.go`):
//! the store's create, update and delete are written once over [`Strategy`], and only a kind's
//! own file decides what that kind adds to a write — its defaults, its validation, what an update
//! may change, what its status write keeps, what marking it deleted means.
//!
//! Adding a kind is adding a file here (and its `mod` line below): its `RESOURCE`, a
//! [`ResourceType`], and its `Strategy`, a unit struct implementing [`Strategy`] (with its
//! typed round trip, the k8s-openapi type the API server decodes it through, the warnings its
//! writes get, the columns of its Table rows (see [`crate::table`]), its field selectors, its
//! discovery categories and what its DELETE answers). The build script lists every file of this
//! directory in [`RESOURCE_TYPES`] and `STRATEGIES`. The API server matches no kind name for them but Namespace's (its
//! `finalize` subresource, no DELETE of the collection) and the Event's (events.k8s.io/v1 is a
//! second version of it); only the generated OpenAPI and protobuf schema data are kept apart. The files form three layers:
//! [`strategy`] (the trait) below the kinds' files, and this file, the lists and the lookups,
//! above them.

pub(crate) mod strategy;

pub(crate) mod cluster_role;
pub(crate) mod cluster_role_binding;
pub(crate) mod config_map;
pub(crate) mod csi_driver;
pub(crate) mod csi_node;
pub(crate) mod csi_storage_capacity;
pub(crate) mod custom_resource_definition;
pub(crate) mod event;
pub(crate) mod lease;
pub(crate) mod namespace;
pub(crate) mod node;
pub(crate) mod persistent_volume;
pub(crate) mod persistent_volume_claim;
pub(crate) mod pod;
pub(crate) mod role;
pub(crate) mod role_binding;
pub(crate) mod secret;
pub(crate) mod service;
pub(crate) mod service_account;
pub(crate) mod storage_class;
pub(crate) mod volume_attachment;
pub(crate) mod volume_attributes_class;

use crate::kinds::ResourceType;
use crate::meta::{meta, meta_mut};
use crate::table::Column;
use serde_json::Value;
pub use strategy::FieldLabels;
pub(crate) use strategy::Strategy;

include!(concat!(env!("OUT_DIR"), "/kinds.rs"));

impl ResourceType {
    /// Looks up a built-in resource by plural name (its store key).
    pub fn by_plural(plural: &str) -> Option<&'static ResourceType> {
        RESOURCE_TYPES.iter().find(|r| r.plural == plural)
    }

    /// Looks up by kind.
    pub fn by_kind(kind: &str) -> Option<&'static ResourceType> {
        RESOURCE_TYPES.iter().find(|r| r.kind == kind)
    }
}

/// The strategy of a served resource.
pub(crate) fn of(rt: &ResourceType) -> &'static dyn Strategy {
    if rt.is_custom() {
        return crate::custom::strategy(rt);
    }
    *STRATEGIES
        .iter()
        .find(|s| s.resource().plural == rt.plural && s.resource().group == rt.group)
        .unwrap_or_else(|| panic!("no strategy for {}", rt.qualified()))
}

/// The object as the k8s-openapi type of its served resource reads and writes it (its
/// strategy's `roundtrip`).
pub fn roundtrip(rt: &ResourceType, value: &Value) -> Result<Value, String> {
    of(rt).roundtrip(value)
}

/// The `Warning` headers for an accepted create (`old` None) or update of `obj` (its strategy's
/// `warnings`).
pub fn warnings(rt: &ResourceType, old: Option<&Value>, obj: &Value) -> Vec<String> {
    of(rt).warnings(old, obj)
}

/// The columns of the served resource's rows in a Table (its strategy's `columns`).
pub fn columns(rt: &ResourceType) -> &'static [Column] {
    of(rt).columns()
}

/// The categories discovery lists the served resource in (its strategy's `categories`).
pub fn categories(rt: &ResourceType) -> &'static [&'static str] {
    of(rt).categories()
}

/// The field labels of the served resource's field label conversion function, if it has one
/// (its strategy's `field_labels`).
pub fn field_labels(rt: &ResourceType) -> Option<FieldLabels> {
    of(rt).field_labels()
}

/// The value a field selector compares for a supported `label` on an object of the served
/// resource (its strategy's `selectable_value`).
pub fn selectable_value(rt: &ResourceType, obj: &Value, label: &str) -> String {
    of(rt).selectable_value(obj, label)
}

/// Whether a DELETE that removes an object of the served resource at once answers with the
/// object (its strategy's `returns_deleted_object`), not a success Status.
pub fn returns_deleted_object(rt: &ResourceType) -> bool {
    of(rt).returns_deleted_object()
}

/// An update before it is stored: the generation counts a spec change of a kind that tracks
/// it, then the kind's own step.
pub(crate) fn updated(rt: &ResourceType, old: &Value, new: &mut Value, status: bool, now: &str) {
    let s = of(rt);
    if !status && s.tracks_generation() && s.spec_changed(old, new) {
        let g = meta(old).and_then(|m| m.get("generation")).and_then(Value::as_i64).unwrap_or(1);
        meta_mut(new).insert("generation".into(), Value::from(g + 1));
    }
    s.updated(old, new, status, now);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_served_resource_has_exactly_one_strategy() {
        for rt in RESOURCE_TYPES {
            let n = STRATEGIES.iter().filter(|s| s.resource() == rt).count();
            assert_eq!(n, 1, "{}", rt.qualified());
        }
        assert_eq!(STRATEGIES.len(), RESOURCE_TYPES.len());
    }

    #[test]
    fn every_served_kind_has_its_typed_round_trip() {
        for rt in RESOURCE_TYPES {
            let obj = serde_json::json!({"apiVersion": rt.api_version(), "kind": rt.kind, "metadata": {"name": "x"}});
            let back = roundtrip(rt, &obj).unwrap_or_else(|e| panic!("{}: {e}", rt.qualified()));
            assert_eq!(back["metadata"]["name"], "x", "{}", rt.qualified());
            let unknown = serde_json::json!({"metadata": {"name": "x"}, "notAField": 1});
            assert!(roundtrip(rt, &unknown).unwrap().get("notAField").is_none(), "{}", rt.qualified());
        }
    }
}
