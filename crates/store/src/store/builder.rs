//! Building a [`Store`]: backend and the snapshot it holds, clock, UIDs, limits, admission.

use super::{content::Namespaces, Backend, Durability, Inner, Key, Snapshot, Store, UidMode};
use crate::admission::Admission;
use crate::kinds::ResourceType;
use crate::object::Object;
use crate::watch::{History, StoreLimits};
use jiff::Timestamp;
use std::collections::HashMap;
use std::sync::Mutex;

/// Builds a [`Store`].
pub struct StoreBuilder {
    backend: Option<Box<dyn Backend>>,
    snapshot: Snapshot,
    now: Box<dyn Fn() -> Timestamp + Send + Sync>,
    uid_mode: UidMode,
    limits: StoreLimits,
    admission: Admission,
    commit_delay: std::time::Duration,
}

impl Default for StoreBuilder {
    fn default() -> Self {
        StoreBuilder {
            backend: None,
            snapshot: Snapshot::default(),
            now: Box::new(Timestamp::now),
            uid_mode: UidMode::Random,
            limits: StoreLimits::default(),
            admission: Admission::none(),
            commit_delay: std::time::Duration::ZERO,
        }
    }
}

impl StoreBuilder {
    /// Persists through `backend`, starting from `snapshot` (what it holds already).
    pub fn backend(mut self, backend: Box<dyn Backend>, snapshot: Snapshot) -> Self {
        self.backend = Some(backend);
        self.snapshot = snapshot;
        self
    }

    /// Uses this clock for timestamps.
    pub fn clock(mut self, now: impl Fn() -> Timestamp + Send + Sync + 'static) -> Self {
        self.now = Box::new(now);
        self
    }

    /// How UIDs are made.
    pub fn uids(mut self, mode: UidMode) -> Self {
        self.uid_mode = mode;
        self
    }

    /// How many changes watch history keeps (older resourceVersions answer 410 Gone).
    pub fn history_limit(mut self, n: usize) -> Self {
        self.limits.history_events = n.max(1);
        self
    }

    /// Bounds object sizes, the watch history and each watcher's buffer (see [`StoreLimits`]).
    pub fn limits(mut self, limits: StoreLimits) -> Self {
        self.limits = StoreLimits { history_events: limits.history_events.max(1), ..limits };
        self
    }

    /// Runs these admission plugins on writes (see [`Admission`]; none by default).
    pub fn admission(mut self, admission: Admission) -> Self {
        self.admission = admission;
        self
    }

    /// How long a group commit waits for more writes to join its batch, when another write
    /// awaits its commit beside the committer's (none by default; a lone write never waits).
    pub fn commit_delay(mut self, delay: std::time::Duration) -> Self {
        self.commit_delay = delay;
        self
    }

    /// Builds the store.
    pub fn build(self) -> Store {
        let mut objects: HashMap<&'static str, HashMap<Key, Object>> = HashMap::new();
        for (resource, obj) in self.snapshot.objects {
            if let Some(rt) = ResourceType::by_plural(&resource) {
                let (ns, name) = obj.key();
                let ns = if rt.namespaced { ns } else { String::new() };
                objects.entry(rt.key).or_default().insert((ns, name), obj);
            } else if resource.contains('.') {
                // A custom resource: served again once its definition is registered.
                let (ns, name) = obj.key();
                objects.entry(crate::custom::intern_str(&resource)).or_default().insert((ns, name), obj);
            }
        }
        let (namespaces, terminating) = Namespaces::loaded(&objects, self.snapshot.rv);
        let finish = crate::finisher::queue::Queue::default();
        for ns in &terminating {
            finish.push(ns);
        }
        Store {
            inner: Mutex::new(Inner {
                rv: self.snapshot.rv,
                objects,
                overlay: HashMap::new(),
                history: History::starting_at(self.snapshot.rv),
                watchers: Vec::new(),
                creates: HashMap::new(),
                writes: 0,
                pending: Vec::new(),
                delivered: self.snapshot.rv,
                namespaces,
            }),
            durability: Mutex::new(Durability::durable_at(self.snapshot.rv)),
            durable_cv: std::sync::Condvar::new(),
            durable_notify: tokio::sync::Notify::new(),
            backend: self.backend,
            faults: Mutex::new(None),
            past_faults: Mutex::new([0; 4]),
            now: self.now,
            uid_mode: self.uid_mode,
            limits: self.limits,
            admission: self.admission,
            commit_delay: self.commit_delay,
            finish,
            custom: Default::default(),
        }
    }
}
