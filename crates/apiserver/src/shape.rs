//! What a request body may expand into, counted before anything is built from it.
//!
//! A body's size says little about its cost: `{}` is two bytes of JSON (and an empty embedded
//! message two bytes of protobuf), but as a container of a Pod it becomes a typed struct of
//! several hundred bytes, then gains defaults (pull policy, termination message path and
//! policy, resources), each step keeping its own copy. A 3 MiB body of a million empty
//! containers cost gigabytes before any validation could refuse it. So every body is first
//! scanned without building anything (JSON by a visitor that keeps nothing, protobuf by walking
//! the wire with the schema, YAML by the parser's own node budget) and refused with 413 when
//! it holds more than:
//!
//! - [`MAX_BODY_VALUES`] values in all (every scalar, list and object): a stored object is at
//!   most [`MAX_OBJECT_BYTES`] of JSON, and each value there takes at least two bytes (the
//!   value and a separator), so no object the store could keep has more;
//! - [`MAX_BODY_OBJECTS`] objects (JSON objects, protobuf messages): each one becomes a typed
//!   struct and, for containers, gains defaults, so this is what bounds a request's memory.
//!   The largest real objects (a Pod of a hundred containers with their environment, a Node's
//!   status) hold a few thousand.
//!
//! kube-apiserver has neither bound (only the 3 MiB body and etcd's 1.5 MiB object); it pays
//! the decoding, then answers 422 for the million containers. A body refused here is one the
//! store could not have kept anyway, or one far beyond any real object.

use crate::error::{ApiError, Result};
use crate::limits::MAX_OBJECT_BYTES;
use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Value;
use std::fmt;

/// Most values (scalars, lists and objects) a body may hold.
pub const MAX_BODY_VALUES: usize = MAX_OBJECT_BYTES / 2;
/// Most objects (JSON objects, protobuf messages) a body may hold.
pub const MAX_BODY_OBJECTS: usize = 16_384;

/// Counts values and objects against the bounds; the first one passed stops the count.
#[derive(Debug, Default)]
pub struct Budget {
    values: usize,
    objects: usize,
    exceeded: Option<ApiError>,
}

impl Budget {
    /// One more value. False (and the refusal kept) once past [`MAX_BODY_VALUES`].
    pub fn value(&mut self) -> bool {
        self.values += 1;
        if self.values > MAX_BODY_VALUES {
            self.exceeded.get_or_insert_with(|| too_many("values", MAX_BODY_VALUES));
        }
        self.exceeded.is_none()
    }

    /// One more object (also a value). False once past a bound.
    pub fn object(&mut self) -> bool {
        self.objects += 1;
        if self.objects > MAX_BODY_OBJECTS {
            self.exceeded.get_or_insert_with(|| too_many("objects", MAX_BODY_OBJECTS));
        }
        self.value()
    }

    /// The refusal, when a bound was passed.
    pub fn finish(self) -> Result<()> {
        self.exceeded.map_or(Ok(()), Err)
    }
}

fn too_many(what: &str, max: usize) -> ApiError {
    ApiError::RequestEntityTooLarge(format!(
        "Request entity too large: the request body holds more than {max} {what}, more than any object the server stores"
    ))
}

/// Scans a JSON body and refuses it when it holds more than the bounds allow. Malformed JSON
/// passes: the parser that reads it next reports it in its own words.
pub fn scan_json(body: &[u8]) -> Result<()> {
    let mut budget = Budget::default();
    count_json(body, &mut budget);
    budget.finish()
}

/// Counts a JSON text into `budget` (embedded JSON in protobuf); false once a bound is passed.
pub fn count_json(body: &[u8], budget: &mut Budget) -> bool {
    let mut de = serde_json::Deserializer::from_slice(body);
    let _ = Counter(&mut *budget).deserialize(&mut de);
    budget.exceeded.is_none()
}

/// Counts a value already parsed (a YAML body, a patched object) against the bounds.
pub fn check_value(v: &Value) -> Result<()> {
    fn walk(v: &Value, b: &mut Budget) -> bool {
        match v {
            Value::Object(o) => b.object() && o.values().all(|x| walk(x, b)),
            Value::Array(a) => b.value() && a.iter().all(|x| walk(x, b)),
            _ => b.value(),
        }
    }
    let mut budget = Budget::default();
    walk(v, &mut budget);
    budget.finish()
}

/// A visitor that keeps nothing and counts everything it is shown.
struct Counter<'a>(&'a mut Budget);

const STOP: &str = "the request body holds too much";

impl<'de> DeserializeSeed<'de> for Counter<'_> {
    type Value = ();
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> std::result::Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl Counter<'_> {
    fn scalar<E: de::Error>(self) -> std::result::Result<(), E> {
        if self.0.value() {
            Ok(())
        } else {
            Err(E::custom(STOP))
        }
    }
}

impl<'de> Visitor<'de> for Counter<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> std::result::Result<(), E> {
        self.scalar()
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> std::result::Result<(), E> {
        self.scalar()
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> std::result::Result<(), E> {
        self.scalar()
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> std::result::Result<(), E> {
        self.scalar()
    }
    fn visit_str<E: de::Error>(self, _: &str) -> std::result::Result<(), E> {
        self.scalar()
    }
    fn visit_unit<E: de::Error>(self) -> std::result::Result<(), E> {
        self.scalar()
    }
    fn visit_none<E: de::Error>(self) -> std::result::Result<(), E> {
        self.scalar()
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> std::result::Result<(), A::Error> {
        if !self.0.value() {
            return Err(de::Error::custom(STOP));
        }
        while seq.next_element_seed(Counter(&mut *self.0))?.is_some() {}
        Ok(())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> std::result::Result<(), A::Error> {
        if !self.0.object() {
            return Err(de::Error::custom(STOP));
        }
        while map.next_key::<IgnoredAny>()?.is_some() {
            map.next_value_seed(Counter(&mut *self.0))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reported body: a Pod of a million empty containers, 3 MB of JSON.
    pub(crate) fn million_containers_json() -> Vec<u8> {
        let mut b =
            br#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"default"},"spec":{"containers":["#
                .to_vec();
        for i in 0..1_000_000 {
            if i > 0 {
                b.push(b',');
            }
            b.extend_from_slice(b"{}");
        }
        b.extend_from_slice(b"]}}");
        b
    }

    #[test]
    fn a_million_empty_containers_are_refused_by_the_count() {
        let body = million_containers_json();
        assert!(body.len() < crate::limits::MAX_BODY, "within the body limit: {}", body.len());
        let err = scan_json(&body).unwrap_err();
        assert_eq!(err.code(), 413);
        assert!(err.to_string().contains(&format!("more than {MAX_BODY_OBJECTS} objects")), "{err}");
    }

    #[test]
    fn many_scalars_are_refused_and_ordinary_bodies_pass() {
        let many = format!("[{}0]", "0,".repeat(MAX_BODY_VALUES));
        assert!(scan_json(many.as_bytes()).unwrap_err().to_string().contains("values"));
        let fine = format!("[{}0]", "0,".repeat(MAX_BODY_VALUES - 2));
        assert!(scan_json(fine.as_bytes()).is_ok());
        let objects = format!("[{}{{}}]", "{},".repeat(MAX_BODY_OBJECTS - 1));
        assert!(scan_json(objects.as_bytes()).is_ok(), "exactly the bound");
        assert!(scan_json(b"{not json").is_ok(), "left to the parser");
    }

    #[test]
    fn parsed_values_are_counted_alike() {
        let v: Value = serde_json::from_slice(&million_containers_json()).unwrap();
        assert_eq!(check_value(&v).unwrap_err().code(), 413);
        assert!(check_value(&serde_json::json!({"a": [1, 2, {"b": 3}]})).is_ok());
    }
}
