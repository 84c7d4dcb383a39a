//! An object as the store keeps it: its compact JSON text, shared.
//!
//! Why text and not a `serde_json::Value`: a tree costs about eight times its text (each JSON
//! object in it is a B-tree node of some 600 bytes, so a bound volume of 700 bytes of JSON takes
//! 5.6 KB as a tree; BENCHMARKS.md, "`simulate` on a file of N static pairs"). The store writes
//! each version's text once, when the write is committed, and everything that keeps the version
//! shares it: the objects readers see, the watch history, every watcher's queue, and the durable
//! backend, which stores the same bytes. A write parses the version it replaces (it validates and
//! merges against a tree); a reader parses what it reads, or decodes it straight into its type.

use serde::de::DeserializeOwned;
use serde_json::Value;
use std::sync::Arc;

/// One version of an object: its JSON text. Cloning shares the text.
#[derive(Clone, PartialEq, Eq)]
pub struct Object(Arc<str>);

impl Object {
    /// The compact JSON text of `value`.
    pub fn new(value: &Value) -> Self {
        Object(serde_json::to_string(value).expect("a JSON value serializes").into())
    }

    /// An object from JSON bytes (the durable backend's records), checked to be a JSON object
    /// and kept compact.
    pub fn from_json(bytes: &[u8]) -> serde_json::Result<Self> {
        let v: serde_json::Map<String, Value> = serde_json::from_slice(bytes)?;
        Ok(Object::new(&Value::Object(v)))
    }

    /// The JSON text.
    pub fn text(&self) -> &str {
        &self.0
    }

    /// Size of the JSON text in bytes: what the store's limits count.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Never true: the text of an object is at least `{}`.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The object as a JSON tree (parsed anew on each call).
    pub fn value(&self) -> Value {
        serde_json::from_str(&self.0).expect("the store's own JSON text parses")
    }

    /// Its `metadata.namespace` (empty when it has none) and `metadata.name`.
    pub fn key(&self) -> (String, String) {
        #[derive(serde::Deserialize, Default)]
        #[serde(default)]
        struct Meta {
            namespace: String,
            name: String,
        }
        #[derive(serde::Deserialize, Default)]
        #[serde(default)]
        struct Named {
            metadata: Meta,
        }
        let m = self.decode::<Named>().unwrap_or_default().metadata;
        (m.namespace, m.name)
    }

    /// The object decoded into `T`.
    pub fn decode<T: DeserializeOwned>(&self) -> serde_json::Result<T> {
        serde_json::from_str(&self.0)
    }
}

impl std::fmt::Debug for Object {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<&Value> for Object {
    fn from(v: &Value) -> Self {
        Object::new(v)
    }
}

impl serde::Serialize for Object {
    /// Written as the object it holds (not as a string), in the serializer's own layout: pretty
    /// JSON is indented, YAML is YAML.
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.value().serialize(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_object_keeps_compact_text_and_gives_back_the_same_tree() {
        let v = json!({"metadata": {"name": "a", "labels": {"x": "y"}}, "n": 1, "f": 0.5, "s": [1, null, "x"]});
        let o = Object::new(&v);
        assert_eq!(o.text(), serde_json::to_string(&v).unwrap());
        assert_eq!(o.len(), o.text().len());
        assert_eq!(o.value(), v);
        assert_eq!(serde_json::to_value(&o).unwrap(), v, "serialized as the object it holds");
        assert_eq!(serde_json::to_string_pretty(&o).unwrap(), serde_json::to_string_pretty(&v).unwrap());
        #[derive(serde::Deserialize)]
        struct Named {
            metadata: Meta,
        }
        #[derive(serde::Deserialize)]
        struct Meta {
            name: String,
        }
        assert_eq!(o.decode::<Named>().unwrap().metadata.name, "a");
    }

    #[test]
    fn text_that_is_not_an_object_is_refused() {
        assert!(Object::from_json(b"[1]").is_err());
        assert!(Object::from_json(b"{\"a\":").is_err());
        assert_eq!(Object::from_json(b"{ \"a\" : 1 }").unwrap().text(), "{\"a\":1}", "made compact");
    }
}
