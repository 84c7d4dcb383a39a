//! Upstream's end-to-end operation metrics: `volume_operation_total_seconds` times provisioning
//! from the operation's start to the claim bound and deletion to the PV gone, external
//! provisioners and deleters included, labelled `provision` / `delete` and by the provisioner's
//! name; a failed attempt counts in `volume_operation_errors_total`. And the hand-off to an
//! external provisioner that fails to save the claim says so, as upstream: a Warning
//! `ProvisioningFailed` "Error saving claim: ...".

use async_trait::async_trait;
use pv_core::metrics::{DELETE, PROVISION};
use pv_core::operations::Mode;
use pv_core::{ApiError, ClusterApi, Config, Controller, ObjectEvent, SimClock};
use pv_model::k8s::{Event, PersistentVolume, PersistentVolumeClaim, StorageClass};
use pv_sim::{load_documents, MemApi, Simulation, SimulationOptions};
use pv_store::Store;
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;

const CLASS: &str = "apiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata: {name: ext}\nprovisioner: example.com/ext\nreclaimPolicy: Delete\n";
const CLAIM: &str = "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: c1, namespace: default, uid: 11111111-1111-1111-1111-111111111111}\nspec: {accessModes: [ReadWriteOnce], storageClassName: ext, resources: {requests: {storage: 1Gi}}}\n";

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap()
}

/// The PV an external provisioner creates for c1.
fn provisioned_pv() -> serde_json::Value {
    json!({"apiVersion": "v1", "kind": "PersistentVolume",
        "metadata": {"name": "pvc-1", "annotations": {"pv.kubernetes.io/provisioned-by": "example.com/ext"}},
        "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "storageClassName": "ext",
                 "persistentVolumeReclaimPolicy": "Delete",
                 "csi": {"driver": "ext.example.com", "volumeHandle": "h1"},
                 "claimRef": {"namespace": "default", "name": "c1", "uid": "11111111-1111-1111-1111-111111111111"}}})
}

#[test]
fn external_provisioning_and_deletion_are_timed_from_start_to_bound_and_to_gone() {
    let rt = rt();
    let input = load_documents(&format!("{CLASS}---\n{CLAIM}")).unwrap();
    let mut sim = Simulation::new(input, pv_core::PluginRegistry::new(), SimulationOptions::default()).unwrap();
    rt.block_on(sim.run()).unwrap();
    let controller = sim.controller().clone();
    let m = &controller.metrics;
    assert!(m.end_to_end_snapshot().is_empty(), "handed off, not done yet");
    assert_eq!(m.operations_in_progress(), 1);

    // The external provisioner takes 40 s, then the claim binds to its volume.
    sim.advance(Duration::from_secs(40));
    sim.store().create("persistentvolumes", provisioned_pv()).unwrap();
    rt.block_on(sim.run()).unwrap();
    let s = m.end_to_end_snapshot();
    assert_eq!(s.len(), 1, "{s:?}");
    assert_eq!(s[0].0, ("example.com/ext".to_string(), PROVISION));
    assert_eq!(s[0].1.seconds.count, 1);
    assert!(s[0].1.seconds.sum >= 40.0, "from the hand-off to the binding: {}", s[0].1.seconds.sum);
    assert_eq!(s[0].1.errors, 0);
    let pvc = sim.store().get("persistentvolumeclaims", "default", "c1").unwrap().value();
    assert_eq!(pvc["status"]["phase"], "Bound");

    // The claim goes: the volume is released and left to its external deleter, which removes the
    // PV 30 s later. Deletion is timed to that moment, under the class's provisioner.
    sim.store().delete("persistentvolumeclaims", "default", "c1", None, None).unwrap();
    rt.block_on(sim.run()).unwrap();
    assert_eq!(m.operations_in_progress(), 1, "the delete has started");
    sim.advance(Duration::from_secs(30));
    let mut pv = sim.store().get("persistentvolumes", "", "pvc-1").unwrap().value();
    pv["metadata"]["finalizers"] = json!([]);
    sim.store().update("persistentvolumes", pv, false).unwrap();
    let _ = sim.store().delete("persistentvolumes", "", "pvc-1", None, None);
    rt.block_on(sim.run()).unwrap();
    let s = m.end_to_end_snapshot();
    let delete = s.iter().find(|(k, _)| k.1 == DELETE).expect("a delete observation");
    assert_eq!(delete.0 .0, "example.com/ext");
    assert_eq!(delete.1.seconds.count, 1);
    assert!(delete.1.seconds.sum >= 30.0, "{}", delete.1.seconds.sum);
    assert_eq!(m.operations_in_progress(), 0);
}

/// MemApi, except that every claim update is refused with a conflict.
struct RefusingClaims(MemApi);

#[async_trait]
impl ClusterApi for RefusingClaims {
    async fn get_volume(&self, name: &str) -> Result<PersistentVolume, ApiError> {
        self.0.get_volume(name).await
    }
    async fn create_volume(&self, v: &PersistentVolume) -> Result<PersistentVolume, ApiError> {
        self.0.create_volume(v).await
    }
    async fn update_volume(&self, v: &PersistentVolume) -> Result<PersistentVolume, ApiError> {
        self.0.update_volume(v).await
    }
    async fn update_volume_status(&self, v: &PersistentVolume) -> Result<PersistentVolume, ApiError> {
        self.0.update_volume_status(v).await
    }
    async fn delete_volume(&self, name: &str) -> Result<(), ApiError> {
        self.0.delete_volume(name).await
    }
    async fn get_claim(&self, ns: &str, name: &str) -> Result<PersistentVolumeClaim, ApiError> {
        self.0.get_claim(ns, name).await
    }
    async fn update_claim(&self, _: &PersistentVolumeClaim) -> Result<PersistentVolumeClaim, ApiError> {
        Err(ApiError::Conflict(
            "Operation cannot be fulfilled on persistentvolumeclaims \"c1\": the object has been modified".into(),
        ))
    }
    async fn update_claim_status(&self, c: &PersistentVolumeClaim) -> Result<PersistentVolumeClaim, ApiError> {
        self.0.update_claim_status(c).await
    }
    async fn create_event(&self, e: &Event) -> Result<Event, ApiError> {
        self.0.create_event(e).await
    }
    async fn update_event(&self, e: &Event) -> Result<Event, ApiError> {
        self.0.update_event(e).await
    }
    async fn list_pods(&self, ns: &str) -> Result<Vec<pv_model::k8s::Pod>, ApiError> {
        self.0.list_pods(ns).await
    }
}

#[test]
fn a_failed_hand_off_to_an_external_provisioner_is_a_provisioning_failed_event_and_an_error() {
    let rt = rt();
    let store = Arc::new(Store::new());
    let api = Arc::new(RefusingClaims(MemApi::new(store.clone())));
    let config = Config { operations: Mode::Deferred, ..Config::default() };
    let c = Controller::new(api, pv_core::PluginRegistry::new(), SimClock::new(jiff::Timestamp::now()), config);
    let docs = load_documents(&format!("{CLASS}---\n{CLAIM}")).unwrap();
    let class: StorageClass = serde_json::from_value(docs[0].value.clone()).unwrap();
    let claim: PersistentVolumeClaim = serde_json::from_value(docs[1].value.clone()).unwrap();
    c.on_class(ObjectEvent::Applied(class));
    c.on_claim(ObjectEvent::Applied(claim));
    rt.block_on(async {
        c.sync_claim_key("default/c1").await.unwrap();
        assert!(c.operations().run_next().await, "the provisioning operation ran");
        c.recorder().flush().await;
    });
    let events = pv_sim::invariants::listed(&store, "events");
    let failed: Vec<_> = events.iter().filter(|e| e["reason"] == "ProvisioningFailed").collect();
    assert_eq!(failed.len(), 1, "{events:?}");
    assert_eq!(failed[0]["type"], "Warning");
    assert_eq!(
        failed[0]["message"],
        "Error saving claim: Operation cannot be fulfilled on persistentvolumeclaims \"c1\": the object has been modified"
    );
    assert!(events.iter().all(|e| e["reason"] != "ExternalProvisioning"), "nothing was handed off");
    let s = c.metrics.end_to_end_snapshot();
    assert_eq!(s.len(), 1);
    assert_eq!((s[0].0 .0.as_str(), s[0].0 .1, s[0].1.errors), ("example.com/ext", PROVISION, 1));
}

/// `pv_controller_claim_time_to_bound_seconds{path}` and `pv_controller_pending_claims{reason}`:
/// a claim waiting for an external provisioner is counted by that reason, then timed from its
/// creation to Bound on the `external` path; static binds and in-tree provisioning on theirs.
#[test]
fn time_to_bound_by_path_and_pending_claims_by_reason() {
    use pv_core::metrics::{PATH_EXTERNAL, PATH_PROVISIONED, PATH_STATIC};
    let rt = rt();
    let input = load_documents(&format!("{CLASS}---\n{CLAIM}")).unwrap();
    let mut sim = Simulation::new(input, pv_core::PluginRegistry::new(), SimulationOptions::default()).unwrap();
    rt.block_on(sim.run()).unwrap();
    let controller = sim.controller().clone();
    assert_eq!(controller.caches().pending_claims(), [("wait-external-provisioner", 1)]);
    assert!(controller.metrics.time_to_bound_snapshot().is_empty());
    sim.advance(Duration::from_secs(40));
    sim.store().create("persistentvolumes", provisioned_pv()).unwrap();
    rt.block_on(sim.run()).unwrap();
    assert!(controller.caches().pending_claims().is_empty());
    let s = controller.metrics.time_to_bound_snapshot();
    assert_eq!(s.len(), 1, "{s:?}");
    assert_eq!((s[0].0, s[0].1.count), (PATH_EXTERNAL, 1));
    assert!(s[0].1.sum >= 40.0, "from the claim's creation: {}", s[0].1.sum);

    // examples/cluster.yaml: two claims bound to existing volumes, one provisioned by host-path.
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/cluster.yaml")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let registry = pv_plugins::registry(Some(dir.path().to_path_buf()));
    let mut sim = Simulation::new(load_documents(&text).unwrap(), registry, SimulationOptions::default()).unwrap();
    rt.block_on(sim.run()).unwrap();
    let s = sim.controller().metrics.time_to_bound_snapshot();
    let counts: Vec<(&str, u64)> = s.iter().map(|(p, h)| (*p, h.count)).collect();
    assert_eq!(counts, [(PATH_PROVISIONED, 1), (PATH_STATIC, 2)]);

    // A claim naming a volume that does not exist, and one of no class that nothing matches.
    let input = load_documents(
        "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: a, namespace: default}\nspec: {accessModes: [ReadWriteOnce], storageClassName: '', volumeName: nope, resources: {requests: {storage: 1Gi}}}\n---\napiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: b, namespace: default}\nspec: {accessModes: [ReadWriteOnce], storageClassName: '', resources: {requests: {storage: 1Gi}}}\n",
    )
    .unwrap();
    let mut sim = Simulation::new(input, pv_core::PluginRegistry::new(), SimulationOptions::default()).unwrap();
    rt.block_on(sim.run()).unwrap();
    assert_eq!(sim.controller().caches().pending_claims(), [("no-class", 1), ("volume-not-found", 1)]);
}
