//! Objects decoded without the tree of their `managedFields`.
//!
//! A real API server puts `metadata.managedFields` on every object it sends: every watch event,
//! every list item and every write's answer. Decoded whole they are a tree of JSON maps, often
//! larger than the rest of the object, and the controller reads one thing of them: which manager
//! last wrote a binder-owned field, when another binder is suspected ([`crate::foreign`]).
//! [`Lean`] decodes an object with `managedFields` left out, and of them keeps only that summary
//! ([`Write`]) read on the fly: the keys of each entry's `fieldsV1` are scanned, not kept.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use pv_model::ownership::{fields_v1_key_bit, Write};
use serde::de::{self, DeserializeOwned, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use std::borrow::Cow;
use std::fmt;

/// An object without its `managedFields`, and the summary of them a binder check reads.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Lean<K> {
    /// The object; its `metadata.managedFields` are `None`.
    pub object: K,
    /// One summary per `managedFields` entry, in their order.
    pub writers: Vec<Write>,
}

impl<'de, K: DeserializeOwned> de::Deserialize<'de> for Lean<K> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let mut writers = Vec::new();
        let object = K::deserialize(Filtered { inner: d, level: Level::Object, out: &mut writers })?;
        Ok(Lean { object, writers })
    }
}

impl<K: kube::Resource> kube::Resource for Lean<K> {
    type DynamicType = K::DynamicType;
    type Scope = K::Scope;

    fn kind(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::kind(dt)
    }
    fn group(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::group(dt)
    }
    fn version(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::version(dt)
    }
    fn api_version(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::api_version(dt)
    }
    fn plural(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::plural(dt)
    }
    fn url_path(dt: &Self::DynamicType, namespace: Option<&str>) -> String {
        K::url_path(dt, namespace)
    }
    fn meta(&self) -> &ObjectMeta {
        self.object.meta()
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        self.object.meta_mut()
    }
}

/// Which map a [`Filtered`] deserializer stands at.
#[derive(Clone, Copy, PartialEq)]
enum Level {
    /// The object: its `metadata` value is filtered.
    Object,
    /// Its metadata: `managedFields` is summarized into `out` and left out.
    Metadata,
}

/// A deserializer that hands the object's maps to the type's visitor with `managedFields` taken
/// out; everything else passes through untouched.
struct Filtered<'a, D> {
    inner: D,
    level: Level,
    out: &'a mut Vec<Write>,
}

impl<'de, D: Deserializer<'de>> Deserializer<'de> for Filtered<'_, D> {
    type Error = D::Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
        self.inner.deserialize_any(FilteredVisitor { visitor, level: self.level, out: self.out })
    }
    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
        self.inner.deserialize_map(FilteredVisitor { visitor, level: self.level, out: self.out })
    }
    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.deserialize_map(visitor)
    }
    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
        self.inner.deserialize_option(FilteredVisitor { visitor, level: self.level, out: self.out })
    }
    fn is_human_readable(&self) -> bool {
        self.inner.is_human_readable()
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        unit unit_struct newtype_struct seq tuple tuple_struct enum identifier ignored_any
    }
}

/// Wraps the map it is given (directly or as an option's value); any other value is an error of
/// the type's own visitor.
struct FilteredVisitor<'a, V> {
    visitor: V,
    level: Level,
    out: &'a mut Vec<Write>,
}

impl<'de, V: Visitor<'de>> Visitor<'de> for FilteredVisitor<'_, V> {
    type Value = V::Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        self.visitor.expecting(f)
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<V::Value, A::Error> {
        self.visitor.visit_map(FilteredMap { map, level: self.level, out: self.out, value_is_metadata: false })
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<V::Value, D::Error> {
        self.visitor.visit_some(Filtered { inner: d, level: self.level, out: self.out })
    }
    fn visit_none<E: de::Error>(self) -> Result<V::Value, E> {
        self.visitor.visit_none()
    }
    fn visit_unit<E: de::Error>(self) -> Result<V::Value, E> {
        self.visitor.visit_unit()
    }
}

struct FilteredMap<'a, A> {
    map: A,
    level: Level,
    out: &'a mut Vec<Write>,
    value_is_metadata: bool,
}

impl<'de, A: MapAccess<'de>> MapAccess<'de> for FilteredMap<'_, A> {
    type Error = A::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>, A::Error> {
        loop {
            let Some(key) = self.map.next_key_seed(KeySeed)? else { return Ok(None) };
            if self.level == Level::Metadata && key == "managedFields" {
                *self.out = self.map.next_value_seed(WritersSeed)?;
                continue;
            }
            self.value_is_metadata = self.level == Level::Object && key == "metadata";
            return match key {
                Cow::Borrowed(k) => seed.deserialize(de::value::BorrowedStrDeserializer::new(k)),
                Cow::Owned(k) => seed.deserialize(de::value::StringDeserializer::new(k)),
            }
            .map(Some);
        }
    }

    fn next_value_seed<S: DeserializeSeed<'de>>(&mut self, seed: S) -> Result<S::Value, A::Error> {
        if self.value_is_metadata {
            self.map.next_value_seed(MetadataSeed { seed, out: &mut *self.out })
        } else {
            self.map.next_value_seed(seed)
        }
    }

    fn size_hint(&self) -> Option<usize> {
        self.map.size_hint()
    }
}

/// The object's metadata, filtered.
struct MetadataSeed<'a, S> {
    seed: S,
    out: &'a mut Vec<Write>,
}

impl<'de, S: DeserializeSeed<'de>> DeserializeSeed<'de> for MetadataSeed<'_, S> {
    type Value = S::Value;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<S::Value, D::Error> {
        self.seed.deserialize(Filtered { inner: d, level: Level::Metadata, out: self.out })
    }
}

/// A map key, borrowed from the input when it can be.
struct KeySeed;

impl<'de> DeserializeSeed<'de> for KeySeed {
    type Value = Cow<'de, str>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_str(KeySeed)
    }
}

impl<'de> Visitor<'de> for KeySeed {
    type Value = Cow<'de, str>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a string key")
    }
    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(Cow::Borrowed(v))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Cow::Owned(v.to_string()))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
        Ok(Cow::Owned(v))
    }
}

/// `managedFields`: null, or a list of entries.
struct WritersSeed;

impl<'de> DeserializeSeed<'de> for WritersSeed {
    type Value = Vec<Write>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(WritersSeed)
    }
}

impl<'de> Visitor<'de> for WritersSeed {
    type Value = Vec<Write>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a list of managedFields entries")
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(Vec::new())
    }
    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(Vec::new())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0));
        while let Some(w) = seq.next_element_seed(EntrySeed)? {
            out.push(w);
        }
        Ok(out)
    }
}

/// One `managedFields` entry, as its [`Write`].
struct EntrySeed;

impl<'de> DeserializeSeed<'de> for EntrySeed {
    type Value = Write;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Write, D::Error> {
        d.deserialize_map(EntrySeed)
    }
}

impl<'de> Visitor<'de> for EntrySeed {
    type Value = Write;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a managedFields entry")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Write, A::Error> {
        let mut w = Write::default();
        while let Some(key) = map.next_key_seed(KeySeed)? {
            match &*key {
                "manager" => w.manager = map.next_value()?,
                "operation" => w.update = map.next_value::<Option<Cow<'de, str>>>()?.as_deref() == Some("Update"),
                "time" => w.time = map.next_value::<Option<Time>>()?,
                "fieldsV1" => w.owns = map.next_value_seed(OwnedFields)?,
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(w)
    }
}

/// A `fieldsV1` tree, scanned for the `f:<field>` keys of binder-owned fields: their bits.
struct OwnedFields;

impl<'de> DeserializeSeed<'de> for OwnedFields {
    type Value = u8;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<u8, D::Error> {
        d.deserialize_any(OwnedFields)
    }
}

impl<'de> Visitor<'de> for OwnedFields {
    type Value = u8;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a fieldsV1 tree")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<u8, A::Error> {
        let mut bits = 0;
        while let Some(key) = map.next_key_seed(KeySeed)? {
            bits |= fields_v1_key_bit(&key);
            bits |= map.next_value_seed(OwnedFields)?;
        }
        Ok(bits)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<u8, A::Error> {
        let mut bits = 0;
        while let Some(b) = seq.next_element_seed(OwnedFields)? {
            bits |= b;
        }
        Ok(bits)
    }
    fn visit_unit<E: de::Error>(self) -> Result<u8, E> {
        Ok(0)
    }
    fn visit_none<E: de::Error>(self) -> Result<u8, E> {
        Ok(0)
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<u8, E> {
        Ok(0)
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<u8, E> {
        Ok(0)
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<u8, E> {
        Ok(0)
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<u8, E> {
        Ok(0)
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<u8, E> {
        Ok(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
    use kube::api::WatchEvent;
    use pv_model::annotations::BIND_COMPLETED;
    use pv_model::ownership;
    use serde_json::json;

    fn claim_json() -> serde_json::Value {
        json!({
            "apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {
                "name": "c", "namespace": "ns", "resourceVersion": "7", "uid": "u1",
                "annotations": {"pv.kubernetes.io/bind-completed": "yes", "managedFields": "an annotation, kept"},
                "managedFields": [
                    {"manager": "kubectl-create", "operation": "Update", "apiVersion": "v1",
                     "time": "2026-01-01T00:00:00Z", "fieldsType": "FieldsV1",
                     "fieldsV1": {"f:spec": {"f:accessModes": {}, "f:resources": {"f:requests": {".": {}, "f:storage": {}}}}}},
                    {"manager": "kube-controller-manager", "operation": "Update", "apiVersion": "v1",
                     "time": "2026-01-01T00:00:05Z", "fieldsType": "FieldsV1",
                     "fieldsV1": {"f:metadata": {"f:annotations": {".": {}, "f:pv.kubernetes.io/bind-completed": {}}}}},
                    {"manager": "kubectl-client-side-apply", "operation": "Apply", "apiVersion": "v1",
                     "time": "2026-01-01T00:00:09Z", "fieldsType": "FieldsV1",
                     "fieldsV1": {"f:metadata": {"f:annotations": {"f:pv.kubernetes.io/bind-completed": {}}}},
                     "subresource": "status"}
                ]
            },
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
            "status": {"phase": "Pending"}
        })
    }

    #[test]
    fn the_object_is_decoded_whole_but_for_its_managed_fields() {
        let text = serde_json::to_vec(&claim_json()).unwrap();
        let lean: Lean<PersistentVolumeClaim> = serde_json::from_slice(&text).unwrap();
        let mut full: PersistentVolumeClaim = serde_json::from_slice(&text).unwrap();
        let entries = full.metadata.managed_fields.take().unwrap();
        assert_eq!(lean.object, full, "everything but managedFields, the annotation of that name included");
        assert_eq!(lean.writers, entries.iter().map(Write::of).collect::<Vec<_>>());
        assert_eq!(lean.writers[1].manager.as_deref(), Some("kube-controller-manager"));
        assert!(!lean.writers[2].update);
        assert_ne!(lean.writers[1].owns, 0);
        assert_eq!(lean.writers[0].owns, 0);
    }

    #[test]
    fn the_writer_named_is_the_one_the_whole_managed_fields_name() {
        let lean: Lean<PersistentVolumeClaim> = serde_json::from_value(claim_json()).unwrap();
        let full: PersistentVolumeClaim = serde_json::from_value(claim_json()).unwrap();
        for fields in [&[BIND_COMPLETED][..], &["claimRef"], &[]] {
            assert_eq!(
                ownership::last_writer(&lean.writers, fields),
                ownership::last_writer(&ownership::writers(&full.metadata), fields)
            );
        }
        assert_eq!(
            ownership::last_writer(&lean.writers, &[BIND_COMPLETED]).as_deref(),
            Some("kube-controller-manager")
        );
    }

    #[test]
    fn watch_events_and_lists_decode_lean_in_either_key_order() {
        let claim = claim_json();
        for event in [json!({"type": "MODIFIED", "object": claim}), json!({"object": claim, "type": "MODIFIED"})] {
            let text = serde_json::to_string(&event).unwrap();
            let ev: WatchEvent<Lean<PersistentVolumeClaim>> = serde_json::from_str(&text).unwrap();
            let WatchEvent::Modified(lean) = ev else { panic!("not a MODIFIED event: {ev:?}") };
            assert!(lean.object.metadata.managed_fields.is_none());
            assert_eq!(lean.writers.len(), 3);
            assert_eq!(lean.object.metadata.resource_version.as_deref(), Some("7"));
        }
        let list = json!({"apiVersion": "v1", "kind": "PersistentVolumeList", "metadata": {"resourceVersion": "9"},
            "items": [{"metadata": {"name": "v", "managedFields": null}, "spec": {"capacity": {"storage": "1Gi"}}}]});
        let l: kube::core::ObjectList<Lean<PersistentVolume>> = serde_json::from_value(list).unwrap();
        assert_eq!(l.items[0].object.metadata.name.as_deref(), Some("v"));
        assert!(l.items[0].writers.is_empty());
    }

    #[test]
    fn a_wrong_type_is_still_an_error() {
        assert!(serde_json::from_value::<Lean<PersistentVolume>>(json!({"metadata": {"managedFields": 3}})).is_err());
        assert!(serde_json::from_value::<Lean<PersistentVolume>>(json!({"metadata": {"name": 3}})).is_err());
        assert!(serde_json::from_value::<Lean<PersistentVolume>>(json!([1])).is_err());
    }
}
