//! Reading cluster state: Kubernetes objects as multi-document YAML, JSON, or a `kind: List`.
//!
//! Every error names the document (1-based, as a person counts them), the object and the field:
//! `document 2 (PersistentVolume pv-1): spec.capacity: Required value`.

use pv_model::k8s::{Namespace, Node, PersistentVolume, PersistentVolumeClaim, Pod, StorageClass};
use pv_store::{validation, ResourceType};
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::fmt;

/// Kinds `simulate` and `explain` load. Objects of other kinds (Events, Deployments, ... as a
/// `kubectl get ... -o yaml` dump holds them) do not affect the controller: they are skipped and
/// counted in [`Loaded::ignored`], unless the kind looks like a misspelling of one of these.
pub const KINDS: &[&str] = &["PersistentVolume", "PersistentVolumeClaim", "StorageClass", "Pod", "Node", "Namespace"];

/// What [`load`] read.
#[derive(Debug, Clone, Default)]
pub struct Loaded {
    /// The objects the controller reads, in input order.
    pub objects: Vec<InputObject>,
    /// Objects skipped because their kind does not affect the controller: (kind, count), sorted.
    pub ignored: Vec<(String, usize)>,
    /// The skipped objects themselves, as given, in input order (`explain` reads the CSIDriver,
    /// Lease and Event objects of a dump among them).
    pub others: Vec<Value>,
}

impl Loaded {
    /// One line saying what was skipped (`None` when nothing was): for stderr.
    pub fn ignored_note(&self) -> Option<String> {
        if self.ignored.is_empty() {
            return None;
        }
        let total: usize = self.ignored.iter().map(|(_, n)| n).sum();
        let kinds: Vec<String> = self.ignored.iter().map(|(k, n)| format!("{n} {k}")).collect();
        Some(format!(
            "ignored {total} object{} of kinds that do not affect the controller ({})",
            if total == 1 { "" } else { "s" },
            kinds.join(", ")
        ))
    }
}

/// Edit distance between two short strings (kinds), case-insensitive.
fn distance(a: &str, b: &str) -> usize {
    let (a, b): (Vec<char>, Vec<char>) = (a.to_lowercase().chars().collect(), b.to_lowercase().chars().collect());
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut cur = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            cur.push((prev[j] + usize::from(ca != cb)).min(prev[j + 1] + 1).min(cur[j] + 1));
        }
        prev = cur;
    }
    prev[b.len()]
}

/// The supported kind `kind` is probably a misspelling of (different case, a letter or two off).
fn misspelling_of(kind: &str) -> Option<&'static str> {
    KINDS.iter().copied().find(|k| distance(kind, k) <= 2)
}

/// A bad input document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputError {
    /// 1-based document number (0 when the stream itself is unreadable).
    pub document: usize,
    /// Item index inside a `kind: List`.
    pub item: Option<usize>,
    /// `Kind name` when known.
    pub object: Option<String>,
    /// What is wrong, starting with the field path when there is one.
    pub message: String,
}

impl fmt::Display for InputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.document == 0 {
            return write!(f, "{}", self.message);
        }
        write!(f, "document {}", self.document)?;
        if let Some(i) = self.item {
            write!(f, " item {i}")?;
        }
        if let Some(o) = &self.object {
            write!(f, " ({o})")?;
        }
        write!(f, ": {}", self.message)
    }
}

impl std::error::Error for InputError {}

/// One accepted object.
#[derive(Debug, Clone)]
pub struct InputObject {
    /// Its resource type.
    pub resource: &'static ResourceType,
    /// The object as given (validated and with kube-apiserver's defaults applied later by the store).
    pub value: Value,
    /// Where it came from, for later error messages.
    pub document: usize,
}

fn err(document: usize, item: Option<usize>, object: Option<String>, message: impl Into<String>) -> InputError {
    InputError { document, item, object, message: message.into() }
}

/// Splits the text into documents (YAML stream, or JSON values).
fn documents(text: &str) -> Result<Vec<Value>, InputError> {
    let trimmed = text.trim_start();
    if trimmed.starts_with('{') || trimmed.starts_with('[') {
        let mut out = Vec::new();
        for (i, v) in serde_json::Deserializer::from_str(text).into_iter::<Value>().enumerate() {
            let v = v.map_err(|e| err(i + 1, None, None, format!("invalid JSON: {e}")))?;
            match v {
                Value::Array(items) => out.extend(items),
                other => out.push(other),
            }
        }
        return Ok(out);
    }
    let mut out = Vec::new();
    // Duplicate keys are refused, as kubectl does. A cluster dump may hold many thousands of
    // objects: the parser's budget counts documents and nodes, so only aliases stay bounded.
    // A number too large for a float (`storage: 1e999`) is read as its canonical text (`.inf`),
    // so that validation refuses it naming the field rather than the parser naming a line.
    let options = serde_saphyr::options! {
        budget: serde_saphyr::budget! { max_documents: usize::MAX, max_nodes: usize::MAX, max_events: usize::MAX },
        non_finite_float_policy: serde_saphyr::NonFiniteFloatPolicy::AsString,
    };
    let mut bytes = text.as_bytes();
    for (i, doc) in serde_saphyr::read_with_options::<_, Value>(&mut bytes, options).enumerate() {
        out.push(doc.map_err(|e| err(i + 1, None, None, format!("invalid YAML: {e}")))?);
    }
    Ok(out)
}

/// Deserializes into a typed object to catch wrong types, naming the field.
fn check_typed<T: DeserializeOwned + serde::Serialize>(v: &Value) -> Result<(), String> {
    let typed: T = serde_path_to_error::deserialize(v).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner().to_string();
        if path == "." || path.is_empty() {
            inner
        } else {
            format!("{path}: {inner}")
        }
    })?;
    let back = serde_json::to_value(&typed).map_err(|e| e.to_string())?;
    let mut unknown = Vec::new();
    unknown_fields(v, &back, String::new(), &mut unknown);
    if let Some(f) = unknown.first() {
        return Err(format!("unknown field {f:?}"));
    }
    Ok(())
}

/// Paths present in `given` but not in `known` (null values are ignored).
fn unknown_fields(given: &Value, known: &Value, path: String, out: &mut Vec<String>) {
    match (given, known) {
        (Value::Object(g), Value::Object(k)) => {
            for (key, gv) in g {
                if gv.is_null() {
                    continue;
                }
                let p = if path.is_empty() { key.clone() } else { format!("{path}.{key}") };
                match k.get(key) {
                    Some(kv) => unknown_fields(gv, kv, p, out),
                    None => out.push(p),
                }
            }
        }
        (Value::Array(g), Value::Array(k)) => {
            for (i, (gv, kv)) in g.iter().zip(k.iter()).enumerate() {
                unknown_fields(gv, kv, format!("{path}[{i}]"), out);
            }
        }
        _ => {}
    }
}

fn check_object(doc: usize, item: Option<usize>, v: Value) -> Result<Option<InputObject>, InputError> {
    let obj = v.as_object().ok_or_else(|| err(doc, item, None, "expected an object with apiVersion and kind"))?;
    let kind = obj.get("kind").and_then(Value::as_str).unwrap_or("");
    let name = v.get("metadata").and_then(|m| m.get("name")).and_then(Value::as_str).unwrap_or("");
    let label = if name.is_empty() { kind.to_string() } else { format!("{kind} {name}") };
    let label = Some(label).filter(|l| !l.is_empty());
    if kind.is_empty() {
        return Err(err(doc, item, None, "kind: Required value"));
    }
    if !KINDS.contains(&kind) {
        if let Some(meant) = misspelling_of(kind) {
            return Err(err(
                doc,
                item,
                label,
                format!("kind: Unsupported value: {kind:?}: did you mean {meant:?}? (supported: {})", KINDS.join(", ")),
            ));
        }
        if obj.get("apiVersion").and_then(Value::as_str).unwrap_or("").is_empty() {
            return Err(err(doc, item, label, "apiVersion: Required value"));
        }
        return Ok(None);
    }
    let rt = ResourceType::by_kind(kind).expect("known kind");
    let api_version = obj.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    if api_version != rt.api_version() {
        return Err(err(
            doc,
            item,
            label,
            format!("apiVersion: Invalid value: {api_version:?}: {kind} is served as {:?}", rt.api_version()),
        ));
    }
    let typed = match kind {
        "PersistentVolume" => check_typed::<PersistentVolume>(&v),
        "PersistentVolumeClaim" => check_typed::<PersistentVolumeClaim>(&v),
        "StorageClass" => check_typed::<StorageClass>(&v),
        "Pod" => check_typed::<Pod>(&v),
        "Node" => check_typed::<Node>(&v),
        _ => check_typed::<Namespace>(&v),
    };
    typed.map_err(|m| err(doc, item, label.clone(), m))?;
    let mut defaulted = v.clone();
    validation::default(rt, &mut defaulted);
    let errs = validation::validate(rt, &defaulted);
    if let Some(e) = errs.first() {
        let all: Vec<String> = errs.iter().map(|e| e.to_string()).collect();
        let _ = e;
        return Err(err(doc, item, label, all.join("; ")));
    }
    Ok(Some(InputObject { resource: rt, value: v, document: doc }))
}

/// Parses and validates every object in `text`; objects of kinds that do not affect the
/// controller are skipped (see [`load`] to learn which).
pub fn load_documents(text: &str) -> Result<Vec<InputObject>, InputError> {
    load(text).map(|l| l.objects)
}

/// Parses and validates every object in `text`, counting the objects it skips. Input with no
/// document at all (an empty file) is an error: it is almost always the wrong file. An explicit
/// empty `kind: List` is an empty cluster.
pub fn load(text: &str) -> Result<Loaded, InputError> {
    let mut out = Loaded::default();
    let mut ignored = std::collections::BTreeMap::<String, usize>::new();
    let mut seen = false;
    // Objects are moved, not copied, from the parsed documents into what is returned.
    let mut take = |doc: usize, item: Option<usize>, v: Value, out: &mut Loaded| -> Result<(), InputError> {
        let kind = v.get("kind").and_then(Value::as_str).unwrap_or("").to_string();
        let other = (!KINDS.contains(&kind.as_str())).then(|| v.clone());
        match check_object(doc, item, v)? {
            Some(o) => out.objects.push(o),
            None => {
                *ignored.entry(kind).or_default() += 1;
                out.others.extend(other);
            }
        }
        Ok(())
    };
    for (i, mut doc) in documents(text)?.into_iter().enumerate() {
        let n = i + 1;
        if doc.is_null() {
            continue;
        }
        seen = true;
        if doc.get("kind").and_then(Value::as_str).is_some_and(|k| k == "List" || k.ends_with("List")) {
            let items = match doc.get_mut("items") {
                Some(Value::Array(items)) => std::mem::take(items),
                _ => return Err(err(n, None, Some("List".into()), "items: Required value")),
            };
            for (j, it) in items.into_iter().enumerate() {
                take(n, Some(j), it, &mut out)?;
            }
            continue;
        }
        take(n, None, doc, &mut out)?;
    }
    if !seen {
        return Err(err(
            0,
            None,
            None,
            "no objects: the input is empty (an empty cluster is `kind: List` with `items: []`)",
        ));
    }
    out.ignored = ignored.into_iter().collect();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn multi_document_yaml_and_lists_are_read() {
        let text = "apiVersion: v1\nkind: PersistentVolume\nmetadata: {name: a}\nspec: {capacity: {storage: 1Gi}, accessModes: [ReadWriteOnce], hostPath: {path: /tmp/a}}\n---\napiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Namespace\n  metadata: {name: ns}\n";
        let objs = load_documents(text).unwrap();
        assert_eq!(objs.len(), 2);
        assert_eq!(objs[1].resource.kind, "Namespace");
    }

    #[test]
    fn errors_name_document_object_and_field() {
        let text = "apiVersion: v1\nkind: Namespace\nmetadata: {name: ok}\n---\napiVersion: v1\nkind: PersistentVolume\nmetadata: {name: pv-1}\nspec: {accessModes: [ReadWriteOnce], hostPath: {path: /tmp/a}}\n";
        let e = load_documents(text).unwrap_err();
        assert_eq!(
            e.to_string(),
            "document 2 (PersistentVolume pv-1): spec.capacity: Required value; spec.capacity: Unsupported value: null: supported values: \"storage\""
        );
    }

    #[test]
    fn misspelled_kinds_wrong_types_and_unknown_fields_are_rejected() {
        let e = load_documents("apiVersion: v1\nkind: PersistentVolumes\nmetadata: {name: d}\n").unwrap_err();
        assert!(
            e.to_string().contains("kind: Unsupported value: \"PersistentVolumes\": did you mean \"PersistentVolume\""),
            "{e}"
        );
        let e = load_documents("apiVersion: v1\nkind: persistentvolumeclaim\nmetadata: {name: d}\n").unwrap_err();
        assert!(e.to_string().contains("did you mean \"PersistentVolumeClaim\""), "{e}");
        let e = load_documents("apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: c, namespace: d}\nspec: {accessModes: ReadWriteOnce}\n").unwrap_err();
        assert!(e.to_string().contains("spec.accessModes"), "{e}");
        let e =
            load_documents("apiVersion: v1\nkind: Namespace\nmetadata: {name: ns1}\nspec: {bogus: 1}\n").unwrap_err();
        assert!(e.to_string().contains("unknown field \"spec.bogus\""), "{e}");
    }

    #[test]
    fn kinds_that_do_not_affect_the_controller_are_skipped_and_counted() {
        let text = "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Namespace\n  metadata: {name: ns}\n- apiVersion: v1\n  kind: Event\n  metadata: {name: e1, namespace: ns}\n  reason: Provisioning\n- apiVersion: v1\n  kind: Event\n  metadata: {name: e2, namespace: ns}\n---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\n";
        let l = load(text).unwrap();
        assert_eq!(l.objects.len(), 1);
        assert_eq!(l.ignored, vec![("Deployment".to_string(), 1), ("Event".to_string(), 2)]);
        assert_eq!(
            l.ignored_note().unwrap(),
            "ignored 3 objects of kinds that do not affect the controller (1 Deployment, 2 Event)"
        );
        let e = load_documents("kind: Event\nmetadata: {name: e}\n").unwrap_err();
        assert!(e.to_string().contains("apiVersion: Required value"), "{e}");
    }

    #[test]
    fn empty_input_is_an_error_and_an_empty_list_is_an_empty_cluster() {
        for text in ["", "\n", "# nothing\n", "---\n---\n"] {
            let e = load(text).unwrap_err();
            assert!(e.to_string().contains("the input is empty"), "{text:?}: {e}");
        }
        assert!(load("apiVersion: v1\nkind: List\nitems: []\n").unwrap().objects.is_empty());
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        assert!(load_documents("{{{{").is_err());
        assert!(load_documents("a: [").is_err());
        assert!(load_documents("- 1\n- 2\n").is_err());
        assert!(load_documents("key: 1\nkey: 2\n").is_err());
    }
}
