//! Objects kept as their JSON bytes and decoded when read.
//!
//! Why: the controller caches every PV and PVC of the cluster, and k8s-openapi's typed objects
//! are large in memory: a `PersistentVolume` is 3.4 KB inline before any string or map (each of
//! its ~25 volume sources is an inline `Option`), ~5.6 KB with its maps, against ~0.7 KB as JSON.
//! The caches keep the bytes and the few fields they index by; a read decodes (a few µs), which
//! is small next to the API round trip every sync exists to make.

use serde::de::DeserializeOwned;
use serde::Serialize;
use std::marker::PhantomData;
use std::sync::Arc;

/// A `T` stored as JSON.
pub struct Packed<T> {
    json: Box<[u8]>,
    kind: PhantomData<fn() -> T>,
}

impl<T: Serialize + DeserializeOwned> Packed<T> {
    /// Packs `value` into an allocation of exactly its size. The JSON is written into a buffer
    /// kept per thread and then copied: a `Vec` grown while serializing has up to twice the
    /// capacity it needs, and shrinking it in place (`into_boxed_slice`) leaves the allocator's
    /// block as large as it was (mimalloc keeps a block that shrinks by less than half), which
    /// for a 700-byte volume wasted ~300 bytes of every cached object.
    pub fn new(value: &T) -> Self {
        thread_local!(static BUF: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) });
        let json = BUF.with_borrow_mut(|buf| {
            buf.clear();
            serde_json::to_writer(&mut *buf, value).expect("Kubernetes objects serialize to JSON");
            let json = Box::<[u8]>::from(buf.as_slice());
            if buf.capacity() > 1 << 16 {
                // Not kept at the size of a rare large object.
                *buf = Vec::new();
            }
            json
        });
        Packed { json, kind: PhantomData }
    }

    /// Decodes a fresh copy.
    pub fn get(&self) -> Arc<T> {
        Arc::new(serde_json::from_slice(&self.json).expect("bytes packed from this type decode as it"))
    }

    /// Bytes held.
    pub fn len(&self) -> usize {
        self.json.len()
    }

    /// True when nothing is held (never, for an object).
    pub fn is_empty(&self) -> bool {
        self.json.is_empty()
    }
}

impl<T> std::fmt::Debug for Packed<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Packed({} bytes)", self.json.len())
    }
}

impl<T> Clone for Packed<T> {
    fn clone(&self) -> Self {
        Packed { json: self.json.clone(), kind: PhantomData }
    }
}

/// An object as a cache holds it: shared while it is in motion, packed once it is at rest.
///
/// Objects the controller is working on (a claim waiting for a volume, a volume that is
/// Available) are read on every sync and are kept as one shared `Arc`, so readers share them;
/// objects at rest (Bound) are read only by the periodic resync and are kept packed, which is
/// where almost every object of a large cluster is.
#[derive(Clone, Debug)]
pub enum Held<T> {
    /// Shared as is.
    Shared(Arc<T>),
    /// Packed as JSON.
    Packed(Packed<T>),
}

impl<T: Serialize + DeserializeOwned> Held<T> {
    /// Holds `value` packed when `at_rest`, shared otherwise.
    pub fn new(value: Arc<T>, at_rest: bool) -> Self {
        if at_rest {
            Held::Packed(Packed::new(&*value))
        } else {
            Held::Shared(value)
        }
    }

    /// The object: the shared one, or a decoded copy.
    pub fn get(&self) -> Arc<T> {
        match self {
            Held::Shared(v) => v.clone(),
            Held::Packed(p) => p.get(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::k8s::{ObjectMeta, PersistentVolume};

    #[test]
    fn a_packed_volume_decodes_to_what_was_packed_and_is_small() {
        let v = PersistentVolume {
            metadata: ObjectMeta { name: Some("a".into()), resource_version: Some("7".into()), ..Default::default() },
            ..Default::default()
        };
        let p = Packed::new(&v);
        assert_eq!(*p.get(), v);
        assert!(p.len() < 100, "{} bytes", p.len());
    }
}
