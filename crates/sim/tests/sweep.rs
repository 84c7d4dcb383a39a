//! The sweep of assets an interrupted provisioning left behind: a host-path directory made for a
//! claim (`pvc-<claim uid>`) whose volume object was never created, because the process
//! stopped in between, and whose claim was then deleted. Nothing refers to it, so the sweep
//! removes it, on the second sweep that finds it unused and only while it is empty; anything a
//! volume or a claim still names is kept.

use pv_core::operations::Mode;
use pv_core::{Config, Controller, ObjectEvent, PluginRegistry, SimClock};
use pv_local::MemApi;
use pv_model::k8s::{PersistentVolume, PersistentVolumeClaim};
use pv_plugins::HostPathPlugin;
use pv_store::Store;
use serde_json::json;
use std::path::Path;
use std::sync::Arc;

const GONE: &str = "pvc-11111111-1111-1111-1111-111111111111";
const CLAIMED: &str = "pvc-22222222-2222-2222-2222-222222222222";
const STATIC_SOURCE: &str = "pvc-33333333-3333-3333-3333-333333333333";
const WITH_DATA: &str = "pvc-44444444-4444-4444-4444-444444444444";

fn controller(root: &Path) -> Arc<Controller> {
    let mut plugins = PluginRegistry::new();
    plugins.register(Arc::new(HostPathPlugin::new(root.to_path_buf())));
    let config = Config { operations: Mode::Deferred, ..Config::default() };
    Controller::new(
        Arc::new(MemApi::new(Arc::new(Store::new()))),
        plugins,
        SimClock::new(jiff::Timestamp::now()),
        config,
    )
}

#[test]
fn only_an_empty_directory_nothing_names_goes_and_only_at_the_second_sweep() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("volumes");
    for d in [GONE, CLAIMED, STATIC_SOURCE, WITH_DATA, "static-data", "pvc-not-a-uid"] {
        std::fs::create_dir_all(root.join(d)).unwrap();
    }
    std::fs::write(root.join(WITH_DATA).join("file"), "data").unwrap();
    let c = controller(&root);

    // A claim whose provisioning would name its volume CLAIMED, and a static volume whose
    // source is STATIC_SOURCE under another name.
    let claim: PersistentVolumeClaim = serde_json::from_value(json!({
        "metadata": {"name": "c", "namespace": "default", "uid": "22222222-2222-2222-2222-222222222222", "resourceVersion": "1"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}))
    .unwrap();
    c.on_claim(ObjectEvent::Applied(claim));
    let volume: PersistentVolume = serde_json::from_value(json!({
        "metadata": {"name": "static-pv", "resourceVersion": "2"},
        "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                 "hostPath": {"path": root.canonicalize().unwrap().join(STATIC_SOURCE)}}}))
    .unwrap();
    c.on_volume(ObjectEvent::Applied(volume));

    let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    let first = rt.block_on(c.sweep_unused_assets());
    assert!(first.is_empty(), "the first sweep only notes what is unused: {first:?}");
    assert!(root.join(GONE).exists());
    let second = rt.block_on(c.sweep_unused_assets());
    assert_eq!(second, [GONE], "the empty directory of a claim that is gone, at the second sweep");
    assert!(!root.join(GONE).exists());
    for kept in [CLAIMED, STATIC_SOURCE, WITH_DATA, "static-data", "pvc-not-a-uid"] {
        assert!(root.join(kept).exists(), "{kept} is kept");
    }
    assert!(root.join(WITH_DATA).join("file").exists(), "nothing inside a directory is touched");
}

#[test]
fn a_directory_that_is_named_again_before_the_second_sweep_is_kept() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("volumes");
    std::fs::create_dir_all(root.join(GONE)).unwrap();
    let c = controller(&root);
    let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    assert!(rt.block_on(c.sweep_unused_assets()).is_empty());
    // The volume made for it reaches the cache between the sweeps.
    let volume: PersistentVolume = serde_json::from_value(json!({
        "metadata": {"name": GONE, "resourceVersion": "3"},
        "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                 "hostPath": {"path": root.canonicalize().unwrap().join(GONE)}}}))
    .unwrap();
    c.on_volume(ObjectEvent::Applied(volume));
    assert!(rt.block_on(c.sweep_unused_assets()).is_empty());
    assert!(root.join(GONE).exists());
}
