//! Long operations (provision, delete, recycle) keyed by name, as upstream's goroutine map.
//!
//! At most one operation runs per name; asking for a running one starts nothing, but the asker's
//! `again` runs when the operation ends, so the object is synced once more right then instead
//! of at the next periodic resync (upstream drops the request). An operation that
//! fails blocks its name for an exponential backoff (500 ms doubling to 2 min 2 s), after which the
//! next sync may start it again. Operations either run as tokio tasks ([`Mode::Spawn`]) or wait in
//! a FIFO for a simulation driver to run them one at a time ([`Mode::Deferred`]).

use crate::clock::Clock;
use crate::error::Error;
use std::collections::{HashMap, HashSet, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

const INITIAL_BACKOFF_MS: u64 = 500;
const MAX_BACKOFF_MS: u64 = 122_000;

/// Which operation: its kind and the object (with uid) it works on. At most one runs per key.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum OpKey {
    /// Provisioning a volume for the claim `namespace/name` with this uid.
    Provision {
        /// The claim's key.
        claim: pv_model::ObjectKey,
        /// The claim's uid.
        uid: String,
    },
    /// Deleting the storage (then the PV) of the volume with this name and uid.
    Delete {
        /// The volume's name.
        volume: String,
        /// The volume's uid.
        uid: String,
    },
    /// Recycling the volume with this name and uid.
    Recycle {
        /// The volume's name.
        volume: String,
        /// The volume's uid.
        uid: String,
    },
}

impl std::fmt::Display for OpKey {
    /// As upstream's operation names: `provision-ns/name[uid]`, `delete-pv[uid]`, `recycle-pv[uid]`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OpKey::Provision { claim, uid } => write!(f, "provision-{claim}[{uid}]"),
            OpKey::Delete { volume, uid } => write!(f, "delete-{volume}[{uid}]"),
            OpKey::Recycle { volume, uid } => write!(f, "recycle-{volume}[{uid}]"),
        }
    }
}

/// A boxed operation.
pub type OpFuture = Pin<Box<dyn Future<Output = Result<(), Error>> + Send>>;

/// What to do when a running operation that refused a request ends: sync the object again.
pub type Again = Box<dyn FnOnce() + Send>;

/// How operations run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// As tokio tasks, concurrently.
    Spawn,
    /// Queued for [`Operations::run_next`].
    Deferred,
}

/// What happened to a scheduling request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scheduled {
    /// The operation started (or was queued to start).
    Started,
    /// An operation with that name is running; nothing was done.
    AlreadyRunning,
    /// The last run failed recently; nothing was done.
    BackingOff,
}

#[derive(Default)]
struct Inner {
    running: HashSet<OpKey>,
    /// For running operations that refused a request: the refused asker's follow-up.
    again: HashMap<OpKey, Again>,
    backoff: HashMap<OpKey, (u64, u64)>,
    deferred: VecDeque<(OpKey, OpFuture)>,
}

/// The operation scheduler.
pub struct Operations {
    inner: Mutex<Inner>,
    /// Requests refused because their operation was backing off.
    backoff_skips: std::sync::atomic::AtomicU64,
    mode: Mode,
    clock: Arc<dyn Clock>,
}

impl Operations {
    /// A scheduler.
    pub fn new(mode: Mode, clock: Arc<dyn Clock>) -> Arc<Self> {
        Arc::new(Operations { inner: Mutex::new(Inner::default()), backoff_skips: Default::default(), mode, clock })
    }

    /// Starts `op` under `name` unless one is running or backing off. When one is running,
    /// `again` runs once it has ended.
    pub fn schedule(self: &Arc<Self>, name: OpKey, op: OpFuture, again: Again) -> Scheduled {
        let mut inner = self.inner.lock().unwrap();
        if inner.running.contains(&name) {
            tracing::debug!(operation = %name, "operation is already running; syncing again when it ends");
            inner.again.insert(name, again);
            return Scheduled::AlreadyRunning;
        }
        if let Some(&(until, _)) = inner.backoff.get(&name) {
            if self.clock.now_ms() < until {
                tracing::debug!(operation = %name, "operation postponed due to exponential backoff");
                self.backoff_skips.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                return Scheduled::BackingOff;
            }
        }
        inner.running.insert(name.clone());
        match self.mode {
            Mode::Deferred => inner.deferred.push_back((name, op)),
            Mode::Spawn => {
                drop(inner);
                let this = self.clone();
                tokio::spawn(async move {
                    let r = op.await;
                    this.finish(&name, r);
                });
            }
        }
        Scheduled::Started
    }

    fn finish(&self, name: &OpKey, result: Result<(), Error>) {
        let mut inner = self.inner.lock().unwrap();
        inner.running.remove(name);
        let again = inner.again.remove(name);
        match result {
            Ok(()) => {
                inner.backoff.remove(name);
            }
            Err(e) => {
                let prev = inner.backoff.get(name).map(|b| b.1);
                let delay = prev.map_or(INITIAL_BACKOFF_MS, |d| (d * 2).min(MAX_BACKOFF_MS));
                inner.backoff.insert(name.clone(), (self.clock.now_ms() + delay, delay));
                tracing::debug!(operation = %name, error = %e, delay_ms = delay, "operation failed");
            }
        }
        drop(inner);
        if let Some(again) = again {
            again();
        }
    }

    /// Runs the oldest deferred operation to completion. Returns false when none is waiting.
    pub async fn run_next(&self) -> bool {
        let next = self.inner.lock().unwrap().deferred.pop_front();
        match next {
            None => false,
            Some((name, op)) => {
                let r = op.await;
                self.finish(&name, r);
                true
            }
        }
    }

    /// True when no operation is running or waiting.
    pub fn is_idle(&self) -> bool {
        self.inner.lock().unwrap().running.is_empty()
    }

    /// How many requests were refused because their operation was backing off.
    pub fn backoff_skips(&self) -> u64 {
        self.backoff_skips.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// When the last pending backoff expires (clock milliseconds), if any is still pending.
    pub fn latest_backoff_expiry(&self) -> Option<u64> {
        let now = self.clock.now_ms();
        self.inner.lock().unwrap().backoff.values().map(|(until, _)| *until).filter(|u| *u > now).max()
    }

    /// Keys of the running (or waiting) operations.
    pub fn running(&self) -> Vec<OpKey> {
        self.inner.lock().unwrap().running.iter().cloned().collect()
    }

    /// Number of running (or waiting) operations.
    pub fn in_flight(&self) -> usize {
        self.inner.lock().unwrap().running.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::SimClock;
    use std::time::Duration;

    fn ok() -> OpFuture {
        Box::pin(async { Ok(()) })
    }
    fn fail() -> OpFuture {
        Box::pin(async { Err(Error::Plugin(crate::PluginError::new("boom"))) })
    }
    fn nothing() -> Again {
        Box::new(|| {})
    }
    fn op() -> OpKey {
        OpKey::Delete { volume: "pv".into(), uid: "u".into() }
    }

    #[tokio::test]
    async fn a_request_refused_while_running_is_followed_up_when_the_operation_ends() {
        let ops = Operations::new(Mode::Deferred, SimClock::new(jiff::Timestamp::now()));
        let calls = Arc::new(std::sync::atomic::AtomicU32::new(0));
        let count = || {
            let c = calls.clone();
            Box::new(move || {
                c.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            }) as Again
        };
        assert_eq!(ops.schedule(op(), ok(), count()), Scheduled::Started);
        assert_eq!(ops.schedule(op(), ok(), count()), Scheduled::AlreadyRunning);
        assert_eq!(ops.schedule(op(), ok(), count()), Scheduled::AlreadyRunning);
        assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 0, "not while it runs");
        assert!(ops.run_next().await);
        assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 1, "once when it ends");
        assert_eq!(ops.schedule(op(), ok(), count()), Scheduled::Started);
        assert!(ops.run_next().await);
        assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 1, "a request that started it is not followed up");
    }

    #[tokio::test]
    async fn second_request_for_a_running_operation_starts_nothing() {
        let ops = Operations::new(Mode::Deferred, SimClock::new(jiff::Timestamp::now()));
        assert_eq!(ops.schedule(op(), ok(), nothing()), Scheduled::Started);
        assert_eq!(ops.schedule(op(), ok(), nothing()), Scheduled::AlreadyRunning);
        assert!(ops.run_next().await);
        assert!(!ops.run_next().await);
        assert!(ops.is_idle());
        assert_eq!(ops.schedule(op(), ok(), nothing()), Scheduled::Started);
    }

    #[tokio::test]
    async fn failures_back_off_exponentially() {
        let clock = SimClock::new(jiff::Timestamp::now());
        let ops = Operations::new(Mode::Deferred, clock.clone());
        ops.schedule(op(), fail(), nothing());
        ops.run_next().await;
        assert_eq!(ops.schedule(op(), ok(), nothing()), Scheduled::BackingOff);
        clock.advance(Duration::from_millis(500));
        assert_eq!(ops.schedule(op(), fail(), nothing()), Scheduled::Started);
        ops.run_next().await;
        clock.advance(Duration::from_millis(999));
        assert_eq!(ops.schedule(op(), ok(), nothing()), Scheduled::BackingOff, "second failure waits 1s");
        clock.advance(Duration::from_millis(1));
        assert_eq!(ops.schedule(op(), ok(), nothing()), Scheduled::Started);
    }
}
