//! Noticing a second binder: a watch event in which fields only a binder writes changed
//! ([`pv_model::ownership`]) by a write that is not this controller's. The writer is named from
//! the object's `managedFields`; a write under this project's own field manager that this
//! process did not make comes from another instance outside the Lease.

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use pv_core::events::Involved;
use pv_core::Controller;
use pv_model::ownership::{self, BinderFields, Write, FIELD_MANAGER};
use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How many of its own writes the controller remembers by resourceVersion.
const REMEMBERED: usize = 16_384;
/// How long a write of this process may take to be acknowledged to it after its watch event
/// arrived, before the write counts as another writer's.
const ACK_GRACE: Duration = Duration::from_secs(5);

/// The resourceVersions this process's writes produced (bounded, oldest forgotten first), and
/// whether this process is the writing replica: a standby sees the leader's writes, which are
/// not another binder's.
#[derive(Default, Debug)]
pub struct OwnWrites {
    inner: Mutex<(HashSet<String>, VecDeque<String>)>,
    active: AtomicBool,
}

impl OwnWrites {
    /// Marks this process as writing (its workers run) or not.
    pub fn set_active(&self, active: bool) {
        self.active.store(active, Ordering::SeqCst);
    }

    /// Whether this process is writing.
    pub fn active(&self) -> bool {
        self.active.load(Ordering::SeqCst)
    }

    /// Remembers a write's resulting resourceVersion.
    pub fn record(&self, rv: Option<&str>) {
        let Some(rv) = rv else { return };
        let mut g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if g.0.insert(rv.to_string()) {
            g.1.push_back(rv.to_string());
            if g.1.len() > REMEMBERED {
                if let Some(old) = g.1.pop_front() {
                    g.0.remove(&old);
                }
            }
        }
    }

    /// Whether this process wrote `rv`.
    pub fn contains(&self, rv: &str) -> bool {
        self.inner.lock().unwrap_or_else(|e| e.into_inner()).0.contains(rv)
    }
}

/// An object whose binder-owned fields can be watched.
pub(crate) trait Bindable: Sized {
    /// Its binder-owned fields.
    fn binder_fields(&self) -> BinderFields;
    /// The object for an event.
    fn involved(&self) -> Involved;
    /// Its metadata.
    fn meta(&self) -> &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
}

impl Bindable for PersistentVolume {
    fn binder_fields(&self) -> BinderFields {
        ownership::volume_binder_fields(self)
    }
    fn involved(&self) -> Involved {
        Involved::from(self)
    }
    fn meta(&self) -> &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
        &self.metadata
    }
}

impl Bindable for PersistentVolumeClaim {
    fn binder_fields(&self) -> BinderFields {
        ownership::claim_binder_fields(self)
    }
    fn involved(&self) -> Involved {
        Involved::from(self)
    }
    fn meta(&self) -> &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
        &self.metadata
    }
}

/// The binder-owned fields last seen per object of one kind, and where to report.
pub(crate) struct ForeignBinders {
    own: Arc<OwnWrites>,
    controller: Arc<Controller>,
    seen: Mutex<HashMap<String, BinderFields>>,
}

impl ForeignBinders {
    pub(crate) fn new(own: Arc<OwnWrites>, controller: Arc<Controller>) -> Self {
        ForeignBinders { own, controller, seen: Mutex::default() }
    }

    /// An object listed (`initial`) or changed: compared with the version seen before. `writers`
    /// summarize its `managedFields` ([`crate::lean`]).
    pub(crate) fn applied<K: Bindable>(&self, obj: &K, writers: &[Write], initial: bool) {
        let Some(uid) = obj.meta().uid.clone() else { return };
        let fields = obj.binder_fields();
        let before = self.seen.lock().unwrap_or_else(|e| e.into_inner()).insert(uid, fields.clone());
        let Some(before) = before.filter(|_| !initial && self.own.active()) else { return };
        let changed = ownership::changed(&before, &fields);
        if changed.is_empty() {
            return;
        }
        let rv = obj.meta().resource_version.clone().unwrap_or_default();
        // This process's own write, answered before its event arrived: the common case of every
        // bind, settled without reading managedFields or waiting.
        if self.own.contains(&rv) {
            return;
        }
        let manager = ownership::last_writer(writers, &changed).unwrap_or_else(|| "unknown".to_string());
        if !ownership::is_foreign_binder(&manager) {
            return;
        }
        let (own, controller, involved) = (self.own.clone(), self.controller.clone(), obj.involved());
        tokio::spawn(async move {
            // This process's own write may be seen before its answer arrives; and a field it
            // removed may still name an earlier writer in managedFields.
            tokio::time::sleep(ACK_GRACE).await;
            if own.contains(&rv) || !own.active() {
                return;
            }
            let manager =
                if manager == FIELD_MANAGER { format!("{FIELD_MANAGER} (another instance)") } else { manager };
            controller.foreign_binder_write(involved, &manager, &changed).await;
        });
    }

    /// An object deleted.
    pub(crate) fn deleted<K: Bindable>(&self, obj: &K) {
        if let Some(uid) = &obj.meta().uid {
            self.seen.lock().unwrap_or_else(|e| e.into_inner()).remove(uid);
        }
    }
}
