//! Resources that CustomResourceDefinitions define, served beside the built-in kinds.
//!
//! A custom resource's [`ResourceType`] is made from its definition at run time and interned
//! (one copy per distinct description, kept for the life of the process), so that the store and
//! the API server refer to built-in and custom resources alike, as `&'static ResourceType`. Its
//! store key is `plural.group`. What a store serves is its own registry
//! ([`crate::Store::register_custom`]); interning only shares the descriptions.

use crate::kinds::ResourceType;
use crate::meta::meta;
use crate::registry::strategy::Strategy;
use serde_json::Value;
use std::collections::HashSet;
use std::sync::{LazyLock, Mutex};

static STRINGS: LazyLock<Mutex<HashSet<&'static str>>> = LazyLock::new(Default::default);
static TYPES: LazyLock<Mutex<Vec<&'static CustomStrategy>>> = LazyLock::new(Default::default);

/// `s` as a string that lives as long as the process, one copy per distinct value.
pub fn intern_str(s: &str) -> &'static str {
    let mut set = STRINGS.lock().unwrap();
    if let Some(k) = set.get(s) {
        return k;
    }
    let k: &'static str = Box::leak(s.to_string().into_boxed_str());
    set.insert(k);
    k
}

fn intern_strs(v: &[String]) -> &'static [&'static str] {
    static LISTS: LazyLock<Mutex<Vec<&'static [&'static str]>>> = LazyLock::new(Default::default);
    let mut lists = LISTS.lock().unwrap();
    if let Some(l) = lists.iter().find(|l| l.len() == v.len() && l.iter().zip(v).all(|(a, b)| a == b)) {
        return l;
    }
    let l: &'static [&'static str] = Box::leak(v.iter().map(|s| intern_str(s)).collect::<Vec<_>>().into_boxed_slice());
    lists.push(l);
    l
}

/// The strategy of a custom resource: metadata rules only (its schema is applied where bodies
/// are decoded), a generation counting every change but to metadata and status, no
/// unconditional update (upstream's `customResourceStrategy`).
pub(crate) struct CustomStrategy {
    rt: &'static ResourceType,
}

impl Strategy for CustomStrategy {
    fn resource(&self) -> &'static ResourceType {
        self.rt
    }

    fn allow_unconditional_update(&self) -> bool {
        false
    }

    fn tracks_generation(&self) -> bool {
        true
    }

    fn kept_by_status_update(&self) -> &'static [&'static str] {
        // A status write changes the status only (upstream's statusStrategy copies the stored
        // object and sets the status).
        &["labels", "annotations", "finalizers", "ownerReferences"]
    }

    fn mark_deleted(&self, obj: &mut Value) {
        let m = crate::meta::meta_mut(obj);
        m.insert("deletionGracePeriodSeconds".into(), Value::from(0));
        // The generic registry counts a graceful deletion as a change of the object.
        if let Some(g) = m.get("generation").and_then(Value::as_i64).filter(|g| *g > 0) {
            m.insert("generation".into(), Value::from(g + 1));
        }
    }

    fn spec_changed(&self, old: &Value, new: &Value) -> bool {
        let rest = |o: &Value| -> Vec<(String, Value)> {
            o.as_object()
                .into_iter()
                .flatten()
                .filter(|(k, _)| {
                    let server_owned = matches!(k.as_str(), "metadata" | "apiVersion" | "kind");
                    let status = self.rt.status_subresource && k.as_str() == "status";
                    !server_owned && !status
                })
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        };
        rest(old) != rest(new)
    }
}

/// The interned description `rt` (its strings must already be interned).
pub fn intern(rt: ResourceType) -> &'static ResourceType {
    strategy_of(rt).resource()
}

fn strategy_of(rt: ResourceType) -> &'static CustomStrategy {
    let mut types = TYPES.lock().unwrap();
    if let Some(s) = types.iter().find(|s| *s.rt == rt) {
        return s;
    }
    let s: &'static CustomStrategy = Box::leak(Box::new(CustomStrategy { rt: Box::leak(Box::new(rt)) }));
    types.push(s);
    s
}

/// The strategy of an interned custom resource.
pub(crate) fn strategy(rt: &ResourceType) -> &'static dyn Strategy {
    strategy_of(*rt)
}

fn s<'a>(v: &'a Value, pointer: &str) -> &'a str {
    v.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

/// The resources a CustomResourceDefinition serves, one per served version, the storage
/// version first; none when it serves nothing.
pub fn served_by(crd: &Value) -> Vec<&'static ResourceType> {
    let group = intern_str(s(crd, "/spec/group"));
    let plural = s(crd, "/spec/names/plural");
    let kind = intern_str(s(crd, "/spec/names/kind"));
    let singular = match s(crd, "/spec/names/singular") {
        "" => kind.to_ascii_lowercase(),
        x => x.to_string(),
    };
    let short: Vec<String> = crd
        .pointer("/spec/names/shortNames")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).map(str::to_string).collect())
        .unwrap_or_default();
    let namespaced = s(crd, "/spec/scope") != "Cluster";
    let key = intern_str(&format!("{plural}.{group}"));
    let mut out: Vec<&'static ResourceType> = Vec::new();
    for v in crd.pointer("/spec/versions").and_then(Value::as_array).into_iter().flatten() {
        if v.get("served").and_then(Value::as_bool) != Some(true) {
            continue;
        }
        let rt = intern(ResourceType {
            group,
            version: intern_str(s(v, "/name")),
            kind,
            plural: intern_str(plural),
            key,
            singular: intern_str(&singular),
            namespaced,
            status_subresource: v.pointer("/subresources/status").is_some(),
            short_names: intern_strs(&short),
        });
        if v.get("storage").and_then(Value::as_bool) == Some(true) {
            out.insert(0, rt);
        } else {
            out.push(rt);
        }
    }
    out
}

/// The schema and printer columns of one served version of a definition.
pub fn version_of<'a>(crd: &'a Value, version: &str) -> Option<&'a Value> {
    crd.pointer("/spec/versions")?.as_array()?.iter().find(|v| s(v, "/name") == version)
}

/// upstream's `CustomResourceCleanupFinalizer`: a definition being deleted keeps it until its
/// objects are gone.
pub const CLEANUP_FINALIZER: &str = "customresourcecleanup.apiextensions.k8s.io";

/// The definition's name (`plural.group`).
pub fn crd_name(crd: &Value) -> &str {
    meta(crd).and_then(|m| m.get("name")).and_then(Value::as_str).unwrap_or("")
}
