//! The simulation's output: every object of the input kinds as stored, sorted by kind, namespace
//! and name, then every Event in the order it was first emitted, as one `v1` `List`.

use pv_store::{Object, Store};
use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::{json, Value};

/// The input kinds' resources, in the order of their kinds' names (`Namespace`, `Node`,
/// `PersistentVolume`, `PersistentVolumeClaim`, `Pod`, `StorageClass`): the store lists each in
/// (namespace, name) order, so one after another they are in output order.
const OUTPUT_RESOURCES: &[&str] =
    &["namespaces", "nodes", "persistentvolumes", "persistentvolumeclaims", "pods", "storageclasses"];

/// The output List, holding the stored objects themselves (their text, shared, not copied):
/// serializing it gives the same text as serializing [`output_list`]'s value.
pub struct OutputList {
    items: Vec<Object>,
}

impl OutputList {
    /// Takes every object of the input kinds, then every Event, from the store.
    pub fn from_store(store: &Store) -> Self {
        let mut objects: Vec<Object> = Vec::new();
        for r in OUTPUT_RESOURCES {
            let (items, _) = store.list(r, &Default::default()).expect("known resource");
            objects.extend(items);
        }
        #[derive(serde::Deserialize, Default)]
        #[serde(default, rename_all = "camelCase")]
        struct Meta {
            creation_timestamp: String,
            name: String,
        }
        #[derive(serde::Deserialize, Default)]
        #[serde(default)]
        struct Stamped {
            metadata: Meta,
        }
        let (events, _) = store.list("events", &Default::default()).expect("events");
        let mut events: Vec<((String, String), Object)> = events
            .into_iter()
            .map(|e| {
                let m = e.decode::<Stamped>().unwrap_or_default().metadata;
                ((m.creation_timestamp, m.name), e)
            })
            .collect();
        events.sort_by(|a, b| a.0.cmp(&b.0));
        objects.extend(events.into_iter().map(|(_, e)| e));
        OutputList { items: objects }
    }

    /// The objects, in output order.
    pub fn items(&self) -> impl Iterator<Item = Value> + '_ {
        self.items.iter().map(Object::value)
    }
}

impl Serialize for OutputList {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        // Keys in the order a JSON object's keys print (sorted).
        let mut m = s.serialize_map(Some(3))?;
        m.serialize_entry("apiVersion", "v1")?;
        m.serialize_entry("items", &self.items)?;
        m.serialize_entry("kind", "List")?;
        m.end()
    }
}

/// Builds the output List from the store, as one JSON value (a copy of every object).
pub fn output_list(store: &Store) -> Value {
    let items: Vec<Value> = OutputList::from_store(store).items().collect();
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
