//! PATCH bodies: JSON merge patch (RFC 7386), JSON patch (RFC 6902), strategic merge patch and
//! server-side apply, each turned into the full object that is then written as an update.
//!
//! Strategic merge patch follows each field's patch strategy and merge key as the API
//! definitions declare them (`patch_strategies.json`, derived from upstream's OpenAPI spec by
//! `scripts/gen-patch-strategies.py`): a list with strategy `merge` and a key merges
//! element-wise by that key, one without a key merges as a set, every other list (e.g.
//! `spec.taints`, which upstream declares atomic) is replaced; a field with strategy `replace`
//! is replaced whole. The directives kubectl emits are honoured (`$patch: delete|replace` in maps and list items,
//! `$deleteFromPrimitiveList/<field>`, `$retainKeys`; `$setElementOrder/<field>` is dropped).
//! For the kinds served here that is what kubectl `apply`, `edit` and `patch` rely on.
//!
//! Server-side apply (`application/apply-patch+yaml`) is approximated as a strategic merge of
//! the applied configuration into the live object (or a create when there is none): fields the
//! manager stops applying are not removed, since there is no managedFields bookkeeping.

use crate::error::{ApiError, Result};
use crate::limits::{MAX_JSON_PATCH_COPY_BYTES, MAX_JSON_PATCH_OPS};
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::sync::OnceLock;

/// The kinds of PATCH body.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PatchKind {
    /// `application/merge-patch+json`.
    Merge,
    /// `application/json-patch+json`.
    Json,
    /// `application/strategic-merge-patch+json`.
    Strategic,
    /// `application/apply-patch+yaml`.
    Apply,
}

impl PatchKind {
    /// From the request's Content-Type.
    pub fn from_content_type(ct: &str) -> Result<Self> {
        let base = ct.split(';').next().unwrap_or("").trim();
        match base {
            "application/merge-patch+json" => Ok(PatchKind::Merge),
            "application/json-patch+json" => Ok(PatchKind::Json),
            "application/strategic-merge-patch+json" => Ok(PatchKind::Strategic),
            "application/apply-patch+yaml" | "application/apply-patch+json" => Ok(PatchKind::Apply),
            _ => Err(ApiError::UnsupportedMediaType(
                "application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json, application/apply-patch+yaml".into(),
            )),
        }
    }
}

/// A field's patch facts from the API definitions: the type it leads to, its patch strategy
/// (`merge`, `retainKeys`, `replace`, or several joined by commas) and its merge key.
#[derive(Clone, Debug, serde::Deserialize)]
struct FieldInfo(Option<String>, Option<String>, Option<String>);

/// The table `scripts/gen-patch-strategies.py` derives from upstream's OpenAPI spec.
#[derive(Debug, serde::Deserialize)]
struct Strategies {
    roots: HashMap<String, String>,
    types: HashMap<String, HashMap<String, FieldInfo>>,
}

fn strategies() -> &'static Strategies {
    static TABLE: OnceLock<Strategies> = OnceLock::new();
    TABLE.get_or_init(|| {
        serde_json::from_str(include_str!("patch_strategies.json")).expect("patch_strategies.json is valid")
    })
}

/// Where a strategic merge stands in the schema: the type of the map being merged (None: no
/// schema, so lists are replaced and maps merged, as for a JSON merge patch).
#[derive(Clone, Copy)]
struct Schema(Option<&'static HashMap<String, FieldInfo>>);

impl Schema {
    /// The schema of a served kind (`events.k8s.io/Event` for the events.k8s.io form).
    fn root(kind: &str) -> Self {
        let t = strategies();
        Schema(t.roots.get(kind).and_then(|n| t.types.get(n)))
    }

    fn field(&self, name: &str) -> Option<&'static FieldInfo> {
        self.0.and_then(|m| m.get(name))
    }

    /// The schema of a field's value (or of its list items).
    fn child(&self, name: &str) -> Schema {
        Schema(self.field(name).and_then(|f| f.0.as_ref()).and_then(|n| strategies().types.get(n)))
    }

    fn merges(&self, name: &str) -> bool {
        self.field(name).and_then(|f| f.1.as_deref()).is_some_and(|s| s.split(',').any(|x| x == "merge"))
    }

    fn replaces(&self, name: &str) -> bool {
        self.field(name).and_then(|f| f.1.as_deref()).is_some_and(|s| s.split(',').any(|x| x == "replace"))
    }

    fn merge_key(&self, name: &str) -> Option<&'static str> {
        self.field(name).and_then(|f| f.2.as_deref())
    }
}

/// Parses a body as JSON, or YAML for apply patches.
pub fn parse_body(kind: PatchKind, body: &[u8]) -> Result<Value> {
    if kind == PatchKind::Apply {
        return crate::decode::parse_yaml(body);
    }
    serde_json::from_slice(body).map_err(|e| ApiError::BadRequest(format!("error decoding patch: {e}")))
}

/// Applies a patch to `target` (an object of kind `schema`, as `Schema::root` names it),
/// returning the patched object.
pub fn apply(kind: PatchKind, schema: &str, target: &Value, patch: &Value) -> Result<Value> {
    let mut out = target.clone();
    match kind {
        PatchKind::Merge => {
            if !patch.is_object() {
                return Err(ApiError::BadRequest("merge patch must be a JSON object".into()));
            }
            json_patch::merge(&mut out, patch);
        }
        PatchKind::Json => {
            let p: json_patch::Patch = serde_json::from_value(patch.clone())
                .map_err(|e| ApiError::BadRequest(format!("invalid JSON patch: {e}")))?;
            apply_json_patch(&mut out, &p.0)?;
        }
        PatchKind::Strategic | PatchKind::Apply => {
            let p = patch
                .as_object()
                .ok_or_else(|| ApiError::BadRequest("strategic merge patch must be a JSON object".into()))?;
            let base = out
                .as_object_mut()
                .ok_or_else(|| ApiError::BadRequest("the object to patch is not a JSON object".into()))?;
            merge_map(base, p, Schema::root(schema))?;
        }
    }
    Ok(out)
}

/// Applies a JSON patch within kube-apiserver's bounds: at most [`MAX_JSON_PATCH_OPS`]
/// operations (413), and `copy` operations adding at most [`MAX_JSON_PATCH_COPY_BYTES`] in all
/// (422), so that a small patch cannot double an object again and again.
fn apply_json_patch(doc: &mut Value, ops: &[json_patch::PatchOperation]) -> Result<()> {
    if ops.len() > MAX_JSON_PATCH_OPS {
        return Err(ApiError::RequestEntityTooLarge(format!(
            "The allowed maximum operations in a JSON patch is {MAX_JSON_PATCH_OPS}, got {}",
            ops.len()
        )));
    }
    let mut copied = 0usize;
    for (i, op) in ops.iter().enumerate() {
        if let json_patch::PatchOperation::Copy(c) = op {
            copied += doc.pointer(c.from.as_str()).map_or(0, pv_store::json_size);
            if copied > MAX_JSON_PATCH_COPY_BYTES {
                return Err(ApiError::Unprocessable(format!(
                    "Unable to complete the copy, the accumulated size increase of copy is {copied}, exceeding the limit {MAX_JSON_PATCH_COPY_BYTES}"
                )));
            }
        }
        // kube-apiserver's JSON patch library replaces a missing key of an object as if it
        // were there (csi-snapshotter relies on it: `replace /metadata/annotations` on an
        // object without annotations).
        let add;
        let op = match op {
            json_patch::PatchOperation::Replace(r) if doc.pointer(r.path.as_str()).is_none() => {
                let parent = r.path.as_str().rsplit_once('/').map_or("", |(p, _)| p);
                if doc.pointer(parent).is_some_and(Value::is_object) {
                    add = json_patch::PatchOperation::Add(json_patch::AddOperation {
                        path: r.path.clone(),
                        value: r.value.clone(),
                    });
                    &add
                } else {
                    op
                }
            }
            _ => op,
        };
        // One operation at a time, so the copy sizes are measured on the document as it is;
        // on failure the whole document is dropped, so no rollback is needed.
        // A patch that does not apply is a 422, as kube-apiserver answers it.
        json_patch::patch_unsafe(doc, std::slice::from_ref(op)).map_err(|e| {
            ApiError::Unprocessable(format!(
                "the JSON patch could not be applied: operation '/{i}' failed at path '{}': {}",
                e.path, e.kind
            ))
        })?;
    }
    Ok(())
}

/// Strategic merge of `patch` into `base`.
fn merge_map(base: &mut Map<String, Value>, patch: &Map<String, Value>, schema: Schema) -> Result<()> {
    match patch.get("$patch").and_then(Value::as_str) {
        Some("replace") => {
            let mut p = patch.clone();
            p.remove("$patch");
            strip_directives(&mut p);
            *base = p;
            return Ok(());
        }
        Some("delete") => {
            base.clear();
            return Ok(());
        }
        _ => {}
    }
    for (k, v) in patch {
        if k == "$patch" || k == "$retainKeys" || k.starts_with("$setElementOrder/") {
            continue;
        }
        if let Some(field) = k.strip_prefix("$deleteFromPrimitiveList/") {
            if let (Some(Value::Array(list)), Some(rm)) = (base.get_mut(field), v.as_array()) {
                list.retain(|x| !rm.contains(x));
            }
            continue;
        }
        match v {
            Value::Null => {
                base.remove(k);
            }
            Value::Object(pm) if pm.get("$patch").and_then(Value::as_str) == Some("delete") => {
                base.remove(k);
            }
            Value::Object(pm) if schema.replaces(k) => {
                let mut p = pm.clone();
                strip_directives(&mut p);
                base.insert(k.clone(), Value::Object(p));
            }
            Value::Object(pm) => match base.get_mut(k) {
                Some(Value::Object(bm)) => merge_map(bm, pm, schema.child(k))?,
                _ => {
                    let mut fresh = Map::new();
                    merge_map(&mut fresh, pm, schema.child(k))?;
                    base.insert(k.clone(), Value::Object(fresh));
                }
            },
            Value::Array(pa) => {
                let merging = schema.merges(k);
                let merged = match (base.get(k), schema.merge_key(k)) {
                    (Some(Value::Array(ba)), Some(key)) if merging => merge_list_by_key(ba, pa, key, schema.child(k))?,
                    (Some(Value::Array(ba)), None) if merging => merge_scalars(ba, pa),
                    _ => pa
                        .iter()
                        .filter(|x| x.get("$patch").is_none())
                        .cloned()
                        .map(|mut x| {
                            if let Some(m) = x.as_object_mut() {
                                strip_directives(m);
                            }
                            x
                        })
                        .collect(),
                };
                base.insert(k.clone(), Value::Array(merged));
            }
            other => {
                base.insert(k.clone(), other.clone());
            }
        }
    }
    if let Some(keep) = patch.get("$retainKeys").and_then(Value::as_array) {
        base.retain(|k, _| keep.iter().any(|x| x.as_str() == Some(k)));
    }
    Ok(())
}

/// A list of scalars with the `merge` strategy, ordered as apimachinery's strategic merge orders
/// it (`mergeSlice`, `normalizeElementOrder`, `mergeSortedSlice`): the patch's items in patch
/// order and the server's other items in server order, interleaved by their positions in the
/// server's list where both have one, a patch item first otherwise.
fn merge_scalars(original: &[Value], patch: &[Value]) -> Vec<Value> {
    let mut right: Vec<Value> = Vec::new();
    for x in patch {
        if !right.contains(x) {
            right.push(x.clone());
        }
    }
    let mut left: Vec<Value> = Vec::new();
    for x in original {
        if !right.contains(x) && !left.contains(x) {
            left.push(x.clone());
        }
    }
    let pos = |v: &Value| original.iter().position(|o| o == v);
    let (mut i, mut j) = (0, 0);
    let mut out = Vec::with_capacity(left.len() + right.len());
    while i < left.len() || j < right.len() {
        let take_left = if j >= right.len() {
            true
        } else if i >= left.len() {
            false
        } else {
            matches!((pos(&left[i]), pos(&right[j])), (Some(l), Some(r)) if l < r)
        };
        if take_left {
            out.push(left[i].clone());
            i += 1;
        } else {
            out.push(right[j].clone());
            j += 1;
        }
    }
    out
}

fn strip_directives(m: &mut Map<String, Value>) {
    m.retain(|k, _| !k.starts_with('$'));
    for v in m.values_mut() {
        if let Value::Object(inner) = v {
            strip_directives(inner);
        }
    }
}

fn merge_list_by_key(base: &[Value], patch: &[Value], key: &str, schema: Schema) -> Result<Vec<Value>> {
    if patch.len() == 1 && patch[0].get("$patch").and_then(Value::as_str) == Some("replace") {
        return Ok(Vec::new());
    }
    let mut out: Vec<Value> = base.to_vec();
    for item in patch {
        let Some(pm) = item.as_object() else {
            out.push(item.clone());
            continue;
        };
        let id = pm.get(key);
        let pos = id.and_then(|id| out.iter().position(|b| b.get(key) == Some(id)));
        let delete = pm.get("$patch").and_then(Value::as_str) == Some("delete");
        match (pos, delete) {
            (Some(i), true) => {
                out.remove(i);
            }
            (None, true) => {}
            (Some(i), false) => {
                if let Some(bm) = out[i].as_object_mut() {
                    merge_map(bm, pm, schema)?;
                }
            }
            (None, false) => {
                let mut fresh = Map::new();
                merge_map(&mut fresh, pm, schema)?;
                out.push(Value::Object(fresh));
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn strategic_merge_of_scalars_puts_new_patch_items_first_as_apimachinery() {
        let v = |xs: &[&str]| xs.iter().map(|x| json!(x)).collect::<Vec<_>>();
        assert_eq!(
            merge_scalars(&v(&["kubernetes.io/pv-protection"]), &v(&["example.com/x"])),
            v(&["example.com/x", "kubernetes.io/pv-protection"])
        );
        assert_eq!(merge_scalars(&v(&["a", "b"]), &v(&["b", "c"])), v(&["a", "b", "c"]));
        assert_eq!(merge_scalars(&v(&["a", "b"]), &v(&["b", "a"])), v(&["b", "a"]));
    }

    #[test]
    fn merge_patch_replaces_lists_and_null_deletes() {
        let t = json!({"spec": {"a": 1, "l": [1, 2]}, "metadata": {"labels": {"x": "1"}}});
        let p = json!({"spec": {"l": [3]}, "metadata": {"labels": {"x": null}}});
        let out = apply(PatchKind::Merge, "PersistentVolume", &t, &p).unwrap();
        assert_eq!(out, json!({"spec": {"a": 1, "l": [3]}, "metadata": {"labels": {}}}));
    }

    #[test]
    fn json_patch_applies_operations_and_reports_failures() {
        let t = json!({"spec": {"a": 1}});
        let out =
            apply(PatchKind::Json, "PersistentVolume", &t, &json!([{"op": "replace", "path": "/spec/a", "value": 2}]))
                .unwrap();
        assert_eq!(out["spec"]["a"], 2);
        // A missing key of an object is replaced as kube-apiserver's library does: added.
        let added =
            apply(PatchKind::Json, "PersistentVolume", &t, &json!([{"op": "replace", "path": "/spec/z", "value": 1}]));
        assert_eq!(added.unwrap()["spec"]["z"], 1);
        let err = apply(PatchKind::Json, "PersistentVolume", &t, &json!([{"op": "remove", "path": "/nope"}]));
        // kube-apiserver: a JSON patch that does not apply is 422 Invalid.
        assert_eq!(err.unwrap_err().code(), 422);
    }

    #[test]
    fn strategic_patch_merges_keyed_lists_and_honours_directives() {
        let t = json!({"metadata": {"finalizers": ["a"]}, "spec": {"containers": [{"name": "c", "image": "x"}, {"name": "d"}], "accessModes": ["ReadWriteOnce"]}});
        let p = json!({
            "metadata": {"finalizers": ["b"]},
            "$setElementOrder/containers": [{"name": "c"}],
            "spec": {"containers": [{"name": "c", "image": "y"}, {"name": "d", "$patch": "delete"}],
                      "accessModes": ["ReadWriteMany"]},
        });
        let out = apply(PatchKind::Strategic, "Pod", &t, &p).unwrap();
        // apimachinery puts the patch's scalars first when the live list does not order them.
        assert_eq!(out["metadata"]["finalizers"], json!(["b", "a"]));
        assert_eq!(out["spec"]["containers"], json!([{"name": "c", "image": "y"}]));
        assert_eq!(out["spec"]["accessModes"], json!(["ReadWriteMany"]));
        let out = apply(
            PatchKind::Strategic,
            "Pod",
            &out,
            &json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["a"]}}),
        )
        .unwrap();
        assert_eq!(out["metadata"]["finalizers"], json!(["b"]));
    }

    #[test]
    fn strategic_patch_takes_list_strategies_from_the_api_definitions() {
        // NodeSpec.taints is atomic: the patch's list replaces the stored one (`kubectl taint
        // node N key-` sends the remaining taints).
        let node =
            json!({"spec": {"taints": [{"key": "a", "effect": "NoSchedule"}, {"key": "b", "effect": "NoSchedule"}]}});
        let out = apply(
            PatchKind::Strategic,
            "Node",
            &node,
            &json!({"spec": {"taints": [{"key": "b", "effect": "NoSchedule"}]}}),
        )
        .unwrap();
        assert_eq!(out["spec"]["taints"], json!([{"key": "b", "effect": "NoSchedule"}]));
        // NodeStatus.addresses merges by `type`; ObjectMeta.ownerReferences by `uid`.
        let node = json!({"status": {"addresses": [{"type": "InternalIP", "address": "1"}, {"type": "Hostname", "address": "h"}]}});
        let out = apply(
            PatchKind::Strategic,
            "Node",
            &node,
            &json!({"status": {"addresses": [{"type": "Hostname", "address": "g"}]}}),
        )
        .unwrap();
        assert_eq!(
            out["status"]["addresses"],
            json!([{"type": "InternalIP", "address": "1"}, {"type": "Hostname", "address": "g"}])
        );
        // A PV's access modes have no strategy: replaced.
        let pv = json!({"spec": {"accessModes": ["ReadWriteOnce"]}});
        let out =
            apply(PatchKind::Strategic, "PersistentVolume", &pv, &json!({"spec": {"accessModes": ["ReadOnlyMany"]}}))
                .unwrap();
        assert_eq!(out["spec"]["accessModes"], json!(["ReadOnlyMany"]));
    }

    #[test]
    fn unknown_patch_types_are_unsupported_media() {
        assert_eq!(PatchKind::from_content_type("text/plain").unwrap_err().code(), 415);
        assert_eq!(
            PatchKind::from_content_type("application/merge-patch+json; charset=utf-8").unwrap(),
            PatchKind::Merge
        );
    }
}
