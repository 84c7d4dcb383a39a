//! PATCH bodies: JSON merge patch (RFC 7386), JSON patch (RFC 6902), strategic merge patch and
//! server-side apply, each turned into the full object that is then written as an update.
//!
//! Strategic merge patch is approximated without schemas: it is a merge patch in which lists
//! named in [`MERGE_KEYS`] merge element-wise by their key, `finalizers` merges as a set, and
//! the directives kubectl emits are honoured (`$patch: delete|replace` in maps and list items,
//! `$deleteFromPrimitiveList/<field>`, `$retainKeys`; `$setElementOrder/<field>` is dropped).
//! For the kinds served here that is what kubectl `apply`, `edit` and `patch` rely on.
//!
//! Server-side apply (`application/apply-patch+yaml`) is approximated as a strategic merge of
//! the applied configuration into the live object (or a create when there is none): fields the
//! manager stops applying are not removed, since there is no managedFields bookkeeping.

use crate::error::{ApiError, Result};
use crate::limits::{MAX_JSON_PATCH_COPY_BYTES, MAX_JSON_PATCH_OPS};
use serde_json::{Map, Value};

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
            other => Err(ApiError::UnsupportedMediaType(other.to_string())),
        }
    }
}

/// List fields that merge element-wise, and the key that identifies an element.
pub const MERGE_KEYS: &[(&str, &str)] = &[
    ("containers", "name"),
    ("initContainers", "name"),
    ("ephemeralContainers", "name"),
    ("volumes", "name"),
    ("volumeMounts", "mountPath"),
    ("volumeDevices", "devicePath"),
    ("env", "name"),
    ("imagePullSecrets", "name"),
    ("ports", "containerPort"),
    ("conditions", "type"),
    ("ownerReferences", "uid"),
    ("addresses", "type"),
    ("taints", "key"),
];

/// Lists of scalars that merge as sets.
const PRIMITIVE_MERGE: &[&str] = &["finalizers"];

/// Parses a body as JSON, or YAML for apply patches.
pub fn parse_body(kind: PatchKind, body: &[u8]) -> Result<Value> {
    if kind == PatchKind::Apply {
        let v: Value =
            serde_norway::from_slice(body).map_err(|e| ApiError::BadRequest(format!("error decoding YAML: {e}")))?;
        return Ok(v);
    }
    serde_json::from_slice(body).map_err(|e| ApiError::BadRequest(format!("error decoding patch: {e}")))
}

/// Applies a patch to `target`, returning the patched object.
pub fn apply(kind: PatchKind, target: &Value, patch: &Value) -> Result<Value> {
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
            merge_map(base, p)?;
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
        // One operation at a time, so the copy sizes are measured on the document as it is;
        // on failure the whole document is dropped, so no rollback is needed.
        json_patch::patch_unsafe(doc, std::slice::from_ref(op)).map_err(|e| {
            ApiError::BadRequest(format!(
                "the JSON patch could not be applied: operation '/{i}' failed at path '{}': {}",
                e.path, e.kind
            ))
        })?;
    }
    Ok(())
}

fn merge_key(field: &str) -> Option<&'static str> {
    MERGE_KEYS.iter().find(|(f, _)| *f == field).map(|(_, k)| *k)
}

/// Strategic merge of `patch` into `base`.
fn merge_map(base: &mut Map<String, Value>, patch: &Map<String, Value>) -> Result<()> {
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
            Value::Object(pm) => match base.get_mut(k) {
                Some(Value::Object(bm)) => merge_map(bm, pm)?,
                _ => {
                    let mut fresh = Map::new();
                    merge_map(&mut fresh, pm)?;
                    base.insert(k.clone(), Value::Object(fresh));
                }
            },
            Value::Array(pa) => {
                let merged = match (base.get(k), merge_key(k)) {
                    (Some(Value::Array(ba)), Some(key)) => merge_list_by_key(ba, pa, key)?,
                    (Some(Value::Array(ba)), None) if PRIMITIVE_MERGE.contains(&k.as_str()) => {
                        let mut out = ba.clone();
                        for x in pa {
                            if !out.contains(x) {
                                out.push(x.clone());
                            }
                        }
                        out
                    }
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

fn strip_directives(m: &mut Map<String, Value>) {
    m.retain(|k, _| !k.starts_with('$'));
    for v in m.values_mut() {
        if let Value::Object(inner) = v {
            strip_directives(inner);
        }
    }
}

fn merge_list_by_key(base: &[Value], patch: &[Value], key: &str) -> Result<Vec<Value>> {
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
                    merge_map(bm, pm)?;
                }
            }
            (None, false) => {
                let mut fresh = Map::new();
                merge_map(&mut fresh, pm)?;
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
    fn merge_patch_replaces_lists_and_null_deletes() {
        let t = json!({"spec": {"a": 1, "l": [1, 2]}, "metadata": {"labels": {"x": "1"}}});
        let p = json!({"spec": {"l": [3]}, "metadata": {"labels": {"x": null}}});
        let out = apply(PatchKind::Merge, &t, &p).unwrap();
        assert_eq!(out, json!({"spec": {"a": 1, "l": [3]}, "metadata": {"labels": {}}}));
    }

    #[test]
    fn json_patch_applies_operations_and_reports_failures() {
        let t = json!({"spec": {"a": 1}});
        let out = apply(PatchKind::Json, &t, &json!([{"op": "replace", "path": "/spec/a", "value": 2}])).unwrap();
        assert_eq!(out["spec"]["a"], 2);
        let err = apply(PatchKind::Json, &t, &json!([{"op": "remove", "path": "/nope"}]));
        assert_eq!(err.unwrap_err().code(), 400);
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
        let out = apply(PatchKind::Strategic, &t, &p).unwrap();
        assert_eq!(out["metadata"]["finalizers"], json!(["a", "b"]));
        assert_eq!(out["spec"]["containers"], json!([{"name": "c", "image": "y"}]));
        assert_eq!(out["spec"]["accessModes"], json!(["ReadWriteMany"]));
        let out =
            apply(PatchKind::Strategic, &out, &json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["a"]}}))
                .unwrap();
        assert_eq!(out["metadata"]["finalizers"], json!(["b"]));
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
