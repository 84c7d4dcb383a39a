//! The namespace finisher: kube-controller-manager's namespace controller, in the process that
//! owns the store.
//!
//! Why in-process and driven by the store: a terminating namespace can make progress after any
//! write in it, whoever makes it — an HTTP client, the controller attached through `MemApi`, a
//! collection delete, or the finisher itself. Hooking the sweep to HTTP handlers left a namespace
//! Terminating for ever when its last finalizer was lifted in-process, or when the process died
//! between the namespace's deletion and its sweep. So the store queues a namespace when it
//! publishes a change that can move it on (the namespace turns Terminating; an object in a
//! terminating namespace is added or removed — removal includes losing its last finalizer
//! while marked), and queues every Terminating namespace it loads at start-up.
//!
//! The queue holds each namespace once however many writes name it, so a burst of 20,000
//! deletes costs a handful of sweeps, and a sweep of a namespace whose remaining objects are
//! all held by finalizers is a count lookup (see [`Store::sweep_namespace`]). The finisher is a
//! thread of its own, off every writer's path: a write that empties a namespace pays nothing
//! for it. A sweep that fails (storage down, an injected fault) is retried with a backoff.

pub(crate) mod queue;

use crate::Store;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

/// First wait before a failed sweep is tried again; doubled per failure up to [`MAX_BACKOFF`].
const MIN_BACKOFF: Duration = Duration::from_millis(200);
/// Longest wait before a failed sweep is tried again.
const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// Namespaces waiting for a sweep, each at most once.
/// A running namespace finisher: one thread sweeping the namespaces its store queues. Stops
/// when dropped (after the sweep in progress, if any).
pub struct NamespaceFinisher {
    store: Arc<Store>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl NamespaceFinisher {
    /// Starts finishing `store`'s terminating namespaces: those queued since the store was
    /// built (every Terminating namespace it loaded among them) and every one queued later.
    /// Run one per store.
    pub fn start(store: Arc<Store>) -> Self {
        store.finish.set_closed(false);
        let s = store.clone();
        let thread = std::thread::Builder::new()
            .name("namespace-finisher".into())
            .spawn(move || run(&s))
            .expect("spawning the namespace finisher thread");
        NamespaceFinisher { store, thread: Some(thread) }
    }
}

impl Drop for NamespaceFinisher {
    fn drop(&mut self) {
        self.store.finish.set_closed(true);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn run(store: &Store) {
    let mut backoff: HashMap<String, Duration> = HashMap::new();
    while let Some(ns) = store.finish.next() {
        match store.sweep_namespace(&ns) {
            Ok(finished) => {
                backoff.remove(&ns);
                if finished {
                    tracing::info!(namespace = %ns, "namespace finished");
                }
            }
            Err(e) => {
                let wait = backoff.get(&ns).map_or(MIN_BACKOFF, |d| (*d * 2).min(MAX_BACKOFF));
                backoff.insert(ns.clone(), wait);
                tracing::warn!(namespace = %ns, error = %e, retry_in = ?wait, "could not finish the namespace");
                store.finish.retry(ns, wait);
            }
        }
    }
}
