//! Reading and writing an object's `metadata` as JSON, and the metadata the server owns.

use serde_json::{Map, Value};

pub(crate) use pv_model::key::{meta, meta_str};

pub(crate) fn meta_mut(obj: &mut Value) -> &mut Map<String, Value> {
    let o = obj.as_object_mut().expect("validated object");
    let m = o.entry("metadata").or_insert_with(|| Value::Object(Map::new()));
    if !m.is_object() {
        *m = Value::Object(Map::new());
    }
    m.as_object_mut().expect("metadata object")
}

/// What holds an object's deletion: `metadata.finalizers`, and for a Namespace also
/// `spec.finalizers` (upstream's `kubernetes` finalizer, removed once the contents are gone).
pub(crate) fn finalizers(obj: &Value) -> Vec<String> {
    let strings = |v: Option<&Value>| -> Vec<String> {
        v.and_then(Value::as_array)
            .map(|a| a.iter().filter_map(|f| f.as_str().map(str::to_string)).collect())
            .unwrap_or_default()
    };
    let mut all = strings(meta(obj).and_then(|m| m.get("finalizers")));
    if obj.get("kind").and_then(Value::as_str) == Some("Namespace") {
        all.extend(strings(obj.get("spec").and_then(|s| s.get("finalizers"))));
    }
    all
}

/// Metadata the server owns, kept from the stored object on every update.
const SERVER_METADATA: [&str; 6] =
    ["uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "generation", "namespace"];

/// Puts the stored object's server-owned metadata into `m`, the metadata of an update.
pub(crate) fn keep_server_metadata(old: &Value, m: &mut Map<String, Value>) {
    keep_fields(old, m, &SERVER_METADATA);
}

/// Puts the stored object's metadata `fields` into `m` (removing those it does not have).
pub(crate) fn keep_fields(old: &Value, m: &mut Map<String, Value>, fields: &[&str]) {
    let old_meta = meta(old);
    for f in fields {
        match old_meta.and_then(|om| om.get(*f)) {
            Some(v) => m.insert((*f).into(), v.clone()),
            None => m.remove(*f),
        };
    }
}
