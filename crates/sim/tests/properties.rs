//! Property tests: random clusters and random sequences of user actions (create and delete
//! claims and volumes, change reclaim policies), each step run to quiescence with and without API
//! faults. After every step the invariants must hold: no claim bound by two volumes, every Bound
//! claim's volume points back to it, no host-path directory without a volume, and no volume
//! deleted or recycled while a claim still used it. Failing cases shrink to a minimal sequence.

use proptest::prelude::*;
use pv_sim::invariants::{self, GuardPlugin};
use pv_sim::{Simulation, SimulationOptions};
use pv_store::{FaultSpec, Store};
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;

#[derive(Clone, Debug)]
enum Action {
    CreateClaim { name: u8, gi: u8, class: u8 },
    DeleteClaim { name: u8 },
    CreateVolume { name: u8, gi: u8, policy: u8, class: u8 },
    DeleteVolume { name: u8 },
    SetPolicy { name: u8, policy: u8 },
}

const POLICIES: [&str; 3] = ["Retain", "Delete", "Recycle"];
const CLASSES: [&str; 2] = ["", "local"];

fn action() -> impl Strategy<Value = Action> {
    prop_oneof![
        (0u8..6, 1u8..4, 0u8..2).prop_map(|(name, gi, class)| Action::CreateClaim { name, gi, class }),
        (0u8..6).prop_map(|name| Action::DeleteClaim { name }),
        (0u8..6, 1u8..4, 0u8..3, 0u8..2).prop_map(|(name, gi, policy, class)| Action::CreateVolume {
            name,
            gi,
            policy,
            class
        }),
        (0u8..6).prop_map(|name| Action::DeleteVolume { name }),
        (0u8..6, 0u8..3).prop_map(|(name, policy)| Action::SetPolicy { name, policy }),
    ]
}

fn apply(store: &Store, root: &Path, a: &Action) {
    // User actions go through the API like kubectl's; refusals (exists, not found) are fine.
    let _ = match a {
        Action::CreateClaim { name, gi, class } => store
            .create(
                "persistentvolumeclaims",
                json!({"metadata": {"name": format!("c{name}"), "namespace": "default"},
                       "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": CLASSES[*class as usize],
                                "resources": {"requests": {"storage": format!("{gi}Gi")}}}}),
            )
            .map(|_| ()),
        Action::DeleteClaim { name } => {
            store.delete("persistentvolumeclaims", "default", &format!("c{name}"), None, None).map(|_| ())
        }
        Action::CreateVolume { name, gi, policy, class } => {
            let dir = root.join(format!("v{name}"));
            let _ = std::fs::create_dir_all(&dir);
            let r = store.create(
                "persistentvolumes",
                json!({"metadata": {"name": format!("v{name}")},
                       "spec": {"capacity": {"storage": format!("{gi}Gi")}, "accessModes": ["ReadWriteOnce"],
                                "storageClassName": CLASSES[*class as usize],
                                "persistentVolumeReclaimPolicy": POLICIES[*policy as usize],
                                "hostPath": {"path": dir.to_string_lossy()}}}),
            );
            if r.is_err() && store.get("persistentvolumes", "", &format!("v{name}")).is_err() {
                let _ = std::fs::remove_dir_all(&dir);
            }
            r.map(|_| ())
        }
        Action::DeleteVolume { name } => {
            store.delete("persistentvolumes", "", &format!("v{name}"), None, None).map(|_| ())
        }
        Action::SetPolicy { name, policy } => match store.get("persistentvolumes", "", &format!("v{name}")) {
            Ok(v) => {
                let mut v: Value = v.value();
                v["spec"]["persistentVolumeReclaimPolicy"] = json!(POLICIES[*policy as usize]);
                store.update("persistentvolumes", v, false).map(|_| ())
            }
            Err(e) => Err(e),
        },
    };
}

fn class_object() -> pv_sim::InputObject {
    let text = "apiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata: {name: local}\nprovisioner: kubernetes.io/host-path\nreclaimPolicy: Delete\n";
    pv_sim::load_documents(text).unwrap().remove(0)
}

/// Runs the actions, each followed by a run to quiescence; returns the violations seen.
fn run(actions: &[Action], faults: Option<(FaultSpec, u64)>) -> Vec<String> {
    let root = tempfile::tempdir().unwrap();
    let (store, clock) = Simulation::load(vec![class_object()]).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    let mut out = Vec::new();
    // Directories a user created for volumes that were then deleted with policy Retain stay on
    // disk legitimately; only directories the controller made (pvc-*) must never be orphaned.
    let user_dirs: BTreeSet<String> = (0..6).map(|n| format!("v{n}")).collect();
    for (i, a) in actions.iter().enumerate() {
        apply(&store, root.path(), a);
        let guard =
            GuardPlugin::new(Arc::new(pv_plugins::HostPathPlugin::new(root.path().to_path_buf())), store.clone());
        let violations = guard.violations.clone();
        let mut plugins = pv_core::PluginRegistry::new();
        plugins.register(Arc::new(guard));
        let opts = SimulationOptions { faults: faults.clone(), ..Default::default() };
        let mut sim = Simulation::with_store(store.clone(), clock.clone(), plugins, opts);
        if let Err(e) = rt.block_on(sim.run()) {
            out.push(format!("step {i} ({a:?}): {e}"));
        }
        for v in invariants::check(&store, Some(root.path()), &user_dirs) {
            out.push(format!("step {i} ({a:?}): {v}"));
        }
        out.extend(violations.lock().unwrap().iter().map(|v| format!("step {i} ({a:?}): {v}")));
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: std::env::var("PV_PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(48), ..ProptestConfig::default() })]

    #[test]
    fn invariants_hold_after_every_step(actions in proptest::collection::vec(action(), 1..12)) {
        let v = run(&actions, None);
        prop_assert!(v.is_empty(), "{v:#?}");
    }

    #[test]
    fn invariants_hold_after_every_step_under_api_faults(actions in proptest::collection::vec(action(), 1..12), seed in 0u64..1000) {
        let spec = FaultSpec::parse("conflict=0.2,error=0.1,timeout=0.05,lost-response=0.05,watch-drop=0.05,watch-gone=0.3,stale=0.2").unwrap();
        let v = run(&actions, Some((spec, seed)));
        prop_assert!(v.is_empty(), "{v:#?}");
    }
}
