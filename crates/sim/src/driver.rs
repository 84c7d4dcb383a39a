//! The deterministic simulation: the whole controller, one step at a time, on virtual time.
//!
//! Each step does exactly one thing, in a fixed order: deliver pending watch events to the
//! controller's handlers; else sync one volume key; else sync one claim key; else run one queued
//! operation; else move the clock to the next backed-off key. When nothing is left, a full resync
//! round runs at the next resync tick; the state is quiescent when such a round makes no write
//! request at all. Volumes go before claims so that a volume the input left Pending becomes
//! Available before any claim looks for one.

use crate::hooks::{Hooks, SimApi};
use crate::input::InputObject;
use jiff::Timestamp;
use k8s_openapi::{Metadata, Resource};
use pv_core::informer::{Handles, Informer, Tombstone};
use pv_core::operations::Mode;
use pv_core::runner::Runner;
use pv_core::steps::SyncReport;
use pv_core::ObjectEvent;
use pv_core::{Clock, Config, Controller, Observer, PluginRegistry, SimClock};
use pv_local::{deliver, list_into, step_of, MemApi};
use pv_model::k8s::{Node, ObjectMeta, PersistentVolume, PersistentVolumeClaim, Pod, StorageClass};
use pv_model::key::meta_str;
use pv_model::ObjectKey;
use pv_store::{FaultSpec, Store, StoreError, UidMode, WatchEvent, Watcher};
use serde::de::DeserializeOwned;
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Settings of one simulation.
#[derive(Clone, Debug)]
pub struct SimulationOptions {
    /// Resync rounds allowed before giving up.
    pub max_rounds: usize,
    /// Resync rounds to run at least, even once the state has settled (a stuck object's events
    /// are emitted again on each).
    pub min_rounds: usize,
    /// Faults injected into write requests, with their seed.
    pub faults: Option<(FaultSpec, u64)>,
    /// Controller settings (operations are always deferred).
    pub config: Config,
    /// Hand the watch events of each of the controller's writes to it *before* the write's
    /// response, as can happen over a network (a watch stream is another connection). The
    /// default delivers them at the next step, after the response.
    pub watch_before_response: bool,
    /// Sync queued claims before queued volumes, as upstream's two workers (and `run`'s) may: a
    /// claim is then synced before the volume created with it has had its first sync. The
    /// default syncs volumes first.
    pub claims_first: bool,
    /// Objects whose watch events never reach the controller (`resource`, namespace/name key):
    /// the API server has them, the controller's cache does not, as with a watch that lags or a
    /// relist in progress.
    pub hidden_from_cache: Vec<(String, ObjectKey)>,
    /// Record every sync the controller carries out, with its steps and the virtual time
    /// ([`Simulation::take_synced`]; `simulate -o changes` lists them). Off by default: nothing
    /// is recorded or copied.
    pub record_steps: bool,
}

/// One sync the controller carried out in a simulation ([`SimulationOptions::record_steps`]):
/// when, on the virtual clock, and what it did.
#[derive(Clone, Debug)]
pub struct SyncRecord {
    /// Virtual milliseconds since the simulation's clock started.
    pub elapsed_ms: u64,
    /// The virtual time.
    pub at: Timestamp,
    /// The object synced and its steps, in order.
    pub report: SyncReport,
}

impl Default for SimulationOptions {
    fn default() -> Self {
        SimulationOptions {
            max_rounds: 100,
            min_rounds: 0,
            faults: None,
            // `simulate` is read by a person: the detailed event texts (see `Config`).
            config: Config { detailed_events: true, ..Config::default() },
            watch_before_response: false,
            claims_first: false,
            hidden_from_cache: Vec::new(),
            record_steps: false,
        }
    }
}

/// Why a simulation could not finish.
#[derive(Debug, thiserror::Error)]
pub enum SimulationError {
    /// An input object was refused by the store.
    #[error("document {document} ({kind} {name}): {source}")]
    Load {
        /// Document number.
        document: usize,
        /// Kind.
        kind: String,
        /// Name.
        name: String,
        /// Store error (boxed: it is large, and the error is rare).
        #[source]
        source: Box<StoreError>,
    },
    /// Still changing after the allowed rounds.
    #[error("the state did not settle after {0} resync rounds (raise --max-rounds to allow more)")]
    NotQuiescent(usize),
}

/// Where one kind's watch stands, as the simulation drives it: its stream (none after a drop),
/// the last version received, and a batch held back to arrive a step late.
#[derive(Default)]
struct Stream {
    watcher: Option<Watcher>,
    last_rv: u64,
    held: Vec<WatchEvent>,
}

/// One kind's informer: the informer core `run` and `up` use, fed from the store's watch with
/// the faults the options ask for.
trait Feed: Send {
    fn resource(&self) -> &'static str;
    fn stream(&mut self) -> &mut Stream;
    /// Lists the kind through the core (delivering what changed and what vanished) and watches
    /// from the list's version.
    fn relist(&mut self, store: &Store, to: &Controller);
    /// Takes one watch event; `to` is `None` when the controller already had it (it arrived
    /// before the write's response): the core records it without delivering it again.
    fn take(&mut self, ev: &WatchEvent, to: Option<&Controller>);
}

struct Kind<K> {
    stream: Stream,
    informer: Informer<K>,
    /// Keys of this kind the controller is never handed ([`SimulationOptions::hidden_from_cache`]).
    hidden: Vec<ObjectKey>,
}

/// Whether the controller may be handed this event (its object is not in `hidden`).
fn visible<K: Metadata<Ty = ObjectMeta>>(hidden: &[ObjectKey], e: &ObjectEvent<K>) -> bool {
    let (ObjectEvent::Applied(o) | ObjectEvent::Deleted(o)) = e;
    hidden.is_empty() || !hidden.contains(&ObjectKey::of(o.metadata()))
}

impl<K> Feed for Kind<K>
where
    K: Resource + Metadata<Ty = ObjectMeta> + Tombstone + DeserializeOwned + Send,
    Controller: Handles<K>,
{
    fn resource(&self) -> &'static str {
        K::URL_PATH_SEGMENT
    }
    fn stream(&mut self) -> &mut Stream {
        &mut self.stream
    }
    fn relist(&mut self, store: &Store, to: &Controller) {
        let hidden = &self.hidden;
        let rv = list_into(store, &mut self.informer, |e| {
            if visible(hidden, &e) {
                to.handle(e)
            }
        });
        self.stream.last_rv = rv;
        self.stream.watcher = Some(store.watch(K::URL_PATH_SEGMENT, None, Some(rv)).expect("fresh history"));
    }
    fn take(&mut self, ev: &WatchEvent, to: Option<&Controller>) {
        if let Some(step) = step_of::<K>(ev) {
            let hidden = &self.hidden;
            self.informer.step(step, |e| {
                if let Some(c) = to.filter(|_| visible(hidden, &e)) {
                    c.handle(e)
                }
            });
        }
    }
}

/// A feed for each watched kind, in [`pv_core::WATCHED_KINDS`]'s order.
/// `hidden`: objects never handed to the controller ([`SimulationOptions::hidden_from_cache`]).
fn feeds(hidden: &[(String, ObjectKey)]) -> Vec<Box<dyn Feed>> {
    fn kind<K>(hidden: &[(String, ObjectKey)]) -> Box<dyn Feed>
    where
        K: Resource + Metadata<Ty = ObjectMeta> + Tombstone + DeserializeOwned + Send + 'static,
        Controller: Handles<K>,
    {
        let hidden = hidden.iter().filter(|(r, _)| r == K::URL_PATH_SEGMENT).map(|(_, k)| k.clone()).collect();
        Box::new(Kind::<K> { stream: Stream::default(), informer: Informer::new(), hidden })
    }
    vec![
        kind::<StorageClass>(hidden),
        kind::<Node>(hidden),
        kind::<Pod>(hidden),
        kind::<PersistentVolume>(hidden),
        kind::<PersistentVolumeClaim>(hidden),
    ]
}

/// A loaded simulation.
pub struct Simulation {
    store: Arc<Store>,
    api: Arc<SimApi>,
    clock: Arc<SimClock>,
    controller: Arc<Controller>,
    /// The controller's queues, stepped (claims first with [`SimulationOptions::claims_first`]).
    runner: Runner,
    informers: Vec<Box<dyn Feed>>,
    watch_rng: Option<(rand::rngs::SmallRng, FaultSpec)>,
    options: SimulationOptions,
    /// With `watch_before_response`: per resource, the last version handed over early. The
    /// informers skip those events, so each is delivered once, as a real informer does.
    delivered_early: Arc<std::sync::Mutex<HashMap<&'static str, u64>>>,
    /// Resync rounds run.
    pub rounds: usize,
    /// Sync steps run.
    pub steps: u64,
    /// The syncs carried out, in order, with [`SimulationOptions::record_steps`].
    synced: Arc<Mutex<Vec<SyncRecord>>>,
}

/// The start of virtual time: the latest timestamp in the input, else a fixed instant, so output
/// is the same on every run.
fn start_time(objects: &[InputObject]) -> Timestamp {
    let mut latest: Option<Timestamp> = None;
    let mut visit = |s: &str| {
        if let Ok(t) = s.parse::<Timestamp>() {
            latest = Some(latest.map_or(t, |l| l.max(t)));
        }
    };
    for o in objects {
        for path in [
            &["metadata", "creationTimestamp"][..],
            &["metadata", "deletionTimestamp"],
            &["status", "lastPhaseTransitionTime"],
        ] {
            let mut v = &o.value;
            for p in path {
                v = &v[*p];
            }
            if let Some(s) = v.as_str() {
                visit(s);
            }
        }
    }
    latest.unwrap_or_else(default_start)
}

/// When the virtual clock starts for input that carries no time.
pub fn default_start() -> Timestamp {
    "2026-01-01T00:00:00Z".parse().expect("a valid timestamp")
}

impl Simulation {
    /// Loads `objects` into a fresh in-memory store and builds the controller over it.
    pub fn new(
        objects: Vec<InputObject>,
        plugins: PluginRegistry,
        options: SimulationOptions,
    ) -> Result<Self, SimulationError> {
        let (store, clock) = Self::load(objects)?;
        Ok(Self::with_store(store, clock, plugins, options))
    }

    /// Loads objects made one at a time (a generated workload, [`crate::workload`]) into a fresh
    /// in-memory store and builds the controller over it, the virtual clock starting at `start`:
    /// each object is loaded and dropped before the next is made, so the input never exists whole.
    pub fn streamed(
        objects: impl IntoIterator<Item = InputObject>,
        start: Timestamp,
        plugins: PluginRegistry,
        options: SimulationOptions,
    ) -> Result<Self, SimulationError> {
        let (store, clock) = Self::load_from(objects, start)?;
        Ok(Self::with_store(store, clock, plugins, options))
    }

    /// A store on a virtual clock holding `objects`, as `simulate` loads them: the clock starts at
    /// the latest time the objects carry.
    pub fn load(objects: Vec<InputObject>) -> Result<(Arc<Store>, Arc<SimClock>), SimulationError> {
        let start = start_time(&objects);
        Self::load_from(objects, start)
    }

    fn load_from(
        objects: impl IntoIterator<Item = InputObject>,
        start: Timestamp,
    ) -> Result<(Arc<Store>, Arc<SimClock>), SimulationError> {
        let clock = SimClock::new(start);
        let c2 = clock.clone();
        let store =
            Arc::new(Store::builder().clock(move || c2.now()).uids(UidMode::Deterministic).history_limit(4096).build());
        for o in objects {
            let kind = o.resource.kind.to_string();
            let name = meta_str(&o.value, "name").to_string();
            store.load(o.resource.plural, o.value).map_err(|source| SimulationError::Load {
                document: o.document,
                kind,
                name,
                source: Box::new(source),
            })?;
        }
        Ok((store, clock))
    }

    /// A fresh controller over an existing store: what a restarted controller process sees.
    pub fn with_store(
        store: Arc<Store>,
        clock: Arc<SimClock>,
        plugins: PluginRegistry,
        options: SimulationOptions,
    ) -> Self {
        let api = Arc::new(SimApi { inner: MemApi::new(store.clone()), interceptor: Hooks::default() });
        let mut config = options.config.clone();
        config.operations = Mode::Deferred;
        let synced: Arc<Mutex<Vec<SyncRecord>>> = Arc::default();
        if options.record_steps {
            let (log, clock, theirs) = (synced.clone(), clock.clone(), config.observer.take());
            config.observer = Some(Observer::new(move |report: SyncReport| {
                if let Some(o) = &theirs {
                    o.synced(report.clone());
                }
                let record = SyncRecord { elapsed_ms: clock.now_ms(), at: clock.now(), report };
                log.lock().unwrap().push(record);
            }));
        }
        let controller = Controller::new(api.clone(), plugins, clock.clone(), config);
        let runner = controller.runner(options.claims_first);
        let watch_rng = options
            .faults
            .as_ref()
            .filter(|(f, _)| f.has_watch_faults())
            .map(|(f, seed)| (rand::SeedableRng::seed_from_u64(*seed ^ 0x5eed), f.clone()));
        Simulation {
            store,
            api,
            clock,
            controller,
            runner,
            informers: Vec::new(),
            watch_rng,
            options,
            delivered_early: Default::default(),
            rounds: 0,
            steps: 0,
            synced,
        }
    }

    /// The syncs carried out so far, in order, each with its steps and virtual time (empty
    /// unless [`SimulationOptions::record_steps`]); taken, so the next call returns only later
    /// ones.
    pub fn take_synced(&self) -> Vec<SyncRecord> {
        std::mem::take(&mut *self.synced.lock().unwrap())
    }

    /// The settings this simulation runs with.
    pub fn options(&self) -> &SimulationOptions {
        &self.options
    }

    /// The controller's API adapter, with the simulation's hooks around it.
    pub fn api(&self) -> &Arc<SimApi> {
        &self.api
    }

    /// The simulation's hooks around the controller's API (crash-step tests).
    pub fn hooks(&self) -> &Hooks {
        &self.api.interceptor
    }

    /// The store (the cluster state).
    pub fn store(&self) -> &Arc<Store> {
        &self.store
    }

    /// The controller.
    pub fn controller(&self) -> &Arc<Controller> {
        &self.controller
    }

    /// The virtual clock.
    pub fn clock(&self) -> &Arc<SimClock> {
        &self.clock
    }

    /// Lists every watched kind into the controller and starts watching (as informers do).
    pub fn start(&mut self) {
        self.informers = feeds(&self.options.hidden_from_cache);
        debug_assert!(self.informers.iter().map(|f| f.resource()).eq(pv_core::WATCHED_KINDS));
        for f in self.informers.iter_mut() {
            f.relist(&self.store, &self.controller);
        }
        if self.options.watch_before_response {
            self.deliver_before_responses();
        }
    }

    /// Installs the hook that hands every write's watch events for volumes and claims to the
    /// controller before the write returns; the informers then skip them.
    fn deliver_before_responses(&self) {
        let mut watchers = Vec::new();
        for resource in ["persistentvolumes", "persistentvolumeclaims"] {
            let rv = self.store.list(resource, &Default::default()).expect("known resource").1;
            watchers.push((resource, self.store.watch(resource, None, Some(rv)).expect("fresh history")));
        }
        let watchers = std::sync::Mutex::new(watchers);
        let controller = Arc::downgrade(&self.controller);
        let delivered = self.delivered_early.clone();
        self.api.interceptor.set_after_write(Box::new(move || {
            let Some(c) = controller.upgrade() else { return };
            let mut events = Vec::new();
            for (resource, w) in watchers.lock().unwrap().iter_mut() {
                while let Ok(ev) = w.try_recv() {
                    events.push((*resource, ev));
                }
            }
            events.sort_by_key(|(_, e)| e.rv);
            for (resource, ev) in events {
                delivered.lock().unwrap().insert(resource, ev.rv);
                deliver(&c, resource, ev.kind, &ev.object);
            }
        }));
    }
}

impl Simulation {
    fn roll(&mut self, p: impl Fn(&FaultSpec) -> f64) -> bool {
        match &mut self.watch_rng {
            Some((rng, spec)) => {
                let p = p(spec);
                p > 0.0 && rand::RngExt::random::<f64>(rng) < p
            }
            None => false,
        }
    }

    /// Delivers pending watch events (in resourceVersion order), re-watching dropped streams and
    /// relisting on 410. With watch faults, streams drop and batches arrive a step late.
    fn pump(&mut self) -> bool {
        let mut informers = std::mem::take(&mut self.informers);
        let mut events: Vec<(usize, WatchEvent)> = Vec::new();
        let mut any = false;
        for (i, inf) in informers.iter_mut().enumerate() {
            // Events held back last time arrive now.
            events.extend(inf.stream().held.drain(..).map(|e| (i, e)));
            if inf.stream().watcher.is_none() {
                any = true;
                let gone = self.roll(|f| f.watch_gone);
                match self.store.watch(inf.resource(), None, Some(inf.stream().last_rv)) {
                    Ok(w) if !gone => inf.stream().watcher = Some(w),
                    _ => inf.relist(&self.store, &self.controller),
                }
            }
            let mut batch = Vec::new();
            while let Some(w) = inf.stream().watcher.as_mut() {
                let Ok(ev) = w.try_recv() else { break };
                batch.push(ev);
                if self.roll(|f| f.watch_drop) {
                    inf.stream().watcher = None;
                }
            }
            if let Some(rv) = batch.iter().map(|e| e.rv).max() {
                inf.stream().last_rv = inf.stream().last_rv.max(rv);
            }
            if !batch.is_empty() && self.roll(|f| f.stale) {
                any = true;
                inf.stream().held = batch;
            } else {
                events.extend(batch.into_iter().map(|e| (i, e)));
            }
        }
        events.sort_by_key(|(_, e)| e.rv);
        any |= !events.is_empty();
        for (i, ev) in events {
            let inf = &mut informers[i];
            let early = self.delivered_early.lock().unwrap().get(inf.resource()).is_some_and(|rv| ev.rv <= *rv);
            inf.take(&ev, (!early).then_some(&*self.controller));
        }
        self.informers = informers;
        any
    }

    /// Runs one step. Returns false when nothing was runnable before `deadline_ms`.
    async fn step(&mut self, deadline_ms: u64) -> bool {
        if self.api.interceptor.crashed() {
            return false;
        }
        if self.pump() {
            return true;
        }
        let c = self.controller.clone();
        // Events recorded by the last step are written before the next one runs.
        if c.recorder().flush().await > 0 {
            return true;
        }
        if self.runner.try_step().await {
            self.steps += 1;
            return true;
        }
        if c.operations().run_next().await {
            self.steps += 1;
            return true;
        }
        self.runner.timer().step(deadline_ms, |due| self.clock.advance_to(due))
    }

    async fn drain(&mut self, deadline_ms: u64) {
        while self.step(deadline_ms).await {}
    }

    /// Runs until quiescent: queues empty, no operation in flight, and a full resync round that
    /// makes no write request.
    pub async fn run(&mut self) -> Result<(), SimulationError> {
        self.store.set_faults(self.options.faults.clone());
        if self.informers.is_empty() {
            self.start();
        }
        let period = self.options.config.resync_period.as_millis() as u64;
        loop {
            let next_resync = self.clock.now_ms() / period * period + period;
            self.drain(next_resync).await;
            if self.api.interceptor.crashed() {
                return Ok(());
            }
            if self.rounds >= self.options.max_rounds {
                return Err(SimulationError::NotQuiescent(self.rounds));
            }
            self.rounds += 1;
            self.clock.advance_to(next_resync);
            let before = self.api.interceptor.write_attempts.load(Ordering::SeqCst);
            let skips = self.controller.operations().backoff_skips();
            self.resync();
            self.controller.sweep_unused_assets().await;
            self.drain(next_resync + period - 1).await;
            let after = self.api.interceptor.write_attempts.load(Ordering::SeqCst);
            let skipped = self.controller.operations().backoff_skips() != skips;
            let settled = after == before && !skipped && self.controller.operations().is_idle();
            if settled && self.rounds >= self.options.min_rounds {
                break;
            }
            if skipped {
                // An operation was refused because it is backing off: the round proves nothing
                // about it. Let the backoff expire and look again.
                if let Some(t) = self.controller.operations().latest_backoff_expiry() {
                    self.clock.advance_to(t);
                }
            }
        }
        self.store.set_faults(None);
        Ok(())
    }

    /// The periodic resync: what [`Controller::resync`] enqueues, in a fixed order (volumes by
    /// name, then claims by key). The caches keep their objects in hash maps, whose order
    /// differs from run to run; sorted, the same input gives the same run, event for event.
    fn resync(&self) {
        let mut wake = self.controller.caches().unsettled();
        wake.volumes.sort();
        wake.claims.sort();
        self.controller.wake(wake);
    }

    /// Advances virtual time (tests use it to let backoffs expire).
    pub fn advance(&self, d: Duration) {
        self.clock.advance(d);
    }
}
