//! Group commit: how writes become durable through the backend, in batches, without a thread.

use super::{PendingWrite, Store};
use crate::error::StoreError;
use crate::Result;

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
