//! Just enough of Kubernetes' protobuf encoding to accept `kubectl create namespace NAME`.
//!
//! kubectl's typed clients (the `create <kind> NAME` generators) write with
//! `application/vnd.kubernetes.protobuf` and do not fall back to JSON on 415. A Namespace
//! carries nothing but metadata that matters here, so its body is decoded by hand: the
//! `k8s\0` magic, the `runtime.Unknown` envelope (`raw` = field 2), the object's `metadata`
//! (field 1) and in it name, generateName, namespace, labels, annotations and finalizers.
//! Every other kind answers 415 (send JSON).

use crate::error::{ApiError, Result};
use serde_json::{json, Map, Value};

const MAGIC: &[u8] = b"k8s\0";

fn bad(what: &str) -> ApiError {
    ApiError::BadRequest(format!("malformed protobuf body: {what}"))
}

fn varint(b: &[u8], i: &mut usize) -> Result<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *b.get(*i).ok_or_else(|| bad("truncated varint"))?;
        *i += 1;
        v |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Ok(v);
        }
    }
    Err(bad("varint too long"))
}

/// Length-delimited fields of one message: (field number, bytes); other wire types skipped.
fn fields(b: &[u8]) -> Result<Vec<(u64, &[u8])>> {
    let (mut i, mut out) = (0, Vec::new());
    while i < b.len() {
        let key = varint(b, &mut i)?;
        match key & 7 {
            0 => {
                varint(b, &mut i)?;
            }
            1 => i += 8,
            5 => i += 4,
            2 => {
                let len = varint(b, &mut i)? as usize;
                let end = i.checked_add(len).filter(|e| *e <= b.len()).ok_or_else(|| bad("length"))?;
                out.push((key >> 3, &b[i..end]));
                i = end;
            }
            _ => return Err(bad("unsupported wire type")),
        }
    }
    if i > b.len() {
        return Err(bad("truncated field"));
    }
    Ok(out)
}

fn text(b: &[u8]) -> Result<String> {
    String::from_utf8(b.to_vec()).map_err(|_| bad("string is not UTF-8"))
}

fn map_entry(b: &[u8]) -> Result<(String, String)> {
    let (mut k, mut v) = (String::new(), String::new());
    for (n, f) in fields(b)? {
        match n {
            1 => k = text(f)?,
            2 => v = text(f)?,
            _ => {}
        }
    }
    Ok((k, v))
}

fn metadata(b: &[u8]) -> Result<Value> {
    let mut m = Map::new();
    let (mut labels, mut annotations, mut finalizers) = (Map::new(), Map::new(), Vec::new());
    for (n, f) in fields(b)? {
        match n {
            1 => drop(m.insert("name".into(), json!(text(f)?))),
            2 => drop(m.insert("generateName".into(), json!(text(f)?))),
            3 => drop(m.insert("namespace".into(), json!(text(f)?))),
            11 => {
                let (k, v) = map_entry(f)?;
                labels.insert(k, json!(v));
            }
            12 => {
                let (k, v) = map_entry(f)?;
                annotations.insert(k, json!(v));
            }
            14 => finalizers.push(json!(text(f)?)),
            _ => {}
        }
    }
    if !labels.is_empty() {
        m.insert("labels".into(), Value::Object(labels));
    }
    if !annotations.is_empty() {
        m.insert("annotations".into(), Value::Object(annotations));
    }
    if !finalizers.is_empty() {
        m.insert("finalizers".into(), Value::Array(finalizers));
    }
    Ok(Value::Object(m))
}

/// Decodes a protobuf-encoded object of `kind` (Namespace only) into JSON.
pub fn decode(kind: &str, body: &[u8]) -> Result<Value> {
    if kind != "Namespace" {
        return Err(ApiError::UnsupportedMediaType("application/vnd.kubernetes.protobuf".into()));
    }
    let env = body.strip_prefix(MAGIC).ok_or_else(|| bad("missing k8s magic"))?;
    let raw =
        fields(env)?.into_iter().find(|(n, _)| *n == 2).map(|(_, r)| r).ok_or_else(|| bad("no object in envelope"))?;
    let meta = fields(raw)?
        .into_iter()
        .find(|(n, _)| *n == 1)
        .map(|(_, m)| metadata(m))
        .transpose()?
        .unwrap_or_else(|| json!({}));
    Ok(json!({"apiVersion": "v1", "kind": kind, "metadata": meta}))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ld(field: u8, bytes: &[u8]) -> Vec<u8> {
        let mut v = vec![(field << 3) | 2, bytes.len() as u8];
        v.extend_from_slice(bytes);
        v
    }

    #[test]
    fn a_namespace_from_kubectl_create_decodes() {
        let label = [ld(1, b"team"), ld(2, b"a")].concat();
        let meta = [ld(1, b"foo"), ld(11, &label)].concat();
        let raw = ld(1, &meta);
        let type_meta = [ld(1, b"v1"), ld(2, b"Namespace")].concat();
        let body = [MAGIC.to_vec(), ld(1, &type_meta), ld(2, &raw)].concat();
        let v = decode("Namespace", &body).unwrap();
        assert_eq!(v["metadata"]["name"], "foo");
        assert_eq!(v["metadata"]["labels"]["team"], "a");
    }

    #[test]
    fn garbage_and_other_kinds_are_refused() {
        assert_eq!(decode("Namespace", b"nope").unwrap_err().code(), 400);
        assert_eq!(decode("Namespace", b"k8s\0\x12\x7f").unwrap_err().code(), 400);
        assert_eq!(decode("Pod", b"k8s\0").unwrap_err().code(), 415);
    }
}
