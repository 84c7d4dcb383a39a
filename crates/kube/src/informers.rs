//! Watches that feed the controller's handlers: one kube-runtime watcher per kind.
//!
//! Why not kube-runtime's reflector store: the controller keeps its own caches (with the volume
//! index), so a second full copy of every object would only cost memory. What the handlers do
//! need from a store is one thing a raw watch does not give: after a relist (a 410 Gone, a
//! reconnect after the server restarted) objects deleted meanwhile are never reported. So each
//! watch keeps a *tombstone* per known object — its name plus the few fields the `Deleted`
//! handler reads — and on `InitDone` reports every known object the relist did not contain.
//!
//! The watcher resumes from the last resourceVersion, relists on 410, and retries with
//! exponential backoff; every stream runs in its own tracing span.

use futures_util::StreamExt;
use k8s_openapi::api::core::v1::{
    Node, ObjectReference, PersistentVolume, PersistentVolumeClaim, PersistentVolumeClaimSpec, PersistentVolumeSpec,
    Pod,
};
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::runtime::watcher::{self, watcher, Event};
use kube::runtime::WatchStreamExt;
use kube::{Api, Client, Resource};
use pv_core::{Controller, ObjectEvent};
use pv_model::ObjectKey;
use serde::de::DeserializeOwned;
use std::collections::{HashMap, HashSet};
use std::fmt::Debug;
use std::sync::Arc;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tracing::Instrument;

/// Kinds watched: PV, PVC, StorageClass, Pod, Node.
pub const KINDS: usize = 5;

/// The running watches.
pub struct Informers {
    synced: watch::Receiver<usize>,
    tasks: Vec<JoinHandle<()>>,
}

impl Informers {
    /// Resolves once every kind has completed its initial list.
    pub async fn wait_synced(&self) {
        let mut rx = self.synced.clone();
        let _ = rx.wait_for(|n| *n >= KINDS).await;
    }

    /// True once every kind has completed its initial list.
    pub fn is_synced(&self) -> bool {
        *self.synced.borrow() >= KINDS
    }

    /// A receiver of how many kinds have synced (for readiness checks elsewhere).
    pub fn synced_receiver(&self) -> watch::Receiver<usize> {
        self.synced.clone()
    }

    /// Stops every watch.
    pub fn stop(&self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

impl Drop for Informers {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Starts watching PVs, PVCs, StorageClasses, Pods and Nodes cluster-wide, delivering to
/// `controller`'s handlers.
pub fn start_informers(client: Client, controller: Arc<Controller>) -> Informers {
    let (tx, rx) = watch::channel(0usize);
    let tx = Arc::new(tx);
    let c = controller;
    let tasks = vec![
        spawn_watch::<PersistentVolume>(client.clone(), tx.clone(), {
            let c = c.clone();
            move |e| c.on_volume(e)
        }),
        spawn_watch::<PersistentVolumeClaim>(client.clone(), tx.clone(), {
            let c = c.clone();
            move |e| c.on_claim(e)
        }),
        spawn_watch::<StorageClass>(client.clone(), tx.clone(), {
            let c = c.clone();
            move |e| c.on_class(e)
        }),
        spawn_watch::<Pod>(client.clone(), tx.clone(), {
            let c = c.clone();
            move |e| c.on_pod(e)
        }),
        spawn_watch::<Node>(client, tx, move |e| c.on_node(e)),
    ];
    Informers { synced: rx, tasks }
}

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
    /// Identity plus the fields the delete handler reads.
    fn remains(&self) -> Remains;
    /// The object a `Deleted` event carries, rebuilt from its remains.
    fn revive(r: &Remains) -> Self;
}

impl Tombstone for PersistentVolume {
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

fn key_of<K: Resource>(o: &K) -> ObjectKey {
    ObjectKey::of(o.meta())
}

/// Per-kind bookkeeping: remains of known objects and the keys seen by a relist in progress.
struct Known<K> {
    objects: HashMap<Box<str>, Remains>,
    relist: Option<HashSet<ObjectKey>>,
    kind: std::marker::PhantomData<K>,
}

impl<K: Resource + Tombstone> Known<K> {
    fn new() -> Self {
        Known { objects: HashMap::new(), relist: None, kind: std::marker::PhantomData }
    }

    fn applied(&mut self, o: &K) {
        let key = key_of(o);
        if let Some(seen) = self.relist.as_mut() {
            seen.insert(key.clone());
        }
        self.objects.insert(key.as_str().into(), o.remains());
    }

    fn deleted(&mut self, o: &K) {
        self.objects.remove(key_of(o).as_str());
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

fn spawn_watch<K>(
    client: Client,
    synced: Arc<watch::Sender<usize>>,
    deliver: impl Fn(ObjectEvent<K>) + Send + 'static,
) -> JoinHandle<()>
where
    K: Resource<DynamicType = ()> + Tombstone + Clone + DeserializeOwned + Debug + Send + 'static,
{
    let kind = K::kind(&()).to_string();
    let span = tracing::info_span!("watch", kind = %kind);
    let api: Api<K> = Api::all(client);
    tokio::spawn(
        async move {
            let stream = watcher(api, watcher::Config::default()).default_backoff();
            futures_util::pin_mut!(stream);
            let mut known = Known::<K>::new();
            let mut first_sync = true;
            while let Some(ev) = stream.next().await {
                match ev {
                    Ok(Event::Apply(o)) | Ok(Event::InitApply(o)) => {
                        known.applied(&o);
                        deliver(ObjectEvent::Applied(crate::api::trimmed(o)));
                    }
                    Ok(Event::Delete(o)) => {
                        known.deleted(&o);
                        deliver(ObjectEvent::Deleted(o));
                    }
                    Ok(Event::Init) => known.relist = Some(HashSet::new()),
                    Ok(Event::InitDone) => {
                        let gone = known.relisted();
                        tracing::debug!(objects = known.objects.len(), vanished = gone.len(), "list complete");
                        for o in gone {
                            deliver(ObjectEvent::Deleted(o));
                        }
                        if std::mem::take(&mut first_sync) {
                            tracing::info!(objects = known.objects.len(), "synced");
                            synced.send_modify(|n| *n += 1);
                        }
                    }
                    Err(e) => tracing::warn!(error = %e, "watch failed, retrying"),
                }
            }
        }
        .instrument(span),
    )
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

    #[test]
    fn relist_reports_objects_that_vanished_while_the_watch_was_down() {
        let mut k = Known::<PersistentVolume>::new();
        k.applied(&pv("a", Some("c1")));
        k.applied(&pv("b", None));
        k.relist = Some(HashSet::new());
        k.applied(&pv("b", None));
        let gone = k.relisted();
        assert_eq!(gone.len(), 1);
        assert_eq!(gone[0].metadata.name.as_deref(), Some("a"));
        let claim = gone[0].spec.as_ref().unwrap().claim_ref.as_ref().unwrap();
        assert_eq!(claim.name.as_deref(), Some("c1"), "tombstone keeps claimRef");
        assert_eq!(claim.namespace.as_deref(), Some("ns"));
        assert!(gone[0].metadata.annotations.is_none(), "tombstone is small");
        assert_eq!(k.objects.len(), 1);
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

    #[test]
    fn watch_deletes_forget_the_object() {
        let mut k = Known::<PersistentVolume>::new();
        k.applied(&pv("a", None));
        k.deleted(&pv("a", None));
        k.relist = Some(HashSet::new());
        assert!(k.relisted().is_empty());
    }
}
