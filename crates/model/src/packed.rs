//! Objects kept as compressed JSON and decoded when read.
//!
//! Why: the controller caches every PV and PVC of the cluster, and k8s-openapi's typed objects
//! are large in memory: a `PersistentVolume` is 3.4 KB inline before any string or map (each of
//! its ~25 volume sources is an inline `Option`), ~5.6 KB with its maps, against ~0.7-0.9 KB as
//! JSON. The caches keep the bytes and the few fields they index by; a read decodes (a few µs),
//! which is small next to the API round trip every sync exists to make.
//!
//! The JSON itself is kept as an LZ4 block compressed against a dictionary per cache
//! ([`Dictionary`], owned by the cache that holds the objects): the first object it packs.
//! Objects of one kind in one cluster share most of their text (every key, the API versions, finalizers, annotations, class and driver names, name
//! prefixes), so a packed object keeps about a fifth of its JSON: mostly what is unique to it (its
//! name, UIDs, versions and timestamps). `run` holding 100,000 bound pairs fell from 365 to 239 MB
//! (BENCHMARKS.md, "Packed objects: exactly sized, then compressed"). An object is packed when it
//! comes to rest and read rarely after; the simulation, which packs every object that becomes
//! Bound, took the same time with it.

use serde::de::DeserializeOwned;
use serde::Serialize;
use std::cell::RefCell;
use std::marker::PhantomData;
use std::sync::{Arc, OnceLock};

/// The compression dictionary of one cache's packed objects: the first object the cache packs.
/// Owned by the cache, so caches of different clusters in one process (simulations, tests) each
/// compress against an object of their own, and a packed object is read only with the
/// dictionary it was packed against.
#[derive(Clone, Debug, Default)]
pub struct Dictionary(OnceLock<Box<[u8]>>);

impl Dictionary {
    /// The dictionary's bytes, once an object was packed.
    pub fn bytes(&self) -> Option<&[u8]> {
        self.0.get().map(|b| &**b)
    }
}

thread_local! {
    /// Where objects are serialized before they are compressed (kept, so packing allocates only
    /// the result, at exactly its size).
    static BUF: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// A `T` stored as JSON, compressed against its cache's [`Dictionary`].
pub struct Packed<T> {
    lz4: Box<[u8]>,
    kind: PhantomData<fn() -> T>,
}

impl<T: Serialize + DeserializeOwned> Packed<T> {
    /// Packs `value`. The result is allocated at exactly its size: a `Vec` shrunk in place keeps
    /// the allocator's larger block (mimalloc keeps a block that shrinks by less than half).
    pub fn new(value: &T, dictionary: &Dictionary) -> Self {
        let lz4 = BUF.with_borrow_mut(|buf| {
            buf.clear();
            serde_json::to_writer(&mut *buf, value).expect("Kubernetes objects serialize to JSON");
            // LZ4 reaches back 64 KiB at most: more of a large first object would be dead weight.
            let dict = dictionary.0.get_or_init(|| buf[..buf.len().min(1 << 16)].into());
            let lz4 = lz4_flex::block::compress_prepend_size_with_dict(buf, dict);
            // Copied, not shrunk in place, for the same reason as the JSON (the compressor's
            // output is sized for the worst case).
            let lz4 = Box::<[u8]>::from(lz4.as_slice());
            if buf.capacity() > 1 << 16 {
                // Not kept at the size of a rare large object.
                *buf = Vec::new();
            }
            lz4
        });
        Packed { lz4, kind: PhantomData }
    }

    /// Decodes a fresh copy; `dictionary` is the one it was packed against.
    pub fn get(&self, dictionary: &Dictionary) -> Arc<T> {
        let dict = dictionary.bytes().expect("a dictionary is set before anything is packed");
        let json = lz4_flex::block::decompress_size_prepended_with_dict(&self.lz4, dict)
            .expect("bytes packed in this process decompress");
        Arc::new(serde_json::from_slice(&json).expect("bytes packed from this type decode as it"))
    }

    /// Bytes held.
    pub fn len(&self) -> usize {
        self.lz4.len()
    }

    /// True when nothing is held (never, for an object).
    pub fn is_empty(&self) -> bool {
        self.lz4.is_empty()
    }
}

impl<T> std::fmt::Debug for Packed<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Packed({} bytes)", self.lz4.len())
    }
}

impl<T> Clone for Packed<T> {
    fn clone(&self) -> Self {
        Packed { lz4: self.lz4.clone(), kind: PhantomData }
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
    /// Holds `value` packed (against the cache's `dictionary`) when `at_rest`, shared otherwise.
    pub fn new(value: Arc<T>, at_rest: bool, dictionary: &Dictionary) -> Self {
        if at_rest {
            Held::Packed(Packed::new(&*value, dictionary))
        } else {
            Held::Shared(value)
        }
    }

    /// The object: the shared one, or a copy decoded with the cache's `dictionary`.
    pub fn get(&self, dictionary: &Dictionary) -> Arc<T> {
        match self {
            Held::Shared(v) => v.clone(),
            Held::Packed(p) => p.get(dictionary),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::k8s::{ObjectMeta, PersistentVolume};

    fn volume(name: &str, uid: &str) -> PersistentVolume {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "uid": uid, "resourceVersion": "7",
                         "annotations": {"pv.kubernetes.io/bound-by-controller": "yes"},
                         "finalizers": ["kubernetes.io/pv-protection"]},
            "spec": {"accessModes": ["ReadWriteOnce"], "capacity": {"storage": "1Gi"},
                     "claimRef": {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "namespace": "ns",
                                  "name": format!("claim-of-{name}"), "uid": format!("claim-{uid}")},
                     "csi": {"driver": "csi.example.com", "volumeHandle": format!("handle-{name}")},
                     "persistentVolumeReclaimPolicy": "Delete", "storageClassName": "standard"},
            "status": {"phase": "Bound"}
        }))
        .unwrap()
    }

    #[test]
    fn packed_volumes_decode_to_what_was_packed_and_share_their_caches_text() {
        let dict = Dictionary::default();
        let first = Packed::new(&volume("a", "0b7e3c6a-0001"), &dict);
        let v = volume("volume-b", "9f1d2e4c-0002");
        let json = serde_json::to_vec(&v).unwrap().len();
        let p = Packed::new(&v, &dict);
        assert_eq!(*p.get(&dict), v);
        assert_eq!(*first.get(&dict), volume("a", "0b7e3c6a-0001"));
        assert!(p.len() * 3 < json, "{} bytes packed of {json}", p.len());
        let odd = PersistentVolume {
            metadata: ObjectMeta { name: Some("odd".into()), ..Default::default() },
            ..Default::default()
        };
        assert_eq!(*Packed::new(&odd, &dict).get(&dict), odd, "an object unlike the dictionary packs too");
    }

    #[test]
    fn each_cache_compresses_against_the_first_object_it_packs() {
        let (one, two) = (Dictionary::default(), Dictionary::default());
        let odd = PersistentVolume {
            metadata: ObjectMeta { name: Some("odd".into()), ..Default::default() },
            ..Default::default()
        };
        Packed::new(&odd, &one);
        let v = volume("a", "0b7e3c6a-0001");
        let in_two = Packed::new(&v, &two);
        assert_eq!(two.bytes().unwrap(), serde_json::to_vec(&v).unwrap().as_slice(), "not the other cache's object");
        assert_eq!(one.bytes().unwrap(), serde_json::to_vec(&odd).unwrap().as_slice());
        let w = volume("volume-b", "9f1d2e4c-0002");
        assert!(Packed::new(&w, &two).len() < Packed::new(&w, &one).len(), "a cache of volumes packs volumes smaller");
        assert_eq!(*in_two.get(&two), v);
    }
}
