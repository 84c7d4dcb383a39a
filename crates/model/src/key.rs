//! What an object is known by: its key (`namespace/name`, or `name` for a cluster-scoped object,
//! as client-go's `MetaNamespaceKeyFunc` writes it), and its `metadata` read from JSON.
//!
//! Every queue, cache and report keys objects this way; building the string by hand in each place
//! is what [`ObjectKey`] replaces.

use crate::k8s::{ObjectMeta, ObjectReference};
use serde_json::{Map, Value};
use std::borrow::Borrow;
use std::fmt;
use std::ops::Deref;

/// `namespace/name`, or `name` when the namespace is empty. Neither part can hold a `/`
/// (the API server validates both as DNS names), so the key splits back unambiguously.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectKey(String);

impl ObjectKey {
    /// The key of `name` in `namespace` ("" for a cluster-scoped object).
    pub fn new(namespace: &str, name: &str) -> Self {
        if namespace.is_empty() {
            ObjectKey(name.to_string())
        } else {
            let mut k = String::with_capacity(namespace.len() + 1 + name.len());
            k.push_str(namespace);
            k.push('/');
            k.push_str(name);
            ObjectKey(k)
        }
    }

    /// The key of the object with this metadata.
    pub fn of(meta: &ObjectMeta) -> Self {
        Self::new(meta.namespace.as_deref().unwrap_or(""), meta.name.as_deref().unwrap_or(""))
    }

    /// The key of the object a reference points to (a volume's claimRef).
    pub fn of_ref(r: &ObjectReference) -> Self {
        Self::new(r.namespace.as_deref().unwrap_or(""), r.name.as_deref().unwrap_or(""))
    }

    /// The key of an object given as JSON.
    pub fn of_json(obj: &Value) -> Self {
        Self::new(meta_str(obj, "namespace"), meta_str(obj, "name"))
    }

    /// The key as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The namespace ("" for a cluster-scoped object).
    pub fn namespace(&self) -> &str {
        self.0.split_once('/').map_or("", |(ns, _)| ns)
    }

    /// The name.
    pub fn name(&self) -> &str {
        self.0.split_once('/').map_or(&self.0, |(_, n)| n)
    }
}

impl Deref for ObjectKey {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl Borrow<str> for ObjectKey {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for ObjectKey {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<ObjectKey> for String {
    fn from(k: ObjectKey) -> String {
        k.0
    }
}

impl PartialEq<str> for ObjectKey {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}

impl PartialEq<&str> for ObjectKey {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

impl PartialEq<String> for ObjectKey {
    fn eq(&self, other: &String) -> bool {
        &self.0 == other
    }
}

/// An object's `metadata` as JSON, if it has one.
pub fn meta(obj: &Value) -> Option<&Map<String, Value>> {
    obj.get("metadata").and_then(Value::as_object)
}

/// A string field of an object's `metadata` (`name`, `namespace`, `uid`, `resourceVersion`…),
/// "" when missing or not a string.
pub fn meta_str<'a>(obj: &'a Value, field: &str) -> &'a str {
    meta(obj).and_then(|m| m.get(field)).and_then(Value::as_str).unwrap_or("")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn namespaced_and_cluster_scoped_keys_split_back() {
        let k = ObjectKey::new("demo", "data");
        assert_eq!((k.as_str(), k.namespace(), k.name()), ("demo/data", "demo", "data"));
        let k = ObjectKey::new("", "pv1");
        assert_eq!((k.as_str(), k.namespace(), k.name()), ("pv1", "", "pv1"));
    }

    #[test]
    fn metadata_references_and_json_give_the_same_key() {
        let obj = json!({"metadata": {"namespace": "demo", "name": "data", "uid": 7}});
        let meta: ObjectMeta = serde_json::from_value(obj["metadata"].clone()).unwrap_or_default();
        let r = ObjectReference { namespace: Some("demo".into()), name: Some("data".into()), ..Default::default() };
        assert_eq!(ObjectKey::of_json(&obj), ObjectKey::new("demo", "data"));
        assert_eq!(ObjectKey::of_ref(&r), ObjectKey::new("demo", "data"));
        assert_eq!(
            ObjectKey::of(&ObjectMeta { namespace: Some("demo".into()), name: Some("data".into()), ..meta }),
            "demo/data"
        );
        assert_eq!(meta_str(&obj, "uid"), "", "a number is not a string");
        assert_eq!(meta_str(&json!({"metadata": []}), "name"), "");
    }
}
