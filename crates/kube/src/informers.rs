//! Watches that feed the controller's handlers: one kube-runtime watcher per kind, each feeding
//! the informer core ([`pv_core::informer`]), which keeps the tombstones that report objects
//! deleted while the watch was down.
//!
//! The watcher resumes from the last resourceVersion, relists on 410, and retries with
//! exponential backoff; every stream runs in its own tracing span.

use crate::foreign::{ForeignBinders, OwnWrites};
use crate::lean::Lean;
use futures_util::StreamExt;
use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::runtime::watcher::{self, watcher, Event};
use kube::runtime::WatchStreamExt;
use kube::{Api, Client, Resource};
use pv_core::informer::{Handles, Informer, Step, Tombstone};
use pv_core::Controller;
use pv_model::ownership::Write;
use serde::de::DeserializeOwned;
use std::fmt::Debug;
use std::sync::Arc;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tracing::Instrument;

/// Kinds watched: PV, PVC, StorageClass, Pod, Node ([`pv_core::WATCHED_KINDS`]).
pub const KINDS: usize = pv_core::WATCHED_KINDS.len();

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
/// `controller`'s handlers. Volumes and claims are also checked for another binder's writes
/// (see [`crate::foreign`]); `own` holds this process's writes.
pub fn start_informers(client: Client, controller: Arc<Controller>, own: Arc<OwnWrites>) -> Informers {
    start_informers_seeing(client, controller, own, None)
}

/// Called with each object a watch delivers, before the controller handles it.
pub type See<K> = Arc<dyn Fn(&K) + Send + Sync>;

/// Called with each volume the watch delivers.
pub type SeeVolume = See<PersistentVolume>;

/// [`start_informers`], telling `see` of each volume delivered (shadow mode notes when it first
/// saw each one).
pub fn start_informers_seeing(
    client: Client,
    controller: Arc<Controller>,
    own: Arc<OwnWrites>,
    see: Option<SeeVolume>,
) -> Informers {
    let (tx, rx) = watch::channel(0usize);
    let tx = Arc::new(tx);
    let c = controller;
    let volumes = Some(Arc::new(ForeignBinders::new(own.clone(), c.clone())));
    let claims = Some(Arc::new(ForeignBinders::new(own, c.clone())));
    let tasks = vec![
        spawn_watch::<PersistentVolume, _>(client.clone(), tx.clone(), c.clone(), volumes, see),
        spawn_watch::<PersistentVolumeClaim, _>(client.clone(), tx.clone(), c.clone(), claims, None),
        spawn_watch::<StorageClass, _>(client.clone(), tx.clone(), c.clone(), None, None),
        spawn_watch::<Pod, _>(client.clone(), tx.clone(), c.clone(), None, None),
        spawn_watch::<Node, _>(client, tx, c, None, None),
    ];
    Informers { synced: rx, tasks }
}

/// A kind whose watch may check for another binder's writes.
trait Watched {
    fn check(&self, _foreign: &ForeignBinders, _writers: &[Write], _initial: bool) {}
    fn forget(&self, _foreign: &ForeignBinders) {}
}

impl Watched for PersistentVolume {
    fn check(&self, foreign: &ForeignBinders, writers: &[Write], initial: bool) {
        foreign.applied(self, writers, initial);
    }
    fn forget(&self, foreign: &ForeignBinders) {
        foreign.deleted(self);
    }
}

impl Watched for PersistentVolumeClaim {
    fn check(&self, foreign: &ForeignBinders, writers: &[Write], initial: bool) {
        foreign.applied(self, writers, initial);
    }
    fn forget(&self, foreign: &ForeignBinders) {
        foreign.deleted(self);
    }
}

impl Watched for StorageClass {}
impl Watched for Pod {}
impl Watched for Node {}

fn spawn_watch<K, H>(
    client: Client,
    synced: Arc<watch::Sender<usize>>,
    to: Arc<H>,
    foreign: Option<Arc<ForeignBinders>>,
    see: Option<See<K>>,
) -> JoinHandle<()>
where
    K: Resource<DynamicType = ()> + Tombstone + Watched + Clone + DeserializeOwned + Debug + Send + 'static,
    H: Handles<K>,
{
    let kind = K::kind(&()).to_string();
    let span = tracing::info_span!("watch", kind = %kind);
    // Decoded without the tree of their managedFields (see `crate::lean`).
    let api: Api<Lean<K>> = Api::all(client);
    tokio::spawn(
        async move {
            let stream = watcher(api, watcher::Config::default()).default_backoff();
            futures_util::pin_mut!(stream);
            let mut informer = Informer::<K>::new();
            while let Some(ev) = stream.next().await {
                if let (Some(see), Ok(Event::Apply(o) | Event::InitApply(o))) = (&see, &ev) {
                    see(&o.object);
                }
                if let Some(f) = &foreign {
                    match &ev {
                        Ok(Event::Apply(o)) => o.object.check(f, &o.writers, false),
                        Ok(Event::InitApply(o)) => o.object.check(f, &o.writers, true),
                        Ok(Event::Delete(o)) => o.object.forget(f),
                        _ => {}
                    }
                }
                let step = match ev {
                    Ok(Event::Apply(o)) | Ok(Event::InitApply(o)) => Step::Applied(o.object),
                    Ok(Event::Delete(o)) => Step::Deleted(o.object),
                    Ok(Event::Init) => Step::Listing,
                    Ok(Event::InitDone) => Step::Listed,
                    Err(e) => {
                        tracing::warn!(error = %e, "watch failed, retrying");
                        continue;
                    }
                };
                let listed = matches!(step, Step::Listed);
                if informer.step(step, |e| to.handle(e)) {
                    tracing::info!(objects = informer.len(), "synced");
                    synced.send_modify(|n| *n += 1);
                } else if listed {
                    tracing::debug!(objects = informer.len(), "list complete");
                }
            }
        }
        .instrument(span),
    )
}
