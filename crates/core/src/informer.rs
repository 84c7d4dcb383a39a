//! The informer core: what every adapter's list-and-watch feeds, whether it reads kube-apiserver
//! through kube-rs (`pv-kube`, `run`) or the store in the same process (`pv-local`, `up`).
//!
//! Why not kube-runtime's reflector store: the controller keeps its own caches (with the volume
//! index), so a second full copy of every object would only cost memory. What the handlers do
//! need from a store is one thing a raw watch does not give: after a relist (a 410 Gone, a
//! reconnect after the server restarted) objects deleted meanwhile are never reported. So each
//! [`Informer`] keeps a *tombstone* per known object — its key plus the few fields the `Deleted`
//! handler reads — and at the end of a relist reports every known object it did not contain.
//! [`Handles`] says which handler takes each kind, so both adapters dispatch alike.
//!
//! A relist hands on only what changed: an object listed again at the resourceVersion the
//! informer already knows is not delivered, as client-go's shared informer treats such a
//! `Replaced` delta as a sync (the controller's own resync period covers those). A feed that
//! cannot lose events and never relists (the store's watch in the same process) keeps no
//! tombstones at all: [`Informer::never_relisting`].

use crate::cache::ObjectEvent;
use crate::controller::Controller;
use crate::protection::Protection;
use pv_model::k8s::{
    Node, ObjectMeta, ObjectReference, PersistentVolume, PersistentVolumeClaim, PersistentVolumeClaimSpec,
    PersistentVolumeSpec, Pod, StorageClass,
};
use pv_model::ObjectKey;
use std::collections::{HashMap, HashSet};

/// What a list-and-watch reports, one step at a time.
#[derive(Debug)]
pub enum Step<K> {
    /// A (re)list begins.
    Listing,
    /// An object listed, added or modified.
    Applied(K),
    /// An object the watch saw deleted.
    Deleted(K),
    /// The list is complete; the watch follows from its version.
    Listed,
}

/// Something that takes the events of kind `K`.
pub trait Handles<K>: Send + Sync + 'static {
    /// One event.
    fn handle(&self, ev: ObjectEvent<K>);
}

macro_rules! handles {
    ($on:ty: $($k:ty => $method:ident),*) => {$(
        impl Handles<$k> for $on {
            fn handle(&self, ev: ObjectEvent<$k>) {
                self.$method(ev)
            }
        }
    )*};
}
handles!(Controller: PersistentVolume => on_volume, PersistentVolumeClaim => on_claim,
    StorageClass => on_class, Pod => on_pod, Node => on_node);
handles!(Protection: PersistentVolume => on_volume, PersistentVolumeClaim => on_claim, Pod => on_pod);

/// What a `Deleted` handler needs of an object that vanished while the watch was down: its
/// identity, and for volumes and claims the link between them (a volume's claimRef namespace,
/// name and uid; a claim's `spec.volumeName`). Kept per known object, so it is one allocation of
/// its fields joined by newlines (~100 bytes) rather than a copy: a `PersistentVolume` alone is
/// 3.4 KB inline, and even separate `String`s cost several hundred bytes per object.
#[derive(Clone, Debug, Default)]
pub struct Remains(Box<str>);

/// The fields of [`Remains`], in order.
const NAME: usize = 0;
const NAMESPACE: usize = 1;
const UID: usize = 2;
const RESOURCE_VERSION: usize = 3;
const LINK_NAMESPACE: usize = 4;
const LINK_NAME: usize = 5;
const LINK_UID: usize = 6;

impl Remains {
    fn of(m: &ObjectMeta, link: Option<&ObjectReference>) -> Self {
        let l = |f: fn(&ObjectReference) -> &Option<String>| link.and_then(|r| f(r).as_deref()).unwrap_or("");
        let fields = [
            m.name.as_deref().unwrap_or(""),
            m.namespace.as_deref().unwrap_or(""),
            m.uid.as_deref().unwrap_or(""),
            m.resource_version.as_deref().unwrap_or(""),
            l(|r| &r.namespace),
            l(|r| &r.name),
            l(|r| &r.uid),
        ];
        Remains(fields.join("\n").into())
    }

    /// Field `i`; `None` when it was unset or empty.
    fn field(&self, i: usize) -> Option<String> {
        self.0.split('\n').nth(i).filter(|f| !f.is_empty()).map(str::to_string)
    }

    fn meta(&self) -> ObjectMeta {
        ObjectMeta {
            name: self.field(NAME),
            namespace: self.field(NAMESPACE),
            uid: self.field(UID),
            resource_version: self.field(RESOURCE_VERSION),
            ..Default::default()
        }
    }

    /// The link as a reference, when there is one.
    fn link(&self) -> Option<ObjectReference> {
        let name = self.field(LINK_NAME)?;
        Some(ObjectReference {
            namespace: self.field(LINK_NAMESPACE),
            name: Some(name),
            uid: self.field(LINK_UID),
            ..Default::default()
        })
    }
}

/// Objects the informers keep remains of.
pub trait Tombstone: Sized {
    /// The object's metadata (its key is read from it).
    fn metadata(&self) -> &ObjectMeta;
    /// Identity plus the fields the delete handler reads.
    fn remains(&self) -> Remains;
    /// The object a `Deleted` event carries, rebuilt from its remains.
    fn revive(r: &Remains) -> Self;
}

impl Tombstone for PersistentVolume {
    fn metadata(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn remains(&self) -> Remains {
        Remains::of(&self.metadata, self.spec.as_ref().and_then(|s| s.claim_ref.as_ref()))
    }
    fn revive(r: &Remains) -> Self {
        PersistentVolume {
            metadata: r.meta(),
            spec: Some(PersistentVolumeSpec { claim_ref: r.link(), ..Default::default() }),
            status: None,
        }
    }
}

impl Tombstone for PersistentVolumeClaim {
    fn metadata(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn remains(&self) -> Remains {
        let volume = self.spec.as_ref().and_then(|s| s.volume_name.clone());
        Remains::of(&self.metadata, volume.map(|v| ObjectReference { name: Some(v), ..Default::default() }).as_ref())
    }
    fn revive(r: &Remains) -> Self {
        PersistentVolumeClaim {
            metadata: r.meta(),
            spec: Some(PersistentVolumeClaimSpec { volume_name: r.link().and_then(|l| l.name), ..Default::default() }),
            status: None,
        }
    }
}

macro_rules! tombstone_by_meta {
    ($($t:ty),*) => {$(
        impl Tombstone for $t {
            fn metadata(&self) -> &ObjectMeta {
                &self.metadata
            }
            fn remains(&self) -> Remains {
                Remains::of(&self.metadata, None)
            }
            fn revive(r: &Remains) -> Self {
                let mut t = <$t>::default();
                t.metadata = r.meta();
                t
            }
        }
    )*};
}
tombstone_by_meta!(StorageClass, Pod, Node);

/// One kind's informer, whichever adapter feeds it: the remains of every known object, and the
/// keys a relist in progress has seen. It turns what a list-and-watch reports into the events the
/// handlers take, adding a `Deleted` for each known object a relist no longer contains.
pub struct Informer<K> {
    objects: HashMap<Box<str>, Remains>,
    relist: Option<HashSet<ObjectKey>>,
    listed_once: bool,
    /// False for a feed that never relists: then no remains are kept.
    tombstones: bool,
    kind: std::marker::PhantomData<K>,
}

impl<K: Tombstone> Default for Informer<K> {
    fn default() -> Self {
        Informer {
            objects: HashMap::new(),
            relist: None,
            listed_once: false,
            tombstones: true,
            kind: std::marker::PhantomData,
        }
    }
}

impl<K: Tombstone> Informer<K> {
    /// An informer that knows no object yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// An informer for a feed that lists once and then never misses an event (the store's own
    /// watch, in the same process): it keeps no remains, as it will never need them.
    pub fn never_relisting() -> Self {
        Informer { tombstones: false, ..Self::default() }
    }

    /// How many objects it knows.
    pub fn len(&self) -> usize {
        self.objects.len()
    }

    /// True when it knows no object.
    pub fn is_empty(&self) -> bool {
        self.objects.is_empty()
    }

    /// Takes one step of the list-and-watch and hands `deliver` what the handlers should see.
    /// Returns true at the end of the first complete list (the kind is synced).
    pub fn step(&mut self, step: Step<K>, mut deliver: impl FnMut(ObjectEvent<K>)) -> bool {
        match step {
            Step::Listing => {
                debug_assert!(self.tombstones || !self.listed_once, "a feed said never to relist relisted");
                self.relist = Some(HashSet::new())
            }
            Step::Applied(o) => {
                if self.tombstones {
                    let key = ObjectKey::of(o.metadata());
                    let rv = o.metadata().resource_version.as_deref().filter(|v| !v.is_empty());
                    let known = self.objects.insert(key.as_str().into(), o.remains());
                    if let Some(seen) = self.relist.as_mut() {
                        seen.insert(key);
                        if rv.is_some() && known.is_some_and(|r| r.field(RESOURCE_VERSION).as_deref() == rv) {
                            return false;
                        }
                    }
                }
                deliver(ObjectEvent::Applied(o));
            }
            Step::Deleted(o) => {
                if self.tombstones {
                    self.objects.remove(ObjectKey::of(o.metadata()).as_str());
                }
                deliver(ObjectEvent::Deleted(o));
            }
            Step::Listed => {
                for o in self.relisted() {
                    deliver(ObjectEvent::Deleted(o));
                }
                return !std::mem::replace(&mut self.listed_once, true);
            }
        }
        false
    }

    /// Ends a relist: the tombstones of every known object it did not contain.
    fn relisted(&mut self) -> Vec<K> {
        let Some(seen) = self.relist.take() else {
            return Vec::new();
        };
        let gone: Vec<Box<str>> = self.objects.keys().filter(|k| !seen.contains(&***k)).cloned().collect();
        gone.iter().filter_map(|k| self.objects.remove(k)).map(|r| K::revive(&r)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pv(name: &str, claim: Option<&str>) -> PersistentVolume {
        PersistentVolume {
            metadata: ObjectMeta {
                name: Some(name.into()),
                annotations: Some([("big".to_string(), "x".repeat(100))].into()),
                ..Default::default()
            },
            spec: Some(PersistentVolumeSpec {
                claim_ref: claim.map(|c| ObjectReference {
                    namespace: Some("ns".into()),
                    name: Some(c.into()),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            status: None,
        }
    }

    /// Runs `steps` and returns the deletions delivered, and whether the last step synced.
    fn run(k: &mut Informer<PersistentVolume>, steps: Vec<Step<PersistentVolume>>) -> (Vec<PersistentVolume>, bool) {
        let mut deleted = Vec::new();
        let mut synced = false;
        for s in steps {
            synced = k.step(s, |e| {
                if let ObjectEvent::Deleted(v) = e {
                    deleted.push(v)
                }
            });
        }
        (deleted, synced)
    }

    #[test]
    fn relist_reports_objects_that_vanished_while_the_watch_was_down() {
        let mut k = Informer::<PersistentVolume>::new();
        let (gone, synced) = run(
            &mut k,
            vec![Step::Listing, Step::Applied(pv("a", Some("c1"))), Step::Applied(pv("b", None)), Step::Listed],
        );
        assert!(gone.is_empty() && synced, "the first list syncs the kind");
        let (gone, synced) = run(&mut k, vec![Step::Listing, Step::Applied(pv("b", None)), Step::Listed]);
        assert!(!synced, "only the first list syncs");
        assert_eq!(gone.len(), 1);
        assert_eq!(gone[0].metadata.name.as_deref(), Some("a"));
        let claim = gone[0].spec.as_ref().unwrap().claim_ref.as_ref().unwrap();
        assert_eq!(claim.name.as_deref(), Some("c1"), "tombstone keeps claimRef");
        assert_eq!(claim.namespace.as_deref(), Some("ns"));
        assert!(gone[0].metadata.annotations.is_none(), "tombstone is small");
        assert_eq!(k.len(), 1);
    }

    #[test]
    fn claim_remains_keep_identity_and_the_volume_name() {
        let c = PersistentVolumeClaim {
            metadata: ObjectMeta {
                name: Some("c".into()),
                namespace: Some("ns".into()),
                uid: Some("u".into()),
                labels: Some([("a".to_string(), "b".to_string())].into()),
                ..Default::default()
            },
            spec: Some(PersistentVolumeClaimSpec { volume_name: Some("v".into()), ..Default::default() }),
            status: None,
        };
        let back = PersistentVolumeClaim::revive(&c.remains());
        assert_eq!(back.spec.unwrap().volume_name.as_deref(), Some("v"));
        assert_eq!((back.metadata.namespace.as_deref(), back.metadata.uid.as_deref()), (Some("ns"), Some("u")));
        assert!(back.metadata.labels.is_none());
    }

    fn at(mut v: PersistentVolume, rv: &str) -> PersistentVolume {
        v.metadata.resource_version = Some(rv.into());
        v
    }

    #[test]
    fn a_relist_delivers_only_what_changed() {
        let mut k = Informer::<PersistentVolume>::new();
        let mut applied = Vec::new();
        let steps =
            [Step::Listing, Step::Applied(at(pv("a", None), "1")), Step::Applied(at(pv("b", None), "2")), Step::Listed];
        for s in steps {
            k.step(s, |e| applied.extend(matches!(e, ObjectEvent::Applied(_)).then_some(())));
        }
        assert_eq!(applied.len(), 2, "the first list delivers everything");
        let mut names = Vec::new();
        for s in
            [Step::Listing, Step::Applied(at(pv("a", None), "1")), Step::Applied(at(pv("b", None), "3")), Step::Listed]
        {
            k.step(s, |e| {
                if let ObjectEvent::Applied(v) = e {
                    names.push(v.metadata.name.unwrap())
                }
            });
        }
        assert_eq!(names, ["b"], "a at the version already known is not delivered again");
        let (gone, _) = run(&mut k, vec![Step::Listing, Step::Applied(at(pv("b", None), "3")), Step::Listed]);
        assert_eq!(gone.len(), 1, "an object skipped as unchanged is still known, and its deletion seen");
    }

    #[test]
    fn a_feed_that_never_relists_keeps_nothing() {
        let mut k = Informer::<PersistentVolume>::never_relisting();
        let (_, synced) = run(&mut k, vec![Step::Listing, Step::Applied(pv("a", None)), Step::Listed]);
        assert!(synced);
        let (gone, _) = run(&mut k, vec![Step::Deleted(pv("a", None))]);
        assert_eq!(gone.len(), 1, "the watch's deletion is still delivered");
        let (_, _) = run(&mut k, vec![Step::Applied(pv("b", None))]);
        assert!(k.is_empty(), "no remains are kept");
    }

    #[test]
    fn watch_deletes_forget_the_object() {
        let mut k = Informer::<PersistentVolume>::new();
        let (gone, _) = run(&mut k, vec![Step::Applied(pv("a", None)), Step::Deleted(pv("a", None))]);
        assert_eq!(gone.len(), 1, "the watch's own deletion is delivered");
        let (gone, _) = run(&mut k, vec![Step::Listing, Step::Listed]);
        assert!(gone.is_empty(), "and not reported again by a relist");
        assert!(k.is_empty());
    }
}
