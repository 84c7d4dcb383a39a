//! In-process informers: every watched kind listed from the store into the controller's caches,
//! then followed through the store's watches, through the same informer core as `run`'s.
//! [`list_into`] and [`step_of`] are the pieces the simulator's fault-injecting informers reuse;
//! [`deliver`] hands a single JSON event over by resource name (the simulator's early delivery).

use k8s_openapi::Resource;
use pv_core::informer::{Handles, Informer, Step, Tombstone};
use pv_core::{Controller, ObjectEvent, Protection};
use pv_model::k8s::{Node, PersistentVolume, PersistentVolumeClaim, Pod, StorageClass};
use pv_store::{Object, Store, WatchEvent, WatchEventType};
use serde::de::DeserializeOwned;
use std::sync::Arc;
use tokio::task::JoinHandle;

/// The running in-process watches; dropping them stops delivery.
pub struct LocalInformers {
    tasks: Vec<JoinHandle<()>>,
}

impl Drop for LocalInformers {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// Lists one kind from `store` into `to` through the informer core, then follows its changes
/// from the version of its list. On return the list is delivered. A store watch is an unbounded
/// channel registered at the list's version, so no change is skipped and none needs a relist
/// (so the informer keeps no tombstones); the core is the same one `run`'s kube-rs watches feed.
fn follow<K, H>(store: &Store, to: &Arc<H>) -> JoinHandle<()>
where
    K: Resource + Tombstone + DeserializeOwned + Send + 'static,
    H: Handles<K>,
{
    let mut informer = Informer::<K>::never_relisting();
    let rv = list_into(store, &mut informer, |e| to.handle(e));
    let mut watch = store.watch(K::URL_PATH_SEGMENT, None, Some(rv)).expect("a version the store just reported");
    let to = to.clone();
    tokio::spawn(async move {
        while let Some(ev) = watch.recv().await {
            if let Some(step) = step_of::<K>(&ev) {
                informer.step(step, |e| to.handle(e));
            }
        }
    })
}

/// Lists kind `K` from `store` through `informer` (a first list or a relist), handing `deliver`
/// what the handlers should see. Returns the list's resourceVersion, to watch from.
pub fn list_into<K>(store: &Store, informer: &mut Informer<K>, mut deliver: impl FnMut(ObjectEvent<K>)) -> u64
where
    K: Resource + Tombstone + DeserializeOwned,
{
    let resource = K::URL_PATH_SEGMENT;
    let (items, rv) = store.list(resource, &Default::default()).expect("a watched kind the store serves");
    informer.step(Step::Listing, &mut deliver);
    for obj in &items {
        if let Some(o) = decoded::<K>(resource, obj) {
            informer.step(Step::Applied(o), &mut deliver);
        }
    }
    informer.step(Step::Listed, &mut deliver);
    rv
}

/// A store watch event as the informer core's step (`None`, logged, if it does not decode).
pub fn step_of<K: Resource + DeserializeOwned>(ev: &WatchEvent) -> Option<Step<K>> {
    let o = decoded::<K>(K::URL_PATH_SEGMENT, &ev.object)?;
    Some(if ev.kind == WatchEventType::Deleted { Step::Deleted(o) } else { Step::Applied(o) })
}

/// Lists every watched kind into `controller`'s caches and follows their changes: on return the
/// caches are synced. Kinds in [`pv_core::WATCHED_KINDS`]'s order.
pub fn start(store: &Store, controller: &Arc<Controller>) -> LocalInformers {
    let tasks = vec![
        follow::<StorageClass, _>(store, controller),
        follow::<Node, _>(store, controller),
        follow::<Pod, _>(store, controller),
        follow::<PersistentVolume, _>(store, controller),
        follow::<PersistentVolumeClaim, _>(store, controller),
    ];
    LocalInformers { tasks }
}

/// Feeds the pv- and pvc-protection controllers from the store as [`start`] feeds the binder:
/// pods first, so that a claim is never judged unused for want of its pods.
pub fn start_protection(store: &Store, protection: &Arc<Protection>) -> LocalInformers {
    let tasks = vec![
        follow::<Pod, _>(store, protection),
        follow::<PersistentVolume, _>(store, protection),
        follow::<PersistentVolumeClaim, _>(store, protection),
    ];
    LocalInformers { tasks }
}

/// Hands one watch event to the controller's handler for its kind, as an informer does.
pub fn deliver(c: &Controller, resource: &str, kind: WatchEventType, obj: &Object) {
    match resource {
        "persistentvolumes" => typed(resource, kind, obj).map(|e| c.on_volume(e)),
        "persistentvolumeclaims" => typed(resource, kind, obj).map(|e| c.on_claim(e)),
        "storageclasses" => typed(resource, kind, obj).map(|e| c.on_class(e)),
        "pods" => typed(resource, kind, obj).map(|e| c.on_pod(e)),
        "nodes" => typed(resource, kind, obj).map(|e| c.on_node(e)),
        _ => None,
    };
}

/// A watch event as its typed object (see [`decoded`]).
fn typed<T: DeserializeOwned>(resource: &str, kind: WatchEventType, v: &Object) -> Option<ObjectEvent<T>> {
    decoded(resource, v).map(|t| match kind {
        WatchEventType::Deleted => ObjectEvent::Deleted(t),
        _ => ObjectEvent::Applied(t),
    })
}

/// A stored object as its type, decoded straight from its JSON text. The store decodes every
/// write as its k8s-openapi type, so a stored object that does not decode is a defect: it is
/// logged, never dropped in silence.
fn decoded<T: DeserializeOwned>(resource: &str, v: &Object) -> Option<T> {
    match v.decode::<T>() {
        Ok(t) => Some(t),
        Err(e) => {
            let name = v.key().1;
            tracing::error!(%resource, %name, error = %e, "a stored object does not decode as its kind; not delivered");
            None
        }
    }
}
