//! The event recorder: upstream's reasons and messages, correlated as client-go's recorder does.
//!
//! Upstream's binder re-emits its event on every sync of an object that stays stuck (a Pending
//! claim gets FailedBinding every resync period), and client-go's `EventCorrelator` turns the
//! repeats into one Event whose `count` grows and whose `lastTimestamp` moves: `kubectl describe`
//! shows "(x12 over 3m)", and the Event never expires while the problem lasts. The [`Correlator`]
//! here applies the same three rules, with the same keys and limits:
//!
//! 1. **Aggregation.** Events about one object with the same type and reason but different
//!    messages are counted per 10-minute window (reset when none came for that long); from the
//!    10th distinct message on, they are written as one Event whose message is
//!    `(combined from similar events): <latest message>`.
//! 2. **Counting.** A repeat of an Event (same object, type, reason and message, or the same
//!    combined Event) updates it: `count` + 1, `lastTimestamp` now, `firstTimestamp`, name and
//!    `involvedObject` kept.
//! 3. **Spam filter.** Per object and type, a token bucket of 25 writes refilled at one per five
//!    minutes. A filtered repeat still counts, so the next write carries the true count.
//!
//! Recording does not wait for the API server: as client-go's broadcaster, [`Recorder::event`]
//! puts the event on a queue of [`QUEUE_LENGTH`] (a full queue drops it, with a warning) and
//! returns, and one drainer ([`Recorder::run`], or [`Recorder::flush`] as a simulation step)
//! correlates and writes the events in order, so a sync never holds its worker for an event's
//! round trip.
//!
//! Memory is bounded: each rule keeps a least-recently-used cache of [`REMEMBERED`] entries, as
//! client-go's do (4096), holding names, counts and timestamps, never whole Events. A repeat of a
//! forgotten event starts a new Event.

use crate::api::ClusterApi;
use crate::clock::Clock;
use lru::LruCache;
use pv_model::annotations::EVENT_COMPONENT;
use pv_model::k8s::{Event, ObjectMeta, ObjectReference, PersistentVolume, PersistentVolumeClaim, Pod, Time};
use std::collections::{HashSet, VecDeque};
use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// How many entries each of the correlator's caches keeps (client-go's `maxLruCacheEntries`).
pub const REMEMBERED: usize = 4096;
/// Distinct messages per object, type and reason from which events are combined
/// (client-go's `defaultAggregateMaxEvents`).
pub const AGGREGATE_MAX_EVENTS: usize = 10;
/// A window of aggregation ends after this long without an event (`defaultAggregateIntervalInSeconds`).
pub const AGGREGATE_INTERVAL_MS: u64 = 600_000;
/// Writes an object and type may burst to (`defaultSpamBurst`).
pub const SPAM_BURST: f64 = 25.0;
/// Refill of that burst, per second (`defaultSpamQPS`: one per five minutes).
pub const SPAM_QPS: f64 = 1.0 / 300.0;
/// Events waiting to be written at most; beyond, new ones are dropped (client-go's
/// `maxQueuedEvents`).
pub const QUEUE_LENGTH: usize = 1000;
/// Prefix of a combined Event's message (`EventAggregatorByReasonMessageFunc`).
pub const COMBINED_PREFIX: &str = "(combined from similar events): ";

/// The object an event is about.
#[derive(Clone, Debug)]
pub struct Involved {
    kind: &'static str,
    namespace: Option<String>,
    name: String,
    uid: String,
    resource_version: String,
}

impl Involved {
    /// `Kind namespace/name` (or `Kind name` for cluster-scoped objects), for logs.
    pub fn describe(&self) -> String {
        match &self.namespace {
            Some(ns) => format!("{} {ns}/{}", self.kind, self.name),
            None => format!("{} {}", self.kind, self.name),
        }
    }
}

impl From<&PersistentVolume> for Involved {
    fn from(v: &PersistentVolume) -> Self {
        Involved {
            kind: "PersistentVolume",
            namespace: None,
            name: v.metadata.name.clone().unwrap_or_default(),
            uid: v.metadata.uid.clone().unwrap_or_default(),
            resource_version: v.metadata.resource_version.clone().unwrap_or_default(),
        }
    }
}

impl From<&PersistentVolumeClaim> for Involved {
    fn from(c: &PersistentVolumeClaim) -> Self {
        Involved {
            kind: "PersistentVolumeClaim",
            namespace: c.metadata.namespace.clone(),
            name: c.metadata.name.clone().unwrap_or_default(),
            uid: c.metadata.uid.clone().unwrap_or_default(),
            resource_version: c.metadata.resource_version.clone().unwrap_or_default(),
        }
    }
}

impl From<&Pod> for Involved {
    fn from(p: &Pod) -> Self {
        Involved {
            kind: "Pod",
            namespace: p.metadata.namespace.clone(),
            name: p.metadata.name.clone().unwrap_or_default(),
            uid: p.metadata.uid.clone().unwrap_or_default(),
            resource_version: p.metadata.resource_version.clone().unwrap_or_default(),
        }
    }
}

/// The object and type: client-go's spam key (source and apiVersion are constant here).
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
struct SpamKey {
    kind: &'static str,
    namespace: Option<String>,
    name: String,
    uid: String,
    type_: &'static str,
}

/// Object, type and reason: the aggregation key.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
struct AggregateKey {
    object: SpamKey,
    reason: &'static str,
}

/// Which Event a repeat counts on: one message's, or the combined one (`message: None`).
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
struct LogKey {
    aggregate: AggregateKey,
    message: Option<String>,
}

/// Messages seen in the current aggregation window.
struct Aggregate {
    messages: HashSet<String>,
    last_ms: u64,
}

/// What is known of a written Event (client-go's `eventLog`).
#[derive(Clone, Debug)]
struct Log {
    count: i32,
    first: Time,
    name: String,
    involved_resource_version: String,
}

/// A token bucket (golang.org/x/time/rate, as client-go's passive rate limiter).
struct Bucket {
    tokens: f64,
    last_ms: u64,
}

impl Bucket {
    fn full(now_ms: u64) -> Self {
        Bucket { tokens: SPAM_BURST, last_ms: now_ms }
    }

    fn try_accept(&mut self, now_ms: u64) -> bool {
        let elapsed = now_ms.saturating_sub(self.last_ms) as f64 / 1000.0;
        self.tokens = (self.tokens + elapsed * SPAM_QPS).min(SPAM_BURST);
        self.last_ms = self.last_ms.max(now_ms);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

/// What to write for one event, once correlated.
#[derive(Clone, Debug, PartialEq)]
pub struct Correlated {
    key_index: usize,
    /// The message to write (combined or not).
    pub message: String,
    /// The Event's count after this occurrence.
    pub count: i32,
    /// The existing Event to update (`count > 1`), else `None`: a new Event.
    pub name: Option<String>,
    /// Its first timestamp (now for a new Event).
    pub first: Time,
    /// The involved object's resourceVersion the Event was created with.
    pub involved_resource_version: String,
}

/// client-go's `EventCorrelator`: aggregation, counting and the spam filter (see the module note).
pub struct Correlator {
    aggregates: LruCache<AggregateKey, Aggregate>,
    logs: LruCache<LogKey, Log>,
    spam: LruCache<SpamKey, Bucket>,
    /// Keys of correlations whose write has not been confirmed yet, by `Correlated::key_index`.
    pending: LruCache<usize, LogKey>,
    next_index: usize,
}

impl Default for Correlator {
    fn default() -> Self {
        let n = NonZeroUsize::new(REMEMBERED).expect("not zero");
        Correlator {
            aggregates: LruCache::new(n),
            logs: LruCache::new(n),
            spam: LruCache::new(n),
            pending: LruCache::new(n),
            next_index: 0,
        }
    }
}

impl Correlator {
    /// Correlates one occurrence at `now` (`now_ms` on the controller's monotonic clock): what to
    /// write, or `None` when the spam filter drops it (it is counted all the same).
    pub fn correlate(
        &mut self,
        obj: &Involved,
        type_: &'static str,
        reason: &'static str,
        message: &str,
        now: Time,
        now_ms: u64,
    ) -> Option<Correlated> {
        let object = SpamKey {
            kind: obj.kind,
            namespace: obj.namespace.clone(),
            name: obj.name.clone(),
            uid: obj.uid.clone(),
            type_,
        };
        let aggregate = AggregateKey { object: object.clone(), reason };

        // 1. Aggregation by reason.
        let record = self
            .aggregates
            .get_or_insert_mut(aggregate.clone(), || Aggregate { messages: HashSet::new(), last_ms: now_ms });
        if now_ms.saturating_sub(record.last_ms) > AGGREGATE_INTERVAL_MS {
            record.messages.clear();
        }
        record.messages.insert(message.to_string());
        record.last_ms = now_ms;
        let (key, message) = if record.messages.len() < AGGREGATE_MAX_EVENTS {
            (LogKey { aggregate, message: Some(message.to_string()) }, message.to_string())
        } else {
            // As client-go: drop one remembered message, so the window stays one short of the
            // limit and every further new message is combined too.
            if let Some(any) = record.messages.iter().find(|m| *m != message).cloned() {
                record.messages.remove(&any);
            }
            (LogKey { aggregate, message: None }, format!("{COMBINED_PREFIX}{message}"))
        };

        // 2. Counting on the existing Event.
        let log = match self.logs.get(&key) {
            Some(l) if l.count > 0 => Log { count: l.count + 1, ..l.clone() },
            _ => Log {
                count: 1,
                first: now.clone(),
                name: String::new(),
                involved_resource_version: obj.resource_version.clone(),
            },
        };
        self.logs.put(key.clone(), log.clone());

        // 3. Spam filter, per object and type.
        let accepted = self.spam.get_or_insert_mut(object, || Bucket::full(now_ms)).try_accept(now_ms);
        if !accepted {
            return None;
        }
        let key_index = self.next_index;
        self.next_index = self.next_index.wrapping_add(1);
        self.pending.put(key_index, key);
        Some(Correlated {
            key_index,
            message,
            count: log.count,
            name: (log.count > 1 && !log.name.is_empty()).then_some(log.name),
            first: log.first,
            involved_resource_version: log.involved_resource_version,
        })
    }

    /// Records the Event as the API server stored it, so the next repeat updates it.
    pub fn written(&mut self, c: &Correlated, stored: &Event) {
        let Some(key) = self.pending.pop(&c.key_index) else {
            return;
        };
        let log = Log {
            count: stored.count.unwrap_or(1),
            first: stored.first_timestamp.clone().unwrap_or_else(|| c.first.clone()),
            name: stored.metadata.name.clone().unwrap_or_default(),
            involved_resource_version: c.involved_resource_version.clone(),
        };
        self.logs.put(key, log);
    }

    /// Forgets a correlation whose write failed.
    pub fn failed(&mut self, c: &Correlated) {
        self.pending.pop(&c.key_index);
    }

    /// Entries of the largest cache (each is at most [`REMEMBERED`]).
    pub fn remembered(&self) -> usize {
        self.aggregates.len().max(self.logs.len()).max(self.spam.len())
    }
}

/// Emits Events through the API.
pub struct Recorder {
    api: Arc<dyn ClusterApi>,
    clock: Arc<dyn Clock>,
    /// `reportingInstance` of every event written.
    instance: String,
    /// `source.component` and `reportingComponent` of every event written.
    component: &'static str,
    correlator: Mutex<Correlator>,
    seq: AtomicU64,
    /// Events recorded and not yet correlated and written, oldest first.
    queue: Mutex<VecDeque<Pending>>,
    /// Wakes the drainer.
    queued: tokio::sync::Notify,
    /// Events dropped because the queue was full.
    pub dropped: AtomicU64,
    /// Events written (new or counted), for metrics and tests.
    pub emitted: AtomicU64,
}

/// An event as recorded: what it says, about what, and when.
struct Pending {
    obj: Involved,
    type_: &'static str,
    reason: &'static str,
    key_message: String,
    detail: String,
    now: Time,
    now_ms: u64,
}

impl Recorder {
    /// A recorder writing through `api`.
    pub fn new(api: Arc<dyn ClusterApi>, clock: Arc<dyn Clock>) -> Self {
        Recorder {
            api,
            clock,
            instance: String::new(),
            component: EVENT_COMPONENT,
            correlator: Mutex::default(),
            seq: AtomicU64::new(0),
            queue: Mutex::default(),
            queued: tokio::sync::Notify::new(),
            dropped: AtomicU64::new(0),
            emitted: AtomicU64::new(0),
        }
    }

    /// The recorder with events' `reportingInstance` set to `instance` (empty by default, as
    /// kube-controller-manager's legacy recorder leaves it; `source` stays upstream's).
    pub fn with_instance(mut self, instance: &str) -> Self {
        self.instance = instance.to_string();
        self
    }

    /// The recorder with events' `source.component` and `reportingComponent` set to
    /// `component` (the controller's, `persistentvolume-controller`, by default).
    pub fn with_component(mut self, component: &'static str) -> Self {
        self.component = component;
        self
    }

    /// Records an event about `obj`. Failures to write are logged, never returned: events are
    /// best effort, as upstream's.
    pub async fn event(
        &self,
        obj: impl Into<Involved>,
        type_: &'static str,
        reason: &'static str,
        message: impl Into<String>,
    ) {
        self.event_with_detail(obj, type_, reason, message, "").await
    }

    /// Records an event whose message is upstream's `message` followed by `detail`, a part that
    /// changes with the state (FailedBinding's breakdown of rejected volumes). Repeats are
    /// correlated on `message` alone, as upstream's are, so a changing detail updates the one
    /// Event instead of starting new ones.
    pub async fn event_with_detail(
        &self,
        obj: impl Into<Involved>,
        type_: &'static str,
        reason: &'static str,
        message: impl Into<String>,
        detail: &str,
    ) {
        let mut queue = self.queue.lock().unwrap();
        if queue.len() >= QUEUE_LENGTH {
            drop(queue);
            self.dropped.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(reason, "dropping an event: {QUEUE_LENGTH} are waiting to be written");
            return;
        }
        queue.push_back(Pending {
            obj: obj.into(),
            type_,
            reason,
            key_message: message.into(),
            detail: detail.to_string(),
            now: Time(self.clock.now()),
            now_ms: self.clock.now_ms(),
        });
        drop(queue);
        self.queued.notify_one();
    }

    /// Events recorded and not written yet.
    pub fn pending(&self) -> usize {
        self.queue.lock().unwrap().len()
    }

    /// Correlates and writes every queued event, in order. Returns how many were taken.
    pub async fn flush(&self) -> usize {
        let mut n = 0;
        loop {
            let next = self.queue.lock().unwrap().pop_front();
            let Some(p) = next else { return n };
            self.write(p).await;
            n += 1;
        }
    }

    /// Writes queued events as they come until `shutdown` completes, then writes what is left.
    pub async fn run(&self, shutdown: impl std::future::Future<Output = ()>) {
        tokio::pin!(shutdown);
        loop {
            self.flush().await;
            tokio::select! {
                _ = self.queued.notified() => {}
                _ = &mut shutdown => break,
            }
        }
        self.flush().await;
    }

    async fn write(&self, p: Pending) {
        let Pending { obj, type_, reason, key_message, detail, now, now_ms } = p;
        let detail = detail.as_str();
        let correlated =
            self.correlator.lock().unwrap().correlate(&obj, type_, reason, &key_message, now.clone(), now_ms);
        let message = format!("{key_message}{detail}");
        let correlated = correlated.map(|mut c| {
            c.message.push_str(detail);
            c
        });
        let Some(c) = correlated else {
            tracing::debug!(object = %obj.name, kind = obj.kind, reason, %message, "event dropped by the spam filter");
            return;
        };
        if c.count == 1 {
            // Upstream's binder logs its events at V(3) (`StartStructuredLogging(3)`).
            tracing::info!(target: crate::PROGRESS, object = %obj.name, kind = obj.kind, r#type = type_, reason, %message, "event");
        } else {
            tracing::debug!(object = %obj.name, kind = obj.kind, r#type = type_, reason, %message, count = c.count, "event repeated");
        }
        self.emitted.fetch_add(1, Ordering::Relaxed);
        let mut event = self.build(&obj, type_, reason, &c, now);
        let written = match c.name {
            // An unconditional update of count, lastTimestamp and message (client-go patches).
            Some(_) => match self.api.update_event(&event).await {
                Err(e) if e.is_not_found() => {
                    event.metadata.name = Some(self.fresh_name(&obj.name, &event));
                    self.api.create_event(&event).await
                }
                r => r,
            },
            None => self.api.create_event(&event).await,
        };
        let mut correlator = self.correlator.lock().unwrap();
        match written {
            Ok(stored) => correlator.written(&c, &stored),
            Err(e) => {
                correlator.failed(&c);
                tracing::warn!(error = %e, reason, "could not write event");
            }
        }
    }

    /// Distinct entries remembered for correlation (at most [`REMEMBERED`] per cache).
    pub fn remembered(&self) -> usize {
        self.correlator.lock().unwrap().remembered()
    }

    fn fresh_name(&self, object: &str, e: &Event) -> String {
        let n = self.seq.fetch_add(1, Ordering::Relaxed);
        let nanos = e.last_timestamp.as_ref().map_or(0, |t| t.0.as_nanosecond()) as u64;
        format!("{object}.{:x}", nanos.wrapping_add(n))
    }

    fn build(&self, obj: &Involved, type_: &str, reason: &str, c: &Correlated, now: Time) -> Event {
        let mut e = Event {
            metadata: ObjectMeta {
                name: c.name.clone(),
                namespace: Some(obj.namespace.clone().unwrap_or_else(|| "default".into())),
                ..Default::default()
            },
            involved_object: ObjectReference {
                api_version: Some("v1".into()),
                kind: Some(obj.kind.into()),
                namespace: obj.namespace.clone(),
                name: Some(obj.name.clone()),
                uid: Some(obj.uid.clone()),
                resource_version: Some(c.involved_resource_version.clone()),
                field_path: None,
            },
            reason: Some(reason.into()),
            message: Some(c.message.clone()),
            type_: Some(type_.into()),
            count: Some(c.count),
            first_timestamp: Some(c.first.clone()),
            last_timestamp: Some(now),
            source: Some(k8s_openapi::api::core::v1::EventSource {
                component: Some(self.component.into()),
                host: None,
            }),
            reporting_component: Some(self.component.into()),
            reporting_instance: Some(self.instance.clone()),
            ..Default::default()
        };
        if e.metadata.name.is_none() {
            e.metadata.name = Some(self.fresh_name(&obj.name, &e));
        }
        e
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim(rv: &str) -> Involved {
        Involved {
            kind: "PersistentVolumeClaim",
            namespace: Some("ns".into()),
            name: "c1".into(),
            uid: "u1".into(),
            resource_version: rv.into(),
        }
    }

    fn at(s: u64) -> (Time, u64) {
        (Time(k8s_openapi::jiff::Timestamp::from_second(1_700_000_000 + s as i64).unwrap()), s * 1000)
    }

    /// Correlates and confirms the write as the server would store it.
    fn emit(c: &mut Correlator, reason: &'static str, msg: &str, s: u64) -> Option<Correlated> {
        let (now, ms) = at(s);
        let r = c.correlate(&claim("1"), "Normal", reason, msg, now.clone(), ms)?;
        let stored = Event {
            metadata: ObjectMeta {
                name: Some(r.name.clone().unwrap_or_else(|| format!("c1.{s}"))),
                ..Default::default()
            },
            count: Some(r.count),
            first_timestamp: Some(r.first.clone()),
            last_timestamp: Some(now),
            ..Default::default()
        };
        c.written(&r, &stored);
        Some(r)
    }

    #[test]
    fn a_repeated_event_counts_on_the_first_one_keeping_its_name_and_first_timestamp() {
        let mut c = Correlator::default();
        let first = emit(&mut c, "FailedBinding", "no volumes", 0).unwrap();
        assert_eq!((first.count, first.name.as_deref()), (1, None));
        let second = emit(&mut c, "FailedBinding", "no volumes", 15).unwrap();
        assert_eq!((second.count, second.name.as_deref()), (2, Some("c1.0")));
        assert_eq!(second.first, at(0).0, "firstTimestamp stays");
    }

    #[test]
    fn the_spam_filter_lets_25_through_then_one_per_five_minutes_and_counts_the_dropped_ones() {
        let mut c = Correlator::default();
        for i in 0..25 {
            assert!(emit(&mut c, "FailedBinding", "no volumes", i * 15).is_some(), "burst write {i}");
        }
        // The 26th, 15 s later: 24 gaps of 15 s and this one gave back 1.25 tokens; one passes.
        let mut passed = Vec::new();
        for i in 25..60 {
            if let Some(r) = emit(&mut c, "FailedBinding", "no volumes", i * 15) {
                passed.push((i, r.count));
            }
        }
        // 0.25 left after the 26th; 0.75 more takes 225 s (the sync at 600 s), then one per 300 s.
        assert_eq!(passed, vec![(25, 26), (40, 41)], "dropped repeats are still counted");
    }

    #[test]
    fn the_tenth_distinct_message_of_a_reason_is_combined_and_later_ones_count_on_it() {
        let mut c = Correlator::default();
        for i in 0..9 {
            let r = emit(&mut c, "FailedBinding", &format!("m{i}"), i).unwrap();
            assert_eq!(r.message, format!("m{i}"));
        }
        let tenth = emit(&mut c, "FailedBinding", "m9", 9).unwrap();
        assert_eq!((tenth.message.as_str(), tenth.count), ("(combined from similar events): m9", 1));
        let eleventh = emit(&mut c, "FailedBinding", "m10", 10).unwrap();
        assert_eq!(eleventh.message, "(combined from similar events): m10");
        assert_eq!((eleventh.count, eleventh.name.as_deref()), (2, Some("c1.9")));
        // Another reason is aggregated apart.
        assert_eq!(emit(&mut c, "ProvisioningFailed", "x", 11).unwrap().message, "x");
    }

    #[test]
    fn aggregation_starts_over_after_ten_quiet_minutes() {
        let mut c = Correlator::default();
        for i in 0..9 {
            emit(&mut c, "FailedBinding", &format!("m{i}"), i);
        }
        let later = emit(&mut c, "FailedBinding", "m9", 8 + 601).unwrap();
        assert_eq!(later.message, "m9");
    }

    #[test]
    fn every_cache_stays_bounded() {
        let mut c = Correlator::default();
        for i in 0..REMEMBERED + 10 {
            let obj = Involved { name: format!("c{i}"), uid: format!("u{i}"), ..claim("1") };
            let (now, ms) = at(0);
            let r = c.correlate(&obj, "Normal", "FailedBinding", "m", now, ms).unwrap();
            c.failed(&r);
        }
        assert_eq!(c.remembered(), REMEMBERED);
    }
}
