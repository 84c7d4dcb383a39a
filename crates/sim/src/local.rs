//! The controller attached to a store in the same process: what `up` runs.
//!
//! `up` serves the store over HTTP to kubectl and other clients, and its own controller reads and
//! writes the same store directly: informers that list and watch the store, and [`MemApi`] for
//! writes. Nothing between them is HTTP, TLS or JSON text, so the API server's capacity goes to
//! its clients; the store's rules are the same for both (resourceVersions, 409 on stale writes,
//! the status subresource, validation, a write acknowledged only once durable). `run` is the
//! path that talks to an API server over the network.
//!
//! [`MemApi`]: crate::MemApi

use crate::driver::{deliver, typed};
use pv_core::{Controller, Protection};
use pv_store::Store;
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

/// Lists every watched kind into `controller`'s caches, then follows each kind's changes from
/// the version of its list. On return the caches are synced. A store watch is an unbounded
/// channel registered at the list's version, so no change is skipped and none needs a relist.
pub fn start(store: &Store, controller: &Arc<Controller>) -> LocalInformers {
    let mut tasks = Vec::new();
    for resource in pv_core::WATCHED_KINDS {
        let (items, rv) = store.list(resource, &Default::default()).expect("a watched kind the store serves");
        for obj in &items {
            deliver(controller, resource, pv_store::WatchEventType::Added, obj);
        }
        let mut watch = store.watch(resource, None, Some(rv)).expect("a version the store just reported");
        let c = controller.clone();
        tasks.push(tokio::spawn(async move {
            while let Some(ev) = watch.recv().await {
                deliver(&c, resource, ev.kind, &ev.object);
            }
        }));
    }
    LocalInformers { tasks }
}

/// Kinds the protection controllers watch, pods first so that a claim is never judged unused
/// for want of its pods.
const PROTECTION_WATCHED: [&str; 3] = ["pods", "persistentvolumes", "persistentvolumeclaims"];

fn deliver_protection(p: &Protection, resource: &str, kind: pv_store::WatchEventType, obj: &serde_json::Value) {
    match resource {
        "pods" => typed(resource, kind, obj).map(|e| p.on_pod(e)),
        "persistentvolumes" => typed(resource, kind, obj).map(|e| p.on_volume(e)),
        "persistentvolumeclaims" => typed(resource, kind, obj).map(|e| p.on_claim(e)),
        _ => None,
    };
}

/// Feeds the pv- and pvc-protection controllers from the store as [`start`] feeds the binder.
pub fn start_protection(store: &Store, protection: &Arc<Protection>) -> LocalInformers {
    let mut tasks = Vec::new();
    for resource in PROTECTION_WATCHED {
        let (items, rv) = store.list(resource, &Default::default()).expect("a watched kind the store serves");
        for obj in &items {
            deliver_protection(protection, resource, pv_store::WatchEventType::Added, obj);
        }
        let mut watch = store.watch(resource, None, Some(rv)).expect("a version the store just reported");
        let p = protection.clone();
        tasks.push(tokio::spawn(async move {
            while let Some(ev) = watch.recv().await {
                deliver_protection(&p, resource, ev.kind, &ev.object);
            }
        }));
    }
    LocalInformers { tasks }
}
