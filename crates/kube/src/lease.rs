//! Leader election over a `coordination.k8s.io/v1` Lease, with client-go's semantics.
//!
//! Why: two replicas run for availability, but only one may write — two binders racing on the
//! same claim would each be correct alone and wrong together. The Lease is the one object both
//! agree on: whoever holds it (and renews it in time) is the writer.
//!
//! The rules, as client-go's `leaderelection` package applies them:
//! - A candidate takes the Lease when it does not exist, has no holder, or its record has not
//!   changed for `lease_duration` *as observed on the candidate's own clock* (the Lease's
//!   `renewTime` comes from another machine's clock, so it is only compared for equality).
//! - Writes are optimistic (resourceVersion): of two candidates racing, one gets a 409 and stays
//!   a candidate.
//! - The leader renews every `retry_period`. If no renewal succeeded for `renew_deadline`, or it
//!   sees another holder, it has lost: it must stop writing at once (the caller stops its
//!   workers and exits, as kube-controller-manager does).
//! - On graceful shutdown the leader releases the Lease (empty holder, 1 s duration) so that a
//!   standby takes over without waiting for expiry.
//! - Becoming and ceasing to be the leader are recorded as client-go's lease lock records them:
//!   a Normal Event with reason `LeaderElection` on the Lease, "`<identity>` became leader" and
//!   "`<identity>` stopped leading" (after a loss too, best effort, without holding up the exit).
//!
//! Decisions use tokio's clock, so tests drive them with `tokio::time::pause()`.

use async_trait::async_trait;
use futures_util::future::BoxFuture;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, Time};
use kube::api::PostParams;
use kube::{Api, Client};
use pv_core::ApiError;
use std::time::Duration;
use tokio::sync::watch;
use tokio::time::Instant;

/// Why leader election stopped.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The timings are inconsistent.
    #[error("invalid leader election settings: {0}")]
    Config(String),
    /// Leadership was lost: no renewal within the renew deadline, or another holder appeared.
    #[error("lost leadership of lease {lease}: {reason}")]
    Lost {
        /// `namespace/name`.
        lease: String,
        /// What happened.
        reason: String,
    },
}

/// Where the Lease lives and how it is timed (upstream's defaults: 15 s, 10 s, 2 s).
#[derive(Clone, Debug)]
pub struct LeaderElectionConfig {
    /// Namespace of the Lease (`kube-system`).
    pub namespace: String,
    /// Name of the Lease (`pv-controller`).
    pub name: String,
    /// This replica's identity (hostname plus a random suffix).
    pub identity: String,
    /// How long a non-leader waits after the last observed change before taking over.
    pub lease_duration: Duration,
    /// How long the leader keeps trying to renew before giving up leadership.
    pub renew_deadline: Duration,
    /// How often candidates try to acquire and the leader renews.
    pub retry_period: Duration,
}

impl LeaderElectionConfig {
    /// Upstream's defaults for lease `namespace/name` held as `identity`.
    pub fn new(namespace: &str, name: &str, identity: &str) -> Self {
        LeaderElectionConfig {
            namespace: namespace.into(),
            name: name.into(),
            identity: identity.into(),
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }

    /// Checks client-go's constraints: duration > deadline > 1.2 × retry period.
    pub fn validate(&self) -> Result<(), Error> {
        if self.identity.is_empty() {
            return Err(Error::Config("identity must not be empty".into()));
        }
        if self.lease_duration <= self.renew_deadline {
            return Err(Error::Config("lease duration must be greater than renew deadline".into()));
        }
        if self.renew_deadline <= self.retry_period.mul_f64(JITTER) {
            return Err(Error::Config("renew deadline must be greater than 1.2 × retry period".into()));
        }
        Ok(())
    }

    fn key(&self) -> pv_model::ObjectKey {
        pv_model::ObjectKey::new(&self.namespace, &self.name)
    }
}

/// Jitter factor applied to the candidate's retry period (client-go's `JitterFactor`).
const JITTER: f64 = 1.2;

/// A replica's view of leadership.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LeaderState {
    /// Not yet known: the Lease has not been read.
    Unknown,
    /// Another replica holds the Lease.
    Follower {
        /// Its identity.
        holder: String,
    },
    /// This replica holds the Lease and may write.
    Leader,
    /// This replica held the Lease and lost it; it must not write any more.
    Lost,
    /// This replica released the Lease on shutdown.
    Released,
}

impl LeaderState {
    /// True once the replica knows who leads (readiness with leader election).
    pub fn is_known(&self) -> bool {
        !matches!(self, LeaderState::Unknown)
    }
}

/// Reads and writes the Lease object: kube-rs in production, memory in tests.
#[async_trait]
pub trait LeaseStore: Send + Sync {
    /// The Lease, or `None` when it does not exist.
    async fn get(&self) -> Result<Option<Lease>, ApiError>;
    /// Creates it.
    async fn create(&self, lease: &Lease) -> Result<Lease, ApiError>;
    /// Replaces it (optimistic on `metadata.resourceVersion`).
    async fn replace(&self, lease: &Lease) -> Result<Lease, ApiError>;
    /// A `LeaderElection` event on the Lease last seen (`lease`), best effort: the returned
    /// future writes it and may be awaited or left to run on its own.
    fn record_event(&self, lease: &ObjectMeta, message: String) -> BoxFuture<'static, ()>;
}

/// `source.component` of the leader-election events (kube-controller-manager uses its own
/// name for its lease events, as this process does).
pub const EVENT_COMPONENT: &str = "pv-controller";

/// The `LeaderElection` event client-go's recorder writes for `message` about `lease`.
pub fn leader_election_event(lease: &ObjectMeta, message: String, now: k8s_openapi::jiff::Timestamp) -> Event {
    let name = lease.name.clone().unwrap_or_default();
    let time = Time(now);
    Event {
        metadata: ObjectMeta {
            name: Some(format!("{name}.{:x}", now.as_nanosecond())),
            namespace: lease.namespace.clone(),
            ..Default::default()
        },
        involved_object: ObjectReference {
            api_version: Some("coordination.k8s.io/v1".into()),
            kind: Some("Lease".into()),
            namespace: lease.namespace.clone(),
            name: Some(name),
            uid: lease.uid.clone(),
            resource_version: lease.resource_version.clone(),
            field_path: None,
        },
        reason: Some("LeaderElection".into()),
        message: Some(message),
        type_: Some("Normal".into()),
        count: Some(1),
        first_timestamp: Some(time.clone()),
        last_timestamp: Some(time),
        source: Some(EventSource { component: Some(EVENT_COMPONENT.into()), host: None }),
        reporting_component: Some(EVENT_COMPONENT.into()),
        reporting_instance: Some(String::new()),
        ..Default::default()
    }
}

/// The Lease over kube-rs.
pub struct KubeLeaseStore {
    api: Api<Lease>,
    events: Api<Event>,
    name: String,
    timeout: Duration,
}

impl KubeLeaseStore {
    /// The Lease `namespace/name`; each request is bounded by `timeout`.
    pub fn new(client: Client, namespace: &str, name: &str, timeout: Duration) -> Self {
        KubeLeaseStore {
            api: Api::namespaced(client.clone(), namespace),
            events: Api::namespaced(client, namespace),
            name: name.into(),
            timeout,
        }
    }

    async fn bounded<T>(
        &self,
        what: &str,
        fut: impl std::future::Future<Output = kube::Result<T>>,
    ) -> Result<T, ApiError> {
        match tokio::time::timeout(self.timeout, fut).await {
            Ok(r) => r.map_err(|e| crate::api::classify(what, e)),
            Err(_) => Err(ApiError::other(format!("{what}: timed out"))),
        }
    }
}

#[async_trait]
impl LeaseStore for KubeLeaseStore {
    async fn get(&self) -> Result<Option<Lease>, ApiError> {
        self.bounded("get lease", self.api.get_opt(&self.name)).await
    }
    async fn create(&self, lease: &Lease) -> Result<Lease, ApiError> {
        let pp = PostParams::default();
        self.bounded("create lease", self.api.create(&pp, lease)).await
    }
    async fn replace(&self, lease: &Lease) -> Result<Lease, ApiError> {
        let pp = PostParams::default();
        self.bounded("update lease", self.api.replace(&self.name, &pp, lease)).await
    }
    fn record_event(&self, lease: &ObjectMeta, message: String) -> BoxFuture<'static, ()> {
        let event = leader_election_event(lease, message, k8s_openapi::jiff::Timestamp::now());
        let (api, timeout) = (self.events.clone(), self.timeout);
        Box::pin(async move {
            match tokio::time::timeout(timeout, api.create(&PostParams::default(), &event)).await {
                Ok(Ok(_)) => {}
                Ok(Err(e)) => tracing::warn!(error = %e, "could not write leader election event"),
                Err(_) => tracing::warn!("could not write leader election event: timed out"),
            }
        })
    }
}

/// What one acquire-or-renew attempt found.
#[derive(Debug, PartialEq, Eq)]
enum Attempt {
    /// This replica holds the Lease now.
    Held,
    /// Another replica holds a valid Lease.
    HeldBy(String),
    /// The attempt failed (API error, lost race); try again later.
    Failed(ApiError),
}

/// Runs the election for one replica; see the module docs for the rules.
pub struct Elector<S> {
    store: S,
    config: LeaderElectionConfig,
    /// The last Lease spec seen and when (local clock) it was first seen with that content.
    observed: Option<(LeaseSpec, Instant)>,
    /// The metadata of the Lease last read or written (what events refer to).
    lease_meta: ObjectMeta,
    state: watch::Sender<LeaderState>,
}

impl<S: LeaseStore> Elector<S> {
    /// An elector and a receiver of its state.
    pub fn new(store: S, config: LeaderElectionConfig) -> (Self, watch::Receiver<LeaderState>) {
        let (state, rx) = watch::channel(LeaderState::Unknown);
        let lease_meta = ObjectMeta {
            name: Some(config.name.clone()),
            namespace: Some(config.namespace.clone()),
            ..Default::default()
        };
        let e = Elector { store, config, observed: None, lease_meta, state };
        (e, rx)
    }

    fn set_state(&self, s: LeaderState) {
        self.state.send_if_modified(|cur| {
            if *cur == s {
                return false;
            }
            tracing::info!(lease = %self.config.key(), identity = %self.config.identity, state = ?s, "leader election state changed");
            *cur = s;
            true
        });
    }

    fn observe(&mut self, spec: &LeaseSpec, now: Instant) {
        match &self.observed {
            Some((seen, _)) if seen == spec => {}
            _ => self.observed = Some((spec.clone(), now)),
        }
    }

    fn new_spec(&self, old: Option<&LeaseSpec>, now: MicroTime) -> LeaseSpec {
        let me = &self.config.identity;
        let mine = old.is_some_and(|o| o.holder_identity.as_deref() == Some(me.as_str()));
        let transitions = old.and_then(|o| o.lease_transitions).unwrap_or(0);
        LeaseSpec {
            holder_identity: Some(me.clone()),
            lease_duration_seconds: Some(self.config.lease_duration.as_secs().max(1) as i32),
            acquire_time: match old {
                Some(o) if mine => o.acquire_time.clone(),
                _ => Some(now.clone()),
            },
            renew_time: Some(now),
            lease_transitions: Some(if mine || old.is_none() { transitions } else { transitions + 1 }),
            ..Default::default()
        }
    }

    /// One acquire-or-renew round trip.
    async fn try_acquire_or_renew(&mut self) -> Attempt {
        let now = Instant::now();
        let wall = MicroTime(k8s_openapi::jiff::Timestamp::now());
        let current = match self.store.get().await {
            Ok(l) => l,
            Err(e) => return Attempt::Failed(e),
        };
        if let Some(l) = &current {
            self.lease_meta = l.metadata.clone();
        }
        let Some(mut lease) = current else {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(self.config.name.clone()),
                    namespace: Some(self.config.namespace.clone()),
                    ..Default::default()
                },
                spec: Some(self.new_spec(None, wall)),
            };
            return match self.store.create(&lease).await {
                Ok(l) => self.held(l, now),
                Err(e) => Attempt::Failed(e),
            };
        };
        let spec = lease.spec.clone().unwrap_or_default();
        self.observe(&spec, now);
        let holder = spec.holder_identity.clone().filter(|h| !h.is_empty());
        if let Some(h) = holder.filter(|h| *h != self.config.identity) {
            let duration = spec
                .lease_duration_seconds
                .map(|s| Duration::from_secs(s.max(0) as u64))
                .unwrap_or(self.config.lease_duration);
            let since = self.observed.as_ref().map_or(now, |(_, t)| *t);
            if since + duration > now {
                return Attempt::HeldBy(h);
            }
            tracing::info!(lease = %self.config.key(), previous = %h, "lease expired, taking over");
        }
        lease.spec = Some(self.new_spec(Some(&spec), wall));
        match self.store.replace(&lease).await {
            Ok(l) => self.held(l, now),
            Err(e) => Attempt::Failed(e),
        }
    }

    fn held(&mut self, lease: Lease, now: Instant) -> Attempt {
        self.lease_meta = lease.metadata;
        let spec = lease.spec.unwrap_or_default();
        self.observed = Some((spec, now));
        Attempt::Held
    }

    /// Waits until this replica holds the Lease, or `stop` resolves (then `false`).
    pub async fn acquire(&mut self, stop: &mut watch::Receiver<bool>) -> bool {
        tracing::info!(lease = %self.config.key(), identity = %self.config.identity, "leader election: this replica's identity");
        loop {
            match self.try_acquire_or_renew().await {
                Attempt::Held => {
                    self.set_state(LeaderState::Leader);
                    tokio::spawn(self.event("became leader"));
                    return true;
                }
                Attempt::HeldBy(h) => self.set_state(LeaderState::Follower { holder: h }),
                Attempt::Failed(e @ (ApiError::Conflict(_) | ApiError::AlreadyExists(_))) => {
                    tracing::debug!(error = %e, "lost a race for the lease")
                }
                Attempt::Failed(e) => tracing::warn!(error = %e, "could not acquire lease"),
            }
            let wait = self.config.retry_period.mul_f64(1.0 + rand::random::<f64>() * (JITTER - 1.0));
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                _ = stop_requested(stop) => return false,
            }
        }
    }

    /// Renews every retry period until `stop` resolves (then releases the Lease) or leadership
    /// is lost (then [`Error::Lost`], with the state already [`LeaderState::Lost`]).
    pub async fn renew(&mut self, stop: &mut watch::Receiver<bool>) -> Result<(), Error> {
        let mut last_renew = Instant::now();
        loop {
            tokio::select! {
                _ = tokio::time::sleep(self.config.retry_period) => {}
                _ = stop_requested(stop) => {
                    self.release().await;
                    self.event("stopped leading").await;
                    return Ok(());
                }
            }
            let left = self.config.renew_deadline.saturating_sub(last_renew.elapsed());
            let attempt = tokio::time::timeout(left, self.try_acquire_or_renew()).await;
            let reason = match attempt {
                Ok(Attempt::Held) => {
                    last_renew = Instant::now();
                    continue;
                }
                Ok(Attempt::HeldBy(h)) => Some(format!("lease is held by {h}")),
                Ok(Attempt::Failed(e)) => {
                    tracing::warn!(error = %e, "could not renew lease");
                    None
                }
                Err(_) => None,
            };
            let expired = last_renew.elapsed() >= self.config.renew_deadline;
            if reason.is_some() || expired {
                self.set_state(LeaderState::Lost);
                // Not awaited: the caller stops writing and exits at once.
                tokio::spawn(self.event("stopped leading"));
                return Err(Error::Lost {
                    lease: self.config.key().into(),
                    reason: reason.unwrap_or_else(|| format!("not renewed within {:?}", self.config.renew_deadline)),
                });
            }
        }
    }

    /// The `LeaderElection` event "<identity> <what>" on the Lease, to be awaited or spawned.
    fn event(&self, what: &str) -> BoxFuture<'static, ()> {
        self.store.record_event(&self.lease_meta, format!("{} {what}", self.config.identity))
    }

    /// Gives the Lease up (best effort): empty holder, 1 s duration.
    pub async fn release(&mut self) {
        let Ok(Some(mut lease)) = self.store.get().await else {
            return;
        };
        let spec = lease.spec.clone().unwrap_or_default();
        if spec.holder_identity.as_deref() != Some(self.config.identity.as_str()) {
            return;
        }
        let now = MicroTime(k8s_openapi::jiff::Timestamp::now());
        lease.spec = Some(LeaseSpec {
            holder_identity: None,
            lease_duration_seconds: Some(1),
            acquire_time: Some(now.clone()),
            renew_time: Some(now),
            lease_transitions: spec.lease_transitions,
            ..Default::default()
        });
        match self.store.replace(&lease).await {
            Ok(l) => {
                self.lease_meta = l.metadata;
                tracing::info!(lease = %self.config.key(), "released lease");
                self.set_state(LeaderState::Released);
            }
            Err(e) => tracing::warn!(error = %e, "could not release lease"),
        }
    }

    /// Acquires, then renews until `stop` (release) or loss (error).
    pub async fn run(mut self, mut stop: watch::Receiver<bool>) -> Result<(), Error> {
        self.config.validate()?;
        if !self.acquire(&mut stop).await {
            return Ok(());
        }
        self.renew(&mut stop).await
    }
}

/// Resolves when `stop` turns true or its sender is gone (returns nothing borrowed, so the
/// future stays `Send`).
async fn stop_requested(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}

/// This replica's identity: the hostname plus a random suffix (two processes on one host must
/// not share it).
pub fn default_identity() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "pv-controller".into());
    let suffix: String = (0..8).map(|_| char::from(b'a' + rand::random::<u8>() % 26)).collect();
    format!("{host}_{suffix}")
}

#[cfg(test)]
#[path = "lease_tests.rs"]
mod tests;
