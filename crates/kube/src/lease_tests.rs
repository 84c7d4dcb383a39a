//! The Lease state machine on tokio's paused clock, against an in-memory Lease with
//! resourceVersions, so acquire / renew / lose / release are exercised without an API server.

use super::*;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// One Lease shared by several electors; `down` makes every request fail (an unreachable
/// API server).
#[derive(Clone, Default)]
struct MemLease {
    lease: Arc<Mutex<Option<Lease>>>,
    down: Arc<AtomicBool>,
    /// The events recorded, as they would be written.
    events: Arc<Mutex<Vec<Event>>>,
}

impl MemLease {
    fn event_messages(&self) -> Vec<String> {
        self.events.lock().unwrap().iter().filter_map(|e| e.message.clone()).collect()
    }
    fn holder(&self) -> Option<String> {
        self.lease.lock().unwrap().as_ref().and_then(|l| l.spec.as_ref()?.holder_identity.clone())
    }
    fn transitions(&self) -> i32 {
        self.lease.lock().unwrap().as_ref().and_then(|l| l.spec.as_ref()?.lease_transitions).unwrap_or(-1)
    }
    fn check(&self) -> Result<(), ApiError> {
        if self.down.load(Ordering::SeqCst) {
            Err(ApiError::other("connection refused"))
        } else {
            Ok(())
        }
    }
}

fn bump(l: &mut Lease) {
    let rv: u64 = l.metadata.resource_version.as_deref().and_then(|v| v.parse().ok()).unwrap_or(0);
    l.metadata.resource_version = Some((rv + 1).to_string());
}

#[async_trait]
impl LeaseStore for MemLease {
    async fn get(&self) -> Result<Option<Lease>, ApiError> {
        self.check()?;
        Ok(self.lease.lock().unwrap().clone())
    }
    async fn create(&self, lease: &Lease) -> Result<Lease, ApiError> {
        self.check()?;
        let mut cur = self.lease.lock().unwrap();
        if cur.is_some() {
            return Err(ApiError::AlreadyExists("lease".into()));
        }
        let mut l = lease.clone();
        l.metadata.uid = Some("lease-uid".into());
        bump(&mut l);
        *cur = Some(l.clone());
        Ok(l)
    }
    async fn replace(&self, lease: &Lease) -> Result<Lease, ApiError> {
        self.check()?;
        let mut cur = self.lease.lock().unwrap();
        let Some(existing) = cur.as_ref() else {
            return Err(ApiError::NotFound("lease".into()));
        };
        if existing.metadata.resource_version != lease.metadata.resource_version {
            return Err(ApiError::Conflict("stale".into()));
        }
        let mut l = lease.clone();
        bump(&mut l);
        *cur = Some(l.clone());
        Ok(l)
    }
    fn record_event(&self, lease: &ObjectMeta, message: String) -> BoxFuture<'static, ()> {
        // Recorded even while `down`: the write itself is best effort in any case.
        let now = k8s_openapi::jiff::Timestamp::UNIX_EPOCH;
        self.events.lock().unwrap().push(leader_election_event(lease, message, now));
        Box::pin(async {})
    }
}

fn elector(store: &MemLease, id: &str) -> (Elector<MemLease>, watch::Receiver<LeaderState>) {
    Elector::new(store.clone(), LeaderElectionConfig::new("kube-system", "pv-controller", id))
}

#[tokio::test(start_paused = true)]
async fn first_candidate_creates_the_lease_and_leads() {
    let store = MemLease::default();
    let (mut a, state) = elector(&store, "a");
    let (_stop_tx, mut stop) = watch::channel(false);
    assert!(a.acquire(&mut stop).await);
    assert_eq!(*state.borrow(), LeaderState::Leader);
    assert_eq!(store.holder().as_deref(), Some("a"));
    assert_eq!(store.transitions(), 0);
}

#[tokio::test(start_paused = true)]
async fn second_candidate_follows_while_the_leader_renews() {
    let store = MemLease::default();
    let (a, _) = elector(&store, "a");
    let (_stop_a_tx, stop_a) = watch::channel(false);
    let leader = tokio::spawn(a.run(stop_a));
    tokio::time::sleep(Duration::from_millis(100)).await;

    let (b, b_state) = elector(&store, "b");
    let (_stop_b_tx, stop_b) = watch::channel(false);
    let candidate = tokio::spawn(b.run(stop_b));
    // Well past a lease duration: the leader keeps renewing, so b never takes over.
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert_eq!(*b_state.borrow(), LeaderState::Follower { holder: "a".into() });
    assert_eq!(store.holder().as_deref(), Some("a"));
    assert!(!leader.is_finished());
    candidate.abort();
    leader.abort();
}

#[tokio::test(start_paused = true)]
async fn candidate_takes_over_only_after_the_lease_expires() {
    let store = MemLease::default();
    let (mut a, _) = elector(&store, "a");
    let (_tx, mut stop) = watch::channel(false);
    assert!(a.acquire(&mut stop).await);
    drop(a); // the leader dies without releasing

    let (b, b_state) = elector(&store, "b");
    let (_stop_b_tx, stop_b) = watch::channel(false);
    let task = tokio::spawn(b.run(stop_b));
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert_eq!(*b_state.borrow(), LeaderState::Follower { holder: "a".into() });
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert_eq!(*b_state.borrow(), LeaderState::Leader);
    assert_eq!(store.holder().as_deref(), Some("b"));
    assert_eq!(store.transitions(), 1);
    task.abort();
}

#[tokio::test(start_paused = true)]
async fn leader_that_cannot_renew_within_the_deadline_loses() {
    let store = MemLease::default();
    let (a, state) = elector(&store, "a");
    let (_tx, stop) = watch::channel(false);
    let task = tokio::spawn(a.run(stop));
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(*state.borrow(), LeaderState::Leader);

    store.down.store(true, Ordering::SeqCst);
    let lost_at = Instant::now();
    let r = task.await.unwrap();
    assert!(matches!(r, Err(Error::Lost { .. })), "{r:?}");
    assert_eq!(*state.borrow(), LeaderState::Lost);
    let waited = lost_at.elapsed();
    assert!(waited <= Duration::from_secs(10), "must give up within the renew deadline, took {waited:?}");
}

#[tokio::test(start_paused = true)]
async fn leader_that_sees_another_holder_loses_at_once() {
    let store = MemLease::default();
    let (a, state) = elector(&store, "a");
    let (_tx, stop) = watch::channel(false);
    let task = tokio::spawn(a.run(stop));
    tokio::time::sleep(Duration::from_secs(1)).await;
    {
        let mut l = store.lease.lock().unwrap();
        let lease = l.as_mut().unwrap();
        lease.spec.as_mut().unwrap().holder_identity = Some("intruder".into());
        bump(lease);
    }
    let r = task.await.unwrap();
    assert!(matches!(r, Err(Error::Lost { .. })), "{r:?}");
    assert_eq!(*state.borrow(), LeaderState::Lost);
}

#[tokio::test(start_paused = true)]
async fn release_on_shutdown_lets_the_standby_take_over_without_waiting_for_expiry() {
    let store = MemLease::default();
    let (a, a_state) = elector(&store, "a");
    let (stop_a_tx, stop_a) = watch::channel(false);
    let leader = tokio::spawn(a.run(stop_a));
    tokio::time::sleep(Duration::from_millis(100)).await;
    let (b, b_state) = elector(&store, "b");
    let (_stop_b_tx, stop_b) = watch::channel(false);
    let standby = tokio::spawn(b.run(stop_b));
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(matches!(*b_state.borrow(), LeaderState::Follower { .. }));

    stop_a_tx.send(true).unwrap();
    leader.await.unwrap().unwrap();
    assert_eq!(*a_state.borrow(), LeaderState::Released);
    assert_eq!(store.holder(), None);
    // Within one retry period (with jitter), far less than the 15 s lease duration.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(*b_state.borrow(), LeaderState::Leader);
    standby.abort();
}

#[tokio::test(start_paused = true)]
async fn leadership_changes_are_leader_election_events_on_the_lease() {
    let store = MemLease::default();
    let (a, _) = elector(&store, "a");
    let (stop_tx, stop) = watch::channel(false);
    let leader = tokio::spawn(a.run(stop));
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(store.event_messages(), ["a became leader"]);
    let e = store.events.lock().unwrap()[0].clone();
    assert_eq!(e.reason.as_deref(), Some("LeaderElection"));
    assert_eq!(e.type_.as_deref(), Some("Normal"));
    assert_eq!(e.metadata.namespace.as_deref(), Some("kube-system"));
    let r = &e.involved_object;
    assert_eq!(
        (r.kind.as_deref(), r.api_version.as_deref(), r.namespace.as_deref(), r.name.as_deref(), r.uid.as_deref()),
        (Some("Lease"), Some("coordination.k8s.io/v1"), Some("kube-system"), Some("pv-controller"), Some("lease-uid"))
    );
    assert_eq!(e.source.and_then(|s| s.component).as_deref(), Some("pv-controller"));

    stop_tx.send(true).unwrap();
    leader.await.unwrap().unwrap();
    assert_eq!(store.event_messages(), ["a became leader", "a stopped leading"]);

    // A leader that loses the Lease records it too.
    let (b, _) = elector(&store, "b");
    let (_tx, stop) = watch::channel(false);
    let task = tokio::spawn(b.run(stop));
    tokio::time::sleep(Duration::from_secs(3)).await;
    store.down.store(true, Ordering::SeqCst);
    assert!(task.await.unwrap().is_err());
    tokio::task::yield_now().await;
    assert_eq!(store.event_messages()[2..], ["b became leader", "b stopped leading"]);
}

#[test]
fn inconsistent_timings_are_rejected() {
    let mut c = LeaderElectionConfig::new("ns", "n", "me");
    assert!(c.validate().is_ok());
    c.renew_deadline = c.lease_duration;
    assert!(c.validate().is_err());
    let mut c = LeaderElectionConfig::new("ns", "n", "me");
    c.retry_period = Duration::from_secs(9);
    assert!(c.validate().is_err());
}

#[test]
fn identities_are_unique_per_process_start() {
    assert_ne!(default_identity(), default_identity());
}
