//! One message, JSON ↔ protobuf, driven by the [schema](super::schema).
//!
//! Both directions copy what upstream's Go code does with the same Go struct, so a protobuf
//! client and a JSON client are indistinguishable once the body is decoded:
//!
//! * protobuf → JSON is `json.Marshal` of the decoded struct: a field the wire does not carry
//!   is the Go zero value; a zero scalar, empty list or empty map is left out when the field is
//!   `omitempty` (or a pointer that was not set); structs are always written. Go writes `null`
//!   for nil lists, nil maps and zero times of non-`omitempty` fields; those are left out here,
//!   which Go's decoder reads the same way.
//! * JSON → protobuf is the generated `Marshal`: fields in number order, every non-pointer
//!   field written even when zero, pointers and lists only when set, map keys sorted.
//!
//! Types whose JSON is not their message: `Time` (RFC 3339, seconds), `MicroTime` (RFC 3339,
//! microseconds), `Quantity` (a string), `IntOrString` (a number or a string), `RawExtension`
//! and `FieldsV1` (embedded JSON). `[]byte` is base64 in JSON. int64 is a JSON number.

use super::schema::{schema, Field};
use super::wire::{self, put_key, put_len, put_varint_field, Raw, WireError};
use base64::Engine;
use jiff::Timestamp;
use serde_json::{Map, Number, Value};

pub(super) const TIME: &str = "k8s.io/apimachinery/pkg/apis/meta/v1.Time";
pub(super) const MICRO_TIME: &str = "k8s.io/apimachinery/pkg/apis/meta/v1.MicroTime";
pub(super) const FIELDS_V1: &str = "k8s.io/apimachinery/pkg/apis/meta/v1.FieldsV1";
pub(super) const QUANTITY: &str = "k8s.io/apimachinery/pkg/api/resource.Quantity";
pub(super) const INT_OR_STRING: &str = "k8s.io/apimachinery/pkg/util/intstr.IntOrString";
pub(super) const RAW_EXTENSION: &str = "k8s.io/apimachinery/pkg/runtime.RawExtension";

/// Why a value could not be transcoded: the field path and what was wrong.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {message}")]
pub struct Error {
    /// Dotted JSON path of the field (`spec.capacity.storage`).
    pub path: String,
    /// What was wrong.
    pub message: String,
}

fn err(path: &str, message: impl Into<String>) -> Error {
    Error { path: path.to_string(), message: message.into() }
}

fn wire_err(path: &str) -> impl Fn(WireError) -> Error + '_ {
    move |e| err(path, e.to_string())
}

fn join(path: &str, name: &str) -> String {
    if path.is_empty() {
        name.to_string()
    } else {
        format!("{path}.{name}")
    }
}

fn fields_of<'s>(ty: &str, path: &str) -> Result<&'s [Field], Error> {
    schema().get(ty).map(Vec::as_slice).ok_or_else(|| err(path, format!("no protobuf schema for {ty}")))
}

// ---------------------------------------------------------------- protobuf → JSON

/// Decodes one message of type `ty` into the JSON object Go would marshal.
pub fn decode(ty: &str, bytes: &[u8], path: &str) -> Result<Map<String, Value>, Error> {
    let fields = fields_of(ty, path)?;
    let wire = wire::fields(bytes).map_err(wire_err(path))?;
    let mut out = Map::new();
    for f in fields {
        let occ: Vec<Raw<'_>> = wire.iter().filter(|(n, _)| *n == u64::from(f.num)).map(|(_, r)| *r).collect();
        let p = join(path, &f.json);
        if f.inline {
            out.extend(decode(&f.ty, &merged(&occ, &p)?, path)?);
            continue;
        }
        let value = if f.map {
            if occ.is_empty() {
                continue;
            }
            let mut m = Map::new();
            for r in &occ {
                let (k, v) = map_entry(f, r, &p)?;
                m.insert(k, v);
            }
            Value::Object(m)
        } else if f.rep {
            let mut items = Vec::new();
            for r in &occ {
                repeated_item(f, r, &p, &mut items)?;
            }
            if items.is_empty() {
                continue;
            }
            Value::Array(items)
        } else if occ.is_empty() && (f.ptr || f.kind == "bytes") {
            continue;
        } else if f.kind == "message" {
            match message_value(&f.ty, &merged(&occ, &p)?, &p)? {
                Value::Null => continue,
                v => v,
            }
        } else {
            let v = scalar(&f.kind, occ.last().copied(), &p)?;
            if f.omit && !f.ptr && is_zero(&v) {
                continue;
            }
            v
        };
        out.insert(f.json.clone(), value);
    }
    Ok(out)
}

/// A non-repeated message field that occurs more than once is merged, which for protobuf is
/// the same as decoding the concatenated occurrences.
fn merged(occ: &[Raw<'_>], path: &str) -> Result<Vec<u8>, Error> {
    let mut b = Vec::new();
    for r in occ {
        match r {
            Raw::Len(s) => b.extend_from_slice(s),
            _ => return Err(err(path, "expected a length-delimited field")),
        }
    }
    Ok(b)
}

fn is_zero(v: &Value) -> bool {
    match v {
        Value::String(s) => s.is_empty(),
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        _ => false,
    }
}

fn scalar(kind: &str, raw: Option<Raw<'_>>, path: &str) -> Result<Value, Error> {
    let bad = || err(path, format!("wrong wire type for a {kind}"));
    Ok(match (kind, raw) {
        ("string", None) => Value::String(String::new()),
        ("string", Some(Raw::Len(b))) => {
            Value::String(String::from_utf8(b.to_vec()).map_err(|_| err(path, "string is not UTF-8"))?)
        }
        ("bytes", None) => Value::String(String::new()),
        ("bytes", Some(Raw::Len(b))) => Value::String(base64::engine::general_purpose::STANDARD.encode(b)),
        ("bool", None) => Value::Bool(false),
        ("bool", Some(Raw::Varint(v))) => Value::Bool(v != 0),
        ("int32" | "int64" | "uint32" | "uint64", None) => Value::from(0),
        ("int32", Some(Raw::Varint(v))) => Value::from(v as i32),
        ("int64", Some(Raw::Varint(v))) => Value::from(v as i64),
        ("uint32", Some(Raw::Varint(v))) => Value::from(v as u32),
        ("uint64", Some(Raw::Varint(v))) => Value::from(v),
        ("double" | "float", None) => Value::from(0),
        ("double", Some(Raw::Fixed64(v))) => Number::from_f64(f64::from_bits(v)).map_or(Value::Null, Value::Number),
        ("float", Some(Raw::Fixed32(v))) => {
            Number::from_f64(f64::from(f32::from_bits(v))).map_or(Value::Null, Value::Number)
        }
        _ => return Err(bad()),
    })
}

/// One occurrence of a repeated field: a message, a scalar, or a packed run of scalars.
fn repeated_item(f: &Field, r: &Raw<'_>, path: &str, items: &mut Vec<Value>) -> Result<(), Error> {
    match (f.kind.as_str(), r) {
        ("message", Raw::Len(b)) => items.push(message_value(&f.ty, b, path)?),
        ("string" | "bytes", _) => items.push(scalar(&f.kind, Some(*r), path)?),
        (_, Raw::Len(b)) => {
            // Packed: varints or fixed-width values back to back.
            let mut i = 0;
            while i < b.len() {
                let raw = match f.kind.as_str() {
                    "double" => Raw::Fixed64(u64::from_le_bytes(fixed(b, &mut i, path)?)),
                    "float" => Raw::Fixed32(u32::from_le_bytes(fixed(b, &mut i, path)?)),
                    _ => Raw::Varint(wire::read_varint(b, &mut i).map_err(wire_err(path))?),
                };
                items.push(scalar(&f.kind, Some(raw), path)?);
            }
        }
        _ => items.push(scalar(&f.kind, Some(*r), path)?),
    }
    Ok(())
}

fn fixed<const N: usize>(b: &[u8], i: &mut usize, path: &str) -> Result<[u8; N], Error> {
    let s = b.get(*i..*i + N).ok_or_else(|| err(path, "truncated packed field"))?;
    *i += N;
    Ok(s.try_into().unwrap_or([0; N]))
}

fn map_entry(f: &Field, r: &Raw<'_>, path: &str) -> Result<(String, Value), Error> {
    let Raw::Len(b) = r else { return Err(err(path, "map entry is not length-delimited")) };
    let entry = wire::fields(b).map_err(wire_err(path))?;
    let get = |n: u64| entry.iter().rev().find(|(k, _)| *k == n).map(|(_, r)| *r);
    let key = match scalar("string", get(1), path)? {
        Value::String(s) => s,
        _ => String::new(),
    };
    let p = join(path, &key);
    let value = match (f.kind.as_str(), get(2)) {
        ("message", Some(Raw::Len(v))) => message_value(&f.ty, v, &p)?,
        ("message", None) => message_value(&f.ty, &[], &p)?,
        (kind, raw) => scalar(kind, raw, &p)?,
    };
    Ok((key, value))
}

fn varint_of(fields: &[(u64, Raw<'_>)], n: u64) -> u64 {
    fields
        .iter()
        .rev()
        .find_map(|(k, r)| match r {
            Raw::Varint(v) if *k == n => Some(*v),
            _ => None,
        })
        .unwrap_or(0)
}

fn text_of(fields: &[(u64, Raw<'_>)], n: u64, path: &str) -> Result<String, Error> {
    String::from_utf8(wire::last_len(fields, n).unwrap_or_default().to_vec())
        .map_err(|_| err(path, "string is not UTF-8"))
}

fn embedded_json(raw: Option<&[u8]>, path: &str) -> Result<Value, Error> {
    match raw {
        None => Ok(Value::Null),
        Some(b) => serde_json::from_slice(b).map_err(|e| err(path, format!("embedded object is not JSON: {e}"))),
    }
}

/// A message as its JSON value (special types by name, others as objects).
fn message_value(ty: &str, b: &[u8], path: &str) -> Result<Value, Error> {
    Ok(match ty {
        TIME | MICRO_TIME => {
            if b.is_empty() {
                return Ok(Value::Null);
            }
            let f = wire::fields(b).map_err(wire_err(path))?;
            let (secs, nanos) = (varint_of(&f, 1) as i64, varint_of(&f, 2) as i32);
            let t = Timestamp::new(secs, nanos.clamp(0, 999_999_999)).map_err(|_| err(path, "time out of range"))?;
            let format = if ty == TIME { "%Y-%m-%dT%H:%M:%SZ" } else { "%Y-%m-%dT%H:%M:%S%.6fZ" };
            Value::String(t.strftime(format).to_string())
        }
        QUANTITY => {
            let s = text_of(&wire::fields(b).map_err(wire_err(path))?, 1, path)?;
            Value::String(if s.is_empty() { "0".into() } else { s })
        }
        INT_OR_STRING => {
            let f = wire::fields(b).map_err(wire_err(path))?;
            if varint_of(&f, 1) == 1 {
                Value::String(text_of(&f, 3, path)?)
            } else {
                Value::from(varint_of(&f, 2) as i32)
            }
        }
        RAW_EXTENSION | FIELDS_V1 => embedded_json(wire::last_len(&wire::fields(b).map_err(wire_err(path))?, 1), path)?,
        _ => Value::Object(decode(ty, b, path)?),
    })
}

// ---------------------------------------------------------------- JSON → protobuf

/// Encodes the JSON object `obj` as a message of type `ty`.
pub fn encode(ty: &str, obj: &Map<String, Value>, path: &str, out: &mut Vec<u8>) -> Result<(), Error> {
    for f in fields_of(ty, path)? {
        if f.inline {
            let mut inner = Vec::new();
            encode(&f.ty, obj, path, &mut inner)?;
            put_len(out, f.num, &inner);
            continue;
        }
        let p = join(path, &f.json);
        let v = obj.get(&f.json).filter(|v| !v.is_null());
        if f.map {
            let Some(v) = v else { continue };
            let m = v.as_object().ok_or_else(|| err(&p, "expected an object"))?;
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            for k in keys {
                let mut entry = Vec::new();
                put_len(&mut entry, 1, k.as_bytes());
                single(f, 2, Some(&m[k]), &join(&p, k), &mut entry)?;
                put_len(out, f.num, &entry);
            }
        } else if f.rep {
            let Some(v) = v else { continue };
            let items = v.as_array().ok_or_else(|| err(&p, "expected an array"))?;
            for (i, item) in items.iter().enumerate() {
                single(f, f.num, Some(item).filter(|v| !v.is_null()), &format!("{p}[{i}]"), out)?;
            }
        } else if v.is_some() || !(f.ptr || f.kind == "bytes") {
            single(f, f.num, v, &p, out)?;
        }
    }
    Ok(())
}

/// One item of the repeated message field `f`, framed as that field (key, length, message).
pub fn repeated_item_bytes(f: &Field, item: &Value, path: &str, out: &mut Vec<u8>) -> Result<(), Error> {
    single(f, f.num, Some(item).filter(|v| !v.is_null()), path, out)
}

/// One value of field `f` as field number `num`; `None` is the Go zero value.
fn single(f: &Field, num: u32, v: Option<&Value>, path: &str, out: &mut Vec<u8>) -> Result<(), Error> {
    let want = |what: &str| err(path, format!("expected {what}, got {}", v.map_or("nothing".into(), Value::to_string)));
    match f.kind.as_str() {
        "string" => {
            let s = match v {
                None => "",
                Some(v) => v.as_str().ok_or_else(|| want("a string"))?,
            };
            put_len(out, num, s.as_bytes());
        }
        "bytes" => {
            let s = v.and_then(Value::as_str).ok_or_else(|| want("a base64 string"))?;
            let b = base64::engine::general_purpose::STANDARD.decode(s).map_err(|e| err(path, e.to_string()))?;
            put_len(out, num, &b);
        }
        "bool" => {
            let b = match v {
                None => false,
                Some(v) => v.as_bool().ok_or_else(|| want("a boolean"))?,
            };
            put_varint_field(out, num, u64::from(b));
        }
        "int32" | "int64" => {
            let n = match v {
                None => 0,
                Some(v) => v.as_i64().ok_or_else(|| want("an integer"))?,
            };
            put_varint_field(out, num, n as u64);
        }
        "uint32" | "uint64" => {
            let n = match v {
                None => 0,
                Some(v) => v.as_u64().ok_or_else(|| want("an unsigned integer"))?,
            };
            put_varint_field(out, num, n);
        }
        "double" | "float" => {
            let x = match v {
                None => 0.0,
                Some(v) => v.as_f64().ok_or_else(|| want("a number"))?,
            };
            if f.kind == "double" {
                put_key(out, num, wire::FIXED64);
                out.extend_from_slice(&x.to_bits().to_le_bytes());
            } else {
                put_key(out, num, wire::FIXED32);
                out.extend_from_slice(&(x as f32).to_bits().to_le_bytes());
            }
        }
        "message" => {
            let mut inner = Vec::new();
            message_bytes(&f.ty, v, path, &mut inner)?;
            put_len(out, num, &inner);
        }
        other => return Err(err(path, format!("unsupported field kind {other}"))),
    }
    Ok(())
}

fn message_bytes(ty: &str, v: Option<&Value>, path: &str, out: &mut Vec<u8>) -> Result<(), Error> {
    let want = |what: &str| err(path, format!("expected {what}, got {}", v.map_or("nothing".into(), Value::to_string)));
    match ty {
        TIME | MICRO_TIME => {
            let Some(v) = v else { return Ok(()) };
            let s = v.as_str().ok_or_else(|| want("an RFC 3339 time"))?;
            let t: Timestamp = s.parse().map_err(|e| err(path, format!("invalid time {s:?}: {e}")))?;
            // Time carries whole seconds (its JSON has no more); MicroTime microseconds.
            let nanos = if ty == TIME { 0 } else { t.subsec_microsecond() * 1000 };
            put_varint_field(out, 1, t.as_second() as u64);
            put_varint_field(out, 2, nanos as u64);
        }
        QUANTITY => {
            let s = match v {
                None => "0".to_string(),
                Some(Value::String(s)) => s.clone(),
                Some(Value::Number(n)) => n.to_string(),
                Some(_) => return Err(want("a quantity")),
            };
            put_len(out, 1, s.as_bytes());
        }
        INT_OR_STRING => {
            let (ty, i, s) = match v {
                None => (0, 0, ""),
                Some(Value::String(s)) => (1, 0, s.as_str()),
                Some(v) => (0, v.as_i64().ok_or_else(|| want("an integer or a string"))?, ""),
            };
            put_varint_field(out, 1, ty);
            put_varint_field(out, 2, i as u64);
            put_len(out, 3, s.as_bytes());
        }
        RAW_EXTENSION | FIELDS_V1 => {
            if let Some(v) = v {
                put_len(out, 1, &serde_json::to_vec(v).unwrap_or_default());
            }
        }
        _ => {
            let empty = Map::new();
            let obj = match v {
                None => &empty,
                Some(v) => v.as_object().ok_or_else(|| want("an object"))?,
            };
            encode(ty, obj, path, out)?;
        }
    }
    Ok(())
}
