//! Kubernetes' protobuf encoding (`application/vnd.kubernetes.protobuf`), at the edge only.
//!
//! client-go programs (kube-controller-manager, kube-scheduler, kubectl's typed generators)
//! send and ask for protobuf by default, so the server speaks it for every served kind, their
//! Lists, `Status`, `DeleteOptions` and watch streams. Objects stay JSON inside: a protobuf
//! body is decoded into the JSON a Go client would have sent for the same object, and a JSON
//! answer is encoded just before it leaves. Tables are JSON only, as upstream.
//!
//! An object on the wire is the magic `k8s\0` followed by a `runtime.Unknown`: its `typeMeta`
//! (apiVersion, kind), `raw` (the object's message), `contentEncoding` and `contentType`. A
//! watch stream (`;stream=watch`) is a run of frames, each a 4-byte big-endian length and a
//! `metav1.WatchEvent` whose `object.raw` holds the object encoded as above.

mod count;
mod schema;
mod transcode;
mod wire;

use crate::error::{ApiError, Result};
use pv_store::StoreError;
use serde_json::{Map, Value};
use wire::put_len;

/// The protobuf media type.
pub const MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf";
/// The media type of a protobuf watch stream.
pub const WATCH_MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf;stream=watch";

const MAGIC: &[u8] = b"k8s\0";

/// True when a request body of this content type is protobuf.
pub fn is_protobuf(content_type: &str) -> bool {
    media_type(content_type) == MEDIA_TYPE
}

fn media_type(s: &str) -> &str {
    s.split(';').next().unwrap_or("").trim()
}

/// True when the client prefers protobuf: the first media type in `Accept` that the server can
/// produce is protobuf (client-go sends `application/vnd.kubernetes.protobuf, application/json`).
/// A request for another representation (`;as=Table`) is not one for protobuf objects.
pub fn accepts(accept: &str) -> bool {
    for entry in accept.split(',') {
        if entry.split(';').skip(1).any(|p| p.trim().starts_with("as=")) {
            return false;
        }
        match media_type(entry) {
            MEDIA_TYPE => return true,
            "application/json" | "application/yaml" | "application/*" | "*/*" | "*" => return false,
            _ => {}
        }
    }
    false
}

fn bad(what: impl std::fmt::Display) -> ApiError {
    ApiError::BadRequest(format!("malformed protobuf body: {what}"))
}

/// Decodes a protobuf request body into the JSON object a JSON client would have sent. The
/// type comes from the envelope; `kind` (the resource's) is used when the envelope names none.
pub fn decode(kind: &str, body: &[u8]) -> Result<Value> {
    let env = body.strip_prefix(MAGIC).ok_or_else(|| bad("missing the k8s protobuf magic"))?;
    let fields = wire::fields(env).map_err(bad)?;
    let last = |n: u64| wire::last_len(&fields, n);
    let text = |b: Option<&[u8]>| String::from_utf8(b.unwrap_or_default().to_vec()).map_err(|_| bad("not UTF-8"));
    if !text(last(3))?.is_empty() {
        return Err(ApiError::UnsupportedMediaType(format!("{MEDIA_TYPE} with contentEncoding")));
    }
    let type_meta = wire::fields(last(1).unwrap_or_default()).map_err(bad)?;
    let tm = |n: u64| text(wire::last_len(&type_meta, n));
    let api_version = tm(1)?;
    let kind = Some(tm(2)?).filter(|k| !k.is_empty()).unwrap_or_else(|| kind.to_string());
    let ty = schema::message_for(&api_version, &kind).ok_or_else(|| {
        ApiError::BadRequest(format!("no kind {kind:?} is registered for version {api_version:?} in protobuf"))
    })?;
    // Counted before anything is built from it (crate::shape).
    let raw = last(2).unwrap_or_default();
    let mut budget = crate::shape::Budget::default();
    count::message(&ty, raw, &mut budget);
    budget.finish()?;
    let mut obj = transcode::decode(&ty, raw, "").map_err(bad)?;
    let mut out = Map::new();
    if !api_version.is_empty() {
        out.insert("apiVersion".into(), Value::String(api_version));
    }
    out.insert("kind".into(), Value::String(kind));
    out.append(&mut obj);
    Ok(Value::Object(out))
}

fn internal(e: impl std::fmt::Display) -> ApiError {
    ApiError::Store(StoreError::Internal(format!("encoding protobuf: {e}")))
}

/// Encodes a JSON object (with `apiVersion` and `kind`) as kube-apiserver would.
pub fn encode(obj: &Value) -> Result<Vec<u8>> {
    let o = obj.as_object().ok_or_else(|| internal("not an object"))?;
    let field = |k: &str| o.get(k).and_then(Value::as_str).unwrap_or("");
    let (api_version, kind) = (field("apiVersion"), field("kind"));
    let ty = schema::message_for(api_version, kind)
        .ok_or_else(|| internal(format!("no protobuf type for {kind} at {api_version}")))?;
    let mut raw = Vec::new();
    transcode::encode(&ty, o, "", &mut raw).map_err(|e| internal(format!("{kind} {e}")))?;
    let mut type_meta = Vec::new();
    put_len(&mut type_meta, 1, api_version.as_bytes());
    put_len(&mut type_meta, 2, kind.as_bytes());
    let mut out = MAGIC.to_vec();
    put_len(&mut out, 1, &type_meta);
    put_len(&mut out, 2, &raw);
    put_len(&mut out, 3, b"");
    put_len(&mut out, 4, b"");
    Ok(out)
}

/// A List encoded in parts, so that its items can be written one at a time as the client reads
/// (see [`crate::listing`]): [`ListEncoder::head`], then each item from [`ListEncoder::item`],
/// then [`ListEncoder::tail`]; together the same bytes as [`encode`] of the whole List.
///
/// Why the items' total length comes first: the List message sits in the envelope's `raw`
/// field, whose length precedes it. The caller learns it by encoding every item once without
/// keeping the bytes, then encodes each again as it writes it.
pub struct ListEncoder {
    api_version: String,
    kind: String,
    /// The List message without its items: every field before them.
    raw_head: Vec<u8>,
    items: &'static schema::Field,
}

impl ListEncoder {
    /// An encoder for the List `envelope` (with `apiVersion`, `kind` and `metadata`; its `items`
    /// are ignored). None when the List's items are not its last field, so that it cannot be
    /// written in parts (no served List is like that).
    pub fn new(envelope: &Value) -> Result<Option<Self>> {
        let o = envelope.as_object().ok_or_else(|| internal("not an object"))?;
        let field = |k: &str| o.get(k).and_then(Value::as_str).unwrap_or("").to_string();
        let (api_version, kind) = (field("apiVersion"), field("kind"));
        let ty = schema::message_for(&api_version, &kind)
            .ok_or_else(|| internal(format!("no protobuf type for {kind} at {api_version}")))?;
        let fields = schema::schema().get(&ty).ok_or_else(|| internal(format!("no protobuf schema for {ty}")))?;
        let last = fields.iter().map(|f| f.num).max().unwrap_or(0);
        let Some(items) = fields.iter().find(|f| f.json == "items" && f.rep && !f.map && f.num == last) else {
            return Ok(None);
        };
        let mut head = o.clone();
        head.remove("items");
        let mut raw_head = Vec::new();
        transcode::encode(&ty, &head, "", &mut raw_head).map_err(|e| internal(format!("{kind} {e}")))?;
        Ok(Some(ListEncoder { api_version, kind, raw_head, items }))
    }

    /// Appends item number `i` of the List, as its `items` field: the same bytes whether it is
    /// encoded to count or to send.
    pub fn item(&self, i: usize, item: &Value, out: &mut Vec<u8>) -> Result<()> {
        transcode::repeated_item_bytes(self.items, item, &format!("items[{i}]"), out)
            .map_err(|e| internal(format!("{} {e}", self.kind)))
    }

    /// Everything before the first item, given the length of all items as [`ListEncoder::item`]
    /// encodes them.
    pub fn head(&self, items_len: usize) -> Vec<u8> {
        let mut type_meta = Vec::new();
        put_len(&mut type_meta, 1, self.api_version.as_bytes());
        put_len(&mut type_meta, 2, self.kind.as_bytes());
        let mut out = MAGIC.to_vec();
        put_len(&mut out, 1, &type_meta);
        wire::put_key(&mut out, 2, wire::LEN);
        wire::put_varint(&mut out, (self.raw_head.len() + items_len) as u64);
        out.extend_from_slice(&self.raw_head);
        out
    }

    /// Everything after the last item.
    pub fn tail(&self) -> Vec<u8> {
        let mut out = Vec::new();
        put_len(&mut out, 3, b"");
        put_len(&mut out, 4, b"");
        out
    }
}

/// One frame of a protobuf watch stream: the length, then a `WatchEvent` of type `ty`
/// carrying `obj` encoded as [`encode`] does.
pub fn watch_frame(ty: &str, obj: &Value) -> Result<Vec<u8>> {
    let mut raw_ext = Vec::new();
    put_len(&mut raw_ext, 1, &encode(obj)?);
    let mut event = Vec::new();
    put_len(&mut event, 1, ty.as_bytes());
    put_len(&mut event, 2, &raw_ext);
    let len = u32::try_from(event.len()).map_err(internal)?;
    let mut frame = len.to_be_bytes().to_vec();
    frame.extend_from_slice(&event);
    Ok(frame)
}

/// Splits a protobuf watch stream into its events, as (type, object as JSON). For tests and
/// clients of this crate.
pub fn read_watch_frames(mut stream: &[u8]) -> Result<Vec<(String, Value)>> {
    let mut out = Vec::new();
    while !stream.is_empty() {
        let len = stream.get(..4).ok_or_else(|| bad("truncated frame length"))?;
        let len = u32::from_be_bytes([len[0], len[1], len[2], len[3]]) as usize;
        let event = stream.get(4..4 + len).ok_or_else(|| bad("truncated frame"))?;
        stream = &stream[4 + len..];
        let fields = wire::fields(event).map_err(bad)?;
        let ty = String::from_utf8_lossy(wire::last_len(&fields, 1).unwrap_or_default()).into_owned();
        let raw_ext = wire::fields(wire::last_len(&fields, 2).unwrap_or_default()).map_err(bad)?;
        let obj = match wire::last_len(&raw_ext, 1) {
            Some(b) => decode("", b)?,
            None => Value::Null,
        };
        out.push((ty, obj));
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
