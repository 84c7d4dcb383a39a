//! How a write is recorded, made durable through the backend (group commit, in batches,
//! without a thread) and published to readers and watchers.

use super::{Inner, PendingWrite, Store, WatchEvent, WatchEventType};
use crate::error::StoreError;
use crate::kinds::ResourceType;
use crate::object::Object;
use crate::watch::Refused;
use crate::Result;
use serde_json::Value;

/// Group-commit state: how far writes are durable, and whether someone is committing.
#[derive(Default)]
pub(super) struct Durability {
    durable_rv: u64,
    committing: bool,
    /// Version ranges whose commit failed (rolled back), with the backend's error. Their
    /// writers get that error; ranges are few (one per outage of storage).
    failed: Vec<(u64, u64, String)>,
    /// The last commit's error, until a commit or [`Store::check_storage`] succeeds.
    storage_error: Option<String>,
}

impl Durability {
    /// Everything up to `rv` is durable (what the backend held at start).
    pub(super) fn durable_at(rv: u64) -> Self {
        Durability { durable_rv: rv, ..Default::default() }
    }

    fn failure_of(&self, rv: u64) -> Option<&str> {
        self.failed.iter().rev().find(|(lo, hi, _)| (*lo..=*hi).contains(&rv)).map(|(_, _, e)| e.as_str())
    }
}

impl Store {
    /// Records a change. Without a backend it is applied and its watch event goes out at once;
    /// with one, it waits in `pending` (seen by writers only) until [`Store::wait_durable`]
    /// commits it. Called with the lock held.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn commit(
        &self,
        inner: &mut Inner,
        rt: &'static ResourceType,
        kind: WatchEventType,
        ns: &str,
        name: &str,
        obj: &Value,
        rv: u64,
    ) -> Result<()> {
        let obj = Object::new(obj);
        if kind != WatchEventType::Deleted && self.limits.max_object_bytes.is_some_and(|max| obj.len() > max) {
            return Err(StoreError::TooLarge);
        }
        inner.rv = rv;
        let ev = WatchEvent { kind, resource: rt.plural, namespace: ns.to_string(), object: obj.clone(), rv };
        let object = (kind != WatchEventType::Deleted).then_some(obj);
        let w = PendingWrite { rv, resource: rt.plural, namespace: ns.to_string(), name: name.to_string(), object };
        if self.backend.is_some() {
            let key = (w.namespace.clone(), w.name.clone());
            inner.overlay.entry(rt.plural).or_default().insert(key, (rv, w.object.clone()));
            inner.pending.push((w, ev));
        } else {
            self.publish(inner, w, ev);
        }
        Ok(())
    }

    /// Makes a durable change visible: into the objects readers see, to watchers, into history.
    fn publish(&self, inner: &mut Inner, w: PendingWrite, ev: WatchEvent) {
        if w.resource != "events" {
            inner.writes += 1;
        }
        let key = (w.namespace, w.name);
        if let Some(o) = inner.overlay.get_mut(w.resource) {
            if o.get(&key).is_some_and(|(rv, _)| *rv == w.rv) {
                o.remove(&key);
            }
        }
        let existed = inner.objects.get(w.resource).is_some_and(|m| m.contains_key(&key));
        if let Some(ns) = inner.namespaces.published(w.resource, &key, w.object.as_ref(), existed, w.rv) {
            self.finish.push(&ns);
        }
        let map = inner.objects.entry(w.resource).or_default();
        match w.object {
            None => map.remove(&key),
            Some(obj) => map.insert(key, obj),
        };
        self.deliver(inner, ev);
    }

    /// Sends a change to its watchers and into the history.
    fn deliver(&self, inner: &mut Inner, ev: WatchEvent) {
        inner.watchers.retain(|w| {
            if w.resource != ev.resource || w.namespace.as_ref().is_some_and(|n| *n != ev.namespace) || ev.rv <= w.since
            {
                return !w.tx.is_closed();
            }
            match w.tx.offer(ev.clone()) {
                Ok(()) => true,
                Err(Refused::Closed) => false,
                Err(Refused::Behind) => {
                    tracing::warn!(resource = w.resource, rv = ev.rv, "closing a watcher that fell too far behind");
                    false
                }
            }
        });
        inner.delivered = inner.delivered.max(ev.rv);
        let now = self.limits.history_age.map(|_| (self.now)());
        inner.history.push(ev, now, &self.limits);
    }

    /// Group commit without a thread: the first writer to find nobody committing takes every
    /// pending write, commits them in one batch, publishes them in order (objects, watchers,
    /// history), and wakes the others; a writer whose version is still not durable then becomes
    /// the next committer. When a commit fails, that batch and every write queued behind it
    /// (each was computed from a state that never became durable) are dropped: no reader ever
    /// saw them, their writers get the error, and their versions are not handed out again.
    /// The next write tries storage afresh, so the store recovers when storage does.
    pub(super) fn wait_durable(&self, rv: u64) -> Result<()> {
        let Some(backend) = &self.backend else { return Ok(()) };
        let mut d = self.durability.lock().unwrap();
        loop {
            if let Some(reason) = d.failure_of(rv) {
                return Err(StoreError::Internal(format!("the write was not persisted and is undone: {reason}")));
            }
            if d.durable_rv >= rv {
                return Ok(());
            }
            if d.committing {
                d = self.durable_cv.wait(d).unwrap();
                continue;
            }
            d.committing = true;
            drop(d);
            let batch = std::mem::take(&mut self.inner.lock().unwrap().pending);
            let writes: Vec<PendingWrite> = batch.iter().map(|(w, _)| w.clone()).collect();
            let result = if writes.is_empty() { Ok(()) } else { backend.commit_batch(&writes) };
            // Lock order: `inner`, then `durability`.
            let mut inner = self.inner.lock().unwrap();
            d = self.durability.lock().unwrap();
            d.committing = false;
            match result {
                Ok(()) => {
                    if let Some(top) = writes.last().map(|w| w.rv) {
                        d.durable_rv = d.durable_rv.max(top);
                        d.storage_error = None;
                    }
                    for (w, ev) in batch {
                        self.publish(&mut inner, w, ev);
                    }
                }
                Err(e) => {
                    let first = writes.first().map_or(inner.rv, |w| w.rv);
                    tracing::error!(error = %e, versions = %format!("{first}..={}", inner.rv),
                        "storage commit failed; the writes are undone");
                    inner.pending.clear();
                    inner.overlay.clear();
                    match d.failed.last_mut() {
                        // One range per outage: consecutive failures extend it.
                        Some(last) if last.1 + 1 >= first => *last = (last.0, inner.rv, e.clone()),
                        _ => d.failed.push((first, inner.rv, e.clone())),
                    }
                    d.storage_error = Some(e);
                }
            }
            drop(inner);
            self.durable_cv.notify_all();
        }
    }

    /// `None` when storage works; else the error of the last failed commit. While failing,
    /// each call tries storage again (persisting the resourceVersion counter), so the answer
    /// recovers once storage does even if no write comes; `/readyz` and `/healthz` ask this.
    pub fn check_storage(&self) -> Option<String> {
        let backend = self.backend.as_ref()?;
        let mut d = self.durability.lock().unwrap();
        if d.storage_error.is_none() || d.committing {
            return d.storage_error.clone();
        }
        d.committing = true;
        drop(d);
        let rv = self.inner.lock().unwrap().rv;
        let result = backend.persist_counter(rv);
        d = self.durability.lock().unwrap();
        d.committing = false;
        d.storage_error = result.err();
        self.durable_cv.notify_all();
        d.storage_error.clone()
    }
}
