//! Working queues, written once for the binder's two queues, the protection controllers' queue
//! and the simulator.
//!
//! A [`Lane`] is a queue and what syncs its keys. A [`Runner`] works its lanes in one of two
//! ways, over one [`Clock`]:
//! - in real time ([`Runner::run`], `up` and `run`): workers per lane, each taking a key when
//!   one is ready, and one timer that releases delayed (backed-off) keys and runs the periodic
//!   work (the binder's resync) when it is due;
//! - step by step ([`Runner::try_step`] and [`Runner::timer`], the simulator): the first lane
//!   with a ready key syncs it, and when none has one, the stepped clock moves to the earliest
//!   delayed key.
//!
//! Never two syncs of one key at once comes from the queue alone ([`WorkQueue`]: a key being
//! processed is not handed out again until it is done).

use crate::clock::Clock;
use crate::queue::{Delayed, Timer, WorkQueue};
use async_trait::async_trait;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

/// A queue and what syncs its keys.
#[async_trait]
pub trait Lane: Send + Sync {
    /// The queue, for the timer that releases its delayed keys.
    fn delayed(&self) -> &dyn Delayed;
    /// Syncs a key (or the batch the lane takes at once) if one is ready; false when none was.
    async fn try_work(&self) -> bool;
    /// Waits for a key and syncs it; false once the queue is shut down.
    async fn work(&self) -> bool;
    /// Shuts the queue down: a waiting [`Lane::work`] returns false.
    fn shutdown(&self);
}

/// What syncs the keys of one queue, one key at a time; [`Keys`] makes it a lane.
#[async_trait]
pub trait SyncKey: Send + Sync {
    /// The queue's key.
    type Key: Clone + Eq + std::hash::Hash + Send + Sync + 'static;
    /// The queue.
    fn queue(&self) -> &WorkQueue<Self::Key>;
    /// Syncs `key` and marks it done in the queue ([`WorkQueue::done`], after
    /// [`WorkQueue::forget`] or a requeue).
    async fn sync_key(&self, key: Self::Key);
}

/// The lane of a [`SyncKey`]: one key per sync.
pub struct Keys<S>(pub S);

#[async_trait]
impl<S: SyncKey> Lane for Keys<S> {
    fn delayed(&self) -> &dyn Delayed {
        self.0.queue()
    }

    async fn try_work(&self) -> bool {
        match self.0.queue().try_get() {
            Some(k) => {
                self.0.sync_key(k).await;
                true
            }
            None => false,
        }
    }

    async fn work(&self) -> bool {
        match self.0.queue().get().await {
            Some(k) => {
                self.0.sync_key(k).await;
                true
            }
            None => false,
        }
    }

    fn shutdown(&self) {
        self.0.queue().shutdown();
    }
}

/// Periodic work the timer runs (the binder's resync): every `period`, first after one period.
pub struct Periodic {
    /// How often.
    pub period: Duration,
    /// What.
    pub run: Box<dyn Fn() + Send + Sync>,
}

/// How long the timer sleeps when no key is delayed and nothing is periodic (it is woken sooner
/// when a key is delayed).
const IDLE_WAKE_MS: u64 = 3_600_000;

/// Lanes worked over one clock.
pub struct Runner {
    clock: Arc<dyn Clock>,
    lanes: Vec<Arc<dyn Lane>>,
}

/// Tasks aborted when dropped: a [`Runner::run`] future dropped before it finished (an aborted
/// task) leaves no worker behind.
struct Tasks(Vec<tokio::task::JoinHandle<()>>);

impl Drop for Tasks {
    fn drop(&mut self) {
        for t in &self.0 {
            t.abort();
        }
    }
}

impl Runner {
    /// Works `lanes` (in this order, for [`Runner::try_step`]) on `clock`.
    pub fn new(clock: Arc<dyn Clock>, lanes: Vec<Arc<dyn Lane>>) -> Self {
        Runner { clock, lanes }
    }

    /// The timer over every lane's delayed keys.
    pub fn timer(&self) -> Timer<'_> {
        Timer::new(self.clock.as_ref(), self.lanes.iter().map(|l| l.delayed()))
    }

    /// One step: the first lane with a ready key syncs it. False when no lane had one.
    pub async fn try_step(&self) -> bool {
        for lane in &self.lanes {
            if lane.try_work().await {
                return true;
            }
        }
        false
    }

    /// Works the lanes in real time until `shutdown` resolves: `workers` tasks per lane, and
    /// one timer that releases delayed keys and runs `periodic` when due, sleeping on the clock
    /// until the earliest of the two and woken sooner when a key is delayed to before that.
    /// Then shuts the lanes down and waits for the syncs under way to finish.
    pub async fn run(&self, workers: usize, periodic: Option<Periodic>, shutdown: impl Future<Output = ()>) {
        let mut tasks = Tasks(Vec::new());
        for _ in 0..workers.max(1) {
            for lane in &self.lanes {
                let lane = lane.clone();
                tasks.0.push(tokio::spawn(async move { while lane.work().await {} }));
            }
        }
        let timer = async {
            let timer = self.timer();
            let period = periodic.as_ref().map(|p| p.period.as_millis() as u64);
            let mut next = period.map(|p| self.clock.now_ms() + p);
            loop {
                timer.promote_due();
                let now = self.clock.now_ms();
                if let (Some(p), Some(at), Some(periodic)) = (period, next, periodic.as_ref()) {
                    if now >= at {
                        (periodic.run)();
                        next = Some(now + p);
                    }
                }
                timer.sleep_until(next.unwrap_or(now + IDLE_WAKE_MS)).await;
            }
        };
        tokio::select! {
            _ = shutdown => {}
            _ = timer => {}
        }
        for lane in &self.lanes {
            lane.shutdown();
        }
        for t in std::mem::take(&mut tasks.0) {
            let _ = t.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::SimClock;
    use std::sync::Mutex;

    /// Records the keys synced; fails each key once when `fail_once`.
    struct Recorder {
        queue: WorkQueue<String>,
        synced: Mutex<Vec<String>>,
        fail_once: bool,
    }

    #[async_trait]
    impl SyncKey for Arc<Recorder> {
        type Key = String;
        fn queue(&self) -> &WorkQueue<String> {
            &self.queue
        }
        async fn sync_key(&self, key: String) {
            let first = {
                let mut s = self.synced.lock().unwrap();
                let first = !s.contains(&key);
                s.push(key.clone());
                first
            };
            if self.fail_once && first {
                self.queue.add_rate_limited(&key);
            } else {
                self.queue.forget(&key);
            }
            self.queue.done(&key);
        }
    }

    fn lane(name: &'static str, clock: Arc<dyn Clock>, fail_once: bool) -> (Arc<Recorder>, Arc<dyn Lane>) {
        let rec = Arc::new(Recorder { queue: WorkQueue::new(name, clock), synced: Mutex::default(), fail_once });
        (rec.clone(), Arc::new(Keys(rec)))
    }

    #[tokio::test]
    async fn a_step_takes_the_first_lane_with_a_ready_key_and_the_timer_moves_to_a_delayed_one() {
        let clock = SimClock::new(jiff::Timestamp::now());
        let (a, la) = lane("a", clock.clone(), true);
        let (b, lb) = lane("b", clock.clone(), false);
        let runner = Runner::new(clock.clone(), vec![la, lb]);
        a.queue.add("a1");
        b.queue.add("b1");
        assert!(runner.try_step().await);
        assert!(runner.try_step().await);
        assert_eq!(
            (a.synced.lock().unwrap().clone(), b.synced.lock().unwrap().clone()),
            (vec!["a1".to_string()], vec!["b1".to_string()])
        );
        // a1 failed once: delayed, not ready.
        assert!(!runner.try_step().await);
        let deadline = clock.now_ms() + 60_000;
        assert!(runner.timer().step(deadline, |due| clock.advance_to(due)));
        assert!(runner.try_step().await);
        assert_eq!(a.synced.lock().unwrap().len(), 2);
        assert!(!runner.try_step().await);
        assert!(!runner.timer().step(deadline, |due| clock.advance_to(due)));
    }

    /// A lane whose sync never ends; `alive` counts the syncs under way.
    struct Stuck {
        queue: WorkQueue<String>,
        alive: Arc<std::sync::atomic::AtomicUsize>,
    }

    struct Alive(Arc<std::sync::atomic::AtomicUsize>);

    impl Drop for Alive {
        fn drop(&mut self) {
            self.0.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
        }
    }

    #[async_trait]
    impl SyncKey for Stuck {
        type Key = String;
        fn queue(&self) -> &WorkQueue<String> {
            &self.queue
        }
        async fn sync_key(&self, _key: String) {
            self.alive.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let _alive = Alive(self.alive.clone());
            std::future::pending::<()>().await
        }
    }

    #[tokio::test]
    async fn a_dropped_run_leaves_no_sync_running() {
        let clock: Arc<dyn Clock> = crate::clock::SystemClock::new();
        let alive = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let stuck = Stuck { queue: WorkQueue::new("stuck", clock.clone()), alive: alive.clone() };
        stuck.queue.add("k");
        let runner = Arc::new(Runner::new(clock, vec![Arc::new(Keys(stuck))]));
        let r = runner.clone();
        let task = tokio::spawn(async move { r.run(2, None, std::future::pending()).await });
        while alive.load(std::sync::atomic::Ordering::SeqCst) == 0 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        task.abort();
        let _ = task.await;
        // The aborted run aborted its workers: the sync under way was dropped.
        tokio::time::timeout(Duration::from_secs(5), async {
            while alive.load(std::sync::atomic::Ordering::SeqCst) != 0 {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        })
        .await
        .expect("a worker still runs after its run was dropped");
    }

    #[tokio::test]
    async fn real_time_workers_sync_every_key_and_stop_at_shutdown() {
        let clock: Arc<dyn Clock> = crate::clock::SystemClock::new();
        let (rec, l) = lane("a", clock.clone(), false);
        let runner = Runner::new(clock, vec![l]);
        let ticks = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let t = ticks.clone();
        let periodic = Periodic {
            period: Duration::from_millis(10),
            run: Box::new(move || {
                t.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            }),
        };
        for i in 0..20 {
            rec.queue.add(&format!("k{i}"));
        }
        let done = {
            let rec = rec.clone();
            async move {
                while rec.synced.lock().unwrap().len() < 20 || ticks.load(std::sync::atomic::Ordering::SeqCst) < 2 {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            }
        };
        tokio::time::timeout(Duration::from_secs(10), runner.run(4, Some(periodic), done)).await.unwrap();
        let mut synced = rec.synced.lock().unwrap().clone();
        synced.sort();
        synced.dedup();
        assert_eq!(synced.len(), 20);
        assert!(rec.queue.is_empty());
    }
}
