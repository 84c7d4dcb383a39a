//! Replays one case through this controller, as upstream's runner runs it through its own.

use crate::case::{Case, Injection};
use crate::compare;
use crate::inject::injecting;
use crate::mock::MockPlugin;
use pv_core::operations::Mode;
use pv_core::{Config, Controller, PluginRegistry, WATCHED_KINDS};
use pv_local::{deliver, MemApi};
use pv_model::helpers;
use pv_model::index::VolumeIndex;
use pv_model::k8s::{PersistentVolume, PersistentVolumeClaim};
use pv_model::ObjectKey;
use pv_sim::{Simulation, SimulationOptions};
use pv_store::{ListOptions, Object, Store, WatchEventType};
use serde_json::Value;
use std::sync::Arc;

/// Upstream's annotation for objects its API has and its controller's cache does not.
const SKIP_LOCAL_STORE: &str = "pv-testing-skip-local-store";

/// What a replay found.
pub enum Verdict {
    /// Objects and events as upstream's test expects them.
    Same,
    /// What differs.
    Differ(Vec<String>),
    /// The case cannot be asked of this controller, and why.
    NotApplicable(String),
}

/// Replays `case`.
pub async fn replay(case: &Case) -> Verdict {
    if case.csi_migration {
        return Verdict::NotApplicable(
            "upstream's test migrates its mock in-tree plugin to a fake CSI driver through a fake translator (Go internals); this controller's migration table names the real in-tree plugins only".into(),
        );
    }
    match case.run.as_str() {
        "index" => index(case),
        "check" => check(case),
        "sync" => match sync(case).await {
            Ok(v) => v,
            Err(e) => Verdict::Differ(vec![e]),
        },
        "multisync" | "controller" => match settle(case).await {
            Ok(v) => v,
            Err(e) => Verdict::Differ(vec![e]),
        },
        other => Verdict::NotApplicable(format!("unknown run {other:?}")),
    }
}

fn typed(v: &Value, api_version: &str, kind: &str) -> Value {
    let mut v = v.clone();
    if let Some(o) = v.as_object_mut() {
        o.insert("apiVersion".into(), api_version.into());
        o.insert("kind".into(), kind.into());
    }
    v
}

/// The case's classes and pods: upstream hands them to its controller's listers, never to its
/// fake API server (which validates nothing: some are not valid objects, a class without a
/// provisioner, a pod named `runningPod`).
fn listed_only(case: &Case) -> Vec<(&'static str, Object)> {
    let classes =
        case.classes.iter().map(|c| ("storageclasses", Object::new(&typed(c, "storage.k8s.io/v1", "StorageClass"))));
    let pods = case.pods.iter().map(|p| ("pods", Object::new(&typed(p, "v1", "Pod"))));
    classes.chain(pods).collect()
}

/// The case's volumes and claims (and, where the API server holds them, its classes), as
/// documents the simulator loads.
fn initial_objects(case: &Case, with_classes: bool) -> Result<Vec<pv_sim::InputObject>, String> {
    let mut docs: Vec<Value> = Vec::new();
    if with_classes {
        docs.extend(case.classes.iter().map(|c| typed(c, "storage.k8s.io/v1", "StorageClass")));
    }
    // Upstream's fake API server keeps the last object of a name.
    let last = |list: &[Value], kind: &str| -> Vec<Value> {
        let mut by_name: Vec<Value> = Vec::new();
        for v in list {
            by_name.retain(|o| o["metadata"]["name"] != v["metadata"]["name"]);
            by_name.push(typed(v, "v1", kind));
        }
        by_name
    };
    docs.extend(last(&case.initial_volumes, "PersistentVolume"));
    docs.extend(last(&case.initial_claims, "PersistentVolumeClaim"));
    let text = serde_json::to_string(&Value::Array(docs)).map_err(|e| e.to_string())?;
    pv_sim::load_documents(&text).map_err(|e| format!("the initial objects: {e}"))
}

/// The case's objects in a store, or why the case cannot be asked: kube-apiserver refuses one of
/// them (upstream's fake API server validates nothing).
fn loaded(case: &Case, with_classes: bool) -> Result<Vec<pv_sim::InputObject>, Verdict> {
    initial_objects(case, with_classes).map_err(|e| {
        Verdict::NotApplicable(format!(
            "kube-apiserver refuses an object of the case, which upstream's fake API server takes: {e}"
        ))
    })
}

fn skipped(v: &Value) -> bool {
    v.pointer("/metadata/annotations").and_then(Value::as_object).is_some_and(|a| a.contains_key(SKIP_LOCAL_STORE))
}

fn config() -> Config {
    // Upstream's event texts (`--detailed-events=false`, as `run` has them).
    Config { detailed_events: false, operations: Mode::Deferred, ..Config::default() }
}

fn plugins(case: &Case) -> PluginRegistry {
    let mut plugins = PluginRegistry::new();
    if let Some(answers) = &case.plugin {
        plugins.register(Arc::new(MockPlugin::new(answers.clone())));
    }
    plugins
}

fn listed(store: &Store, resource: &str) -> Vec<Value> {
    store
        .list(resource, &ListOptions::default())
        .map(|(items, _)| items.iter().map(Object::value).collect())
        .unwrap_or_default()
}

/// The events written, in order, as upstream's fake recorder prints them.
fn events(store: &Store) -> Vec<String> {
    let mut evs = listed(store, "events");
    let rv =
        |v: &Value| v.pointer("/metadata/resourceVersion").and_then(Value::as_str).and_then(|s| s.parse::<u64>().ok());
    evs.sort_by_key(rv);
    let mut out = Vec::new();
    for e in evs {
        let s = |f: &str| e.get(f).and_then(Value::as_str).unwrap_or_default().to_string();
        let count = e.get("count").and_then(Value::as_u64).unwrap_or(1).max(1);
        for _ in 0..count {
            out.push(format!("{} {} {}", s("type"), s("reason"), s("message")));
        }
    }
    out
}

fn verdict(case: &Case, store: &Store, mut found: Vec<String>) -> Verdict {
    found.extend(compare::objects("volume", &case.expected_volumes, &listed(store, "persistentvolumes")));
    found.extend(compare::objects("claim", &case.expected_claims, &listed(store, "persistentvolumeclaims")));
    found.extend(compare::events(&case.expected_events, &events(store)));
    if found.is_empty() {
        Verdict::Same
    } else {
        Verdict::Differ(found)
    }
}

/// Upstream's `runSyncTests`: the controller's caches filled (but for objects marked to skip
/// them), one sync, the operations it started run to their end (after the case's injected
/// changes), then objects and events compared.
async fn sync(case: &Case) -> Result<Verdict, String> {
    let Some(call) = &case.sync else {
        return Ok(Verdict::NotApplicable("the test function performs no sync of its own".into()));
    };
    let objects = match loaded(case, false) {
        Ok(o) => o,
        Err(v) => return Ok(v),
    };
    let (store, clock) = Simulation::load(objects).map_err(|e| format!("load: {e}"))?;
    let api = Arc::new(injecting(MemApi::new(store.clone()), case.errors.clone()));
    let c = Controller::new(api, plugins(case), clock, config());
    for (resource, o) in listed_only(case) {
        deliver(&c, resource, WatchEventType::Added, &o);
    }
    for resource in WATCHED_KINDS {
        for o in store.list(resource, &ListOptions::default()).map_err(|e| e.to_string())?.0 {
            if !skipped(&o.value()) {
                deliver(&c, resource, WatchEventType::Added, &o);
            }
        }
    }
    // An object the API server holds in a newer version (marked to skip the cache) whose
    // older version the cache holds.
    for (resource, kind, list) in [
        ("persistentvolumes", "PersistentVolume", &case.initial_volumes),
        ("persistentvolumeclaims", "PersistentVolumeClaim", &case.initial_claims),
    ] {
        for v in list.iter().filter(|v| !skipped(v)) {
            let ns = v.pointer("/metadata/namespace").and_then(Value::as_str).unwrap_or_default();
            let name = v.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default();
            if store.get(resource, ns, name).is_ok_and(|o| skipped(&o.value())) {
                deliver(&c, resource, WatchEventType::Added, &Object::new(&typed(v, "v1", kind)));
            }
        }
    }
    let result = match call.kind.as_str() {
        "claim" => c.sync_claim_key(ObjectKey::new(&call.namespace, &call.name).as_str()).await,
        _ => c.sync_volume_key(&call.name).await,
    };
    let mut found = Vec::new();
    match (&result, call.expect_error) {
        (Ok(()), true) => found.push("the sync succeeded where upstream's fails".to_string()),
        (Err(e), false) => found.push(format!("the sync failed: {e}")),
        _ => {}
    }
    if let Some(inj) = &case.injection {
        inject(&store, &c, inj)?;
    }
    while c.operations().run_next().await {}
    c.recorder().flush().await;
    Ok(verdict(case, &store, found))
}

/// Changes made while an operation waits to start: API writes the controller is not told of,
/// and objects only its cache sees.
fn inject(store: &Store, c: &Controller, inj: &Injection) -> Result<(), String> {
    let put = |resource: &str, v: &Value| -> Result<(), String> {
        let ns = v.pointer("/metadata/namespace").and_then(Value::as_str).unwrap_or_default();
        let name = v.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default();
        let kind = if resource == "persistentvolumes" { "PersistentVolume" } else { "PersistentVolumeClaim" };
        let mut obj = typed(v, "v1", kind);
        match store.get(resource, ns, name) {
            Ok(old) => {
                obj["metadata"]["resourceVersion"] = old.value()["metadata"]["resourceVersion"].clone();
                let new = store.update(resource, obj.clone(), false).map_err(|e| format!("inject {name}: {e}"))?;
                obj["metadata"]["resourceVersion"] = new["metadata"]["resourceVersion"].clone();
                store.update(resource, obj, true).map_err(|e| format!("inject {name} status: {e}"))?;
            }
            // As upstream's fake API server stores it: uid and status as given.
            Err(_) => drop(store.load(resource, obj).map_err(|e| format!("inject {name}: {e}"))?),
        }
        Ok(())
    };
    for v in &inj.volumes {
        put("persistentvolumes", v)?;
    }
    for v in &inj.claims {
        put("persistentvolumeclaims", v)?;
    }
    for name in &inj.delete_volumes {
        gone(store, "persistentvolumes", "", name)?;
    }
    for key in &inj.delete_claims {
        gone(store, "persistentvolumeclaims", "default", key)?;
    }
    for (resource, kind, list) in [
        ("persistentvolumeclaims", "PersistentVolumeClaim", &inj.cache_claims),
        ("persistentvolumes", "PersistentVolume", &inj.cache_volumes),
        ("nodes", "Node", &inj.nodes),
    ] {
        for v in list {
            deliver(c, resource, WatchEventType::Added, &Object::new(&typed(v, "v1", kind)));
        }
    }
    Ok(())
}

/// Removes an object as upstream's fake API server does: at once, whatever its finalizers.
fn gone(store: &Store, resource: &str, ns: &str, name: &str) -> Result<(), String> {
    let err = |e: pv_store::StoreError| format!("delete {resource} {name}: {e}");
    let mut obj = store.get(resource, ns, name).map_err(err)?.value();
    if obj.pointer("/metadata/finalizers").is_some_and(|f| f.as_array().is_some_and(|a| !a.is_empty())) {
        obj["metadata"]["finalizers"] = Value::Array(Vec::new());
        store.update(resource, obj, false).map_err(err)?;
    }
    store.delete(resource, ns, name, None, None).map_err(err)?;
    Ok(())
}

/// Upstream's `runMultisyncTests` (syncs of what changed and periodic syncs of everything until
/// nothing changes) and `TestControllerSync` (the running controller, then the case's API
/// changes): the simulator runs this controller until it is quiescent.
async fn settle(case: &Case) -> Result<Verdict, String> {
    let objects = match loaded(case, true) {
        Ok(o) => o,
        Err(v) => return Ok(v),
    };
    let options = SimulationOptions { config: config(), ..SimulationOptions::default() };
    let mut sim = Simulation::new(objects, plugins(case), options).map_err(|e| format!("load: {e}"))?;
    sim.start();
    if let (Some(inj), Some(call)) = (&case.injection, &case.sync) {
        // The case's first sync, then its changes while the operation that sync started waits
        // (operations are deferred in the simulator), then the run to quiescence.
        let c = sim.controller().clone();
        // Upstream's runner fills the caches without queueing anything: its test function's
        // sync is the first.
        c.volume_queue.discard();
        c.claim_queue.discard();
        let _ = match call.kind.as_str() {
            "claim" => c.sync_claim_key(ObjectKey::new(&call.namespace, &call.name).as_str()).await,
            _ => c.sync_volume_key(&call.name).await,
        };
        inject(sim.store(), &c, inj)?;
        // The operation goes on right after the changes, as upstream's hook lets it.
        while c.operations().run_next().await {}
    }
    sim.run().await.map_err(|e| e.to_string())?;
    if !case.actions.is_empty() {
        let store = sim.store().clone();
        for a in &case.actions {
            let ns = a.object.pointer("/metadata/namespace").and_then(Value::as_str).unwrap_or_default();
            let name = a.object.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default();
            let r = match a.op.as_str() {
                // As upstream's fake API server stores it: uid and status as given.
                "add-claim" => store
                    .load("persistentvolumeclaims", typed(&a.object, "v1", "PersistentVolumeClaim"))
                    .map(drop)
                    .map_err(|e| format!("add claim {name}: {e}")),
                "delete-claim" => gone(&store, "persistentvolumeclaims", ns, name),
                "delete-volume" => gone(&store, "persistentvolumes", "", name),
                other => return Ok(Verdict::NotApplicable(format!("unknown action {other:?}"))),
            };
            r?;
            // Upstream's controller tests wait for each change to be handled before the next.
            sim.run().await.map_err(|e| e.to_string())?;
        }
    }
    sim.controller().recorder().flush().await;
    Ok(verdict(case, sim.store(), Vec::new()))
}

/// An index test's search: the volumes indexed, the claim, upstream's answer against ours.
fn index(case: &Case) -> Verdict {
    let decode_all = || -> Result<(VolumeIndex, PersistentVolumeClaim), String> {
        let mut idx = VolumeIndex::new();
        for v in &case.volumes {
            let pv: PersistentVolume = serde_json::from_value(v.clone()).map_err(|e| format!("a volume: {e}"))?;
            idx.apply(Arc::new(pv));
        }
        let claim =
            serde_json::from_value(case.claim.clone().unwrap_or_default()).map_err(|e| format!("the claim: {e}"))?;
        Ok((idx, claim))
    };
    let (idx, claim) = match decode_all() {
        Ok(x) => x,
        Err(e) => return Verdict::Differ(vec![e]),
    };
    if let Some(e) = &case.error {
        return Verdict::NotApplicable(format!("upstream's search failed ({e}); this index's search cannot fail"));
    }
    let ours = idx.find_best_match(&claim, case.delay_binding, &|_| false).and_then(|v| v.metadata.name.clone());
    if ours == case.found {
        Verdict::Same
    } else {
        Verdict::Differ(vec![format!("upstream chose {:?}, this controller {:?}", case.found, ours)])
    }
}

/// A matching check an index test calls, or a migration or finalizer decision a controller test
/// checks: upstream's answer against this controller's rule.
fn check(case: &Case) -> Verdict {
    match case.check.as_str() {
        "migrationAnnotations" => {
            let mut ann = case.annotations.clone();
            let changed = pv_model::csi::anneal_migration_annotations(&mut ann, case.is_claim);
            return if (changed, &ann) == (case.result, &case.after) {
                Verdict::Same
            } else {
                Verdict::Differ(vec![format!(
                    "annotations: upstream {:?} (changed: {}), this controller {ann:?} (changed: {changed})",
                    case.after, case.result
                )])
            };
        }
        "deletionFinalizers" => {
            let mut volume: PersistentVolume = match serde_json::from_value(case.volume.clone().unwrap_or_default()) {
                Ok(v) => v,
                Err(e) => return Verdict::Differ(vec![format!("the volume: {e}")]),
            };
            let changed = pv_model::csi::modify_deletion_finalizers(&mut volume);
            let ours = volume.metadata.finalizers.clone().filter(|f| !f.is_empty());
            let theirs = case.finalizers.clone().filter(|f| !f.is_empty());
            return if (changed, &ours) == (case.result, &theirs) {
                Verdict::Same
            } else {
                Verdict::Differ(vec![format!(
                    "finalizers: upstream {theirs:?} (changed: {}), this controller {ours:?} (changed: {changed})",
                    case.result
                )])
            };
        }
        _ => {}
    }
    let decoded = || -> Result<(PersistentVolumeClaim, PersistentVolume), String> {
        let claim =
            serde_json::from_value(case.claim.clone().unwrap_or_default()).map_err(|e| format!("the claim: {e}"))?;
        let volume =
            serde_json::from_value(case.volume.clone().unwrap_or_default()).map_err(|e| format!("the volume: {e}"))?;
        Ok((claim, volume))
    };
    let (claim, volume) = match decoded() {
        Ok(x) => x,
        Err(e) => return Verdict::Differ(vec![e]),
    };
    let ours = match case.check.as_str() {
        "volumeMode" => helpers::volume_mode_mismatch(&claim, &volume),
        "accessModes" => helpers::volume_access_modes(&volume).contains_all(helpers::claim_access_modes(&claim)),
        other => return Verdict::NotApplicable(format!("unknown check {other:?}")),
    };
    if ours == case.result {
        Verdict::Same
    } else {
        Verdict::Differ(vec![format!("{}: upstream {}, this controller {ours}", case.check, case.result)])
    }
}
