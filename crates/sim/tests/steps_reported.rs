//! The steps the controller reports for each sync (`SimulationOptions::record_steps`, shown by
//! `simulate -o changes`): the right objects in the right order, exactly the writes the API
//! server received, and not one decision or write changed by observing them.

use pv_sim::scenario::{fixture_files, load_fixture, outcome, prepare};
use pv_sim::{Changes, Simulation, SimulationOptions, SyncRecord};
use std::sync::atomic::Ordering;

/// A bind to a static volume, a provisioning through a class, and a claim with neither.
const CLUSTER: &str = r#"
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: local}
provisioner: kubernetes.io/host-path
volumeBindingMode: Immediate
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: pv1}
spec:
  capacity: {storage: 1Gi}
  accessModes: [ReadWriteOnce]
  storageClassName: ""
  nfs: {server: nfs.example.com, path: /exports/a}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: c1, namespace: default}
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: ""
  resources: {requests: {storage: 1Gi}}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: fast, namespace: default}
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: local
  resources: {requests: {storage: 1Gi}}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: lonely, namespace: default}
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: ""
  resources: {requests: {storage: 5Gi}}
"#;

/// Runs `objects` to quiescence with the steps recorded: the simulation and its syncs.
fn run(
    objects: Vec<pv_sim::InputObject>,
    root: &std::path::Path,
    mut opts: SimulationOptions,
) -> (Simulation, Vec<SyncRecord>) {
    opts.record_steps = true;
    let mut sim = Simulation::new(objects, pv_plugins::registry(Some(root.to_path_buf())), opts).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    rt.block_on(sim.run()).unwrap();
    let synced = sim.take_synced();
    (sim, synced)
}

/// The lines of the syncs of `object` that acted, without their time.
fn lines_of<'a>(lines: &'a [String], object: &str) -> Vec<&'a str> {
    let prefix = format!("{object}: ");
    lines
        .iter()
        .filter_map(|l| l.split_once(' ').map(|(_, rest)| rest.trim_start()))
        .filter(|l| l.starts_with(&prefix))
        .collect()
}

#[test]
fn a_bind_a_provisioning_and_a_claim_left_pending_are_told_step_by_step() {
    let root = tempfile::tempdir().unwrap();
    let (sim, synced) = run(pv_sim::load_documents(CLUSTER).unwrap(), root.path(), SimulationOptions::default());
    let steps = Changes::default().with_steps(&synced).steps;

    // The static bind: the volume promised, then the volume's two writes, then the claim's two.
    assert_eq!(
        lines_of(&steps, "claim default/c1"),
        ["claim default/c1: reserve volume pv1; write volume pv1: spec.claimRef to default/c1; \
          write volume pv1: status.phase Bound; \
          write claim default/c1: spec.volumeName pv1, annotations bound-by-controller and bind-completed; \
          write claim default/c1: status.phase Bound"],
        "{steps:#?}"
    );
    // Its volume's first sync made it Available, before the claim's sync bound it.
    let volume = lines_of(&steps, "volume pv1");
    assert_eq!(volume, ["volume pv1: write volume pv1: status.phase Available"], "{steps:#?}");
    let at = |line: &str| steps.iter().position(|l| l.ends_with(line)).unwrap();
    assert!(at(volume[0]) < at(lines_of(&steps, "claim default/c1")[0]));

    // The provisioned claim: an operation started, then (once the volume exists) the claim's
    // side of the bind, the volume's side having been written by the provisioning.
    let fast = lines_of(&steps, "claim default/fast");
    assert_eq!(
        fast[0], "claim default/fast: provision a volume with kubernetes.io/host-path (an operation)",
        "{steps:#?}"
    );
    let pv = sim.store().list("persistentvolumes", &Default::default()).unwrap().0;
    let provisioned = pv.iter().map(|o| o.value()).find(|v| v["spec"]["claimRef"]["name"] == "fast").unwrap();
    let name = provisioned["metadata"]["name"].as_str().unwrap();
    let bind = fast.iter().find(|l| l.contains("spec.volumeName")).expect("the provisioned volume is bound");
    let claim_writes: Vec<&str> = bind.split("; ").filter(|s| s.starts_with("write claim default/fast: ")).collect();
    assert_eq!(
        claim_writes,
        [
            format!(
                "write claim default/fast: spec.volumeName {name}, annotations bound-by-controller and bind-completed"
            ),
            "write claim default/fast: status.phase Bound".to_string(),
        ],
        "{steps:#?}"
    );

    // The claim without volume or class: told why, left Pending, never bound.
    let lonely = lines_of(&steps, "claim default/lonely");
    assert!(!lonely.is_empty(), "{steps:#?}");
    // (The store made it Pending as it stored it: the sync's Pending write changes nothing.)
    // Its event again at the resync, as each resync of a claim that cannot bind says it.
    let told = "claim default/lonely: event Normal FailedBinding on claim default/lonely";
    assert_eq!(lonely, [told, told], "{steps:#?}");
    assert!(steps.iter().all(|l| !l.contains("spec.claimRef to default/lonely")), "{steps:#?}");

    // In time order, each line starting with its virtual time.
    assert!(synced.windows(2).all(|w| w[0].elapsed_ms <= w[1].elapsed_ms));
    assert!(steps[0].starts_with("+0s "), "{steps:#?}");
    // Every sync is recorded, also those that did nothing (a bound pair's resync).
    assert!(synced.iter().any(|r| !r.report.acted()));
}

/// Runs every scenario fixture twice, without and with the steps recorded: the same objects
/// and events, to the byte (two runs of the same input are the same run, the resync's order
/// included, so any difference is the observer's). Where no sync started an operation, the writes the syncs report
/// saving are exactly the write requests the API server received; an operation's own writes
/// (a provisioned volume created, a finalizer removed) are not a sync's.
#[test]
fn every_scenario_reports_exactly_the_writes_it_makes_and_behaves_the_same_observed() {
    let mut checked = 0;
    let mut exact = 0;
    for f in fixture_files().unwrap() {
        let s = load_fixture(&f).unwrap();
        if s.expect.error.is_some() {
            continue;
        }
        let opts = || {
            let mut o = SimulationOptions::default();
            s.apply_options(&mut o);
            o
        };
        let plain = {
            let root = tempfile::tempdir().unwrap();
            let mut sim = Simulation::new(
                prepare(&s, root.path()).unwrap(),
                pv_plugins::registry(Some(root.path().into())),
                opts(),
            )
            .unwrap();
            let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
            rt.block_on(sim.run()).unwrap();
            assert!(sim.take_synced().is_empty(), "{}: nothing recorded unless asked", s.name);
            let root_s = std::fs::canonicalize(root.path()).unwrap().to_string_lossy().into_owned();
            serde_json::to_string(&outcome(&sim).items).unwrap().replace(&root_s, "${ROOT}")
        };
        let root = tempfile::tempdir().unwrap();
        let (sim, synced) = run(prepare(&s, root.path()).unwrap(), root.path(), opts());
        let root_s = std::fs::canonicalize(root.path()).unwrap().to_string_lossy().into_owned();
        let observed = serde_json::to_string(&outcome(&sim).items).unwrap().replace(&root_s, "${ROOT}");
        if plain != observed {
            let (a, b): (serde_json::Value, serde_json::Value) =
                (serde_json::from_str(&plain).unwrap(), serde_json::from_str(&observed).unwrap());
            let first = a.as_array().unwrap().iter().zip(b.as_array().unwrap()).find(|(x, y)| x != y);
            panic!("{}: observing the syncs changed the outcome; first difference:\n{first:?}", s.name);
        }

        let reported: usize = synced.iter().map(|r| r.report.writes()).sum();
        let received = sim.hooks().write_attempts.load(Ordering::SeqCst) as usize;
        let operations = synced.iter().flat_map(|r| &r.report.steps).any(|t| {
            use pv_core::steps::{ClaimStep, Step, VolumeStep};
            use pv_core::Provisioning::{External, Internal};
            t.acted()
                && matches!(
                    t.step,
                    Step::Claim(ClaimStep::Provision(Internal { .. } | External { .. }))
                        | Step::Volume(VolumeStep::Reclaim(_))
                )
        });
        if operations {
            assert!(reported <= received, "{}: {reported} writes reported, {received} received", s.name);
        } else {
            assert_eq!(reported, received, "{}: the writes reported are the writes received", s.name);
            exact += 1;
        }
        checked += 1;
    }
    assert!(checked >= 160 && exact >= 100, "{checked} scenarios checked, {exact} exactly");
}
