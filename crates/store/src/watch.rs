//! Watch plumbing with bounds: each watcher's buffer, the replayable history, and the largest
//! object the store keeps.
//!
//! Why bounds: a watch client that stops reading, or a client that rewrites a large object
//! over and over, must not make the server's memory grow without end. kube-apiserver ends a
//! watcher that cannot keep up (its client watches again from its last version, or lists
//! again when that version is gone) and etcd forgets old revisions after compaction (a watch
//! from before answers 410 Expired). The store does the same: a watcher started with
//! [`crate::Store::watch_bounded`] (a remote client's) whose undelivered events pass
//! [`StoreLimits::watch_events`] or [`StoreLimits::watch_bytes`] is closed; the
//! history keeps at most [`StoreLimits::history_events`], [`StoreLimits::history_bytes`] and
//! [`StoreLimits::history_age`] worth of changes. Sizes are the length of the object's JSON text
//! ([`crate::Object`]), which the store writes once per write.
//!
//! The in-memory store (simulation, tests) keeps the historical defaults: no size limits.
//! Watchers started with [`crate::Store::watch`], which consumers in the same process drain in
//! their own loop, are never closed. `pv-controller up` sets the bounds (see the API server's
//! `open_store`).

use crate::object::Object;
use jiff::Timestamp;
use serde_json::Value;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::sync::mpsc::error::{TryRecvError, TrySendError};

/// Type of a watch event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WatchEventType {
    /// Object created.
    Added,
    /// Object changed.
    Modified,
    /// Object removed.
    Deleted,
}

impl WatchEventType {
    /// The wire name (`ADDED`, `MODIFIED`, `DELETED`).
    pub fn as_str(&self) -> &'static str {
        match self {
            WatchEventType::Added => "ADDED",
            WatchEventType::Modified => "MODIFIED",
            WatchEventType::Deleted => "DELETED",
        }
    }
}

/// One change, as watchers receive it.
#[derive(Clone, Debug)]
pub struct WatchEvent {
    /// What happened.
    pub kind: WatchEventType,
    /// Resource (plural).
    pub resource: &'static str,
    /// Namespace ("" for cluster-scoped).
    pub namespace: String,
    /// The object after the change (for deletions: its last state, with the deletion's version).
    pub object: Object,
    /// resourceVersion of the change.
    pub rv: u64,
}

/// The bounds a store applies. [`StoreLimits::default`] is unbounded but for the history's
/// event count (100,000), as the in-memory store has always been.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StoreLimits {
    /// Largest object, as JSON bytes, a write may store (None: no limit).
    pub max_object_bytes: Option<usize>,
    /// Changes the history keeps at most.
    pub history_events: usize,
    /// JSON bytes of the objects the history keeps at most (None: no limit).
    pub history_bytes: Option<usize>,
    /// How long a change stays in the history at most, by the store's clock (None: no limit).
    pub history_age: Option<Duration>,
    /// Undelivered events one watcher may have queued before it is closed (None: no limit).
    pub watch_events: Option<usize>,
    /// Undelivered JSON bytes one watcher may have queued before it is closed (None: no limit).
    pub watch_bytes: Option<usize>,
}

impl Default for StoreLimits {
    fn default() -> Self {
        StoreLimits {
            max_object_bytes: None,
            history_events: 100_000,
            history_bytes: None,
            history_age: None,
            watch_events: None,
            watch_bytes: None,
        }
    }
}

/// The size of `v` serialized as compact JSON, without building the text.
pub fn json_size(v: &Value) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0 += b.len();
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut c = Count(0);
    let _ = serde_json::to_writer(&mut c, v);
    c.0
}

/// A stream of watch events for one resource (optionally one namespace): first the changes
/// replayed from history, then live ones. `recv` answers None once the watch has ended: the
/// store is gone, or the watcher fell too far behind and was closed (watch again from the
/// last version seen).
#[derive(Debug)]
pub struct Watcher {
    replay: VecDeque<WatchEvent>,
    rx: mpsc::Receiver<WatchEvent>,
    queued: Arc<AtomicUsize>,
}

impl Watcher {
    fn took(&self, ev: WatchEvent) -> WatchEvent {
        let size = ev.object.len();
        let _ = self.queued.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |q| Some(q.saturating_sub(size)));
        ev
    }

    /// The next event, waiting for one; None when the watch has ended.
    pub async fn recv(&mut self) -> Option<WatchEvent> {
        if let Some(ev) = self.replay.pop_front() {
            return Some(ev);
        }
        let ev = self.rx.recv().await?;
        Some(self.took(ev))
    }

    /// The next event if one is ready.
    pub fn try_recv(&mut self) -> Result<WatchEvent, TryRecvError> {
        if let Some(ev) = self.replay.pop_front() {
            return Ok(ev);
        }
        let ev = self.rx.try_recv()?;
        Ok(self.took(ev))
    }
}

/// The store's end of one watcher.
pub(crate) struct Sender {
    tx: mpsc::Sender<WatchEvent>,
    queued: Arc<AtomicUsize>,
    max_bytes: Option<usize>,
}

/// Why an event could not be queued for a watcher.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Refused {
    /// The watcher is gone.
    Closed,
    /// The watcher is too far behind.
    Behind,
}

impl Sender {
    /// Queues an event unless the watcher is gone or too far behind.
    pub(crate) fn offer(&self, ev: WatchEvent) -> Result<(), Refused> {
        let size = ev.object.len();
        if let Some(max) = self.max_bytes {
            let queued = self.queued.load(Ordering::Relaxed);
            if queued > 0 && queued.saturating_add(size) > max {
                return Err(Refused::Behind);
            }
        }
        match self.tx.try_send(ev) {
            Ok(()) => {
                self.queued.fetch_add(size, Ordering::Relaxed);
                Ok(())
            }
            Err(TrySendError::Full(_)) => Err(Refused::Behind),
            Err(TrySendError::Closed(_)) => Err(Refused::Closed),
        }
    }

    /// True when the watcher has gone.
    pub(crate) fn is_closed(&self) -> bool {
        self.tx.is_closed()
    }
}

/// A new watcher with `replay` queued first, bounded by `limits`.
pub(crate) fn channel(limits: &StoreLimits, replay: VecDeque<WatchEvent>) -> (Sender, Watcher) {
    let cap = limits.watch_events.unwrap_or(usize::MAX).clamp(1, tokio::sync::Semaphore::MAX_PERMITS);
    let (tx, rx) = mpsc::channel(cap);
    let queued = Arc::new(AtomicUsize::new(0));
    (Sender { tx, queued: queued.clone(), max_bytes: limits.watch_bytes }, Watcher { replay, rx, queued })
}

/// A change the history keeps: when it was made, and the event.
type Kept = (Option<Timestamp>, WatchEvent);

/// The changes a watch can still be resumed from. Each keeps its object's JSON text, shared with
/// the store and the watchers (see [`crate::Object`]).
#[derive(Default)]
pub(crate) struct History {
    kept: VecDeque<Kept>,
    bytes: usize,
    /// Events at or below this version are no longer kept.
    compacted: u64,
}

impl History {
    /// An empty history that cannot replay anything at or below `rv`.
    pub(crate) fn starting_at(rv: u64) -> Self {
        History { compacted: rv, ..Default::default() }
    }

    /// The newest version that can no longer be replayed.
    pub(crate) fn compacted(&self) -> u64 {
        self.compacted
    }

    /// Keeps `ev` (made at `now`), then forgets the oldest changes beyond the limits.
    pub(crate) fn push(&mut self, ev: WatchEvent, now: Option<Timestamp>, limits: &StoreLimits) {
        self.bytes += ev.object.len();
        self.kept.push_back((now, ev));
        self.trim(now, limits);
    }

    /// Forgets the oldest changes beyond the limits (age measured at `now`).
    pub(crate) fn trim(&mut self, now: Option<Timestamp>, limits: &StoreLimits) {
        let too_old = |at: Option<Timestamp>| match (limits.history_age, at, now) {
            (Some(age), Some(at), Some(now)) => Duration::try_from(now.duration_since(at)).is_ok_and(|d| d > age),
            _ => false,
        };
        while let Some((at, front)) = self.kept.front() {
            let over = self.kept.len() > limits.history_events.max(1)
                || limits.history_bytes.is_some_and(|b| self.bytes > b && self.kept.len() > 1)
                || too_old(*at);
            if !over {
                break;
            }
            self.bytes -= front.object.len();
            self.compacted = front.rv;
            self.kept.pop_front();
        }
    }

    /// The kept changes of `resource` (in `namespace`, when given) after `since`.
    pub(crate) fn since(&self, since: u64, resource: &str, namespace: Option<&str>) -> VecDeque<WatchEvent> {
        self.kept
            .iter()
            .filter(|(_, e)| e.rv > since && e.resource == resource && namespace.is_none_or(|n| n == e.namespace))
            .map(|(_, e)| e.clone())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::WatchEventType;
    use serde_json::json;

    /// An event whose object's text is `size` bytes long (`{}` below 8).
    fn ev(rv: u64, size: usize) -> WatchEvent {
        let object = if size < 8 { json!({}) } else { json!({"p": "x".repeat(size - 8)}) };
        WatchEvent {
            kind: WatchEventType::Modified,
            resource: "persistentvolumes",
            namespace: String::new(),
            object: crate::Object::new(&object),
            rv,
        }
    }

    #[test]
    fn json_size_is_the_compact_serialized_length() {
        let v = json!({"a": [1, "x"], "b": null});
        assert_eq!(json_size(&v), serde_json::to_vec(&v).unwrap().len());
    }

    #[test]
    fn history_forgets_by_bytes_and_age_and_remembers_what_it_forgot() {
        let limits =
            StoreLimits { history_bytes: Some(100), history_age: Some(Duration::from_secs(60)), ..Default::default() };
        let mut h = History::starting_at(0);
        let t0 = Timestamp::UNIX_EPOCH;
        for rv in 1..=5 {
            h.push(ev(rv, 40), Some(t0), &limits);
        }
        // 5 x 40 bytes > 100: only the newest two fit.
        assert_eq!(h.compacted(), 3);
        assert_eq!(h.since(0, "persistentvolumes", None).len(), 2);
        h.trim(Some(t0 + jiff::SignedDuration::from_secs(61)), &limits);
        assert_eq!(h.compacted(), 5);
        assert!(h.since(0, "persistentvolumes", None).is_empty());
    }

    #[test]
    fn a_history_replays_the_same_objects_and_counts_their_text() {
        let limits = StoreLimits { history_bytes: Some(1 << 20), ..Default::default() };
        let mut h = History::starting_at(0);
        let objects = [
            json!({"metadata": {"name": "a"}, "n": 1, "f": 0.5}),
            json!({"metadata": {"name": "b"}, "s": [1, null, "x"]}),
        ];
        for (i, o) in objects.iter().enumerate() {
            h.push(WatchEvent { object: crate::Object::new(o), ..ev(i as u64 + 1, 0) }, None, &limits);
        }
        assert_eq!(h.bytes, objects.iter().map(json_size).sum::<usize>());
        let replayed: Vec<Value> = h.since(0, "persistentvolumes", None).iter().map(|e| e.object.value()).collect();
        assert_eq!(replayed, objects);
        assert_eq!(h.since(1, "persistentvolumes", None).len(), 1);
    }

    #[test]
    fn a_watcher_over_its_byte_or_event_budget_is_refused() {
        let limits = StoreLimits { watch_events: Some(3), watch_bytes: Some(100), ..Default::default() };
        let (tx, mut w) = channel(&limits, VecDeque::new());
        assert_eq!(tx.offer(ev(1, 60)), Ok(()));
        assert_eq!(tx.offer(ev(2, 60)), Err(Refused::Behind), "60 + 60 > 100 bytes");
        assert_eq!(w.try_recv().unwrap().rv, 1);
        for rv in 3..=5 {
            assert_eq!(tx.offer(ev(rv, 1)), Ok(()));
        }
        assert_eq!(tx.offer(ev(6, 1)), Err(Refused::Behind), "three events queued already");
        drop(w);
        assert_eq!(tx.offer(ev(7, 1)), Err(Refused::Closed));
    }

    #[test]
    fn a_single_event_larger_than_the_budget_still_goes_to_an_idle_watcher() {
        let limits = StoreLimits { watch_bytes: Some(10), ..Default::default() };
        let (tx, mut w) = channel(&limits, VecDeque::from([ev(1, 5)]));
        assert_eq!(tx.offer(ev(2, 50)), Ok(()));
        assert_eq!(w.try_recv().unwrap().rv, 1, "replay first");
        assert_eq!(w.try_recv().unwrap().rv, 2);
    }

    fn pv(name: &str, pad: usize) -> Value {
        json!({"metadata": {"name": name, "annotations": {"pad": "x".repeat(pad)}},
               "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "nfs": {"server": "s", "path": "/x"}}})
    }

    fn update(s: &crate::Store, name: &str, pad: usize) -> crate::Result<Arc<Value>> {
        let mut o = s.get("persistentvolumes", "", name)?.value();
        o["metadata"]["annotations"]["pad"] = json!("y".repeat(pad));
        s.update("persistentvolumes", o, false)
    }

    #[test]
    fn a_write_that_would_store_an_object_over_the_limit_is_refused_like_etcd() {
        let limits = StoreLimits { max_object_bytes: Some(4096), ..Default::default() };
        let s = crate::Store::builder().limits(limits).build();
        s.create("persistentvolumes", pv("a", 1000)).unwrap();
        let e = s.create("persistentvolumes", pv("b", 5000)).unwrap_err();
        assert_eq!((e.code(), e.reason(), e.to_string().as_str()), (500, "", "etcdserver: request is too large"));
        // Growing an existing object past the limit is refused too, and nothing changes.
        let rv = s.resource_version();
        assert_eq!(update(&s, "a", 5000).unwrap_err(), crate::StoreError::TooLarge);
        assert_eq!(s.resource_version(), rv);
        assert_eq!(
            s.get("persistentvolumes", "", "a").unwrap().value()["metadata"]["annotations"]["pad"]
                .as_str()
                .unwrap()
                .len(),
            1000
        );
    }

    #[test]
    fn many_updates_of_a_large_object_keep_history_within_its_bytes_and_older_versions_expire() {
        let limits = StoreLimits { history_bytes: Some(200_000), ..Default::default() };
        let s = crate::Store::builder().limits(limits).build();
        let first = s.create("persistentvolumes", pv("big", 20_000)).unwrap();
        for i in 0..200 {
            update(&s, "big", 20_000 + i).unwrap();
        }
        // About 20 KB per change and 200 KB kept: the ten newest changes can be replayed.
        let now = s.resource_version();
        let resumable = (0..=now).take_while(|k| s.watch("persistentvolumes", None, Some(now - k)).is_ok()).count();
        assert!((5..=11).contains(&resumable), "{resumable} versions resumable");
        let from = first["metadata"]["resourceVersion"].as_str().unwrap().parse().unwrap();
        let e = s.watch("persistentvolumes", None, Some(from)).err().unwrap();
        assert_eq!((e.code(), e.reason()), (410, "Expired"));
        // A recent version still resumes.
        assert!(s.watch("persistentvolumes", None, Some(s.resource_version() - 2)).is_ok());
    }

    #[test]
    fn a_watcher_that_never_reads_is_closed_and_ends_after_what_it_was_sent() {
        let limits = StoreLimits { watch_events: Some(10), watch_bytes: Some(1 << 20), ..Default::default() };
        let s = crate::Store::builder().limits(limits).build();
        s.create("persistentvolumes", pv("a", 10)).unwrap();
        let mut slow = s.watch_bounded("persistentvolumes", None, None).unwrap();
        let mut fast = s.watch_bounded("persistentvolumes", None, None).unwrap();
        let mut local = s.watch("persistentvolumes", None, None).unwrap();
        let mut fast_seen = 0;
        for i in 0..50 {
            update(&s, "a", 10 + i).unwrap();
            while fast.try_recv().is_ok() {
                fast_seen += 1;
            }
        }
        assert_eq!(fast_seen, 50, "a watcher that keeps up is never closed");
        let mut got = 0;
        while slow.try_recv().is_ok() {
            got += 1;
        }
        assert_eq!(got, 10, "what was queued before it fell behind is still delivered");
        assert_eq!(slow.try_recv().unwrap_err(), TryRecvError::Disconnected);
        let mut local_seen = 0;
        while local.try_recv().is_ok() {
            local_seen += 1;
        }
        assert_eq!(local_seen, 50, "an in-process watcher is never cut off");
    }
}
