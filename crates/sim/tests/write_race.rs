//! kubernetes/kubernetes#135127: the volume worker (setting a pre-bound volume Available) and the
//! claim worker (binding it) both write the volume's status from the same cached version; in
//! upstream one gets a 409 and waits out a retry backoff. Here writes to one volume are taken one
//! at a time and the later one, finding the cache newer, sends nothing and re-syncs. Run on the
//! multi-threaded runtime with parallel workers, so the two syncs really do overlap.

use async_trait::async_trait;
use pv_core::{ApiError, ClusterApi, Config, Controller, SystemClock};
use pv_model::k8s::{Event, PersistentVolume, PersistentVolumeClaim};
use pv_sim::{workload, MemApi};
use pv_store::{Store, UidMode};
use serde_json::json;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// MemApi, counting 409s on volume writes.
struct Counting {
    inner: MemApi,
    volume_conflicts: AtomicU64,
    volume_writes: AtomicU64,
}

impl Counting {
    fn count<T>(&self, r: Result<T, ApiError>) -> Result<T, ApiError> {
        self.volume_writes.fetch_add(1, Ordering::Relaxed);
        if matches!(r, Err(ApiError::Conflict(_))) {
            self.volume_conflicts.fetch_add(1, Ordering::Relaxed);
        }
        r
    }
}

#[async_trait]
impl ClusterApi for Counting {
    async fn get_volume(&self, name: &str) -> Result<PersistentVolume, ApiError> {
        self.inner.get_volume(name).await
    }
    async fn create_volume(&self, v: &PersistentVolume) -> Result<PersistentVolume, ApiError> {
        self.inner.create_volume(v).await
    }
    async fn update_volume(&self, v: &PersistentVolume) -> Result<PersistentVolume, ApiError> {
        // Yield first, as a network round trip would: the other worker gets to run.
        tokio::task::yield_now().await;
        let r = self.inner.update_volume(v).await;
        self.count(r)
    }
    async fn update_volume_status(&self, v: &PersistentVolume) -> Result<PersistentVolume, ApiError> {
        tokio::task::yield_now().await;
        let r = self.inner.update_volume_status(v).await;
        self.count(r)
    }
    async fn delete_volume(&self, name: &str) -> Result<(), ApiError> {
        self.inner.delete_volume(name).await
    }
    async fn get_claim(&self, ns: &str, name: &str) -> Result<PersistentVolumeClaim, ApiError> {
        self.inner.get_claim(ns, name).await
    }
    async fn update_claim(&self, c: &PersistentVolumeClaim) -> Result<PersistentVolumeClaim, ApiError> {
        tokio::task::yield_now().await;
        self.inner.update_claim(c).await
    }
    async fn update_claim_status(&self, c: &PersistentVolumeClaim) -> Result<PersistentVolumeClaim, ApiError> {
        tokio::task::yield_now().await;
        self.inner.update_claim_status(c).await
    }
    async fn create_event(&self, e: &Event) -> Result<Event, ApiError> {
        self.inner.create_event(e).await
    }
    async fn update_event(&self, e: &Event) -> Result<Event, ApiError> {
        self.inner.update_event(e).await
    }
    async fn list_pods(&self, ns: &str) -> Result<Vec<pv_model::k8s::Pod>, ApiError> {
        self.inner.list_pods(ns).await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prebound_volumes_bind_without_a_single_conflict() {
    let n = 400;
    let store = Arc::new(Store::builder().uids(UidMode::Deterministic).build());
    for mut o in workload::static_pairs(n) {
        if o.resource.kind == "PersistentVolume" {
            // Pre-bound by the user to its pair's claim, not yet Available.
            let i = o.value["metadata"]["name"].as_str().unwrap().trim_start_matches("bench-pv-").to_string();
            o.value["spec"]["claimRef"] = json!({"namespace": "default", "name": format!("bench-pvc-{i}")});
            o.value["status"] = json!({"phase": "Pending"});
        }
        store.load(o.resource.plural, o.value).unwrap();
    }
    let api = Arc::new(Counting {
        inner: MemApi::new(store.clone()),
        volume_conflicts: AtomicU64::new(0),
        volume_writes: AtomicU64::new(0),
    });
    let config = Config { resync_period: Duration::from_secs(3600), ..Default::default() };
    let controller = Controller::new(api.clone(), pv_plugins::registry(None), SystemClock::new(), config);
    let informers = pv_local::start(&store, &controller);
    controller.resync();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let runner = tokio::spawn(pv_core::runtime::run(controller.clone(), 8, async {
        let _ = stop_rx.await;
    }));
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let pvs = pv_sim::invariants::listed(&store, "persistentvolumes");
        let claims = pv_sim::invariants::listed(&store, "persistentvolumeclaims");
        if pvs.iter().chain(&claims).all(|o| o["status"]["phase"] == "Bound") {
            for pv in &pvs {
                let i = pv["metadata"]["name"].as_str().unwrap().trim_start_matches("bench-pv-");
                assert_eq!(pv["spec"]["claimRef"]["name"], format!("bench-pvc-{i}"), "bound to its own claim");
            }
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "pairs did not all bind within 60s");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let _ = stop_tx.send(());
    let _ = runner.await;
    drop(informers);
    let writes = api.volume_writes.load(Ordering::Relaxed);
    assert!(writes >= n as u64, "every volume was written at least once ({writes} writes)");
    assert_eq!(api.volume_conflicts.load(Ordering::Relaxed), 0, "volume writes that got a 409, of {writes}");
}
