//! How a write is recorded, made durable through the backend (group commit, in batches,
//! without a thread) and published to readers and watchers.

use super::{Inner, PendingWrite, Store};
use crate::error::StoreError;
use crate::faults::FaultKind;
use crate::kinds::ResourceType;
use crate::object::Object;
use crate::watch::{Refused, WatchEvent, WatchEventType};
use crate::Result;
use serde_json::Value;
use std::sync::Arc;

/// Runs `f`, which may block, from a task: on a multi-threaded runtime its worker hands its other
/// tasks to another thread meanwhile.
fn blocking<T>(f: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current() {
        Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => tokio::task::block_in_place(f),
        _ => f(),
    }
}

/// How many writes must await their commit, the committer's among them, for the commit to wait
/// the store's commit delay first.
const COMMIT_SIBLINGS: usize = 2;

/// A crash point of the robustness tests (scripts/e2e-robustness.sh): with the `failpoints`
/// feature, `FAILPOINTS='NAME=ACTION'` (tikv's fail-rs: e.g. `3*off->return`, the fourth time)
/// makes the process abort there, as `kill -9` would: no destructor runs, nothing is flushed, no
/// waiting writer is answered. Without the feature it is nothing.
macro_rules! crash_point {
    ($name:literal) => {
        #[cfg(feature = "failpoints")]
        fail::fail_point!($name, |_| std::process::abort());
    };
}

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
    /// How many commits have failed: a refusal decided meanwhile may rest on an undone write
    /// ([`Store::refusal_stands`]).
    failures: u64,
}

impl Durability {
    /// Everything up to `rv` is durable (what the backend held at start).
    pub(super) fn durable_at(rv: u64) -> Self {
        Durability { durable_rv: rv, ..Default::default() }
    }

    fn failure_of(&self, rv: u64) -> Option<&str> {
        self.failed.iter().rev().find(|(lo, hi, _)| (*lo..=*hi).contains(&rv)).map(|(_, _, e)| e.as_str())
    }

    /// The answer of the write of version `rv`, once its commit has succeeded or failed.
    fn settled(&self, rv: u64) -> Option<Result<()>> {
        if let Some(reason) = self.failure_of(rv) {
            return Some(Err(StoreError::Internal(format!("the write was not persisted and is undone: {reason}"))));
        }
        (self.durable_rv >= rv).then_some(Ok(()))
    }
}

/// A write applied in memory (seen by writers, not yet by readers or watchers) and the
/// durability its answer waits for: [`Written::wait`] blocks the thread, [`Written::durable`]
/// awaits it, so a task's write holds no thread while the batch it joined commits.
#[must_use = "a write is answered only once durable"]
pub struct Written {
    value: Arc<Value>,
    pending: Pending,
}

/// What a write's answer still waits for once its object is known: its version becoming durable,
/// and the error it answers then in place of the object (an injected lost response).
#[must_use = "a write is answered only once durable"]
#[derive(Default)]
pub struct Pending {
    /// The version to await: the write's, or for a write that changed nothing
    /// ([`Written::stored`]) the stored object's; `None` for a dry run.
    rv: Option<u64>,
    lost: Option<StoreError>,
}

impl Written {
    pub(super) fn settled(value: Arc<Value>) -> Self {
        Written { value, pending: Pending::default() }
    }

    /// The object as stored, written by an earlier write (an update that changes nothing, a
    /// delete of an object already being deleted): answered once the version it carries is
    /// durable, since that write's own commit may still be pending.
    pub(super) fn stored(value: Arc<Value>, lost: Option<StoreError>) -> Self {
        let rv = crate::meta::meta_str(&value, "resourceVersion").parse().ok();
        Written { value, pending: Pending { rv, lost } }
    }

    pub(super) fn pending(value: Arc<Value>, rv: u64, lost: Option<StoreError>) -> Self {
        Written { value, pending: Pending { rv: Some(rv), lost } }
    }

    /// The object as written, once durable, blocking this thread until then.
    pub fn wait(self, store: &Store) -> Result<Arc<Value>> {
        self.pending.wait(store)?;
        Ok(self.value)
    }

    /// The object as written, once durable, awaited without holding a thread (see
    /// [`Pending::durable`]).
    pub fn durable(self, store: &Arc<Store>) -> impl std::future::Future<Output = Result<Arc<Value>>> + Send + 'static {
        let wait = self.pending.durable(store);
        async move {
            wait.await?;
            Ok(self.value)
        }
    }

    /// The object as it will be answered, and what the answer waits for: for a caller that
    /// builds its answer on a thread that should not wait.
    pub fn split(self) -> (Arc<Value>, Pending) {
        (self.value, self.pending)
    }
}

impl Pending {
    /// Blocks this thread until the write is durable; its error if it never will be.
    pub fn wait(self, store: &Store) -> Result<()> {
        if let Some(rv) = self.rv {
            store.wait_durable(rv)?;
        }
        self.lost.map_or(Ok(()), Err)
    }

    /// [`Pending::wait`] without holding a thread: only a task that finds nobody committing
    /// commits (blocking, as the thread of [`Pending::wait`] does). The wait is a task of its
    /// own, so a caller that gives up (a client gone) never leaves a write that writers see
    /// uncommitted: it becomes durable, or fails, answered or not.
    /// The task starts here, not at the first poll: a caller dropped before then leaves no
    /// write behind either. Call it from within a Tokio runtime.
    /// A version already settled (durable, or failed) is answered without a task.
    pub fn durable(self, store: &Arc<Store>) -> impl std::future::Future<Output = Result<()>> + Send + 'static {
        let rv = self.rv.filter(|_| store.backend.is_some());
        let settled = rv.and_then(|rv| store.durability.lock().unwrap().settled(rv));
        let wait = rv.filter(|_| settled.is_none()).map(|rv| {
            let store = store.clone();
            tokio::spawn(async move { store.durable(rv).await })
        });
        async move {
            if let Some(answer) = settled {
                answer?;
            }
            if let Some(wait) = wait {
                wait.await.map_err(|e| StoreError::Internal(format!("waiting for the commit: {e}")))??;
            }
            self.lost.map_or(Ok(()), Err)
        }
    }
}

/// A write's refusal being decided ([`Store::deciding`]): a 404, 409, 403 or 422 that writers
/// decide from every write handed out, durable or not.
#[must_use = "a refusal is answered only once what it rests on is durable"]
pub struct Deciding {
    failures: u64,
}

impl Store {
    /// Call before deciding a write; once it is refused, [`Store::refusal_stands`] says when the
    /// refusal may be answered.
    pub fn deciding(&self) -> Deciding {
        Deciding { failures: self.durability.lock().unwrap().failures }
    }

    /// Writers decide from writes not yet durable (the overlay), so a refusal may rest on a write
    /// that a crash or a failed commit undoes: a 409 for a create nobody will ever see, a 404 for
    /// a delete that never happened. Such an answer would contradict every read after it, so a
    /// refusal is answered only once every write handed out by then is durable: `true`. `false`
    /// when a commit failed meanwhile: the refusal may rest on an undone write, and the write is
    /// to be decided again. Awaited without holding a thread, as [`Pending::durable`].
    pub fn refusal_stands(
        self: &Arc<Self>,
        deciding: Deciding,
    ) -> impl std::future::Future<Output = bool> + Send + 'static {
        let seen = self.backend.as_ref().map(|_| self.inner.lock().unwrap().rv);
        let settled = seen.is_none_or(|rv| self.durability.lock().unwrap().settled(rv).is_some());
        let store = self.clone();
        async move {
            if let Some(rv) = seen.filter(|_| !settled) {
                // A task of its own, as Pending::durable: it commits when nobody is.
                let s = store.clone();
                let _ = tokio::spawn(async move { s.durable(rv).await }).await;
            }
            store.durability.lock().unwrap().failures == deciding.failures
        }
    }

    /// The error a write answers in place of its object when a lost response was drawn.
    pub(super) fn lost(fault: Option<FaultKind>, rt: &ResourceType, name: &str) -> Option<StoreError> {
        (fault == Some(FaultKind::LostResponse)).then(|| FaultKind::LostResponse.error(&rt.qualified(), name))
    }

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
        let ev = WatchEvent { kind, resource: rt.key, namespace: ns.to_string(), object: obj.clone(), rv };
        let object = (kind != WatchEventType::Deleted).then_some(obj);
        let w = PendingWrite { rv, resource: rt.key, namespace: ns.to_string(), name: name.to_string(), object };
        if self.backend.is_some() {
            let key = (w.namespace.clone(), w.name.clone());
            inner.overlay.entry(rt.key).or_default().insert(key, (rv, w.object.clone()));
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
    /// The next write tries storage afresh, so the store recovers when storage does. Under
    /// load the committer first waits the commit delay ([`Store::delay_commit`]).
    pub(super) fn wait_durable(&self, rv: u64) -> Result<()> {
        let Some(backend) = &self.backend else { return Ok(()) };
        let mut d = self.durability.lock().unwrap();
        loop {
            if let Some(answer) = d.settled(rv) {
                return answer;
            }
            if d.committing {
                d = self.durable_cv.wait(d).unwrap();
                continue;
            }
            d.committing = true;
            drop(d);
            self.delay_commit();
            let batch = std::mem::take(&mut self.inner.lock().unwrap().pending);
            let writes: Vec<PendingWrite> = batch.iter().map(|(w, _)| w.clone()).collect();
            if !writes.is_empty() {
                crash_point!("commit-before-fsync");
            }
            let result = if writes.is_empty() { Ok(()) } else { backend.commit_batch(&writes) };
            if !writes.is_empty() && result.is_ok() {
                crash_point!("commit-after-fsync");
            }
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
                    d.failures += 1;
                }
            }
            drop(inner);
            self.durable_cv.notify_all();
            self.durable_notify.notify_waiters();
        }
    }

    /// Under load, waits the commit delay before a batch is taken, so that the writes made
    /// meanwhile join it: one commit (one fsync) for more writes. Load is another writer's write
    /// already waiting beside the committer's ([`COMMIT_SIBLINGS`]); a lone write commits at once.
    /// PostgreSQL's `commit_delay` with `commit_siblings`, for the same reason.
    fn delay_commit(&self) {
        if !self.commit_delay.is_zero() && self.inner.lock().unwrap().pending.len() >= COMMIT_SIBLINGS {
            std::thread::sleep(self.commit_delay);
            // A batch of two or more writes forming: accepted, none durable, none answered.
            crash_point!("commit-mid-batch");
        }
    }

    /// [`Store::wait_durable`] for a task: it awaits a commit that someone else runs, and
    /// commits itself (blocking) only when nobody is committing.
    async fn durable(&self, rv: u64) -> Result<()> {
        loop {
            // Registered before the check, so a commit finishing in between still wakes it.
            let notified = self.durable_notify.notified();
            let mut notified = std::pin::pin!(notified);
            notified.as_mut().enable();
            {
                let d = self.durability.lock().unwrap();
                if let Some(answer) = d.settled(rv) {
                    return answer;
                }
                if !d.committing {
                    drop(d);
                    return blocking(|| self.wait_durable(rv));
                }
            }
            notified.await;
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
        self.durable_notify.notify_waiters();
        d.storage_error.clone()
    }
}
