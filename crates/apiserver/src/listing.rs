//! List answers written as the client reads them, in every encoding (JSON, YAML, protobuf,
//! Tables and `PartialObjectMetadataList`).
//!
//! Why: a list used to be built whole (every item rendered, then the whole encoding) before its
//! first byte went out, and held until the client had read it all, so a client that asks for a
//! large list and reads it slowly (or not at all) held a copy of the collection in its
//! encoding. Now the answer holds the list's snapshot (the stored objects, which are shared
//! text: a pointer each) and renders items as hyper asks for the next piece of the body, about
//! [`CHUNK`] at a time. hyper asks only while its write buffer has room, so an unread list costs
//! its snapshot and a chunk or two, whatever the size of the collection. kube-apiserver streams
//! its list encodings the same way.
//!
//! The bytes are the same as encoding the whole List: the envelope (`apiVersion`, `kind`,
//! `metadata`, and for a Table its column definitions) is encoded once with its items left out
//! and split where they go, and each item is encoded as it would be inside the whole. For
//! protobuf the length of the List message precedes it, so every item is encoded once to count
//! its bytes before the answer starts (which also finds any item that cannot be encoded while a
//! 500 can still be answered) and again as it is written.

use crate::error::{ApiError, Result};
use crate::format::Format;
use crate::protobuf::{self, ListEncoder};
use axum::body::{Body, Bytes};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use pv_store::{Object, StoreError};
use serde_json::{json, Value};

/// About how many bytes of a list are rendered at a time (one item may make a piece longer).
pub const CHUNK: usize = 64 * 1024;

/// Turns a stored object into the item the answer carries.
pub type Render = Box<dyn Fn(&Object) -> Value + Send>;

/// How the items are written.
enum Form {
    /// JSON from the stored text, less `kind` and `apiVersion` (no tree built).
    Stored,
    /// JSON of the rendered item.
    Json(Render),
    /// YAML of the rendered item, as one entry of the top-level `items:` sequence.
    Yaml(Render),
    /// Protobuf of the rendered item, as the List message's `items` field.
    Protobuf(Render, ListEncoder),
}

/// The body of one list answer, rendered piece by piece from its snapshot.
struct ListBody {
    head: Vec<u8>,
    items: std::vec::IntoIter<Object>,
    written: usize,
    /// Written between two items.
    sep: &'static [u8],
    form: Form,
    tail: Vec<u8>,
    done: bool,
}

impl ListBody {
    fn item(&self, o: &Object, out: &mut Vec<u8>) -> Result<()> {
        match &self.form {
            Form::Stored => stored_item(o, out),
            Form::Json(render) => serde_json::to_writer(out, &render(o)).map_err(internal),
            Form::Yaml(render) => {
                out.extend_from_slice(yaml_item(&render(o))?.as_bytes());
                Ok(())
            }
            Form::Protobuf(render, enc) => enc.item(self.written, &render(o), out),
        }
    }

    /// The next piece of the body: the head, then items until the piece passes [`CHUNK`], then
    /// the tail after the last item.
    fn next_piece(&mut self) -> Option<Result<Bytes>> {
        if self.done {
            return None;
        }
        let mut buf = std::mem::take(&mut self.head);
        buf.reserve(CHUNK);
        while buf.len() < CHUNK {
            let Some(o) = self.items.next() else {
                buf.extend_from_slice(&self.tail);
                self.done = true;
                break;
            };
            if self.written > 0 {
                buf.extend_from_slice(self.sep);
            }
            if let Err(e) = self.item(&o, &mut buf) {
                self.done = true;
                return Some(Err(e));
            }
            self.written += 1;
        }
        Some(Ok(Bytes::from(buf)))
    }
}

fn internal(e: impl std::fmt::Display) -> ApiError {
    ApiError::Store(StoreError::Internal(format!("encoding the list: {e}")))
}

/// A JSON list item from the stored text: its top-level fields as they are, less `kind` and
/// `apiVersion` (items of a JSON list carry neither, as kube-apiserver lists them), in the
/// same sorted order as serializing its tree would give.
fn stored_item(o: &Object, out: &mut Vec<u8>) -> Result<()> {
    use serde::ser::{SerializeMap, Serializer};
    use serde_json::value::RawValue;
    use std::collections::BTreeMap;
    let fields: BTreeMap<&str, &RawValue> = serde_json::from_str(o.text()).map_err(internal)?;
    let mut ser = serde_json::Serializer::new(out);
    let mut m = ser.serialize_map(None).map_err(internal)?;
    for (k, v) in fields.iter().filter(|(k, _)| **k != "kind" && **k != "apiVersion") {
        m.serialize_entry(k, v).map_err(internal)?;
    }
    m.end().map_err(internal)
}

/// Marks where the items go in an encoded envelope; nothing a List's metadata holds can
/// contain it.
const SENTINEL: &str = "\u{1}items\u{1}";
/// The same for YAML, where a control character would be escaped: a plain scalar.
const YAML_SENTINEL: &str = "x-items-go-here-7c1f";

/// The JSON of `envelope` split where its `field` goes: before it (with `[`) and after (`]`).
fn json_split(envelope: &Value, field: &str) -> Result<(Vec<u8>, Vec<u8>)> {
    let mut e = envelope.clone();
    e[field] = Value::String(SENTINEL.into());
    let text = serde_json::to_vec(&e).map_err(internal)?;
    let mark = serde_json::to_vec(SENTINEL).map_err(internal)?;
    let at = text.windows(mark.len()).position(|w| w == mark).ok_or_else(|| internal("no place for the items"))?;
    let mut head = text[..at].to_vec();
    head.push(b'[');
    let mut tail = b"]".to_vec();
    tail.extend_from_slice(&text[at + mark.len()..]);
    Ok((head, tail))
}

/// The YAML of `envelope` split where its `items` go: through `items:` and its line break, and
/// from the next top-level key on.
fn yaml_split(envelope: &Value) -> Result<(Vec<u8>, Vec<u8>)> {
    let mut e = envelope.clone();
    e["items"] = Value::String(YAML_SENTINEL.into());
    let text = serde_saphyr::to_string(&e).map_err(internal)?;
    let mark = format!("\nitems: {YAML_SENTINEL}\n");
    let at = text.find(&mark).ok_or_else(|| internal("no place for the items"))?;
    let head = format!("{}\nitems:\n", &text[..at]);
    Ok((head.into_bytes(), text.as_bytes()[at + mark.len()..].to_vec()))
}

/// One item as an entry of a top-level `items:` sequence, as it appears in the whole List.
fn yaml_item(item: &Value) -> Result<String> {
    let one = serde_saphyr::to_string(&json!({ "items": [item] })).map_err(internal)?;
    one.strip_prefix("items:\n").map(str::to_string).ok_or_else(|| internal("unexpected YAML for an item"))
}

/// The answer to a list: `envelope` (a List or Table whose items, named `field`, are left out)
/// with `items` rendered by `render` (None: JSON from the stored text, with no tree built), in
/// `format`, written as the client reads it.
pub fn answer(
    envelope: Value,
    field: &'static str,
    items: Vec<Object>,
    render: Option<Render>,
    format: Format,
) -> Result<Response> {
    let media =
        if format.table.is_some() || format.partial.is_some() { "application/json" } else { format.media_type() };
    let body = match render {
        None => {
            let (head, tail) = json_split(&envelope, field)?;
            ListBody { head, items: items.into_iter(), written: 0, sep: b",", form: Form::Stored, tail, done: false }
        }
        Some(render) if format.yaml => {
            let (head, tail) = if items.is_empty() {
                let mut whole = envelope.clone();
                whole[field] = json!([]);
                (serde_saphyr::to_string(&whole).map_err(internal)?.into_bytes(), Vec::new())
            } else {
                yaml_split(&envelope)?
            };
            ListBody {
                head,
                items: items.into_iter(),
                written: 0,
                sep: b"",
                form: Form::Yaml(render),
                tail,
                done: false,
            }
        }
        Some(render) if media == protobuf::MEDIA_TYPE => match ListEncoder::new(&envelope)? {
            Some(enc) => {
                // Counting pass: the List's length goes before it; an item that cannot be
                // encoded is a 500 now rather than a broken body later.
                let mut scratch = Vec::new();
                let mut total = 0;
                for (i, o) in items.iter().enumerate() {
                    scratch.clear();
                    enc.item(i, &render(o), &mut scratch)?;
                    total += scratch.len();
                }
                let (head, tail) = (enc.head(total), enc.tail());
                let form = Form::Protobuf(render, enc);
                ListBody { head, items: items.into_iter(), written: 0, sep: b"", form, tail, done: false }
            }
            None => {
                let mut whole = envelope;
                whole[field] = items.iter().map(&render).collect();
                return Ok((StatusCode::OK, [(header::CONTENT_TYPE, media)], protobuf::encode(&whole)?).into_response());
            }
        },
        Some(render) => {
            let (head, tail) = json_split(&envelope, field)?;
            ListBody {
                head,
                items: items.into_iter(),
                written: 0,
                sep: b",",
                form: Form::Json(render),
                tail,
                done: false,
            }
        }
    };
    Ok((StatusCode::OK, [(header::CONTENT_TYPE, media)], body_of(body)).into_response())
}

fn body_of(mut list: ListBody) -> Body {
    let pieces = std::iter::from_fn(move || list.next_piece()).map(|piece| {
        piece.map_err(|e| {
            // The status went out already: all that can be done is to break the body off.
            tracing::warn!(error = %e, "list answer broken off");
            std::io::Error::other(e.to_string())
        })
    });
    Body::from_stream(futures_util::stream::iter(pieces))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tables::{self, IncludeObject};
    use futures_util::StreamExt;

    fn pv(i: usize) -> Object {
        Object::new(&json!({
            "apiVersion": "v1", "kind": "PersistentVolume",
            "metadata": {"name": format!("pv-{i:05}"), "resourceVersion": i.to_string(),
                         "creationTimestamp": "2024-01-01T00:00:00Z",
                         "labels": {"n": i.to_string()}, "annotations": {"pad": "é\"x\n".repeat(i % 7 * 40)}},
            "spec": {"capacity": {"storage": format!("{i}Gi")}, "accessModes": ["ReadWriteOnce"],
                     "persistentVolumeReclaimPolicy": "Retain", "hostPath": {"path": format!("/v/{i}")},
                     "mountOptions": if i.is_multiple_of(3) { json!([]) } else { json!(["ro", "x: y"]) }},
            "status": {"phase": "Available"}
        }))
    }

    fn envelope() -> Value {
        json!({"kind": "PersistentVolumeList", "apiVersion": "v1",
               "metadata": {"resourceVersion": "77", "continue": "abc", "remainingItemCount": 3}})
    }

    fn without_type_meta(o: &Object) -> Value {
        let mut v = o.value();
        v.as_object_mut().unwrap().retain(|k, _| k != "kind" && k != "apiVersion");
        v
    }

    /// The body in the pieces the server writes it in.
    async fn pieces(resp: Response) -> (String, Vec<Bytes>) {
        let ct = resp.headers()[header::CONTENT_TYPE].to_str().unwrap().to_string();
        let stream = resp.into_body().into_data_stream();
        (ct, stream.map(|b| b.unwrap()).collect().await)
    }

    fn whole(envelope: &Value, field: &str, items: Vec<Value>) -> Value {
        let mut w = envelope.clone();
        w[field] = Value::Array(items);
        w
    }

    #[tokio::test]
    async fn a_list_is_written_in_pieces_that_make_the_same_bytes_as_the_whole_in_every_encoding() {
        let objects: Vec<Object> = (0..600).map(pv).collect();
        let plain = |o: &Object| without_type_meta(o);
        let json_f = Format::default();
        let yaml_f = Format { yaml: true, ..Format::default() };
        let proto_f = Format { protobuf: true, ..Format::default() };
        let table_f = Format { table: Some(IncludeObject::Object), ..Format::default() };
        let now = jiff::Timestamp::now();
        let columns = pv_store::columns(pv_store::ResourceType::by_kind("PersistentVolume").unwrap());
        let table_head = tables::table_head(&tables::Printer::Kind(columns), "77", Some("abc"));
        let row =
            move |o: &Object| tables::row(&tables::Printer::Kind(columns), &o.value(), IncludeObject::Object, now);
        for n in [0, 1, 2, 600] {
            let items = objects[..n].to_vec();
            let list = whole(&envelope(), "items", items.iter().map(plain).collect());
            let table = whole(&table_head, "rows", items.iter().map(row).collect());
            // (what, renderer, format, envelope, the whole List encoded at once, media type)
            type Case<'a> = (&'a str, Option<Render>, Format, Value, Vec<u8>, &'a str);
            let cases: Vec<Case> = vec![
                ("stored JSON", None, json_f, envelope(), serde_json::to_vec(&list).unwrap(), "application/json"),
                (
                    "JSON",
                    Some(Box::new(plain)),
                    json_f,
                    envelope(),
                    serde_json::to_vec(&list).unwrap(),
                    "application/json",
                ),
                (
                    "YAML",
                    Some(Box::new(plain)),
                    yaml_f,
                    envelope(),
                    serde_saphyr::to_string(&list).unwrap().into_bytes(),
                    "application/yaml",
                ),
                (
                    "protobuf",
                    Some(Box::new(plain)),
                    proto_f,
                    envelope(),
                    protobuf::encode(&list).unwrap(),
                    protobuf::MEDIA_TYPE,
                ),
                (
                    "Table",
                    Some(Box::new(row)),
                    table_f,
                    table_head.clone(),
                    serde_json::to_vec(&table).unwrap(),
                    "application/json",
                ),
            ];
            for (what, render, format, env, want, media) in cases {
                let field = if what == "Table" { "rows" } else { "items" };
                let resp = answer(env, field, items.clone(), render, format).unwrap();
                let (ct, got) = pieces(resp).await;
                assert_eq!(ct, media, "{what}");
                let body: Vec<u8> = got.concat();
                assert!(
                    body == want,
                    "{what} of {n} items:\n{}\n---\n{}",
                    String::from_utf8_lossy(&body),
                    String::from_utf8_lossy(&want)
                );
                // No piece is much larger than a chunk: the list is never rendered at once.
                let largest = got.iter().map(Bytes::len).max().unwrap_or(0);
                assert!(largest < CHUNK + 4096, "{what}: a piece of {largest} bytes");
                if n == 600 {
                    assert!(got.len() > 3, "{what}: {} pieces", got.len());
                }
            }
        }
    }
}
