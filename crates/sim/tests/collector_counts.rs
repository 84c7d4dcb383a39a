//! The `pv_collector_*` counts come from what the caches keep per object (packed Bound objects
//! are not decoded); they must equal counting the objects themselves, by upstream's rules, as
//! objects are added, change phase and go away. Upstream's rules: a PV's class is its
//! `spec.storageClassName` (the beta annotation is not read), a claim's class the beta
//! annotation first; a PV's plugin is host-path or NFS (the binder's only plugins), else `N/A`.

use pv_core::{Config, Controller, ObjectEvent, SystemClock};
use pv_local::MemApi;
use pv_model::helpers;
use pv_model::k8s::{PersistentVolume, PersistentVolumeClaim};
use pv_store::Store;
use serde_json::json;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

fn pv(name: &str, rv: u64, class: &str, phase: &str, block: bool, nfs: bool) -> PersistentVolume {
    let source = if nfs {
        json!({"nfs": {"server": "s", "path": "/p"}})
    } else {
        json!({"csi": {"driver": "d.example.com", "volumeHandle": name}})
    };
    let mut spec = json!({"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "storageClassName": class,
        "volumeMode": if block { "Block" } else { "Filesystem" }});
    spec.as_object_mut().unwrap().extend(source.as_object().unwrap().clone());
    serde_json::from_value(json!({"metadata": {"name": name, "resourceVersion": rv.to_string()}, "spec": spec,
        "status": {"phase": phase}}))
    .unwrap()
}

fn pvc(ns: &str, name: &str, rv: u64, class: Option<&str>, vac: Option<&str>, phase: &str) -> PersistentVolumeClaim {
    serde_json::from_value(json!({"metadata": {"name": name, "namespace": ns, "resourceVersion": rv.to_string()},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}},
                 "storageClassName": class, "volumeAttributesClassName": vac},
        "status": {"phase": phase}}))
    .unwrap()
}

type Reference = (
    BTreeMap<String, u64>,
    BTreeMap<String, u64>,
    BTreeMap<(String, String, String), u64>,
    BTreeMap<(String, String, String), u64>,
    BTreeMap<(String, String), u64>,
);

/// Upstream's counting, over the objects themselves.
fn reference(
    _c: &Controller,
    pvs: &HashMap<String, PersistentVolume>,
    pvcs: &HashMap<String, PersistentVolumeClaim>,
) -> Reference {
    let mut r = Reference::default();
    for v in pvs.values() {
        let spec = v.spec.as_ref().unwrap();
        let class = spec.storage_class_name.clone().unwrap_or_default();
        let plugin = if spec.nfs.is_some() {
            "kubernetes.io/nfs"
        } else if spec.host_path.is_some() {
            "kubernetes.io/host-path"
        } else {
            "N/A"
        };
        *r.4.entry((plugin.to_string(), helpers::volume_mode(v).to_string())).or_default() += 1;
        let m = if helpers::volume_phase(v) == "Bound" { &mut r.0 } else { &mut r.1 };
        *m.entry(class).or_default() += 1;
    }
    for cl in pvcs.values() {
        let key = (
            cl.metadata.namespace.clone().unwrap_or_default(),
            helpers::annotation(&cl.metadata, "volume.beta.kubernetes.io/storage-class")
                .map(str::to_string)
                .or_else(|| cl.spec.as_ref().and_then(|s| s.storage_class_name.clone()))
                .unwrap_or_default(),
            helpers::claim_vac(cl).to_string(),
        );
        let m = if helpers::claim_phase(cl) == "Bound" { &mut r.2 } else { &mut r.3 };
        *m.entry(key).or_default() += 1;
    }
    r
}

fn counted(c: &Controller) -> Reference {
    let k = c.caches().collect_counts();
    fn s<K: Ord + std::hash::Hash>(m: HashMap<K, u64>) -> BTreeMap<K, u64> {
        m.into_iter().collect()
    }
    (s(k.bound_pv), s(k.unbound_pv), s(k.bound_pvc), s(k.unbound_pvc), s(k.total_pv))
}

#[test]
fn collector_counts_equal_counting_the_objects() {
    let store = Arc::new(Store::new());
    let c = Controller::new(
        Arc::new(MemApi::new(store)),
        pv_plugins::registry(None),
        SystemClock::new(),
        Config::default(),
    );
    let mut pvs = HashMap::new();
    let mut pvcs = HashMap::new();
    let put_pv = |c: &Controller, v: PersistentVolume, pvs: &mut HashMap<String, PersistentVolume>| {
        pvs.insert(v.metadata.name.clone().unwrap(), v.clone());
        c.on_volume(ObjectEvent::Applied(v));
    };
    let beta = |m: &mut pv_model::k8s::ObjectMeta| {
        m.annotations = Some([("volume.beta.kubernetes.io/storage-class".to_string(), "beta".to_string())].into());
    };
    for i in 0..30u64 {
        let phase = ["Bound", "Available", "Released"][i as usize % 3];
        let mut v = pv(
            &format!("v{i}"),
            1,
            ["", "gold", "silver"][i as usize % 3 / 2 + i as usize % 2],
            phase,
            i % 4 == 0,
            i % 5 != 0,
        );
        if i % 6 == 0 {
            beta(&mut v.metadata);
        }
        if i % 7 == 0 {
            // A host-path volume.
            let spec = v.spec.as_mut().unwrap();
            (spec.nfs, spec.csi) = (None, None);
            spec.host_path = serde_json::from_value(json!({"path": "/tmp/x"})).unwrap();
        }
        put_pv(&c, v, &mut pvs);
    }
    for i in 0..30u64 {
        let cl = pvc(
            ["a", "b"][i as usize % 2],
            &format!("c{i}"),
            1,
            [None, Some("gold"), Some("")][i as usize % 3],
            if i % 7 == 0 { Some("fast") } else { None },
            ["Bound", "Pending"][i as usize % 2],
        );
        let mut cl = cl;
        if i % 5 == 0 {
            beta(&mut cl.metadata);
        }
        pvcs.insert(helpers::claim_key(&cl).into(), cl.clone());
        c.on_claim(ObjectEvent::Applied(cl));
    }
    assert_eq!(counted(&c), reference(&c, &pvs, &pvcs));

    // Phase changes, a class change, and deletions move the counts.
    put_pv(&c, pv("v1", 2, "gold", "Bound", false, true), &mut pvs);
    put_pv(&c, pv("v0", 2, "silver", "Released", true, true), &mut pvs);
    let v2 = pvs.remove("v2").unwrap();
    c.on_volume(ObjectEvent::Deleted(v2));
    let cl = pvc("a", "c2", 2, Some("gold"), None, "Bound");
    pvcs.insert(helpers::claim_key(&cl).into(), cl.clone());
    c.on_claim(ObjectEvent::Applied(cl));
    let gone = pvcs.remove("b/c3").unwrap();
    c.on_claim(ObjectEvent::Deleted(gone));
    // An older version is refused and changes nothing.
    c.on_volume(ObjectEvent::Applied(pv("v1", 1, "", "Available", false, true)));
    assert_eq!(counted(&c), reference(&c, &pvs, &pvcs));
}
