//! The store itself: objects by resource, one resourceVersion counter, watch history, writers.

use crate::admission::Admission;
use crate::error::{FieldError, StoreError};
use crate::faults::{FaultInjector, FaultKind, FaultSpec};
use crate::kinds::ResourceType;
use crate::meta::{finalizers, keep_fields, keep_server_metadata, meta, meta_mut, meta_str};
use crate::object::Object;
use crate::registry;
use crate::validation;
use crate::watch::{self, History, StoreLimits, Watcher};
pub use crate::watch::{WatchEvent, WatchEventType};
use crate::Result;
use jiff::Timestamp;
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

mod builder;
mod commit;
mod content;
mod delete;
mod sweep;

pub use builder::StoreBuilder;
use commit::Durability;
pub use commit::{Deciding, Pending, Written};

/// A durable write, as the persistence layer receives it.
#[derive(Debug)]
pub enum Mutation<'a> {
    /// The object now reads `object`.
    Put {
        /// Resource (plural).
        resource: &'a str,
        /// Namespace ("" for cluster-scoped).
        namespace: &'a str,
        /// Name.
        name: &'a str,
        /// Full object, resourceVersion included.
        object: &'a Object,
    },
    /// The object is gone.
    Delete {
        /// Resource (plural).
        resource: &'a str,
        /// Namespace.
        namespace: &'a str,
        /// Name.
        name: &'a str,
    },
}

/// A mutation the store hands to its backend, owned so it can wait for a group commit.
#[derive(Debug, Clone)]
pub struct PendingWrite {
    /// resourceVersion of the write.
    pub rv: u64,
    /// Resource (plural).
    pub resource: &'static str,
    /// Namespace ("" for cluster-scoped).
    pub namespace: String,
    /// Name.
    pub name: String,
    /// The object after the write; `None` for a deletion.
    pub object: Option<Object>,
}

impl PendingWrite {
    /// The borrowed form.
    pub fn mutation(&self) -> Mutation<'_> {
        match &self.object {
            Some(o) => {
                Mutation::Put { resource: self.resource, namespace: &self.namespace, name: &self.name, object: o }
            }
            None => Mutation::Delete { resource: self.resource, namespace: &self.namespace, name: &self.name },
        }
    }
}

/// Persistence under the store. The store acknowledges a write to its client, and shows it to
/// any reader (GET, LIST, WATCH), only after the backend has made it durable; a write whose
/// commit fails is rolled back and answered with an error.
///
/// Writers that arrive while a commit is in progress are batched: the next of them commits
/// everything queued meanwhile with one `commit_batch` (one transaction, one fsync), so durable
/// throughput grows with concurrency instead of being capped by the disk's sync rate.
pub trait Backend: Send + Sync {
    /// Persists one mutation together with the resourceVersion counter.
    fn commit(&self, rv: u64, mutation: &Mutation<'_>) -> std::result::Result<(), String>;

    /// Persists several mutations (in resourceVersion order) atomically. The default commits
    /// them one by one.
    fn commit_batch(&self, batch: &[PendingWrite]) -> std::result::Result<(), String> {
        for w in batch {
            self.commit(w.rv, &w.mutation())?;
        }
        Ok(())
    }

    /// Persists the resourceVersion counter alone, never lowering it. After a failed commit
    /// the store calls this (from [`Store::check_storage`]) to learn whether storage works
    /// again, and so that the versions the failed writes took are not handed out again after
    /// a restart. The default does nothing.
    fn persist_counter(&self, rv: u64) -> std::result::Result<(), String> {
        let _ = rv;
        Ok(())
    }
}

/// What a backend hands back on start: the counter and every object.
#[derive(Debug, Default)]
pub struct Snapshot {
    /// Last resourceVersion handed out.
    pub rv: u64,
    /// `(resource, object)` pairs.
    pub objects: Vec<(String, Object)>,
}

/// List scope.
#[derive(Clone, Debug, Default)]
pub struct ListOptions {
    /// Only this namespace (None: all).
    pub namespace: Option<String>,
}

type Key = (String, String);

/// A write not yet durable: its version and the object after it (`None`: deleted).
type Unpublished = (u64, Option<Object>);

struct WatchSlot {
    resource: &'static str,
    namespace: Option<String>,
    /// Events at or below this version were already visible when the watch started.
    since: u64,
    tx: watch::Sender,
}

struct Inner {
    /// Last resourceVersion handed to a write (durable or not).
    rv: u64,
    /// Objects by resource, as readers see them: durable writes only. Hashed, not ordered:
    /// point reads and writes are the hot path; lists sort.
    objects: HashMap<&'static str, HashMap<Key, Object>>,
    /// Writes waiting for their commit, latest per object, with their version (`None`: a
    /// deletion). Writers read through it, so that concurrency checks see every earlier
    /// write; readers never do.
    overlay: HashMap<&'static str, HashMap<Key, Unpublished>>,
    history: History,
    watchers: Vec<WatchSlot>,
    creates: HashMap<String, u64>,
    writes: u64,
    /// Writes not yet durable, with their watch events (durable mode).
    pending: Vec<(PendingWrite, WatchEvent)>,
    /// Highest version delivered to watchers: every write up to it is durable and visible.
    delivered: u64,
    /// What each namespace holds, and which are Terminating (for the namespace finisher).
    namespaces: content::Namespaces,
}

impl Inner {
    /// An object as writers see it: the latest write, durable or not.
    fn latest(&self, plural: &'static str, ns: &str, name: &str) -> Option<Object> {
        let key = (ns.to_string(), name.to_string());
        if let Some((_, o)) = self.overlay.get(plural).and_then(|m| m.get(&key)) {
            return o.clone();
        }
        self.objects.get(plural).and_then(|m| m.get(&key)).cloned()
    }

    /// Every object of a resource as writers see it (admission reads the classes this way).
    fn all(&self, plural: &'static str) -> Vec<Value> {
        let overlay = self.overlay.get(plural);
        let mut out: Vec<Value> = self
            .objects
            .get(plural)
            .into_iter()
            .flatten()
            .filter(|(k, _)| overlay.is_none_or(|o| !o.contains_key(*k)))
            .map(|(_, v)| v.value())
            .collect();
        out.extend(overlay.into_iter().flatten().filter_map(|(_, (_, v))| v.as_ref().map(Object::value)));
        out
    }
}

/// How the store makes UIDs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UidMode {
    /// Random v4 UUIDs (API servers).
    Random,
    /// Derived from kind, namespace, name and how often that name was created (simulation).
    Deterministic,
}

/// The object store.
pub struct Store {
    inner: Mutex<Inner>,
    backend: Option<Box<dyn Backend>>,
    durability: Mutex<Durability>,
    durable_cv: std::sync::Condvar,
    /// Wakes writers awaiting durability asynchronously ([`Written::durable`]).
    durable_notify: tokio::sync::Notify,
    faults: Mutex<Option<FaultInjector>>,
    past_faults: Mutex<[u64; 4]>,
    now: Box<dyn Fn() -> Timestamp + Send + Sync>,
    uid_mode: UidMode,
    limits: StoreLimits,
    admission: Admission,
    /// How long a commit under load waits for more writes to join its batch.
    commit_delay: std::time::Duration,
    /// Namespaces the finisher should look at.
    pub(crate) finish: crate::finisher::queue::Queue,
    /// The custom resources served, by store key: each served version, the storage version
    /// first.
    custom: std::sync::RwLock<HashMap<&'static str, Served>>,
}

/// A custom resource as served: each served version (the storage version first) and the
/// definition they come from.
type Served = (Vec<&'static ResourceType>, Arc<Value>);

/// Formats a time as Kubernetes does (RFC 3339, seconds).
pub fn format_time(t: Timestamp) -> String {
    t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// Which part of an object an update writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Part {
    /// The main resource (status kept from the stored object).
    Main,
    /// The `status` subresource.
    Status,
    /// A Namespace's `finalize` subresource: only `spec.finalizers`.
    Finalize,
    /// A Pod's `binding` subresource: only `spec.nodeName` (from empty) and the PodScheduled
    /// condition.
    Binding,
}

impl Store {
    /// An empty in-memory store with random UIDs and the wall clock.
    pub fn new() -> Self {
        Self::builder().build()
    }

    /// Configures a store.
    pub fn builder() -> StoreBuilder {
        StoreBuilder::default()
    }

    fn rt(&self, resource: &str) -> Result<&'static ResourceType> {
        ResourceType::by_plural(resource)
            .or_else(|| self.custom.read().unwrap().get(resource).and_then(|(v, _)| v.first().copied()))
            .ok_or_else(|| StoreError::NotFound { resource: resource.into(), name: String::new() })
    }

    /// Serves the custom resources of a definition: every served version
    /// ([`crate::custom::served_by`], the storage version first), with the definition they come
    /// from. Replaces what the same key served before; a definition serving no version stops
    /// serving it.
    pub fn register_custom(&self, definition: Arc<Value>) {
        let served = crate::custom::served_by(&definition);
        let key = crate::custom::intern_str(crate::custom::crd_name(&definition));
        let mut custom = self.custom.write().unwrap();
        if served.is_empty() {
            custom.remove(key);
        } else {
            custom.insert(served[0].key, (served, definition));
        }
    }

    /// The definition a custom resource (`plural.group`) is served from.
    pub fn custom_definition(&self, key: &str) -> Option<Arc<Value>> {
        self.custom.read().unwrap().get(key).map(|(_, d)| d.clone())
    }

    /// Stops serving the custom resource stored under `key` (`plural.group`); its objects stay
    /// stored until they are deleted.
    pub fn unregister_custom(&self, key: &str) {
        self.custom.write().unwrap().remove(key);
    }

    /// Every custom resource served, at its storage version.
    pub(crate) fn custom_storage_versions(&self) -> Vec<&'static ResourceType> {
        self.custom.read().unwrap().values().filter_map(|(v, _)| v.first().copied()).collect()
    }

    /// Every custom resource served, each served version.
    pub fn custom_resources(&self) -> Vec<&'static ResourceType> {
        let mut v: Vec<&'static ResourceType> =
            self.custom.read().unwrap().values().flat_map(|(v, _)| v.iter().copied()).collect();
        // Stable: each resource's storage version stays first.
        v.sort_by_key(|r| (r.group, r.plural));
        v
    }

    /// Installs (or clears) fault injection for writes to every resource but Events.
    pub fn set_faults(&self, spec: Option<(FaultSpec, u64)>) {
        let mut f = self.faults.lock().unwrap();
        if let Some(old) = f.as_ref() {
            let mut past = self.past_faults.lock().unwrap();
            for (p, n) in past.iter_mut().zip(old.injected) {
                *p += n;
            }
        }
        *f = spec.map(|(s, seed)| FaultInjector::new(s, seed));
    }

    /// Faults injected so far: conflict, error, timeout, lost-response.
    pub fn faults_injected(&self) -> [u64; 4] {
        let mut total = *self.past_faults.lock().unwrap();
        if let Some(f) = self.faults.lock().unwrap().as_ref() {
            for (t, n) in total.iter_mut().zip(f.injected) {
                *t += n;
            }
        }
        total
    }

    /// Successful writes so far (creates, updates, deletes; Events excluded).
    pub fn write_count(&self) -> u64 {
        self.inner.lock().unwrap().writes
    }

    /// The last resourceVersion handed to a write, durable or not (see
    /// [`Store::delivered_version`] for what readers may be told).
    pub fn resource_version(&self) -> u64 {
        self.inner.lock().unwrap().rv
    }

    /// The version through which every change is durable, visible and gone out to watchers.
    /// Behind [`Store::resource_version`] while writes wait for their group commit: a list or
    /// a watch bookmark must carry this one, or a client resuming from it would skip the writes
    /// still in flight.
    pub fn delivered_version(&self) -> u64 {
        self.inner.lock().unwrap().delivered
    }

    fn draw_fault(&self, rt: &ResourceType) -> Option<FaultKind> {
        if !registry::of(rt).faulted() {
            return None;
        }
        self.faults.lock().unwrap().as_mut().and_then(FaultInjector::draw)
    }

    fn make_uid(&self, inner: &mut Inner, rt: &ResourceType, ns: &str, name: &str) -> String {
        match self.uid_mode {
            UidMode::Random => uuid::Uuid::new_v4().to_string(),
            UidMode::Deterministic => {
                let key = format!("{}/{}/{}", rt.kind, ns, name);
                let n = inner.creates.entry(key.clone()).or_insert(0);
                *n += 1;
                let seed = format!("{key}#{n}");
                uuid::Uuid::new_v5(&uuid::Uuid::NAMESPACE_OID, seed.as_bytes()).to_string()
            }
        }
    }

    /// Reads one object.
    pub fn get(&self, resource: &str, namespace: &str, name: &str) -> Result<Object> {
        let rt = self.rt(resource)?;
        let inner = self.inner.lock().unwrap();
        inner
            .objects
            .get(rt.key)
            .and_then(|m| m.get(&(namespace.to_string(), name.to_string())))
            .cloned()
            .ok_or_else(|| StoreError::NotFound { resource: rt.qualified(), name: name.into() })
    }

    /// Reads one object as the next write will find it: with the writes that are still waiting
    /// for their group commit. A read-modify-write (a patch, retried until it applies) starts
    /// from this version; one started from [`Store::get`] would conflict with every write still
    /// in flight, and so would each retry.
    pub fn get_latest(&self, resource: &str, namespace: &str, name: &str) -> Result<Object> {
        let rt = self.rt(resource)?;
        let inner = self.inner.lock().unwrap();
        inner
            .latest(rt.key, namespace, name)
            .ok_or_else(|| StoreError::NotFound { resource: rt.qualified(), name: name.into() })
    }

    /// Lists objects and the resourceVersion the list is consistent with.
    pub fn list(&self, resource: &str, opts: &ListOptions) -> Result<(Vec<Object>, u64)> {
        let rt = self.rt(resource)?;
        let inner = self.inner.lock().unwrap();
        let mut items: Vec<(&Key, &Object)> = match inner.objects.get(rt.key) {
            None => Vec::new(),
            Some(m) => match &opts.namespace {
                Some(ns) if rt.namespaced => m.iter().filter(|((n, _), _)| n == ns).collect(),
                _ => m.iter().collect(),
            },
        };
        // In (namespace, name) order, as kube-apiserver lists (and as paging continues).
        items.sort_unstable_by(|a, b| a.0.cmp(b.0));
        let items = items.into_iter().map(|(_, v)| v.clone()).collect();
        Ok((items, inner.delivered))
    }

    /// Starts a watch. With `since`, replays every later change still in history (410 Gone when
    /// `since` is older than the history); without it, only future changes. The watcher is never
    /// closed for falling behind: for consumers in this process that drain it in their own loop.
    pub fn watch(&self, resource: &str, namespace: Option<&str>, since: Option<u64>) -> Result<Watcher> {
        self.start_watch(resource, namespace, since, false)
    }

    /// [`Store::watch`] for a remote client: closed once it falls behind by more than the
    /// store's [`StoreLimits::watch_events`] or [`StoreLimits::watch_bytes`] (the client then
    /// watches again from the last version it saw).
    pub fn watch_bounded(&self, resource: &str, namespace: Option<&str>, since: Option<u64>) -> Result<Watcher> {
        self.start_watch(resource, namespace, since, true)
    }

    fn start_watch(
        &self,
        resource: &str,
        namespace: Option<&str>,
        since: Option<u64>,
        bounded: bool,
    ) -> Result<Watcher> {
        let rt = self.rt(resource)?;
        let mut inner = self.inner.lock().unwrap();
        let ns = namespace.filter(|n| !n.is_empty() && rt.namespaced).map(str::to_string);
        let mut replay = Default::default();
        if let Some(since) = since {
            let now = self.limits.history_age.map(|_| (self.now)());
            inner.history.trim(now, &self.limits);
            if since < inner.history.compacted() {
                return Err(StoreError::Gone { requested: since, oldest: inner.history.compacted() });
            }
            replay = inner.history.since(since, rt.key, ns.as_deref());
        }
        let unbounded = StoreLimits { watch_events: None, watch_bytes: None, ..self.limits };
        let (tx, rx) = watch::channel(if bounded { &self.limits } else { &unbounded }, replay);
        let since = since.unwrap_or(inner.delivered);
        inner.watchers.push(WatchSlot { resource: rt.key, namespace: ns, since, tx });
        Ok(rx)
    }

    fn check_valid(rt: &ResourceType, name: &str, errs: Vec<FieldError>) -> Result<()> {
        if errs.is_empty() {
            Ok(())
        } else {
            Err(StoreError::Invalid { kind: rt.qualified_kind(), name: name.into(), errors: errs })
        }
    }

    fn stamp(obj: &mut Value, rv: u64) {
        meta_mut(obj).insert("resourceVersion".into(), Value::String(rv.to_string()));
    }

    /// Fills server-set metadata of a new object.
    fn prepare_new(&self, inner: &mut Inner, rt: &ResourceType, obj: &mut Value) {
        let now = format_time((self.now)());
        let o = obj.as_object_mut().expect("object");
        o.insert("apiVersion".into(), Value::String(rt.api_version()));
        o.insert("kind".into(), Value::String(rt.kind.into()));
        let ns = meta_str(obj, "namespace").to_string();
        let name = meta_str(obj, "name").to_string();
        let has_uid = !meta_str(obj, "uid").is_empty();
        let uid = if has_uid { None } else { Some(self.make_uid(inner, rt, &ns, &name)) };
        let m = meta_mut(obj);
        if !rt.namespaced {
            m.remove("namespace");
        }
        if let Some(uid) = uid {
            m.insert("uid".into(), Value::String(uid));
        }
        m.entry("creationTimestamp").or_insert_with(|| Value::String(now));
        if m.get("creationTimestamp").is_some_and(Value::is_null) {
            m.insert("creationTimestamp".into(), Value::String(format_time((self.now)())));
        }
        // Only kinds whose strategy tracks a generation set one; others keep what was given.
        if registry::of(rt).tracks_generation() {
            m.insert("generation".into(), Value::from(1));
        }
    }

    /// Creates an object through the API: server fields set, status reset for kinds with a
    /// status subresource (a PV starts Pending), validated and defaulted.
    pub fn create(&self, resource: &str, obj: Value) -> Result<Arc<Value>> {
        self.create_inner(resource, obj, false)?.wait(self)
    }

    /// [`Store::create`] whose caller awaits durability itself, with [`Written::durable`].
    pub fn create_written(&self, resource: &str, obj: Value) -> Result<Written> {
        self.create_inner(resource, obj, false)
    }

    /// Everything [`Store::create`] does but the write: the object it would create, or the
    /// error it would answer (AlreadyExists, Invalid, Forbidden).
    pub fn create_dry_run(&self, resource: &str, obj: Value) -> Result<Arc<Value>> {
        self.create_inner(resource, obj, true)?.wait(self)
    }

    fn create_inner(&self, resource: &str, mut obj: Value, dry_run: bool) -> Result<Written> {
        let rt = self.rt(resource)?;
        if !obj.is_object() {
            return Err(StoreError::BadRequest("the body of the request must be a JSON object".into()));
        }
        let name = meta_str(&obj, "name").to_string();
        registry::of(rt).reset_status_for_create(&mut obj);
        {
            let m = meta_mut(&mut obj);
            for f in ["resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds"] {
                m.remove(f);
            }
            m.remove("uid");
            m.remove("creationTimestamp");
        }
        registry::of(rt).prepare_for_create(&mut obj);
        validation::default(rt, &mut obj);
        if self.admission != Admission::none() {
            let classes = self.inner.lock().unwrap().all("storageclasses");
            self.admission.admit_create(rt.kind, &mut obj, &classes);
        }
        validation::prepare_create(rt, &mut obj);
        Self::check_valid(rt, &name, validation::validate(rt, &obj))?;
        let fault = if dry_run { None } else { self.draw_fault(rt) };
        if let Some(f) = fault.filter(|f| *f != FaultKind::LostResponse) {
            return Err(f.error(&rt.qualified(), &name));
        }
        let mut inner = self.inner.lock().unwrap();
        let ns = if rt.namespaced { meta_str(&obj, "namespace").to_string() } else { String::new() };
        if inner.latest(rt.key, &ns, &name).is_some() {
            return Err(StoreError::AlreadyExists { resource: rt.qualified(), name });
        }
        crate::namespaces::admit_create(&inner.objects, rt, &ns, &name)?;
        self.prepare_new(&mut inner, rt, &mut obj);
        registry::of(rt).created(&mut obj, &format_time((self.now)()));
        if dry_run {
            return Ok(Written::settled(Arc::new(obj)));
        }
        let rv = inner.rv + 1;
        Self::stamp(&mut obj, rv);
        self.commit(&mut inner, rt, WatchEventType::Added, &ns, &name, &obj, rv)?;
        drop(inner);
        Ok(Written::pending(Arc::new(obj), rv, Self::lost(fault, rt, &name)))
    }

    /// Loads an object as stored (status and given UID kept), as `simulate` reads a cluster's
    /// state. Validated and defaulted like a create; never faulted.
    pub fn load(&self, resource: &str, mut obj: Value) -> Result<Arc<Value>> {
        let rt = self.rt(resource)?;
        let name = meta_str(&obj, "name").to_string();
        validation::default(rt, &mut obj);
        Self::check_valid(rt, &name, validation::validate(rt, &obj))?;
        let mut inner = self.inner.lock().unwrap();
        let ns = if rt.namespaced { meta_str(&obj, "namespace").to_string() } else { String::new() };
        if inner.latest(rt.key, &ns, &name).is_some() {
            return Err(StoreError::AlreadyExists { resource: rt.qualified(), name });
        }
        let generation = meta(&obj).and_then(|m| m.get("generation")).cloned();
        self.prepare_new(&mut inner, rt, &mut obj);
        if let Some(g) = generation {
            meta_mut(&mut obj).insert("generation".into(), g);
        }
        let rv = inner.rv + 1;
        Self::stamp(&mut obj, rv);
        self.commit(&mut inner, rt, WatchEventType::Added, &ns, &name, &obj, rv)?;
        drop(inner);
        self.wait_durable(rv)?;
        Ok(Arc::new(obj))
    }

    /// Updates an object. `status == false` writes the main resource (status changes ignored for
    /// kinds with a status subresource); `status == true` writes only the status. A non-empty
    /// `metadata.resourceVersion` must be current (else 409). An update that changes nothing
    /// returns the stored object without a new version.
    pub fn update(&self, resource: &str, obj: Value, status: bool) -> Result<Arc<Value>> {
        self.update_written(resource, obj, status)?.wait(self)
    }

    /// [`Store::update`] whose caller awaits durability itself, with [`Written::durable`].
    pub fn update_written(&self, resource: &str, obj: Value, status: bool) -> Result<Written> {
        self.update_inner(resource, obj, if status { Part::Status } else { Part::Main }, false)
    }

    /// Everything [`Store::update`] does but the write: the object it would store, or the
    /// error it would answer (Conflict, Invalid, NotFound).
    pub fn update_dry_run(&self, resource: &str, obj: Value, status: bool) -> Result<Arc<Value>> {
        self.update_inner(resource, obj, if status { Part::Status } else { Part::Main }, true)?.wait(self)
    }

    /// Assigns the pod `namespace/name` to `node`, as a POST of a Binding to its `binding`
    /// subresource does (what a scheduler writes): `spec.nodeName` set and the PodScheduled
    /// condition True. 409 when the pod is being deleted or already has a node.
    pub fn bind_pod(&self, namespace: &str, name: &str, node: &str) -> Result<Arc<Value>> {
        self.bind_pod_written(namespace, name, node, None)?.wait(self)
    }

    /// [`Store::bind_pod`] with the binding's annotations, whose caller awaits durability itself.
    pub fn bind_pod_written(
        &self,
        namespace: &str,
        name: &str,
        node: &str,
        annotations: Option<Map<String, Value>>,
    ) -> Result<Written> {
        let mut binding =
            serde_json::json!({"metadata": {"namespace": namespace, "name": name}, "spec": {"nodeName": node}});
        if let Some(a) = annotations {
            binding["metadata"]["annotations"] = Value::Object(a);
        }
        self.update_inner("pods", binding, Part::Binding, false)
    }

    pub(crate) fn update_inner(&self, resource: &str, mut obj: Value, part: Part, dry_run: bool) -> Result<Written> {
        let rt = self.rt(resource)?;
        let status = part == Part::Status;
        if !obj.is_object() {
            return Err(StoreError::BadRequest("the body of the request must be a JSON object".into()));
        }
        let name = meta_str(&obj, "name").to_string();
        let ns = if rt.namespaced { meta_str(&obj, "namespace").to_string() } else { String::new() };
        let fault = if dry_run { None } else { self.draw_fault(rt) };
        if let Some(f) = fault.filter(|f| *f != FaultKind::LostResponse) {
            return Err(f.error(&rt.qualified(), &name));
        }
        let mut inner = self.inner.lock().unwrap();
        let old = inner
            .latest(rt.key, &ns, &name)
            .ok_or_else(|| StoreError::NotFound { resource: rt.qualified(), name: name.clone() })?
            .value();
        let given_uid = meta_str(&obj, "uid");
        if !status && part != Part::Finalize && !given_uid.is_empty() && given_uid != meta_str(&old, "uid") {
            return Err(StoreError::Conflict {
                resource: rt.qualified(),
                name,
                message: format!(
                    "Precondition failed: UID in precondition: {given_uid}, UID in object meta: {}",
                    meta_str(&old, "uid")
                ),
            });
        }
        let given_rv = meta_str(&obj, "resourceVersion").to_string();
        if given_rv.is_empty() && part != Part::Binding && !registry::of(rt).allow_unconditional_update() {
            // kube-apiserver names the resource, not the kind, in this one refusal.
            return Err(StoreError::Invalid {
                kind: rt.qualified(),
                name,
                errors: vec![FieldError::invalid_value(
                    "metadata.resourceVersion",
                    "0",
                    "must be specified for an update",
                )],
            });
        }
        if !given_rv.is_empty() && given_rv != meta_str(&old, "resourceVersion") {
            return Err(StoreError::Conflict {
                resource: rt.qualified(),
                name,
                message: "the object has been modified; please apply your changes to the latest version and try again"
                    .into(),
            });
        }
        let mut new = if status {
            // A status write takes the status and the metadata (labels, annotations,
            // finalizers) from the body, as kube-apiserver's status strategies do; the spec
            // stays as stored, and so do a Pod's owner references.
            let mut n = old.clone();
            match obj.get("status") {
                Some(s) => n.as_object_mut().unwrap().insert("status".into(), s.clone()),
                None => n.as_object_mut().unwrap().remove("status"),
            };
            let mut m = meta(&obj).cloned().unwrap_or_default();
            keep_server_metadata(&old, &mut m);
            keep_fields(&old, &mut m, registry::of(rt).kept_by_status_update());
            n.as_object_mut().unwrap().insert("metadata".into(), Value::Object(m));
            n
        } else if part == Part::Binding {
            bound_pod(&old, &obj, &name, &(self.now)())?
        } else if part == Part::Finalize {
            let mut n = old.clone();
            let fin = obj.get("spec").and_then(|s| s.get("finalizers")).cloned().unwrap_or(Value::Array(Vec::new()));
            n.as_object_mut().unwrap().entry("spec").or_insert_with(|| Value::Object(Map::new()))["finalizers"] = fin;
            n
        } else {
            registry::of(rt).prepare_for_update(&old, &mut obj);
            if rt.status_subresource {
                match old.get("status") {
                    Some(s) => obj.as_object_mut().unwrap().insert("status".into(), s.clone()),
                    None => obj.as_object_mut().unwrap().remove("status"),
                };
            }
            keep_server_metadata(&old, meta_mut(&mut obj));
            let o = obj.as_object_mut().unwrap();
            o.insert("apiVersion".into(), Value::String(rt.api_version()));
            o.insert("kind".into(), Value::String(rt.kind.into()));
            obj
        };
        validation::default(rt, &mut new);
        if !status && part != Part::Binding {
            validation::prepare_update(rt, &old, &mut new);
        }
        // A binding's two fields are checked where it is made (`bound_pod`).
        let errs = if part == Part::Binding {
            Vec::new()
        } else if status {
            validation::validate_status_update(rt, &old, &new)
        } else {
            validation::validate_update(rt, &old, &new)
        };
        Self::check_valid(rt, &name, errs)?;
        if !status && part != Part::Binding && self.admission != Admission::none() {
            self.admission.validate_update(rt.kind, &old, &new, &inner.all("storageclasses"))?;
        }
        if !status && meta(&old).is_some_and(|m| m.contains_key("deletionTimestamp")) {
            let (of, nf) = (finalizers(&old), finalizers(&new));
            if nf.iter().any(|f| !of.contains(f)) {
                return Err(StoreError::Invalid {
                    kind: rt.qualified_kind(),
                    name,
                    errors: vec![FieldError::forbidden(
                        "metadata.finalizers",
                        "no new finalizers can be added if the object is being deleted",
                    )],
                });
            }
        }
        // Compare without the resourceVersion to detect no-op writes.
        meta_mut(&mut new).insert("resourceVersion".into(), Value::String(meta_str(&old, "resourceVersion").into()));
        if new == old || dry_run {
            if dry_run && new != old {
                return Ok(Written::settled(Arc::new(new)));
            }
            drop(inner);
            if fault == Some(FaultKind::LostResponse) {
                return Err(FaultKind::LostResponse.error(&rt.qualified(), &name));
            }
            return Ok(Written::stored(Arc::new(old), None));
        }
        registry::updated(rt, &old, &mut new, status || part == Part::Binding, &format_time((self.now)()));
        let rv = inner.rv + 1;
        if meta(&new).is_some_and(|m| m.contains_key("deletionTimestamp")) && finalizers(&new).is_empty() {
            // The last finalizer of an object being deleted is gone: the object goes, as
            // kube-apiserver's deleteWithoutFinalizers does it. Watchers see it as last stored,
            // at the deletion's version (etcd's previous value); the writer gets the object it
            // wrote, at the version it had.
            let mut gone = old;
            Self::stamp(&mut gone, rv);
            self.commit(&mut inner, rt, WatchEventType::Deleted, &ns, &name, &gone, rv)?;
            drop(inner);
            return Ok(Written::pending(Arc::new(new), rv, Self::lost(fault, rt, &name)));
        }
        Self::stamp(&mut new, rv);
        self.commit(&mut inner, rt, WatchEventType::Modified, &ns, &name, &new, rv)?;
        drop(inner);
        Ok(Written::pending(Arc::new(new), rv, Self::lost(fault, rt, &name)))
    }
}

/// The pod `old` assigned to the node `binding` names (`spec.nodeName`), as kube-apiserver's
/// `pods/binding` does it: refused (409) for a pod being deleted or already on a node; the
/// PodScheduled condition set True; the binding's annotations added to the pod's.
fn bound_pod(old: &Value, binding: &Value, name: &str, now: &Timestamp) -> Result<Value> {
    let conflict =
        |message: String| StoreError::Conflict { resource: "pods/binding".into(), name: name.into(), message };
    let node = binding.pointer("/spec/nodeName").and_then(Value::as_str).unwrap_or_default();
    if node.is_empty() {
        return Err(StoreError::Invalid {
            kind: "Binding".into(),
            name: name.into(),
            errors: vec![FieldError::required("target.name", "")],
        });
    }
    if meta(old).is_some_and(|m| m.contains_key("deletionTimestamp")) {
        return Err(conflict(format!("pod {name} is being deleted, cannot be assigned to a host")));
    }
    match old.pointer("/spec/nodeName").and_then(Value::as_str) {
        Some(n) if !n.is_empty() => return Err(conflict(format!("pod {name} is already assigned to node {n:?}"))),
        _ => {}
    }
    let mut new = old.clone();
    new["spec"]["nodeName"] = Value::String(node.into());
    if let Some(a) = binding.pointer("/metadata/annotations").and_then(Value::as_object) {
        let m = meta_mut(&mut new);
        let anns = m.entry("annotations").or_insert_with(|| Value::Object(Map::new()));
        if let Some(anns) = anns.as_object_mut() {
            anns.extend(a.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
    }
    let status = new.as_object_mut().unwrap().entry("status").or_insert_with(|| Value::Object(Map::new()));
    let conditions = status.as_object_mut().unwrap().entry("conditions").or_insert_with(|| Value::Array(Vec::new()));
    if let Some(list) = conditions.as_array_mut() {
        let scheduled = serde_json::json!({"type": "PodScheduled", "status": "True", "lastProbeTime": null,
            "lastTransitionTime": format_time(*now)});
        match list.iter_mut().find(|c| c.get("type").and_then(Value::as_str) == Some("PodScheduled")) {
            Some(c) if c.get("status").and_then(Value::as_str) == Some("True") => {}
            Some(c) => *c = scheduled,
            None => list.push(scheduled),
        }
    }
    Ok(new)
}

impl Default for Store {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests;
