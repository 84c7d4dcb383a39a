//! The store's unit tests.

use super::*;
use serde_json::json;

fn pv(name: &str) -> Value {
    json!({"metadata": {"name": name}, "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "hostPath": {"path": "/tmp/x"}}, "status": {"phase": "Bound"}})
}

/// A backend whose commits wait until the test lets them through.
struct Gate(std::sync::Mutex<std::sync::mpsc::Receiver<()>>);
impl Backend for Gate {
    fn commit(&self, _rv: u64, _m: &Mutation<'_>) -> std::result::Result<(), String> {
        self.0.lock().unwrap().recv().map_err(|e| e.to_string())
    }
}

/// Waits until a write on another thread has taken version `rv` (it then waits for its commit);
/// fails the test when none has within 10 s, rather than spinning for ever.
fn wait_for_version(s: &Store, rv: u64) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while s.resource_version() < rv {
        assert!(std::time::Instant::now() < deadline, "no write took version {rv} within 10 s");
        std::thread::yield_now();
    }
}

#[test]
fn writes_waiting_for_their_commit_are_versioned_but_not_yet_delivered() {
    let (open, gate) = std::sync::mpsc::channel();
    let s =
        Arc::new(Store::builder().backend(Box::new(Gate(std::sync::Mutex::new(gate))), Snapshot::default()).build());
    let mut w = s.watch("persistentvolumes", None, Some(0)).unwrap();
    let writer = {
        let s = s.clone();
        std::thread::spawn(move || s.create("persistentvolumes", pv("a")).map(|_| ()))
    };
    wait_for_version(&s, 1);
    // Versioned, but neither durable nor visible: no read, list, watch or bookmark shows it.
    assert_eq!((s.resource_version(), s.delivered_version()), (1, 0));
    assert!(w.try_recv().is_err());
    assert_eq!(s.get("persistentvolumes", "", "a").unwrap_err().code(), 404);
    let (items, rv) = s.list("persistentvolumes", &ListOptions::default()).unwrap();
    assert_eq!((items.len(), rv), (0, 0));
    // Writers do see it: a second create of the same name conflicts.
    assert_eq!(s.create("persistentvolumes", pv("a")).unwrap_err().code(), 409);
    open.send(()).unwrap();
    writer.join().unwrap().unwrap();
    assert_eq!(s.delivered_version(), 1);
    assert_eq!(w.try_recv().unwrap().rv, 1);
    assert_eq!(s.get("persistentvolumes", "", "a").unwrap().value()["metadata"]["resourceVersion"], "1");
}

/// A write run on a thread of its own.
type StoreWrite = Box<dyn FnOnce(&Store) -> Result<Arc<Value>> + Send>;

/// A store whose commits wait at a gate: `before` makes the writes up to version `rv` - 1, which
/// pass; `first` runs a write that gets version `rv` and waits for its commit; then `second` runs
/// a write that changes nothing and answers the stored object. That answer must wait for the
/// first write's commit too. Returns it.
fn answered_once_the_pending_write_is_durable(
    before: impl FnOnce(&Store),
    rv: u64,
    first: impl FnOnce(&Store) -> Result<Arc<Value>> + Send + 'static,
    second: impl FnOnce(&Store) -> Result<Arc<Value>> + Send + 'static,
) -> Arc<Value> {
    let (open, gate) = std::sync::mpsc::channel();
    let s =
        Arc::new(Store::builder().backend(Box::new(Gate(std::sync::Mutex::new(gate))), Snapshot::default()).build());
    for _ in 1..rv {
        open.send(()).unwrap();
    }
    before(&s);
    let spawn = |f: StoreWrite| {
        let s = s.clone();
        std::thread::spawn(move || f(&s))
    };
    let first = spawn(Box::new(first));
    wait_for_version(&s, rv);
    let second = spawn(Box::new(second));
    std::thread::sleep(std::time::Duration::from_millis(200));
    assert!(!second.is_finished(), "answered with an object not yet durable");
    open.send(()).unwrap();
    first.join().unwrap().unwrap();
    let answered = second.join().unwrap().unwrap();
    assert_eq!(answered["metadata"]["resourceVersion"], rv.to_string());
    assert_eq!(s.resource_version(), rv, "the second write writes nothing");
    answered
}

#[test]
fn an_update_that_changes_nothing_is_answered_only_once_the_object_is_durable() {
    // The same object again, while its create still waits for its commit.
    answered_once_the_pending_write_is_durable(
        |_| {},
        1,
        |s| s.create("persistentvolumes", pv("a")),
        |s| {
            let same = s.get_latest("persistentvolumes", "", "a").unwrap().value();
            s.update("persistentvolumes", same, false)
        },
    );
}

#[test]
fn a_delete_of_an_object_already_being_deleted_is_answered_only_once_the_mark_is_durable() {
    // The first delete marks it (version 2); the second finds it marked and answers the mark.
    let answered = answered_once_the_pending_write_is_durable(
        |s| {
            let mut held = pv("a");
            held["metadata"]["finalizers"] = json!(["kubernetes.io/pv-protection"]);
            s.create("persistentvolumes", held).unwrap();
        },
        2,
        |s| s.delete("persistentvolumes", "", "a", None, None),
        |s| s.delete("persistentvolumes", "", "a", None, None),
    );
    assert!(answered["metadata"]["deletionTimestamp"].is_string());
}

/// A backend whose disk can fill up.
#[derive(Clone, Default)]
struct Disk {
    full: Arc<std::sync::atomic::AtomicBool>,
    counter: Arc<Mutex<u64>>,
}
impl Disk {
    fn check(&self) -> std::result::Result<(), String> {
        match self.full.load(std::sync::atomic::Ordering::SeqCst) {
            true => Err("No space left on device (os error 28)".into()),
            false => Ok(()),
        }
    }
    fn fill(&self, full: bool) {
        self.full.store(full, std::sync::atomic::Ordering::SeqCst);
    }
}
impl Backend for Disk {
    fn commit(&self, rv: u64, _m: &Mutation<'_>) -> std::result::Result<(), String> {
        self.check()?;
        *self.counter.lock().unwrap() = rv;
        Ok(())
    }
    fn persist_counter(&self, rv: u64) -> std::result::Result<(), String> {
        self.check()?;
        let mut c = self.counter.lock().unwrap();
        *c = (*c).max(rv);
        Ok(())
    }
}

#[test]
fn a_write_whose_commit_fails_is_never_visible_and_the_store_recovers_with_storage() {
    let disk = Disk::default();
    let s = Store::builder().backend(Box::new(disk.clone()), Snapshot::default()).build();
    let mut w = s.watch("persistentvolumes", None, Some(0)).unwrap();
    let a = s.create("persistentvolumes", pv("a")).unwrap();
    assert_eq!(s.check_storage(), None);
    disk.fill(true);
    let err = s.create("persistentvolumes", pv("b")).unwrap_err();
    assert_eq!(err.code(), 500);
    assert!(err.to_string().contains("No space left on device"), "{err}");
    let mut a2 = (*a).clone();
    a2["metadata"]["labels"] = json!({"x": "1"});
    assert_eq!(s.update("persistentvolumes", a2.clone(), false).unwrap_err().code(), 500);
    assert_eq!(s.delete("persistentvolumes", "", "a", None, None).unwrap_err().code(), 500);
    // Nothing of the failed writes shows: not b, not a's new label, not a's deletion.
    assert_eq!(s.get("persistentvolumes", "", "b").unwrap_err().code(), 404);
    assert_eq!(s.get("persistentvolumes", "", "a").unwrap().value(), *a);
    let (items, rv) = s.list("persistentvolumes", &ListOptions::default()).unwrap();
    assert_eq!((items.len(), rv), (1, 1));
    assert_eq!(w.try_recv().unwrap().rv, 1);
    assert!(w.try_recv().is_err());
    assert!(s.check_storage().unwrap().contains("No space left"), "not ready while storage fails");
    // Space returns: the probe persists the counter past the failed versions.
    disk.fill(false);
    assert_eq!(s.check_storage(), None);
    assert_eq!(*disk.counter.lock().unwrap(), 4);
    // The failed writes can be made again, with versions never handed out before.
    let b = s.create("persistentvolumes", pv("b")).unwrap();
    assert_eq!(b["metadata"]["resourceVersion"], "5");
    let a3 = s.update("persistentvolumes", a2, false).unwrap();
    assert_eq!(a3["metadata"]["resourceVersion"], "6");
    assert_eq!((w.try_recv().unwrap().rv, w.try_recv().unwrap().rv), (5, 6));
}

/// A backend that fails the first batch once the test lets it, and passes the rest.
struct FailFirst(std::sync::Mutex<std::sync::mpsc::Receiver<()>>, std::sync::atomic::AtomicBool);
impl Backend for FailFirst {
    fn commit(&self, _rv: u64, _m: &Mutation<'_>) -> std::result::Result<(), String> {
        Ok(())
    }
    fn commit_batch(&self, _batch: &[PendingWrite]) -> std::result::Result<(), String> {
        if self.1.swap(false, std::sync::atomic::Ordering::SeqCst) {
            self.0.lock().unwrap().recv().map_err(|e| e.to_string())?;
            return Err("No space left on device (os error 28)".into());
        }
        Ok(())
    }
}

#[test]
fn writes_queued_behind_a_failed_commit_are_undone_too() {
    let (release, gate) = std::sync::mpsc::channel();
    let backend = FailFirst(std::sync::Mutex::new(gate), true.into());
    let s = Arc::new(Store::builder().backend(Box::new(backend), Snapshot::default()).build());
    let spawn = |name: &'static str| {
        let s = s.clone();
        std::thread::spawn(move || {
            s.create("persistentvolumes", pv(name)).map(|o| o["metadata"]["resourceVersion"].clone())
        })
    };
    let first = spawn("a");
    wait_for_version(&s, 1);
    // "b" is computed while "a" is being committed; "a" then fails.
    let second = spawn("b");
    wait_for_version(&s, 2);
    release.send(()).unwrap();
    assert_eq!(first.join().unwrap().unwrap_err().code(), 500);
    assert_eq!(second.join().unwrap().unwrap_err().code(), 500);
    assert_eq!(s.list("persistentvolumes", &ListOptions::default()).unwrap().0.len(), 0);
    // Undone for writers too: the names are free, and the versions move on.
    let a = s.create("persistentvolumes", pv("a")).unwrap();
    assert_eq!(a["metadata"]["resourceVersion"], "3");
}

/// The versions of each batch a backend committed, in order.
type Committed = Arc<std::sync::Mutex<Vec<Vec<u64>>>>;

/// A backend that records the versions of each batch it commits.
#[derive(Default)]
struct Batches(Committed);
impl Backend for Batches {
    fn commit(&self, rv: u64, _m: &Mutation<'_>) -> std::result::Result<(), String> {
        self.0.lock().unwrap().push(vec![rv]);
        Ok(())
    }
    fn commit_batch(&self, batch: &[PendingWrite]) -> std::result::Result<(), String> {
        self.0.lock().unwrap().push(batch.iter().map(|w| w.rv).collect());
        Ok(())
    }
}

fn delayed_store(delay: std::time::Duration) -> (Arc<Store>, Committed) {
    let batches = Batches::default();
    let seen = batches.0.clone();
    let s = Store::builder().backend(Box::new(batches), Snapshot::default()).commit_delay(delay).build();
    (Arc::new(s), seen)
}

#[test]
fn under_load_a_commit_waits_its_delay_and_writes_made_meanwhile_join_its_batch() {
    // The delay is long beside the 100 ms before the third write, so that only a stall of seconds
    // could take the batch before it; with no delay the batch is taken at once and the test fails.
    let (s, batches) = delayed_store(std::time::Duration::from_secs(3));
    let (a, b) = (
        s.create_written("persistentvolumes", pv("a")).unwrap(),
        s.create_written("persistentvolumes", pv("b")).unwrap(),
    );
    // Two writes await their commit: the one that commits waits the delay before taking them.
    let committer = {
        let s = s.clone();
        std::thread::spawn(move || a.wait(&s).map(|_| ()))
    };
    std::thread::sleep(std::time::Duration::from_millis(100));
    let c = s.create_written("persistentvolumes", pv("c")).unwrap();
    committer.join().unwrap().unwrap();
    b.wait(&s).unwrap();
    c.wait(&s).unwrap();
    assert_eq!(*batches.lock().unwrap(), vec![vec![1, 2, 3]], "the write made during the delay joins the batch");
}

#[test]
fn a_lone_write_commits_without_the_delay() {
    let delay = std::time::Duration::from_secs(10);
    let (s, batches) = delayed_store(delay);
    let started = std::time::Instant::now();
    s.create("persistentvolumes", pv("a")).unwrap();
    s.create("persistentvolumes", pv("b")).unwrap();
    assert!(started.elapsed() < delay, "a write with no other awaiting its commit waited the delay");
    assert_eq!(*batches.lock().unwrap(), vec![vec![1], vec![2]]);
}

#[test]
fn create_sets_server_fields_and_resets_status() {
    let s = Store::new();
    let o = s.create("persistentvolumes", pv("a")).unwrap();
    assert_eq!(o["status"]["phase"], "Pending");
    assert!(o["status"]["lastPhaseTransitionTime"].is_string());
    assert_eq!(o["metadata"]["resourceVersion"], "1");
    assert!(o["metadata"]["uid"].is_string());
    assert_eq!(o["spec"]["persistentVolumeReclaimPolicy"], "Retain");
    assert_eq!(o["kind"], "PersistentVolume");
    assert!(matches!(s.create("persistentvolumes", pv("a")), Err(StoreError::AlreadyExists { .. })));
}

#[test]
fn stale_update_conflicts_and_versions_increase() {
    let s = Store::new();
    let o = s.create("persistentvolumes", pv("a")).unwrap();
    let mut a = (*o).clone();
    a["metadata"]["labels"] = json!({"x": "1"});
    let o2 = s.update("persistentvolumes", a.clone(), false).unwrap();
    assert_eq!(o2["metadata"]["resourceVersion"], "2");
    a["metadata"]["labels"] = json!({"x": "2"});
    assert_eq!(s.update("persistentvolumes", a, false).unwrap_err().code(), 409);
}

#[test]
fn an_update_without_a_resource_version_applies_only_where_the_kind_allows_it() {
    let s = Store::new();
    let o = s.create("persistentvolumes", pv("a")).unwrap();
    let mut a = (*o).clone();
    meta_mut(&mut a).remove("resourceVersion");
    a["metadata"]["labels"] = json!({"x": "1"});
    let o2 = s.update("persistentvolumes", a, false).unwrap();
    assert_eq!(o2["metadata"]["labels"], json!({"x": "1"}), "a volume's update is unconditional");
    // A Lease's strategy refuses an unconditional update (upstream's AllowUnconditionalUpdate).
    let lease = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                       "metadata": {"name": "l", "namespace": "ns"}, "spec": {"holderIdentity": "a"}});
    s.create("leases", lease.clone()).unwrap();
    let mut renewed = lease;
    renewed["spec"]["holderIdentity"] = json!("b");
    let err = s.update("leases", renewed, false).unwrap_err();
    assert_eq!(err.code(), 422);
    assert_eq!(
        err.to_string(),
        "leases.coordination.k8s.io \"l\" is invalid: metadata.resourceVersion: Invalid value: 0: must be specified for an update"
    );
    assert_eq!(s.get("leases", "ns", "l").unwrap().value()["spec"]["holderIdentity"], "a");
}

#[test]
fn main_update_ignores_status_and_status_update_ignores_spec() {
    let s = Store::new();
    let o = s.create("persistentvolumes", pv("a")).unwrap();
    let mut a = (*o).clone();
    a["status"]["phase"] = json!("Available");
    let same = s.update("persistentvolumes", a.clone(), false).unwrap();
    assert_eq!(same["status"]["phase"], "Pending");
    assert_eq!(same["metadata"]["resourceVersion"], "1", "no-op write keeps the version");
    a["spec"]["capacity"]["storage"] = json!("5Gi");
    a["metadata"]["labels"] = json!({"via": "status"});
    a["metadata"]["uid"] = json!("not-the-uid");
    let st = s.update("persistentvolumes", a, true).unwrap();
    assert_eq!(st["status"]["phase"], "Available");
    assert_eq!(st["spec"]["capacity"]["storage"], "1Gi");
    assert_eq!(st["metadata"]["labels"], json!({"via": "status"}), "metadata changes go through, as upstream");
    assert_eq!(st["metadata"]["uid"], o["metadata"]["uid"], "server-owned metadata does not");
}

#[test]
fn finalizers_hold_deletion_until_removed() {
    let s = Store::new();
    let mut p = pv("a");
    p["metadata"]["finalizers"] = json!(["example.com/f"]);
    s.create("persistentvolumes", p).unwrap();
    let marked = s.delete("persistentvolumes", "", "a", None, None).unwrap();
    assert!(marked["metadata"]["deletionTimestamp"].is_string());
    assert!(s.get("persistentvolumes", "", "a").is_ok());
    let mut m = (*marked).clone();
    m["metadata"]["finalizers"] = json!(["example.com/f", "example.com/g"]);
    assert_eq!(s.update("persistentvolumes", m.clone(), false).unwrap_err().code(), 422);
    let mut w = s.watch("persistentvolumes", None, Some(s.resource_version())).unwrap();
    m["metadata"]["finalizers"] = json!([]);
    m["metadata"]["labels"] = json!({"last": "write"});
    let answer = s.update("persistentvolumes", m, false).unwrap();
    assert_eq!(s.get("persistentvolumes", "", "a").unwrap_err().code(), 404);
    // As kube-apiserver: the writer gets the object it wrote at the version it had; watchers get
    // the object as last stored, at the deletion's version.
    assert_eq!(answer["metadata"]["resourceVersion"], marked["metadata"]["resourceVersion"]);
    assert_eq!(answer["metadata"]["labels"]["last"], "write");
    assert_eq!(answer["metadata"]["finalizers"], json!([]));
    let ev = w.try_recv().unwrap();
    assert_eq!(ev.kind, WatchEventType::Deleted);
    let gone = ev.object.value();
    assert_eq!(gone["metadata"]["finalizers"], json!(["example.com/f"]));
    assert!(gone["metadata"].get("labels").is_none(), "{gone}");
    assert_eq!(gone["metadata"]["resourceVersion"], ev.rv.to_string());
    assert!(ev.rv > marked["metadata"]["resourceVersion"].as_str().unwrap().parse::<u64>().unwrap());
}

#[test]
fn watch_replays_history_and_answers_gone_when_too_old() {
    let s = Store::builder().history_limit(2).build();
    for n in ["a", "b", "c"] {
        s.create("persistentvolumes", pv(n)).unwrap();
    }
    let mut w = s.watch("persistentvolumes", None, Some(1)).unwrap();
    assert_eq!(w.try_recv().unwrap().rv, 2);
    assert_eq!(w.try_recv().unwrap().rv, 3);
    assert!(w.try_recv().is_err());
    assert_eq!(s.watch("persistentvolumes", None, Some(0)).unwrap_err().code(), 410);
    s.delete("persistentvolumes", "", "a", None, None).unwrap();
    let ev = w.try_recv().unwrap();
    assert_eq!(ev.kind, WatchEventType::Deleted);
}

#[test]
fn lost_response_applies_the_write_but_reports_failure() {
    let s = Store::new();
    s.set_faults(Some((FaultSpec::parse("lost-response=1").unwrap(), 1)));
    assert_eq!(s.create("persistentvolumes", pv("a")).unwrap_err().code(), 504);
    s.set_faults(None);
    assert!(s.get("persistentvolumes", "", "a").is_ok());
}

#[test]
fn invalid_objects_are_rejected_without_a_write() {
    let s = Store::new();
    let err = s.create("persistentvolumes", json!({"metadata": {"name": "a"}, "spec": {}})).unwrap_err();
    assert_eq!(err.code(), 422);
    assert!(err.to_string().contains("spec.capacity: Required value"), "{err}");
    assert_eq!(s.resource_version(), 0);
}

#[test]
fn delete_preconditions_are_checked() {
    let s = Store::new();
    s.create("persistentvolumes", pv("a")).unwrap();
    assert_eq!(s.delete("persistentvolumes", "", "a", Some("other"), None).unwrap_err().code(), 409);
    assert!(s.delete("persistentvolumes", "", "a", None, Some("1")).is_ok());
}

#[test]
fn custom_resources_are_served_once_registered_and_gone_once_unregistered() {
    let s = Store::new();
    let crd = json!({"metadata": {"name": "widgets.example.com"}, "spec": {
        "group": "example.com", "scope": "Namespaced",
        "names": {"plural": "widgets", "kind": "Widget", "shortNames": ["wd"]},
        "versions": [
            {"name": "v1beta1", "served": true, "storage": false},
            {"name": "v1", "served": true, "storage": true, "subresources": {"status": {}}},
            {"name": "v1alpha1", "served": false, "storage": false}]}});
    let obj =
        json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "a", "namespace": "default"}});
    assert!(matches!(s.create("widgets.example.com", obj.clone()), Err(StoreError::NotFound { .. })));
    s.register_custom(std::sync::Arc::new(crd));
    let served = s.custom_resources();
    let versions: Vec<&str> = served.iter().map(|r| r.version).collect();
    assert_eq!(versions, ["v1", "v1beta1"], "the storage version first, the unserved one left out");
    assert!(served[0].status_subresource && !served[1].status_subresource);
    assert_eq!(
        (served[0].key, served[0].singular, served[0].short_names),
        ("widgets.example.com", "widget", &["wd"][..])
    );
    let created = s.create("widgets.example.com", obj).unwrap();
    assert_eq!(created["metadata"]["generation"], 1);
    // An update without a resourceVersion is refused, as for every custom resource.
    let mut unconditional = (*created).clone();
    unconditional["metadata"].as_object_mut().unwrap().remove("resourceVersion");
    unconditional["spec"] = json!({"x": 1});
    assert!(s.update("widgets.example.com", unconditional, false).is_err());
    let mut changed = (*created).clone();
    changed["spec"] = json!({"x": 1});
    assert_eq!(s.update("widgets.example.com", changed, false).unwrap()["metadata"]["generation"], 2);
    s.unregister_custom("widgets.example.com");
    assert!(matches!(s.get("widgets.example.com", "default", "a"), Err(StoreError::NotFound { .. })));
}

#[test]
fn a_binding_assigns_the_pod_once_and_marks_it_scheduled() {
    let store = Store::new();
    let pod = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "app", "namespace": "default"},
        "spec": {"containers": [{"name": "c", "image": "pause"}]}});
    store.create("pods", pod).unwrap();
    let bound = store.bind_pod("default", "app", "node-a").unwrap();
    assert_eq!(bound["spec"]["nodeName"], "node-a");
    let conditions = bound["status"]["conditions"].as_array().unwrap();
    assert!(conditions.iter().any(|c| c["type"] == "PodScheduled" && c["status"] == "True"), "{conditions:?}");
    // A second binding is refused as kube-apiserver refuses it, and changes nothing.
    match store.bind_pod("default", "app", "node-b") {
        Err(StoreError::Conflict { message, .. }) => {
            assert_eq!(message, "pod app is already assigned to node \"node-a\"")
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(store.get("pods", "default", "app").unwrap().value()["spec"]["nodeName"], "node-a");
    assert!(matches!(store.bind_pod("default", "gone", "node-a"), Err(StoreError::NotFound { .. })));
    // A plain update still may not change the node.
    let mut moved = store.get("pods", "default", "app").unwrap().value();
    moved["spec"]["nodeName"] = json!("node-b");
    assert!(matches!(store.update("pods", moved, false), Err(StoreError::Invalid { .. })));
}
