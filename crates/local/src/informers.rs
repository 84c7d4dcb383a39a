//! In-process informers: every watched kind listed from the store into the controller's caches,
//! then followed through the store's watches.

use pv_core::{Controller, ObjectEvent, Protection};
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

/// Lists each of `kinds` from `store` into `to` through `deliver`, then follows each kind's
/// changes from the version of its list. On return the lists are delivered. A store watch is an
/// unbounded channel registered at the list's version, so no change is skipped and none needs a
/// relist.
fn follow<T: Send + Sync + 'static>(
    store: &Store,
    kinds: &[&'static str],
    to: &Arc<T>,
    deliver: fn(&T, &str, WatchEventType, &serde_json::Value),
) -> LocalInformers {
    let mut tasks = Vec::new();
    for &resource in kinds {
        let (items, rv) = store.list(resource, &Default::default()).expect("a watched kind the store serves");
        for obj in &items {
            deliver(to, resource, WatchEventType::Added, obj);
        }
        let mut watch = store.watch(resource, None, Some(rv)).expect("a version the store just reported");
        let to = to.clone();
        tasks.push(tokio::spawn(async move {
            while let Some(ev) = watch.recv().await {
                deliver(&to, resource, ev.kind, &ev.object);
            }
        }));
    }
    LocalInformers { tasks }
}

/// Lists every watched kind into `controller`'s caches and follows their changes: on return the
/// caches are synced.
pub fn start(store: &Store, controller: &Arc<Controller>) -> LocalInformers {
    follow(store, &pv_core::WATCHED_KINDS, controller, deliver)
}

/// Kinds the protection controllers watch, pods first so that a claim is never judged unused
/// for want of its pods.
const PROTECTION_WATCHED: [&str; 3] = ["pods", "persistentvolumes", "persistentvolumeclaims"];

fn deliver_protection(p: &Protection, resource: &str, kind: WatchEventType, obj: &serde_json::Value) {
    match resource {
        "pods" => typed(resource, kind, obj).map(|e| p.on_pod(e)),
        "persistentvolumes" => typed(resource, kind, obj).map(|e| p.on_volume(e)),
        "persistentvolumeclaims" => typed(resource, kind, obj).map(|e| p.on_claim(e)),
        _ => None,
    };
}

/// Feeds the pv- and pvc-protection controllers from the store as [`start`] feeds the binder.
pub fn start_protection(store: &Store, protection: &Arc<Protection>) -> LocalInformers {
    follow(store, &PROTECTION_WATCHED, protection, deliver_protection)
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

/// A watch event as its typed object. The store decodes every write as its k8s-openapi type, so
/// a stored object that does not decode is a defect: it is logged, never dropped in silence.
pub fn typed<T: DeserializeOwned>(
    resource: &str,
    kind: WatchEventType,
    v: &serde_json::Value,
) -> Option<ObjectEvent<T>> {
    match T::deserialize(v) {
        Ok(t) => Some(match kind {
            WatchEventType::Deleted => ObjectEvent::Deleted(t),
            _ => ObjectEvent::Applied(t),
        }),
        Err(e) => {
            let name = pv_model::key::meta_str(v, "name");
            tracing::error!(%resource, %name, error = %e, "a stored object does not decode as its kind; not delivered");
            None
        }
    }
}
