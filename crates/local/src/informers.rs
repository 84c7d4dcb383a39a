//! In-process informers: every watched kind listed from the store into the controller's caches,
//! then followed through the store's watches, through the same informer core as `run`'s.
//! [`deliver`] hands single JSON events over by resource name (the simulator's own informers).

use k8s_openapi::Resource;
use pv_core::informer::{Handles, Informer, Step, Tombstone};
use pv_core::{Controller, ObjectEvent, Protection};
use pv_model::k8s::{Node, PersistentVolume, PersistentVolumeClaim, Pod, StorageClass};
use pv_store::{Store, WatchEventType};
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
/// channel registered at the list's version, so no change is skipped and none needs a relist;
/// the core is the same one `run`'s kube-rs watches feed.
fn follow<K, H>(store: &Store, to: &Arc<H>) -> JoinHandle<()>
where
    K: Resource + Tombstone + DeserializeOwned + Send + 'static,
    H: Handles<K>,
{
    let resource = K::URL_PATH_SEGMENT;
    let mut informer = Informer::<K>::new();
    let (items, rv) = store.list(resource, &Default::default()).expect("a watched kind the store serves");
    informer.step(Step::Listing, |_| {});
    for obj in &items {
        if let Some(o) = decoded::<K>(resource, obj) {
            informer.step(Step::Applied(o), |e| to.handle(e));
        }
    }
    informer.step(Step::Listed, |e| to.handle(e));
    let mut watch = store.watch(resource, None, Some(rv)).expect("a version the store just reported");
    let to = to.clone();
    tokio::spawn(async move {
        while let Some(ev) = watch.recv().await {
            let Some(o) = decoded::<K>(resource, &ev.object) else { continue };
            let step = if ev.kind == WatchEventType::Deleted { Step::Deleted(o) } else { Step::Applied(o) };
            informer.step(step, |e| to.handle(e));
        }
    })
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
pub fn deliver(c: &Controller, resource: &str, kind: WatchEventType, obj: &serde_json::Value) {
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
pub fn typed<T: DeserializeOwned>(
    resource: &str,
    kind: WatchEventType,
    v: &serde_json::Value,
) -> Option<ObjectEvent<T>> {
    decoded(resource, v).map(|t| match kind {
        WatchEventType::Deleted => ObjectEvent::Deleted(t),
        _ => ObjectEvent::Applied(t),
    })
}

/// A stored object as its type. The store decodes every write as its k8s-openapi type, so a
/// stored object that does not decode is a defect: it is logged, never dropped in silence.
fn decoded<T: DeserializeOwned>(resource: &str, v: &serde_json::Value) -> Option<T> {
    match T::deserialize(v) {
        Ok(t) => Some(t),
        Err(e) => {
            let name = pv_model::key::meta_str(v, "name");
            tracing::error!(%resource, %name, error = %e, "a stored object does not decode as its kind; not delivered");
            None
        }
    }
}
