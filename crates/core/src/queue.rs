//! A work queue with upstream's semantics.
//!
//! - A key is queued at most once (`dirty` de-duplicates).
//! - A key is never handed to two workers at once: while it is being processed a new `add` only
//!   marks it dirty, and `done` queues it again afterwards.
//! - Failed keys come back after a per-key exponential backoff (5 ms doubling to 1000 s, as
//!   client-go's default controller rate limiter), reset by `forget`.
//! - Delayed adds are kept on the controller's clock, so a simulation releases them by advancing
//!   virtual time.
//!
//! It keeps client-go's workqueue metrics as client-go does: `depth` (keys added and not yet
//! taken, a key re-added while processed included), `adds` (adds of a key not already waiting),
//! `retries` (every delayed add), how long keys waited and how long their processing took
//! (histograms over [`DURATION_BUCKETS`]), and what is being processed now, for the unfinished
//! work and longest running processor gauges. Those durations are wall time at nanosecond
//! resolution, as client-go measures them, whatever clock the controller runs on.

use crate::clock::Clock;
use crate::metrics::Histogram;
use std::borrow::Borrow;
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::hash::Hash;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Upper bounds (seconds) of client-go's workqueue duration histograms:
/// `ExponentialBuckets(10e-9, 10, 10)`, 10 ns to 10 s, as that repeated multiplication rounds
/// them (kube-controller-manager writes `le="9.999999999999999e-06"`).
pub const DURATION_BUCKETS: &[f64] =
    &[1e-8, 1e-7, 1e-6, 9.999999999999999e-6, 9.999999999999999e-5, 0.001, 0.01, 0.1, 1.0, 10.0];

const BASE_DELAY_MS: u64 = 5;
const MAX_DELAY_MS: u64 = 1_000_000;

struct Inner<K> {
    queue: VecDeque<K>,
    dirty: HashSet<K>,
    processing: HashSet<K>,
    delayed: BTreeMap<(u64, u64), K>,
    delayed_due: HashMap<K, u64>,
    failures: HashMap<K, u32>,
    added_at: HashMap<K, Instant>,
    started_at: HashMap<K, Instant>,
    seq: u64,
    shutdown: bool,
}

impl<K> Default for Inner<K> {
    fn default() -> Self {
        Inner {
            queue: VecDeque::new(),
            dirty: HashSet::new(),
            processing: HashSet::new(),
            delayed: BTreeMap::new(),
            delayed_due: HashMap::new(),
            failures: HashMap::new(),
            added_at: HashMap::new(),
            started_at: HashMap::new(),
            seq: 0,
            shutdown: false,
        }
    }
}

/// Counters a queue exposes for metrics.
#[derive(Default, Debug)]
pub struct QueueStats {
    /// Keys added (`workqueue_adds_total`).
    pub adds: AtomicU64,
    /// Delayed adds, rate-limited retries included (`workqueue_retries_total`).
    pub retries: AtomicU64,
    /// Seconds keys waited between add and get (`workqueue_queue_duration_seconds`).
    pub queue_duration: Mutex<Histogram>,
    /// Seconds between get and done (`workqueue_work_duration_seconds`).
    pub work_duration: Mutex<Histogram>,
}

/// A snapshot of a queue's metrics.
#[derive(Clone, Debug, PartialEq)]
pub struct QueueMetrics {
    /// `workqueue_depth`.
    pub depth: usize,
    /// `workqueue_adds_total`.
    pub adds: u64,
    /// `workqueue_retries_total`.
    pub retries: u64,
    /// `workqueue_queue_duration_seconds`.
    pub queue_duration: Histogram,
    /// `workqueue_work_duration_seconds`.
    pub work_duration: Histogram,
    /// `workqueue_unfinished_work_seconds`: summed age of the keys being processed.
    pub unfinished_work_seconds: f64,
    /// `workqueue_longest_running_processor_seconds`: age of the oldest of them.
    pub longest_running_processor_seconds: f64,
}

/// A de-duplicating, rate-limited work queue of keys of one type: a volume's name, a claim's
/// [`pv_model::ObjectKey`], or a type of the caller's (the protection controllers' volume-or-claim).
pub struct WorkQueue<K = String> {
    name: &'static str,
    inner: Mutex<Inner<K>>,
    notify: tokio::sync::Notify,
    /// Told when a delayed key becomes the earliest due, for the one timer that releases them.
    earlier_due: tokio::sync::Notify,
    clock: Arc<dyn Clock>,
    /// Counters for metrics.
    pub stats: QueueStats,
}

impl<K: Clone + Eq + Hash> WorkQueue<K> {
    /// A new queue named `name` (`volumes`, `claims`).
    pub fn new(name: &'static str, clock: Arc<dyn Clock>) -> Self {
        WorkQueue {
            name,
            inner: Mutex::new(Inner::default()),
            notify: tokio::sync::Notify::new(),
            earlier_due: tokio::sync::Notify::new(),
            clock,
            stats: QueueStats {
                queue_duration: Mutex::new(Histogram::with_bounds(DURATION_BUCKETS)),
                work_duration: Mutex::new(Histogram::with_bounds(DURATION_BUCKETS)),
                ..Default::default()
            },
        }
    }

    /// The queue's name.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// Queues a key unless it is already queued.
    pub fn add<Q>(&self, key: &Q)
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        let mut q = self.inner.lock().unwrap();
        if q.shutdown || q.dirty.contains(key) {
            return;
        }
        self.stats.adds.fetch_add(1, Ordering::Relaxed);
        q.dirty.insert(key.to_owned());
        q.added_at.entry(key.to_owned()).or_insert_with(Instant::now);
        if q.processing.contains(key) {
            return;
        }
        q.queue.push_back(key.to_owned());
        drop(q);
        self.notify.notify_one();
    }

    /// Takes the next key, if any, marking it as being processed.
    pub fn try_get(&self) -> Option<K> {
        let mut q = self.inner.lock().unwrap();
        let key = q.queue.pop_front()?;
        q.dirty.remove(&key);
        q.processing.insert(key.clone());
        let now = Instant::now();
        q.started_at.insert(key.clone(), now);
        if let Some(t) = q.added_at.remove(&key) {
            self.stats.queue_duration.lock().unwrap().observe(now.duration_since(t).as_secs_f64());
        }
        Some(key)
    }

    /// Waits for the next key; `None` after shutdown.
    pub async fn get(&self) -> Option<K> {
        loop {
            let notified = self.notify.notified();
            if let Some(k) = self.try_get() {
                return Some(k);
            }
            if self.inner.lock().unwrap().shutdown {
                return None;
            }
            notified.await;
        }
    }

    /// Marks a key as processed; if it was added meanwhile, it is queued again.
    pub fn done<Q>(&self, key: &Q)
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        let mut q = self.inner.lock().unwrap();
        if let Some(t) = q.started_at.remove(key) {
            self.stats.work_duration.lock().unwrap().observe(t.elapsed().as_secs_f64());
        }
        q.processing.remove(key);
        if q.dirty.contains(key) && !q.shutdown {
            q.queue.push_back(key.to_owned());
            drop(q);
            self.notify.notify_one();
        }
    }

    /// Queues a key after `delay` (the earliest pending delay wins).
    pub fn add_after<Q>(&self, key: &Q, delay: Duration)
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        self.stats.retries.fetch_add(1, Ordering::Relaxed);
        if delay.is_zero() {
            return self.add(key);
        }
        let due = self.clock.now_ms() + delay.as_millis() as u64;
        let mut q = self.inner.lock().unwrap();
        if q.shutdown {
            return;
        }
        if let Some(&old) = q.delayed_due.get(key) {
            if old <= due {
                return;
            }
            q.delayed.retain(|_, k| <K as Borrow<Q>>::borrow(k) != key);
        }
        q.seq += 1;
        let seq = q.seq;
        let earliest = q.delayed.keys().next().is_none_or(|&(t, _)| due < t);
        q.delayed.insert((due, seq), key.to_owned());
        q.delayed_due.insert(key.to_owned(), due);
        drop(q);
        if earliest {
            self.earlier_due.notify_one();
        }
    }

    /// Queues a key after its exponential backoff and counts the failure.
    pub fn add_rate_limited<Q>(&self, key: &Q)
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        let n = {
            let mut q = self.inner.lock().unwrap();
            let n = q.failures.entry(key.to_owned()).or_insert(0);
            *n += 1;
            *n
        };
        let delay = BASE_DELAY_MS.saturating_mul(1u64 << (n - 1).min(40)).min(MAX_DELAY_MS);
        self.add_after(key, Duration::from_millis(delay));
    }

    /// Clears a key's failure count.
    pub fn forget<Q>(&self, key: &Q)
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.inner.lock().unwrap().failures.remove(key);
    }

    /// Moves every delayed key that is due to the queue. Returns how many.
    pub fn promote_due(&self) -> usize {
        let now = self.clock.now_ms();
        let due: Vec<K> = {
            let mut q = self.inner.lock().unwrap();
            let mut out = Vec::new();
            while let Some((&(t, s), _)) = q.delayed.iter().next() {
                if t > now {
                    break;
                }
                let k = q.delayed.remove(&(t, s)).unwrap();
                q.delayed_due.remove(&k);
                out.push(k);
            }
            out
        };
        for k in &due {
            self.add::<K>(k);
        }
        due.len()
    }

    /// When the next delayed key is due (clock milliseconds).
    pub fn next_due(&self) -> Option<u64> {
        self.inner.lock().unwrap().delayed.keys().next().map(|(t, _)| *t)
    }

    /// The queue's metrics now.
    pub fn metrics(&self) -> QueueMetrics {
        let (depth, ages) = {
            let q = self.inner.lock().unwrap();
            let now = Instant::now();
            let ages: Vec<f64> = q.started_at.values().map(|t| now.duration_since(*t).as_secs_f64()).collect();
            (q.dirty.len(), ages)
        };
        QueueMetrics {
            depth,
            adds: self.stats.adds.load(Ordering::Relaxed),
            retries: self.stats.retries.load(Ordering::Relaxed),
            queue_duration: self.stats.queue_duration.lock().unwrap().clone(),
            work_duration: self.stats.work_duration.lock().unwrap().clone(),
            unfinished_work_seconds: ages.iter().sum(),
            longest_running_processor_seconds: ages.iter().copied().fold(0.0, f64::max),
        }
    }

    /// Takes every queued key and marks it done unprocessed. Returns how many.
    pub fn discard(&self) -> usize {
        let mut n = 0;
        while let Some(k) = self.try_get() {
            self.done::<K>(&k);
            n += 1;
        }
        n
    }

    /// Keys waiting to be processed.
    pub fn len(&self) -> usize {
        self.inner.lock().unwrap().queue.len()
    }

    /// True when nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// True when nothing is queued or being processed (delayed keys aside).
    pub fn is_idle(&self) -> bool {
        let q = self.inner.lock().unwrap();
        q.queue.is_empty() && q.processing.is_empty()
    }

    /// Stops the queue: `get` returns `None` once drained.
    pub fn shutdown(&self) {
        self.inner.lock().unwrap().shutdown = true;
        self.notify.notify_waiters();
    }
}

/// The part of a queue a [`Timer`] drives: its delayed keys.
pub trait Delayed: Send + Sync {
    /// Moves every delayed key that is due to the queue. Returns how many.
    fn promote_due(&self) -> usize;
    /// When the next delayed key is due (clock milliseconds).
    fn next_due(&self) -> Option<u64>;
    /// Told when a delayed key becomes due sooner than [`Delayed::next_due`] said; a signal given
    /// while nobody waited is kept for the next wait (one, however many were given).
    fn earlier(&self) -> &tokio::sync::Notify;
}

impl<K: Clone + Eq + Hash + Send> Delayed for WorkQueue<K> {
    fn promote_due(&self) -> usize {
        WorkQueue::promote_due(self)
    }
    fn next_due(&self) -> Option<u64> {
        WorkQueue::next_due(self)
    }
    fn earlier(&self) -> &tokio::sync::Notify {
        &self.earlier_due
    }
}

/// Releases the delayed keys of some queues on one clock: "move the due keys to their queues,
/// then wait until the next is due". The binder's timer, the protection controllers' and the
/// simulator's stepping are this one loop, in real time ([`Timer::sleep_until`]) or stepped
/// ([`Timer::step`]).
pub struct Timer<'a> {
    clock: &'a dyn Clock,
    queues: Vec<&'a dyn Delayed>,
}

impl<'a> Timer<'a> {
    /// A timer of `queues` on `clock`.
    pub fn new(clock: &'a dyn Clock, queues: impl IntoIterator<Item = &'a dyn Delayed>) -> Self {
        Timer { clock, queues: queues.into_iter().collect() }
    }

    /// Moves every due key to its queue. Returns how many.
    pub fn promote_due(&self) -> usize {
        self.queues.iter().map(|q| q.promote_due()).sum()
    }

    /// When the next delayed key of any queue is due.
    pub fn next_due(&self) -> Option<u64> {
        self.queues.iter().filter_map(|q| q.next_due()).min()
    }

    /// Real time: sleeps on the clock until the next key is due or `until` (clock
    /// milliseconds), whichever is first, and wakes sooner when a key comes due earlier.
    pub async fn sleep_until(&self, until: u64) {
        let wake = self.next_due().map_or(until, |due| due.min(until));
        let wait = Duration::from_millis(wake.saturating_sub(self.clock.now_ms()));
        let mut earlier: Vec<_> = self.queues.iter().map(|q| Box::pin(q.earlier().notified())).collect();
        let any_earlier = std::future::poll_fn(|cx| {
            for n in earlier.iter_mut() {
                if std::future::Future::poll(n.as_mut(), cx).is_ready() {
                    return std::task::Poll::Ready(());
                }
            }
            std::task::Poll::Pending
        });
        tokio::select! {
            _ = self.clock.sleep(wait) => {}
            _ = any_earlier => {}
        }
    }

    /// Stepped: when a key is due no later than `deadline`, moves time there with `advance_to`
    /// and the due keys to their queues. Returns whether it did.
    pub fn step(&self, deadline: u64, advance_to: impl FnOnce(u64)) -> bool {
        match self.next_due().filter(|due| *due <= deadline) {
            Some(due) => {
                advance_to(due);
                self.promote_due();
                true
            }
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::SimClock;

    fn queue() -> (WorkQueue, Arc<SimClock>) {
        let clock = SimClock::new(jiff::Timestamp::now());
        (WorkQueue::new("test", clock.clone()), clock)
    }

    #[test]
    fn queue_should_deduplicate_keys() {
        let (q, _) = queue();
        q.add("a");
        q.add("a");
        q.add("b");
        assert_eq!(q.len(), 2);
        assert_eq!(q.try_get().as_deref(), Some("a"));
        assert_eq!(q.try_get().as_deref(), Some("b"));
        assert_eq!(q.try_get(), None);
    }

    #[test]
    fn key_added_while_processing_is_processed_again_afterwards_not_concurrently() {
        let (q, _) = queue();
        q.add("a");
        let k = q.try_get().unwrap();
        q.add("a");
        assert_eq!(q.try_get(), None, "must not hand out a key being processed");
        q.done(&k);
        assert_eq!(q.try_get().as_deref(), Some("a"));
        q.done("a");
        assert!(q.is_idle());
    }

    #[test]
    fn failed_keys_back_off_exponentially_and_forget_resets() {
        let (q, clock) = queue();
        q.add_rate_limited("a");
        assert_eq!(q.next_due(), Some(5));
        clock.advance(Duration::from_millis(5));
        assert_eq!(q.promote_due(), 1);
        q.try_get().unwrap();
        q.done("a");
        q.add_rate_limited("a");
        assert_eq!(q.next_due(), Some(15), "second failure waits 10ms");
        q.forget("a");
        clock.advance(Duration::from_millis(10));
        q.promote_due();
        q.try_get().unwrap();
        q.done("a");
        q.add_rate_limited("a");
        assert_eq!(q.next_due(), Some(20), "after forget the delay starts over");
    }

    #[test]
    fn metrics_follow_client_go_depth_adds_retries_and_durations() {
        let (q, _) = queue();
        q.add("a");
        q.add("a"); // already waiting: not an add
        q.add("b");
        let m = q.metrics();
        assert_eq!((m.depth, m.adds, m.retries), (2, 2, 0));
        let a = q.try_get().unwrap();
        q.add("a"); // re-added while processed: counts in depth and adds
        let m = q.metrics();
        assert_eq!((m.depth, m.adds), (2, 3));
        assert_eq!(m.queue_duration.count, 1);
        assert!(
            m.longest_running_processor_seconds >= 0.0
                && m.unfinished_work_seconds >= m.longest_running_processor_seconds
        );
        q.done(&a);
        q.add_rate_limited("c");
        q.add_after("c", Duration::ZERO);
        let m = q.metrics();
        assert_eq!((m.retries, m.work_duration.count), (2, 1));
        assert_eq!(m.work_duration.bounds(), DURATION_BUCKETS);
        assert_eq!(m.work_duration.buckets.iter().sum::<u64>(), 1);
    }

    /// Whether the queue's sooner-due signal fires without waiting.
    async fn woken(q: &WorkQueue) -> bool {
        tokio::time::timeout(Duration::from_millis(20), q.earlier().notified()).await.is_ok()
    }

    #[tokio::test]
    async fn the_timer_is_woken_only_when_a_key_comes_due_sooner() {
        let (q, _) = queue();
        assert!(!woken(&q).await, "nothing delayed yet");
        q.add_after("a", Duration::from_secs(10));
        assert!(woken(&q).await, "the first delayed key is the earliest");
        q.add_after("b", Duration::from_secs(20));
        assert!(!woken(&q).await, "a later key changes nothing the timer waits for");
        q.add_after("c", Duration::from_secs(5));
        assert!(woken(&q).await, "a sooner key moves the timer");
        q.add_after("c", Duration::from_secs(1));
        q.add_after("d", Duration::from_millis(500));
        assert!(woken(&q).await);
        assert!(!woken(&q).await, "two wake-ups before the timer looked are one");
        assert_eq!(q.next_due(), Some(500));
    }

    #[test]
    fn earliest_delay_wins() {
        let (q, _) = queue();
        q.add_after("a", Duration::from_secs(10));
        q.add_after("a", Duration::from_secs(1));
        q.add_after("a", Duration::from_secs(5));
        assert_eq!(q.next_due(), Some(1000));
    }

    #[test]
    fn keys_of_any_type_are_queued_once_and_discarded_unprocessed() {
        #[derive(Clone, Debug, PartialEq, Eq, Hash)]
        enum Key {
            Volume(String),
            Claim(pv_model::ObjectKey),
        }
        let clock = SimClock::new(jiff::Timestamp::now());
        let q: WorkQueue<Key> = WorkQueue::new("typed", clock);
        let claim = Key::Claim(pv_model::ObjectKey::new("ns", "c"));
        q.add(&Key::Volume("c".into()));
        q.add(&claim);
        q.add(&claim);
        assert_eq!(q.len(), 2, "a volume and a claim of one name are two keys");
        assert_eq!(q.try_get(), Some(Key::Volume("c".into())));
        assert_eq!(q.discard(), 1);
        assert!(q.try_get().is_none());
        // The key taken before is still being processed; the discarded one is done.
        assert!(!q.is_idle());
        q.done(&Key::Volume("c".into()));
        assert!(q.is_idle());
    }

    #[test]
    fn a_stepped_timer_moves_time_to_the_earliest_key_of_its_queues() {
        let clock = SimClock::new(jiff::Timestamp::now());
        let volumes: WorkQueue = WorkQueue::new("volumes", clock.clone());
        let claims: WorkQueue<pv_model::ObjectKey> = WorkQueue::new("claims", clock.clone());
        volumes.add_after("pv-1", Duration::from_millis(300));
        claims.add_after(&pv_model::ObjectKey::new("ns", "c"), Duration::from_millis(100));
        let timer = Timer::new(clock.as_ref(), [&volumes as &dyn Delayed, &claims]);
        assert_eq!(timer.next_due(), Some(100));
        assert!(!timer.step(99, |t| clock.advance_to(t)), "nothing is due by the deadline");
        assert_eq!(clock.now_ms(), 0);
        assert!(timer.step(1_000, |t| clock.advance_to(t)));
        assert_eq!((clock.now_ms(), claims.len(), volumes.len()), (100, 1, 0));
        assert!(timer.step(1_000, |t| clock.advance_to(t)));
        assert_eq!((clock.now_ms(), volumes.len(), timer.next_due()), (300, 1, None));
    }

    #[tokio::test]
    async fn a_sleeping_timer_wakes_when_a_key_of_any_queue_comes_due_sooner() {
        let clock = crate::clock::SystemClock::new();
        let volumes: WorkQueue = WorkQueue::new("volumes", clock.clone());
        let claims: WorkQueue<pv_model::ObjectKey> = WorkQueue::new("claims", clock.clone());
        let timer = Timer::new(clock.as_ref(), [&volumes as &dyn Delayed, &claims]);
        let start = std::time::Instant::now();
        let sleep = timer.sleep_until(clock.now_ms() + 60_000);
        tokio::pin!(sleep);
        // Not woken while nothing is delayed.
        assert!(tokio::time::timeout(Duration::from_millis(50), &mut sleep).await.is_err());
        claims.add_after(&pv_model::ObjectKey::new("ns", "c"), Duration::from_millis(10));
        tokio::time::timeout(Duration::from_secs(5), &mut sleep).await.expect("woken by the claim queue");
        assert!(start.elapsed() < Duration::from_secs(5));
        // Slept until the key was due; promoted it then.
        timer.sleep_until(clock.now_ms() + 60_000).await;
        assert_eq!(timer.promote_due(), 1);
        assert_eq!(claims.len(), 1);
    }
}
