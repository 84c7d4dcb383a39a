//! Targeted fault cases found by the randomized runs, kept as regressions.

use pv_sim::{load_documents, Simulation, SimulationOptions};
use pv_store::FaultSpec;

/// Every write is applied but reported as failed, and the PV create is tried once: the asset must
/// not be deleted from under the PV that was in fact saved.
#[test]
fn a_lost_response_on_the_last_pv_create_keeps_the_provisioned_directory() {
    let root = tempfile::tempdir().unwrap();
    let input = "apiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata: {name: local}\nprovisioner: kubernetes.io/host-path\n---\napiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: c1, namespace: default, uid: 11111111-1111-1111-1111-111111111111}\nspec: {accessModes: [ReadWriteOnce], storageClassName: local, resources: {requests: {storage: 1Gi}}}\n";
    let mut options =
        SimulationOptions { faults: Some((FaultSpec::parse("lost-response=1").unwrap(), 1)), ..Default::default() };
    options.config.create_provisioned_pv_retry_count = 1;
    let mut sim =
        Simulation::new(load_documents(input).unwrap(), pv_plugins::registry(Some(root.path().to_path_buf())), options)
            .unwrap();
    tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(sim.run()).unwrap();
    let name = "pvc-11111111-1111-1111-1111-111111111111";
    let pv = sim.store().get("persistentvolumes", "", name).expect("the provisioned PV exists").value();
    assert_eq!(pv["status"]["phase"], "Bound");
    assert!(root.path().join(name).is_dir(), "its directory must still exist");
    let c = sim.store().get("persistentvolumeclaims", "default", "c1").unwrap().value();
    assert_eq!(c["spec"]["volumeName"], name);
}
