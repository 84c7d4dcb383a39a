//! The event recorder: upstream's reasons and messages, aggregated.
//!
//! Identical events (same object, type, reason and message) are aggregated into one Event whose
//! `count` grows, as client-go's correlator does. One deliberate difference: a repeat is counted
//! only when the object has changed since the last one (its resourceVersion differs). Upstream
//! re-emits on every periodic resync of an unchanged object; here a Pending claim gets one
//! FailedBinding per state change rather than one every 15 seconds.
//!
//! The recorder remembers the last [`REMEMBERED`] distinct events, least recently used first out,
//! as client-go's correlator caches 4096: memory stays bounded however many objects come and go,
//! and an event older than that starts a new Event instead of counting on an old one.

use crate::api::ClusterApi;
use crate::clock::Clock;
use lru::LruCache;
use pv_model::annotations::EVENT_COMPONENT;
use pv_model::k8s::{Event, ObjectMeta, ObjectReference, PersistentVolume, PersistentVolumeClaim, Time};
use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// How many distinct events the recorder remembers for aggregation.
pub const REMEMBERED: usize = 4096;

/// The object an event is about.
#[derive(Clone, Debug)]
pub struct Involved {
    kind: &'static str,
    namespace: Option<String>,
    name: String,
    uid: String,
    resource_version: String,
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

#[derive(Clone, PartialEq, Eq, Hash)]
struct Key {
    kind: &'static str,
    namespace: Option<String>,
    name: String,
    uid: String,
    type_: &'static str,
    reason: &'static str,
    message: String,
}

struct Record {
    event: Event,
    last_rv: String,
}

/// Emits Events through the API.
pub struct Recorder {
    api: Arc<dyn ClusterApi>,
    clock: Arc<dyn Clock>,
    records: Mutex<LruCache<Key, Record>>,
    seq: AtomicU64,
    /// Events emitted (new or counted), for metrics and tests.
    pub emitted: AtomicU64,
}

impl Recorder {
    /// A recorder writing through `api`.
    pub fn new(api: Arc<dyn ClusterApi>, clock: Arc<dyn Clock>) -> Self {
        Recorder {
            api,
            clock,
            records: Mutex::new(LruCache::new(NonZeroUsize::new(REMEMBERED).expect("not zero"))),
            seq: AtomicU64::new(0),
            emitted: AtomicU64::new(0),
        }
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
        let obj = obj.into();
        let message = message.into();
        tracing::info!(object = %obj.name, kind = obj.kind, r#type = type_, reason, %message, "event");
        let key = Key {
            kind: obj.kind,
            namespace: obj.namespace.clone(),
            name: obj.name.clone(),
            uid: obj.uid.clone(),
            type_,
            reason,
            message: message.clone(),
        };
        let now = Time(self.clock.now());
        let existing = {
            let mut records = self.records.lock().unwrap();
            match records.get_mut(&key) {
                Some(r) if r.last_rv == obj.resource_version => return,
                Some(r) => {
                    r.last_rv = obj.resource_version.clone();
                    let mut e = r.event.clone();
                    e.count = Some(e.count.unwrap_or(1) + 1);
                    e.last_timestamp = Some(now.clone());
                    Some(e)
                }
                None => None,
            }
        };
        self.emitted.fetch_add(1, Ordering::Relaxed);
        let written = match existing {
            Some(e) => match self.api.update_event(&e).await {
                Ok(stored) => Ok(stored),
                Err(_) => {
                    // The aggregate is gone or changed under us: start a new one.
                    let mut fresh = e.clone();
                    fresh.metadata.resource_version = None;
                    self.api.create_event(&fresh).await
                }
            },
            None => {
                let e = self.new_event(&obj, type_, reason, &message, now);
                self.api.create_event(&e).await
            }
        };
        match written {
            Ok(stored) => {
                self.records.lock().unwrap().put(key, Record { event: stored, last_rv: obj.resource_version });
            }
            Err(e) => tracing::warn!(error = %e, reason, "could not write event"),
        }
    }

    /// Distinct events remembered for aggregation (at most [`REMEMBERED`]).
    pub fn remembered(&self) -> usize {
        self.records.lock().unwrap().len()
    }

    fn new_event(&self, obj: &Involved, type_: &str, reason: &str, message: &str, now: Time) -> Event {
        let n = self.seq.fetch_add(1, Ordering::Relaxed);
        let stamp = now.0.as_nanosecond() as u64 + n;
        Event {
            metadata: ObjectMeta {
                name: Some(format!("{}.{:x}", obj.name, stamp)),
                namespace: Some(obj.namespace.clone().unwrap_or_else(|| "default".into())),
                ..Default::default()
            },
            involved_object: ObjectReference {
                api_version: Some("v1".into()),
                kind: Some(obj.kind.into()),
                namespace: obj.namespace.clone(),
                name: Some(obj.name.clone()),
                uid: Some(obj.uid.clone()),
                resource_version: Some(obj.resource_version.clone()),
                field_path: None,
            },
            reason: Some(reason.into()),
            message: Some(message.into()),
            type_: Some(type_.into()),
            count: Some(1),
            first_timestamp: Some(now.clone()),
            last_timestamp: Some(now),
            source: Some(k8s_openapi::api::core::v1::EventSource {
                component: Some(EVENT_COMPONENT.into()),
                host: None,
            }),
            reporting_component: Some(EVENT_COMPONENT.into()),
            reporting_instance: Some(String::new()),
            ..Default::default()
        }
    }
}

