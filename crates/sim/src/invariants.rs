//! Invariants that must hold for any cluster state the controller converges to, and a plugin
//! wrapper that catches a volume deleted or recycled while a claim still uses it (or while a
//! claim uses another volume whose host-path directory would go with it).

use async_trait::async_trait;
use pv_core::{PluginError, ProvisionOptions, RecyclerEvents, VolumePlugin};
use pv_model::k8s::PersistentVolume;
use pv_model::{hostpath, key, ObjectKey};
use pv_store::Store;
use serde_json::Value;
use std::collections::{BTreeSet, HashMap};
use std::path::Path;
use std::sync::{Arc, Mutex};

fn s(v: &Value) -> &str {
    v.as_str().unwrap_or("")
}

fn name(o: &Value) -> &str {
    key::meta_str(o, "name")
}

/// How the finding about a directory under the host-path root that no volume owns begins.
pub const UNOWNED_DIRECTORY: &str = "host-path directory";

/// Every object of `resource` in `store`, parsed, in the store's (namespace, name) order.
pub fn listed(store: &Store, resource: &str) -> Vec<Value> {
    let (items, _) = store.list(resource, &Default::default()).expect("a resource the store serves");
    items.iter().map(pv_store::Object::value).collect()
}

/// Checks the converged state in `store` (and the host-path `root`, if any). Returns violations.
///
/// - no claim is bound by two Bound volumes, and no volume by two claims;
/// - every Bound claim's volume exists, is Bound, and points back with the claim's UID;
/// - every directory under the host-path root belongs to a PV (or to `allowed`), unless an event
///   mentions it.
pub fn check(store: &Store, root: Option<&Path>, allowed: &BTreeSet<String>) -> Vec<String> {
    let (pvs, pvcs, events) =
        (listed(store, "persistentvolumes"), listed(store, "persistentvolumeclaims"), listed(store, "events"));
    check_objects(&pvs, &pvcs, &events, root, allowed)
}

/// [`check`] over objects listed from any API server (a live cluster, as the soak runner reads
/// it): volumes, claims and events as JSON.
pub fn check_objects(
    pvs: &[Value],
    pvcs: &[Value],
    events: &[Value],
    root: Option<&Path>,
    allowed: &BTreeSet<String>,
) -> Vec<String> {
    let mut errs = Vec::new();
    let by_name: HashMap<&str, &Value> = pvs.iter().map(|p| (name(p), p)).collect();
    let mut bound_by_uid: HashMap<&str, Vec<&str>> = HashMap::new();
    for p in pvs {
        let uid = s(&p["spec"]["claimRef"]["uid"]);
        if !uid.is_empty() && s(&p["status"]["phase"]) == "Bound" {
            bound_by_uid.entry(uid).or_default().push(name(p));
        }
    }
    for c in pvcs {
        let key = ObjectKey::of_json(c);
        let uid = key::meta_str(c, "uid");
        if let Some(v) = bound_by_uid.get(uid) {
            if v.len() > 1 {
                errs.push(format!("claim {key} is bound by several volumes: {v:?}"));
            }
        }
        if s(&c["status"]["phase"]) != "Bound" {
            continue;
        }
        let vn = s(&c["spec"]["volumeName"]);
        match by_name.get(vn) {
            None => errs.push(format!("Bound claim {key} points to missing volume {vn:?}")),
            Some(pv) => {
                if s(&pv["spec"]["claimRef"]["uid"]) != uid {
                    errs.push(format!(
                        "Bound claim {key}: volume {vn} points to claim uid {:?}",
                        s(&pv["spec"]["claimRef"]["uid"])
                    ));
                }
                if s(&pv["status"]["phase"]) != "Bound" {
                    errs.push(format!("Bound claim {key}: volume {vn} is {:?}", s(&pv["status"]["phase"])));
                }
            }
        }
    }
    if let Some(root) = root {
        let root = std::fs::canonicalize(root).unwrap_or(root.to_path_buf());
        let referenced: BTreeSet<String> = pvs
            .iter()
            .filter_map(|p| p["spec"]["hostPath"]["path"].as_str())
            .filter_map(|p| Path::new(p).strip_prefix(&root).ok().map(|r| r.to_string_lossy().into_owned()))
            .collect();
        let messages: Vec<&str> = events.iter().map(|e| s(&e["message"])).collect();
        for entry in std::fs::read_dir(&root).into_iter().flatten().flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if referenced.contains(&name) || allowed.contains(&name) {
                continue;
            }
            if messages.iter().any(|m| m.contains(&name)) {
                continue;
            }
            errs.push(format!("{UNOWNED_DIRECTORY} {name} belongs to no volume and no event reports it"));
        }
    }
    errs
}

/// Wraps a plugin; records a violation whenever it is asked to delete or recycle a volume that a
/// claim in the store still uses (volumeName and UID both pointing at each other), or a host-path
/// directory that is, contains or lies inside the directory of another volume a claim uses.
pub struct GuardPlugin {
    inner: Arc<dyn VolumePlugin>,
    store: Arc<Store>,
    /// Violations seen so far.
    pub violations: Arc<Mutex<Vec<String>>>,
}

impl GuardPlugin {
    /// Wraps `inner`, checking against `store`.
    pub fn new(inner: Arc<dyn VolumePlugin>, store: Arc<Store>) -> Self {
        GuardPlugin { inner, store, violations: Arc::default() }
    }

    /// The claim (`namespace/name`) that uses the volume, if any.
    fn user(&self, v: &PersistentVolume) -> Option<String> {
        let name = v.metadata.name.clone().unwrap_or_default();
        let r = v.spec.as_ref().and_then(|s| s.claim_ref.as_ref())?;
        let ns = r.namespace.clone().unwrap_or_default();
        let cname = r.name.clone().unwrap_or_default();
        let c = self.store.get("persistentvolumeclaims", &ns, &cname).ok()?.value();
        (s(&c["spec"]["volumeName"]) == name && Some(key::meta_str(&c, "uid")) == r.uid.as_deref())
            .then(|| format!("{ns}/{cname}"))
    }

    fn check_unused(&self, op: &str, v: &PersistentVolume) {
        let name = v.metadata.name.clone().unwrap_or_default();
        let mut found = Vec::new();
        if let Some(claim) = self.user(v) {
            found.push(format!("{op} of volume {name} while claim {claim} still uses it"));
        }
        if let Some(path) = hostpath::of(v).map(hostpath::normalize) {
            for other in listed(&self.store, "persistentvolumes") {
                let Ok(other) = serde_json::from_value::<PersistentVolume>(other) else { continue };
                let other_name = other.metadata.name.clone().unwrap_or_default();
                let Some(other_path) = hostpath::of(&other).map(hostpath::normalize) else { continue };
                if other_name == name || hostpath::overlap(&path, &other_path).is_none() {
                    continue;
                }
                if let Some(claim) = self.user(&other) {
                    found.push(format!(
                        "{op} of volume {name} (host path {path}) destroys {other_path}, the directory of volume {other_name} that claim {claim} uses"
                    ));
                }
            }
        }
        self.violations.lock().unwrap().extend(found);
    }
}

#[async_trait]
impl VolumePlugin for GuardPlugin {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn can_provision(&self) -> bool {
        self.inner.can_provision()
    }
    fn supports_mount_options(&self) -> bool {
        self.inner.supports_mount_options()
    }
    fn can_support(&self, v: &PersistentVolume) -> bool {
        self.inner.can_support(v)
    }
    fn can_delete(&self) -> bool {
        self.inner.can_delete()
    }
    fn can_recycle(&self) -> bool {
        self.inner.can_recycle()
    }
    async fn provision(&self, o: &ProvisionOptions) -> Result<PersistentVolume, PluginError> {
        self.inner.provision(o).await
    }
    async fn delete(&self, v: &PersistentVolume) -> Result<(), PluginError> {
        self.check_unused("deletion", v);
        self.inner.delete(v).await
    }
    async fn recycle(&self, v: &PersistentVolume, events: &dyn RecyclerEvents) -> Result<(), PluginError> {
        self.check_unused("recycling", v);
        self.inner.recycle(v, events).await
    }
}

/// Checks that the controller's caches hold exactly the volumes and claims `store` holds (no
/// object deleted from the API left behind, none missing) and that the `pv_collector_*` counts
/// add up to them; an object `hidden` from its watches may be missing. Call it once the controller has
/// seen every watch event. Returns violations.
pub fn caches(store: &Store, controller: &pv_core::Controller, hidden: &[(String, ObjectKey)]) -> Vec<String> {
    let mut errs = Vec::new();
    let keys = |resource: &str| -> Vec<ObjectKey> {
        let (items, _) = store.list(resource, &Default::default()).unwrap();
        let mut v: Vec<ObjectKey> = items.iter().map(|o| ObjectKey::of_json(&o.value())).collect();
        v.sort();
        v
    };
    let is_hidden = |resource: &str, k: &ObjectKey| hidden.iter().any(|(r, h)| r == resource && h == k);
    // Returns how many objects of the API the cache lacks because they are hidden from it.
    let diff = |resource: &str, cached: Vec<ObjectKey>, api: &[ObjectKey], errs: &mut Vec<String>| {
        let what = resource.trim_start_matches("persistent");
        let extra: Vec<&str> = cached.iter().filter(|n| !api.contains(n)).map(|k| k.as_str()).collect();
        let (hidden, missing): (Vec<&ObjectKey>, Vec<&ObjectKey>) =
            api.iter().filter(|n| !cached.contains(n)).partition(|k| is_hidden(resource, k));
        let missing: Vec<&str> = missing.iter().map(|k| k.as_str()).collect();
        if !extra.is_empty() {
            errs.push(format!("the controller still caches {what} the API server no longer has: {extra:?}"));
        }
        if !missing.is_empty() {
            errs.push(format!("the controller does not cache {what} the API server has: {missing:?}"));
        }
        api.len() - hidden.len()
    };
    let (pvs, pvcs) = (keys("persistentvolumes"), keys("persistentvolumeclaims"));
    let volumes = controller.caches().volume_names().iter().map(|n| ObjectKey::new("", n)).collect();
    let pv_seen = diff("persistentvolumes", volumes, &pvs, &mut errs);
    let pvc_seen = diff("persistentvolumeclaims", controller.caches().claim_keys(), &pvcs, &mut errs);
    let counts = controller.caches().collect_counts();
    let total_pv: u64 = counts.total_pv.values().sum();
    let by_phase_pv: u64 = counts.bound_pv.values().chain(counts.unbound_pv.values()).sum();
    let by_phase_pvc: u64 = counts.bound_pvc.values().chain(counts.unbound_pvc.values()).sum();
    for (metric, got, want) in [
        ("pv_collector_total_pv_count", total_pv, pv_seen),
        ("pv_collector_bound_pv_count + pv_collector_unbound_pv_count", by_phase_pv, pv_seen),
        ("pv_collector_bound_pvc_count + pv_collector_unbound_pvc_count", by_phase_pvc, pvc_seen),
    ] {
        if got != want as u64 {
            errs.push(format!("{metric} counts {got} objects, the API server has {want} the controller could see"));
        }
    }
    errs
}
