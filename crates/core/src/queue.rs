//! A work queue with upstream's semantics.
//!
//! - A key is queued at most once (`dirty` de-duplicates).
//! - A key is never handed to two workers at once: while it is being processed a new `add` only
//!   marks it dirty, and `done` queues it again afterwards.
//! - Failed keys come back after a per-key exponential backoff (5 ms doubling to 1000 s, as
//!   client-go's default controller rate limiter), reset by `forget`.
//! - Delayed adds are kept on the controller's clock, so a simulation releases them by advancing
//!   virtual time.

use crate::clock::Clock;
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const BASE_DELAY_MS: u64 = 5;
const MAX_DELAY_MS: u64 = 1_000_000;

#[derive(Default)]
struct Inner {
    queue: VecDeque<String>,
    dirty: HashSet<String>,
    processing: HashSet<String>,
    delayed: BTreeMap<(u64, u64), String>,
    delayed_due: HashMap<String, u64>,
    failures: HashMap<String, u32>,
    added_at: HashMap<String, u64>,
    seq: u64,
    shutdown: bool,
}

/// Counters a queue exposes for metrics.
#[derive(Default, Debug)]
pub struct QueueStats {
    /// Keys added (`workqueue_adds_total`).
    pub adds: AtomicU64,
    /// Rate-limited re-adds (`workqueue_retries_total`).
    pub retries: AtomicU64,
    /// Sum of milliseconds keys waited in the queue.
    pub wait_ms_sum: AtomicU64,
    /// Keys taken from the queue.
    pub gets: AtomicU64,
}

/// A de-duplicating, rate-limited work queue of string keys.
pub struct WorkQueue {
    name: &'static str,
    inner: Mutex<Inner>,
    notify: tokio::sync::Notify,
    clock: Arc<dyn Clock>,
    /// Counters for metrics.
    pub stats: QueueStats,
}

impl WorkQueue {
    /// A new queue named `name` (`volumes`, `claims`).
    pub fn new(name: &'static str, clock: Arc<dyn Clock>) -> Self {
        WorkQueue {
            name,
            inner: Mutex::new(Inner::default()),
            notify: tokio::sync::Notify::new(),
            clock,
            stats: QueueStats::default(),
        }
    }

    /// The queue's name.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// Queues a key unless it is already queued.
    pub fn add(&self, key: &str) {
        let mut q = self.inner.lock().unwrap();
        if q.shutdown || q.dirty.contains(key) {
            return;
        }
        self.stats.adds.fetch_add(1, Ordering::Relaxed);
        q.dirty.insert(key.to_string());
        let now = self.clock.now_ms();
        q.added_at.entry(key.to_string()).or_insert(now);
        if q.processing.contains(key) {
            return;
        }
        q.queue.push_back(key.to_string());
        drop(q);
        self.notify.notify_one();
    }

    /// Takes the next key, if any, marking it as being processed.
    pub fn try_get(&self) -> Option<String> {
        let mut q = self.inner.lock().unwrap();
        let key = q.queue.pop_front()?;
        q.dirty.remove(&key);
        q.processing.insert(key.clone());
        if let Some(t) = q.added_at.remove(&key) {
            self.stats.wait_ms_sum.fetch_add(self.clock.now_ms().saturating_sub(t), Ordering::Relaxed);
        }
        self.stats.gets.fetch_add(1, Ordering::Relaxed);
        Some(key)
    }

    /// Waits for the next key; `None` after shutdown.
    pub async fn get(&self) -> Option<String> {
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
    pub fn done(&self, key: &str) {
        let mut q = self.inner.lock().unwrap();
        q.processing.remove(key);
        if q.dirty.contains(key) && !q.shutdown {
            q.queue.push_back(key.to_string());
            drop(q);
            self.notify.notify_one();
        }
    }

    /// Queues a key after `delay` (the earliest pending delay wins).
    pub fn add_after(&self, key: &str, delay: Duration) {
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
            q.delayed.retain(|_, k| k != key);
        }
        q.seq += 1;
        let seq = q.seq;
        q.delayed.insert((due, seq), key.to_string());
        q.delayed_due.insert(key.to_string(), due);
        drop(q);
        self.notify.notify_one();
    }

    /// Queues a key after its exponential backoff and counts the failure.
    pub fn add_rate_limited(&self, key: &str) {
        let n = {
            let mut q = self.inner.lock().unwrap();
            let n = q.failures.entry(key.to_string()).or_insert(0);
            *n += 1;
            *n
        };
        self.stats.retries.fetch_add(1, Ordering::Relaxed);
        let delay = BASE_DELAY_MS.saturating_mul(1u64 << (n - 1).min(40)).min(MAX_DELAY_MS);
        self.add_after(key, Duration::from_millis(delay));
    }

    /// Clears a key's failure count.
    pub fn forget(&self, key: &str) {
        self.inner.lock().unwrap().failures.remove(key);
    }

    /// Moves every delayed key that is due to the queue. Returns how many.
    pub fn promote_due(&self) -> usize {
        let now = self.clock.now_ms();
        let due: Vec<String> = {
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
            self.add(k);
        }
        due.len()
    }

    /// When the next delayed key is due (clock milliseconds).
    pub fn next_due(&self) -> Option<u64> {
        self.inner.lock().unwrap().delayed.keys().next().map(|(t, _)| *t)
    }

    /// Keys waiting to be processed (`workqueue_depth`).
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
    fn earliest_delay_wins() {
        let (q, _) = queue();
        q.add_after("a", Duration::from_secs(10));
        q.add_after("a", Duration::from_secs(1));
        q.add_after("a", Duration::from_secs(5));
        assert_eq!(q.next_due(), Some(1000));
    }
}
