//! The simulation's output: every object of the input kinds as stored, sorted by kind, namespace
//! and name, then every Event in the order it was first emitted, as one `v1` `List`.

use pv_store::Store;
use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::{json, Value};
use std::cmp::Ordering;
use std::sync::Arc;

const OUTPUT_RESOURCES: &[&str] =
    &["namespaces", "nodes", "persistentvolumeclaims", "persistentvolumes", "pods", "storageclasses"];

/// The output List, holding the stored objects themselves (shared, not copied): serializing it
/// gives the same text as serializing [`output_list`]'s value, with no copy of the store.
pub struct OutputList {
    items: Vec<Arc<Value>>,
}

fn kind(o: &Value) -> &str {
    o.get("kind").and_then(Value::as_str).unwrap_or("")
}

fn text<'a>(o: &'a Value, section: &str, field: &str) -> &'a str {
    o.get(section).and_then(|s| s.get(field)).and_then(Value::as_str).unwrap_or("")
}

impl OutputList {
    /// Takes every object of the input kinds, then every Event, from the store.
    pub fn from_store(store: &Store) -> Self {
        let mut objects: Vec<Arc<Value>> = Vec::new();
        for r in OUTPUT_RESOURCES {
            let (items, _) = store.list(r, &Default::default()).expect("known resource");
            objects.extend(items);
        }
        objects.sort_by(|a, b| {
            (kind(a), text(a, "metadata", "namespace"), text(a, "metadata", "name")).cmp(&(
                kind(b),
                text(b, "metadata", "namespace"),
                text(b, "metadata", "name"),
            ))
        });
        let (mut events, _) = store.list("events", &Default::default()).expect("events");
        events.sort_by(|a, b| -> Ordering {
            (text(a, "metadata", "creationTimestamp"), text(a, "metadata", "name"))
                .cmp(&(text(b, "metadata", "creationTimestamp"), text(b, "metadata", "name")))
        });
        objects.extend(events);
        OutputList { items: objects }
    }

    /// The objects, in output order.
    pub fn items(&self) -> impl Iterator<Item = &Value> {
        self.items.iter().map(|o| &**o)
    }
}

impl Serialize for OutputList {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        struct Items<'a>(&'a [Arc<Value>]);
        impl Serialize for Items<'_> {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_seq(self.0.iter().map(|o| &**o))
            }
        }
        // Keys in the order a JSON object's keys print (sorted).
        let mut m = s.serialize_map(Some(3))?;
        m.serialize_entry("apiVersion", "v1")?;
        m.serialize_entry("items", &Items(&self.items))?;
        m.serialize_entry("kind", "List")?;
        m.end()
    }
}

/// Builds the output List from the store, as one JSON value (a copy of every object).
pub fn output_list(store: &Store) -> Value {
    let list = OutputList::from_store(store);
    let items: Vec<Value> = list.items().cloned().collect();
    json!({"apiVersion": "v1", "kind": "List", "items": items})
}

/// YAML as kubectl prints it (`-o yaml`): keys sorted, list items at their key's indentation,
/// strings that YAML 1.1 (kubectl's reader) would take for a bool, number, null or timestamp
/// double-quoted (`"yes"`, `"10"`, `""`, `"2026-01-01T00:00:00Z"`), everything else plain where
/// YAML allows it, multi-line strings as `|` blocks. Two spellings differ from kubectl's, both
/// reading back as the same value: text that YAML syntax keeps from being plain (`a: b`,
/// `*x`) is double-quoted where kubectl single-quotes it, and a one-line string longer than 80
/// characters is a folded `>-` block where kubectl breaks it onto an indented next line.
pub fn to_yaml<T: serde::Serialize>(v: &T) -> String {
    serde_saphyr::to_string(v).expect("every JSON document has a YAML form")
}

/// [`to_yaml`] written to `w` as it is produced.
pub fn write_yaml<T: serde::Serialize>(w: &mut impl std::io::Write, v: &T) -> std::io::Result<()> {
    serde_saphyr::to_io_writer(w, v).map_err(std::io::Error::other)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `kubectl get pv pv-20g -o yaml` prints for this volume (kubectl 1.32, checked by
    /// feeding it the same JSON).
    const KUBECTL_PV: &str = r#"apiVersion: v1
kind: PersistentVolume
metadata:
  annotations:
    pv.kubernetes.io/bound-by-controller: "yes"
  creationTimestamp: "2026-01-01T00:00:00Z"
  generation: 2
  name: pv-20g
  resourceVersion: "11"
  uid: 3607ae47-5741-5418-9a99-a268a515a089
spec:
  accessModes:
  - ReadWriteOnce
  - ReadOnlyMany
  capacity:
    storage: 20Gi
  claimRef:
    apiVersion: v1
    kind: PersistentVolumeClaim
    name: reserved
    namespace: data
    resourceVersion: "7"
    uid: ad4d936a-05ff-5eea-8404-0deb125ebde3
  nfs:
    path: /exports/b
    server: nfs.example.com
  persistentVolumeReclaimPolicy: Retain
  storageClassName: ""
  volumeMode: Filesystem
status:
  lastPhaseTransitionTime: "2026-01-01T00:00:00Z"
  phase: Bound
"#;

    #[test]
    fn a_volume_prints_exactly_as_kubectl_prints_it() {
        let v: Value = serde_saphyr::from_str(KUBECTL_PV).unwrap();
        // Built in another key order: the output sorts keys as kubectl does.
        let mut shuffled = serde_json::Map::new();
        for k in ["status", "spec", "metadata", "kind", "apiVersion"] {
            shuffled.insert(k.into(), v[k].clone());
        }
        assert_eq!(to_yaml(&Value::Object(shuffled)), KUBECTL_PV);
    }

    #[test]
    fn strings_that_yaml_would_read_as_something_else_are_quoted_and_read_back() {
        for s in [
            "",
            "yes",
            "No",
            "on",
            "true",
            "null",
            "~",
            "1",
            "1.5",
            "1e3",
            "0x1F",
            "1_000",
            "12:30",
            ".inf",
            "a: b",
            "a #b",
            " a",
            "a ",
            "line\nbreak",
            "line\nbreak\n",
            "*ref",
            "&a",
            "!tag",
            "%x",
            "@x",
            "`x",
            "{a}",
            "[a]",
            "'a'",
            "\"a\"",
            "a:",
            "2026-01-01",
        ] {
            let v = json!({"k": s, "l": [s]});
            let y = to_yaml(&v);
            assert!(!y.contains(&format!("k: {s}\n")) || s.contains('\n'), "{s:?} is not plain:\n{y}");
            let back: Value = serde_saphyr::from_str(&y).unwrap_or_else(|e| panic!("{s:?}: {e}"));
            assert_eq!(back, v, "{s:?} round-trips through\n{y}");
        }
        for s in ["-x", "pv-1", "5Gi", "/tmp/x", "kubernetes.io/host-path", "Bound", "a b", "x=y", "1Gi", "v1"] {
            assert_eq!(to_yaml(&json!({"k": s})), format!("k: {s}\n"), "{s:?} is plain");
        }
    }

    #[test]
    fn long_and_multi_line_strings_and_empty_collections_read_back() {
        let long =
            "Successfully provisioned volume pvc-59b96b5f-38c3-5150-9b4d-a06ceedff3b0 using kubernetes.io/host-path";
        let v = json!({"message": long, "script": "a\nb\n", "e": {}, "l": [], "n": null, "b": [1, {"c": "on", "d": []}, [true, null]]});
        let y = to_yaml(&v);
        // The key `n` is YAML 1.1's false: quoted, as kubectl quotes it.
        assert!(y.contains("e: {}\n") && y.contains("l: []\n") && y.contains("\"n\": null\n"), "{y}");
        assert!(y.contains("script: |\n  a\n  b\n"), "{y}");
        let back: Value = serde_saphyr::from_str(&y).unwrap();
        assert_eq!(back, v);
    }
}
