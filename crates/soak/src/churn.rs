//! The workload: claims of static and provisioned classes created and deleted, static host-path
//! volumes created and deleted, pods using claims, reclaim policies changed — one random
//! operation at a time, at a steady rate, through an ordinary client as a user would.
//!
//! The book remembers what the user did, for the checks: every acknowledged create (it must
//! never vanish unless the user deleted it), every volume the user deleted (a claim may only go
//! Lost for those), and the host-path directories the user made or cleaned up itself.

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::{Api, Client};
use pv_model::key::meta_str;
use rand::rngs::SmallRng;
use rand::RngExt;
use serde_json::{json, Value};
use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// The namespace the workload lives in.
pub const NS: &str = "soak";
/// Provisioned classes (host-path), by reclaim policy.
pub const CLASSES: [(&str, &str); 2] = [("soak-delete", "Delete"), ("soak-retain", "Retain")];
const POLICIES: [&str; 3] = ["Delete", "Retain", "Recycle"];
const MAX_CLAIMS: usize = 40;
const MAX_VOLUMES: usize = 30;
const MAX_PODS: usize = 12;

/// What the user did, for the checks.
#[derive(Default)]
pub struct Book {
    /// Volumes the user asked to delete (whether or not the answer arrived).
    pub deleted_pvs: HashSet<String>,
    /// Host-path directories the user made (static volumes) or cleaned up after a Retain.
    pub own_dirs: BTreeSet<String>,
    /// Claims whose create was acknowledged, by name: their UID.
    pub acked_claims: HashMap<String, String>,
    /// Pods whose create was acknowledged.
    pub acked_pods: HashMap<String, String>,
    /// The last lists the checker read: volumes and claims.
    pub pvs: Vec<Value>,
    /// See `pvs`.
    pub pvcs: Vec<Value>,
}

/// Operation counts.
#[derive(Default)]
pub struct ChurnStats {
    /// Operations acknowledged by the API server.
    pub ok: AtomicU64,
    /// Operations refused (409, 422, 404: the state moved on) — expected under churn.
    pub refused: AtomicU64,
    /// Operations that got no answer (server down, connection broken).
    pub failed: AtomicU64,
}

/// The churn driver.
pub struct Churn {
    client: Client,
    /// Host-path root shared with the controller.
    pub root: PathBuf,
    next: AtomicU64,
    /// What the user did.
    pub book: Mutex<Book>,
    /// Counts.
    pub stats: ChurnStats,
}

fn s(v: &Value) -> &str {
    v.as_str().unwrap_or("")
}

fn gi(rng: &mut SmallRng) -> String {
    format!("{}Gi", rng.random_range(1..=5))
}

impl Churn {
    /// A driver over `client`, with host-path volumes under `root`.
    pub fn new(client: Client, root: PathBuf) -> Churn {
        Churn { client, root, next: AtomicU64::new(1), book: Mutex::default(), stats: ChurnStats::default() }
    }

    fn name(&self, prefix: &str) -> String {
        format!("{prefix}-{}", self.next.fetch_add(1, Ordering::Relaxed))
    }

    /// Creates the namespace and the classes (once; existing ones are kept).
    pub async fn setup(&self) -> anyhow::Result<()> {
        let pp = PostParams::default();
        let ns: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(self.client.clone());
        let obj = serde_json::from_value(json!({"metadata": {"name": NS}}))?;
        ignore_exists(ns.create(&pp, &obj).await)?;
        let sc: Api<StorageClass> = Api::all(self.client.clone());
        for (name, policy) in CLASSES {
            let obj = serde_json::from_value(json!({
                "metadata": {"name": name},
                "provisioner": "kubernetes.io/host-path",
                "reclaimPolicy": policy,
                "volumeBindingMode": "Immediate",
            }))?;
            ignore_exists(sc.create(&pp, &obj).await)?;
        }
        Ok(())
    }

    /// Runs one random operation.
    pub async fn step(&self, rng: &mut SmallRng) {
        let (n_claims, n_pvs) = {
            let b = self.book.lock().unwrap();
            (b.pvcs.len(), b.pvs.iter().filter(|p| meta_str(p, "name").starts_with("static-")).count())
        };
        let r = rng.random_range(0..100);
        let result = match r {
            0..=29 if n_claims < MAX_CLAIMS => self.create_claim(rng).await,
            0..=49 => self.delete_claim(rng).await,
            50..=69 if n_pvs < MAX_VOLUMES => self.create_volume(rng).await,
            50..=79 => self.delete_volume(rng).await,
            80..=87 => self.change_policy(rng).await,
            _ => self.pod(rng).await,
        };
        let counter = match result {
            Outcome::Ok => &self.stats.ok,
            Outcome::Refused => &self.stats.refused,
            Outcome::Failed => &self.stats.failed,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    async fn create_claim(&self, rng: &mut SmallRng) -> Outcome {
        let name = self.name("claim");
        let class = match rng.random_range(0..3) {
            0 => "",
            i => CLASSES[i - 1].0,
        };
        let obj: PersistentVolumeClaim = serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": NS},
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "storageClassName": class,
                "resources": {"requests": {"storage": gi(rng)}},
            }
        }))
        .expect("a claim");
        let api: Api<PersistentVolumeClaim> = Api::namespaced(self.client.clone(), NS);
        match api.create(&PostParams::default(), &obj).await {
            Ok(c) => {
                let uid = c.metadata.uid.unwrap_or_default();
                let mut b = self.book.lock().unwrap();
                b.acked_claims.insert(name.clone(), uid);
                b.pvcs.push(json!({"metadata": {"name": name}}));
                Outcome::Ok
            }
            Err(e) => outcome(&e),
        }
    }

    fn pick(&self, rng: &mut SmallRng, list: impl Fn(&Book) -> Vec<Value>) -> Option<Value> {
        let items = list(&self.book.lock().unwrap());
        (!items.is_empty()).then(|| items[rng.random_range(0..items.len())].clone())
    }

    async fn delete_claim(&self, rng: &mut SmallRng) -> Outcome {
        let Some(c) = self.pick(rng, |b| b.pvcs.clone()) else { return Outcome::Refused };
        let name = meta_str(&c, "name").to_string();
        {
            let mut b = self.book.lock().unwrap();
            b.acked_claims.remove(&name);
            b.pvcs.retain(|x| meta_str(x, "name") != name);
        }
        let api: Api<PersistentVolumeClaim> = Api::namespaced(self.client.clone(), NS);
        match api.delete(&name, &DeleteParams::default()).await {
            Ok(_) => Outcome::Ok,
            Err(e) => outcome(&e),
        }
    }

    async fn create_volume(&self, rng: &mut SmallRng) -> Outcome {
        let name = self.name("static");
        let dir = self.root.join(&name);
        self.book.lock().unwrap().own_dirs.insert(name.clone());
        if std::fs::create_dir_all(&dir).is_err() {
            return Outcome::Failed;
        }
        let obj: PersistentVolume = serde_json::from_value(json!({
            "metadata": {"name": name},
            "spec": {
                "capacity": {"storage": gi(rng)},
                "accessModes": ["ReadWriteOnce"],
                "storageClassName": "",
                "persistentVolumeReclaimPolicy": POLICIES[rng.random_range(0..3)],
                "hostPath": {"path": dir.to_string_lossy()},
            }
        }))
        .expect("a volume");
        let api: Api<PersistentVolume> = Api::all(self.client.clone());
        match api.create(&PostParams::default(), &obj).await {
            Ok(_) => {
                self.book.lock().unwrap().pvs.push(json!({"metadata": {"name": name}}));
                Outcome::Ok
            }
            Err(e) => outcome(&e),
        }
    }

    /// Deletes a volume no claim is bound to (Available, Released or Failed), on the condition
    /// that it has not changed since it was listed; a Released Retain volume's directory is
    /// then cleaned up, as an administrator would.
    async fn delete_volume(&self, rng: &mut SmallRng) -> Outcome {
        let Some(v) = self.pick(rng, |b| {
            b.pvs
                .iter()
                .filter(|p| matches!(s(&p["status"]["phase"]), "Available" | "Released" | "Failed"))
                .cloned()
                .collect()
        }) else {
            return Outcome::Refused;
        };
        let name = meta_str(&v, "name").to_string();
        let rv = meta_str(&v, "resourceVersion").to_string();
        self.book.lock().unwrap().deleted_pvs.insert(name.clone());
        let api: Api<PersistentVolume> = Api::all(self.client.clone());
        let dp = DeleteParams {
            preconditions: Some(Preconditions { resource_version: Some(rv), uid: None }),
            ..Default::default()
        };
        match api.delete(&name, &dp).await {
            Ok(_) => {
                let path = s(&v["spec"]["hostPath"]["path"]);
                let dir = PathBuf::from(path);
                if dir.parent() == Some(self.root.as_path()) {
                    let base = dir.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default();
                    self.book.lock().unwrap().own_dirs.insert(base);
                    let _ = std::fs::remove_dir_all(&dir);
                }
                self.book.lock().unwrap().pvs.retain(|x| meta_str(x, "name") != name);
                Outcome::Ok
            }
            Err(e) => outcome(&e),
        }
    }

    async fn change_policy(&self, rng: &mut SmallRng) -> Outcome {
        let Some(v) = self.pick(rng, |b| b.pvs.clone()) else { return Outcome::Refused };
        let name = meta_str(&v, "name").to_string();
        let patch = json!({"spec": {"persistentVolumeReclaimPolicy": POLICIES[rng.random_range(0..3)]}});
        let api: Api<PersistentVolume> = Api::all(self.client.clone());
        match api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch)).await {
            Ok(_) => Outcome::Ok,
            Err(e) => outcome(&e),
        }
    }

    /// Creates a pod using a claim, or deletes one.
    async fn pod(&self, rng: &mut SmallRng) -> Outcome {
        let api: Api<Pod> = Api::namespaced(self.client.clone(), NS);
        let pods: Vec<String> = self.book.lock().unwrap().acked_pods.keys().cloned().collect();
        if pods.len() >= MAX_PODS || (!pods.is_empty() && rng.random_bool(0.5)) {
            let name = pods[rng.random_range(0..pods.len())].clone();
            self.book.lock().unwrap().acked_pods.remove(&name);
            let dp = DeleteParams { grace_period_seconds: Some(0), ..Default::default() };
            return match api.delete(&name, &dp).await {
                Ok(_) => Outcome::Ok,
                Err(e) => outcome(&e),
            };
        }
        let Some(c) = self.pick(rng, |b| b.pvcs.clone()) else { return Outcome::Refused };
        let name = self.name("pod");
        let obj: Pod = serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": NS},
            "spec": {
                "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10",
                                "volumeMounts": [{"name": "data", "mountPath": "/data"}]}],
                "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": meta_str(&c, "name")}}],
            }
        }))
        .expect("a pod");
        match api.create(&PostParams::default(), &obj).await {
            Ok(p) => {
                self.book.lock().unwrap().acked_pods.insert(name, p.metadata.uid.unwrap_or_default());
                Outcome::Ok
            }
            Err(e) => outcome(&e),
        }
    }
}

enum Outcome {
    Ok,
    Refused,
    Failed,
}

fn outcome(e: &kube::Error) -> Outcome {
    match e {
        kube::Error::Api(s) if s.code < 500 => Outcome::Refused,
        _ => Outcome::Failed,
    }
}

fn ignore_exists<T>(r: Result<T, kube::Error>) -> anyhow::Result<()> {
    match r {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
        Err(e) => Err(e.into()),
    }
}
