//! The checks the soak runs every few seconds and once more after quiescence.
//!
//! Lists are read straight from the API server (never through the chaos proxy) and are two
//! requests, not one snapshot, while the controller keeps working: a state seen between two
//! writes of a binding can look wrong for a moment. So during the churn a finding becomes a
//! violation only when it persists past a grace period (the same finding at every check in
//! between); after quiescence the state must simply be right. Some findings need no grace,
//! because the order of the reads proves them: a volume directory found emptied *before* its
//! claim is read back still bound to it was emptied under that claim.

use crate::churn::{Churn, CLASSES};
use k8s_openapi::api::core::v1::{Event, PersistentVolume, PersistentVolumeClaim, Pod};
use kube::api::ListParams;
use kube::{Api, Client};
use pv_model::key::meta_str;
use pv_model::ObjectKey;
use serde_json::Value;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A file the soak writes into each bound host-path volume, holding the claim's UID. Gone
/// while the claim is still bound means the volume was deleted or recycled under it.
const MARKER: &str = ".soak-owner";

fn s(v: &Value) -> &str {
    v.as_str().unwrap_or("")
}

fn key(o: &Value) -> ObjectKey {
    ObjectKey::of_json(o)
}

/// How long each kind of finding may last during the churn before it counts.
#[derive(Clone, Copy, Debug)]
pub struct Graces {
    /// An invariant of the objects (a claim bound twice, a Bound claim pointing nowhere).
    pub invariant: Duration,
    /// A host-path directory that no volume owns: a provisioned asset waits for its PV while
    /// the controller retries saving it through an API outage.
    pub asset: Duration,
    /// A controller's cache differing from the API.
    pub cache: Duration,
}

impl Graces {
    /// Every finding counts at once.
    pub const NONE: Graces = Graces { invariant: Duration::ZERO, asset: Duration::ZERO, cache: Duration::ZERO };
    /// No finding counts (the final checks, which wait for one moment where all hold).
    pub const ENDLESS: Graces = Graces { invariant: Duration::MAX, asset: Duration::MAX, cache: Duration::MAX };
}

/// A controller whose caches are compared with the API: `name#instance` and its metrics address.
pub struct Endpoint {
    /// Process name and instance.
    pub id: String,
    /// `/debug/caches` is served here.
    pub addr: SocketAddr,
}

/// Counters of what was checked.
#[derive(Default, Debug, Clone)]
pub struct CheckCounts {
    /// Check rounds.
    pub rounds: u64,
    /// Invariant evaluations (one per round).
    pub invariant_checks: u64,
    /// Cache comparisons (one per controller per round).
    pub cache_checks: u64,
    /// Cache comparisons that found the caches equal to the API at once.
    pub cache_equal: u64,
    /// Bound claims whose volume directory was checked for its marker.
    pub marker_checks: u64,
    /// Acknowledged creates checked for presence.
    pub ack_checks: u64,
}

/// The checker's memory between rounds.
pub struct Checker {
    client: Client,
    churn: Arc<Churn>,
    root: PathBuf,
    /// Findings not yet old enough to count: first seen.
    pending: HashMap<String, Instant>,
    reported: HashSet<String>,
    /// Claim UID → volume whose directory holds its marker.
    marked: HashMap<String, String>,
    /// (controller, object) → when its cache entry was first seen to differ from the API.
    cache_diff: HashMap<(String, String), Instant>,
    /// Counts.
    pub counts: CheckCounts,
    /// Violations found, each once.
    pub violations: Vec<String>,
}

/// Objects listed from the API server.
pub struct Lists {
    /// Volumes.
    pub pvs: Vec<Value>,
    /// Claims (all namespaces).
    pub pvcs: Vec<Value>,
    /// Pods' names (all namespaces).
    pub pods: HashSet<ObjectKey>,
    /// `namespace/claim` of every claim a pod that has not terminated names (upstream's
    /// `isVolumeUsed`: a Released volume of such a claim is not recycled or deleted yet).
    pub claims_in_use: HashSet<ObjectKey>,
}

async fn list<K>(api: Api<K>) -> anyhow::Result<Vec<Value>>
where
    K: kube::Resource
        + Clone
        + k8s_openapi::serde::de::DeserializeOwned
        + k8s_openapi::serde::Serialize
        + std::fmt::Debug,
{
    let items = tokio::time::timeout(Duration::from_secs(20), api.list(&ListParams::default())).await??;
    Ok(items.items.iter().map(|o| serde_json::to_value(o).unwrap_or_default()).collect())
}

/// GETs `path` from a plain-HTTP loopback endpoint; the body of a 200.
pub async fn http_get(addr: SocketAddr, path: &str) -> Option<String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let fut = async {
        let mut s = tokio::net::TcpStream::connect(addr).await.ok()?;
        s.write_all(format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").as_bytes()).await.ok()?;
        let mut buf = Vec::new();
        s.read_to_end(&mut buf).await.ok()?;
        let text = String::from_utf8_lossy(&buf).into_owned();
        let (head, body) = text.split_once("\r\n\r\n")?;
        // hyper answers an HTTP/1.0 request as HTTP/1.0.
        (head.split_whitespace().nth(1) == Some("200")).then(|| body.to_string())
    };
    tokio::time::timeout(Duration::from_secs(10), fut).await.ok().flatten()
}

impl Checker {
    /// A checker reading through `client`.
    pub fn new(client: Client, churn: Arc<Churn>) -> Checker {
        let root = churn.root.clone();
        Checker {
            client,
            churn,
            root,
            pending: HashMap::new(),
            reported: HashSet::new(),
            marked: HashMap::new(),
            cache_diff: HashMap::new(),
            counts: CheckCounts::default(),
            violations: Vec::new(),
        }
    }

    /// Lists volumes, claims and pods.
    pub async fn lists(&self) -> anyhow::Result<Lists> {
        let pvs = list(Api::<PersistentVolume>::all(self.client.clone())).await?;
        let pvcs = list(Api::<PersistentVolumeClaim>::all(self.client.clone())).await?;
        let pod_list = list(Api::<Pod>::all(self.client.clone())).await?;
        let pods = pod_list.iter().map(key).collect();
        let claims_in_use = pod_list
            .iter()
            .filter(|p| !matches!(s(&p["status"]["phase"]), "Succeeded" | "Failed"))
            .flat_map(|p| {
                let ns = meta_str(p, "namespace");
                p["spec"]["volumes"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(move |v| {
                        v["persistentVolumeClaim"]["claimName"].as_str().map(|c| ObjectKey::new(ns, c))
                    })
                    .collect::<Vec<_>>()
            })
            .collect();
        Ok(Lists { pvs, pvcs, pods, claims_in_use })
    }

    fn violation(&mut self, v: String) {
        if self.reported.insert(v.clone()) {
            eprintln!("VIOLATION: {v}");
            self.violations.push(v);
        }
    }

    /// One round. Findings become violations once they persist for their grace (at once with
    /// zero). Returns the findings of this round (empty: everything held). An API server that
    /// does not answer skips the round.
    pub async fn round(&mut self, endpoints: &[Endpoint], graces: Graces) -> Vec<String> {
        // What the user had been told was created, read before the lists, so that every one of
        // them must be in the lists unless the user deleted it since.
        let (acked_claims, acked_pods) = {
            let b = self.churn.book.lock().unwrap();
            (b.acked_claims.clone(), b.acked_pods.clone())
        };
        let Ok(l) = self.lists().await else { return vec!["the API server did not answer".into()] };
        self.counts.rounds += 1;
        {
            let mut b = self.churn.book.lock().unwrap();
            b.pvs = l.pvs.clone();
            b.pvcs = l.pvcs.iter().filter(|c| meta_str(c, "namespace") == crate::churn::NS).cloned().collect();
        }
        let mut findings = self.invariants(&l).await;
        findings.extend(self.lost_claims(&l));
        findings.extend(self.acknowledged(&l, &acked_claims, &acked_pods));
        let now = Instant::now();
        self.pending.retain(|f, _| findings.contains(f));
        for f in &findings {
            let first = *self.pending.entry(f.clone()).or_insert(now);
            let grace =
                if f.starts_with(pv_sim::invariants::UNOWNED_DIRECTORY) { graces.asset } else { graces.invariant };
            if now.duration_since(first) >= grace {
                self.violation(format!("{f} (for {:.0} s)", now.duration_since(first).as_secs_f64()));
            }
        }
        // Proven by the order of reads: no grace.
        for v in self.markers(&l).await {
            self.violation(v.clone());
            findings.push(v);
        }
        findings.extend(self.caches(&l, endpoints, graces.cache).await);
        findings
    }

    async fn invariants(&mut self, l: &Lists) -> Vec<String> {
        self.counts.invariant_checks += 1;
        let own: BTreeSet<String> = self.churn.book.lock().unwrap().own_dirs.clone();
        let mut found = pv_sim::invariants::check_objects(&l.pvs, &l.pvcs, &[], Some(&self.root), &own);
        if found.iter().any(|f| f.starts_with("host-path directory")) {
            // A directory an event explains (a failed deletion) is not a leak: read events now.
            if let Ok(events) = list(Api::<Event>::all(self.client.clone())).await {
                found = pv_sim::invariants::check_objects(&l.pvs, &l.pvcs, &events, Some(&self.root), &own);
            }
        }
        found
    }

    /// A claim goes Lost only when its volume is gone; the user deletes only unbound volumes,
    /// so a Lost claim whose volume the user never deleted lost it to the controller.
    fn lost_claims(&self, l: &Lists) -> Vec<String> {
        let deleted = &self.churn.book.lock().unwrap().deleted_pvs;
        l.pvcs
            .iter()
            .filter(|c| s(&c["status"]["phase"]) == "Lost")
            .filter(|c| !deleted.contains(s(&c["spec"]["volumeName"])))
            .map(|c| {
                format!(
                    "claim {} is Lost, but the user never deleted its volume {:?}",
                    key(c),
                    s(&c["spec"]["volumeName"])
                )
            })
            .collect()
    }

    fn acknowledged(
        &mut self,
        l: &Lists,
        claims: &HashMap<String, String>,
        pods: &HashMap<String, String>,
    ) -> Vec<String> {
        let b = self.churn.book.lock().unwrap();
        let uids: HashMap<ObjectKey, &str> = l.pvcs.iter().map(|c| (key(c), meta_str(c, "uid"))).collect();
        let mut out = Vec::new();
        for (name, uid) in claims {
            self.counts.ack_checks += 1;
            let k = ObjectKey::new(crate::churn::NS, name);
            if b.acked_claims.contains_key(name) && uids.get(&k) != Some(&uid.as_str()) {
                out.push(format!("acknowledged claim {k} (uid {uid}) vanished"));
            }
        }
        for name in pods.keys() {
            self.counts.ack_checks += 1;
            let k = ObjectKey::new(crate::churn::NS, name);
            if b.acked_pods.contains_key(name) && !l.pods.contains(&k) {
                out.push(format!("acknowledged pod {k} vanished"));
            }
        }
        out
    }

    /// Marks each newly bound host-path volume with its claim's UID, and reports a marker gone
    /// while the claim, read afterwards, is still bound to that volume.
    async fn markers(&mut self, l: &Lists) -> Vec<String> {
        let pv_by_name: HashMap<&str, &Value> = l.pvs.iter().map(|p| (meta_str(p, "name"), p)).collect();
        let mut bound_now: HashMap<String, (ObjectKey, String)> = HashMap::new();
        for c in &l.pvcs {
            let (uid, vol) = (meta_str(c, "uid"), s(&c["spec"]["volumeName"]));
            if s(&c["status"]["phase"]) != "Bound" {
                continue;
            }
            let Some(pv) = pv_by_name.get(vol) else { continue };
            let dir = PathBuf::from(s(&pv["spec"]["hostPath"]["path"]));
            if s(&pv["spec"]["claimRef"]["uid"]) != uid || dir.parent() != Some(self.root.as_path()) {
                continue;
            }
            bound_now.insert(uid.to_string(), (key(c), vol.to_string()));
        }
        self.marked.retain(|uid, _| bound_now.contains_key(uid));
        let mut suspects = Vec::new();
        for (uid, (claim, vol)) in &bound_now {
            let marker = self.root.join(vol).join(MARKER);
            match self.marked.get(uid) {
                Some(v) if v == vol => {
                    self.counts.marker_checks += 1;
                    if std::fs::read_to_string(&marker).ok().as_deref() != Some(uid.as_str()) {
                        suspects.push((uid.clone(), claim.clone(), vol.clone()));
                    }
                }
                _ => {
                    if std::fs::write(&marker, uid).is_ok() {
                        self.marked.insert(uid.clone(), vol.clone());
                    }
                }
            }
        }
        let mut out = Vec::new();
        for (uid, claim, vol) in suspects {
            let (ns, name) = claim.split_once('/').unwrap_or(("", &claim));
            let api: Api<PersistentVolumeClaim> = Api::namespaced(self.client.clone(), ns);
            let Ok(Some(c)) = api.get_opt(name).await else {
                continue;
            };
            let still = c.metadata.uid.as_deref() == Some(uid.as_str())
                && c.spec.as_ref().and_then(|s| s.volume_name.as_deref()) == Some(vol.as_str());
            if still {
                out.push(format!(
                    "volume {vol} was deleted or recycled while claim {claim} (uid {uid}) is bound to it"
                ));
            } else {
                self.marked.remove(&uid);
            }
        }
        out
    }

    /// Compares each controller's caches with the lists. Returns the differences of this
    /// round; one persisting past `grace` is a violation.
    async fn caches(&mut self, l: &Lists, endpoints: &[Endpoint], grace: Duration) -> Vec<String> {
        let api_v: HashMap<ObjectKey, String> =
            l.pvs.iter().map(|o| (key(o), meta_str(o, "resourceVersion").to_string())).collect();
        let api_c: HashMap<ObjectKey, String> =
            l.pvcs.iter().map(|o| (key(o), meta_str(o, "resourceVersion").to_string())).collect();
        let mut out = Vec::new();
        let now = Instant::now();
        let mut seen = HashSet::new();
        for ep in endpoints {
            // A controller being restarted may not answer; the final round requires an answer.
            let Some(cached) =
                http_get(ep.addr, "/debug/caches").await.and_then(|b| serde_json::from_str::<Value>(&b).ok())
            else {
                out.push(format!("{}: /debug/caches did not answer", ep.id));
                continue;
            };
            self.counts.cache_checks += 1;
            let mut equal = true;
            for (what, api, c) in [("volume", &api_v, &cached["volumes"]), ("claim", &api_c, &cached["claims"])] {
                let c: HashMap<String, String> = c
                    .as_object()
                    .map(|m| m.iter().map(|(k, v)| (k.clone(), s(v).to_string())).collect())
                    .unwrap_or_default();
                let keys: BTreeSet<&str> = api.keys().map(|k| k.as_str()).chain(c.keys().map(String::as_str)).collect();
                for k in keys {
                    let (a, b) = (api.get(k), c.get(k));
                    if a == b {
                        continue;
                    }
                    equal = false;
                    let id = (ep.id.clone(), format!("{what} {k}"));
                    seen.insert(id.clone());
                    let first = *self.cache_diff.entry(id).or_insert(now);
                    let d = format!(
                        "{}: cached {what} {k} at {} but the API server has {}",
                        ep.id,
                        b.map_or("nothing".into(), |v| format!("resourceVersion {v}")),
                        a.map_or("nothing".into(), |v| format!("resourceVersion {v}"))
                    );
                    if now.duration_since(first) >= grace {
                        self.violation(format!("{d} (for {:.0} s)", now.duration_since(first).as_secs_f64()));
                    }
                    out.push(d);
                }
            }
            if equal {
                self.counts.cache_equal += 1;
            }
        }
        self.cache_diff.retain(|k, _| seen.contains(k));
        out
    }
}

/// Claims that can bind but are not Bound: a claim of a provisioning class, or a claim without
/// class for which an Available volume without class is large enough (every claim and volume
/// of the workload is ReadWriteOnce, Filesystem, without selector).
pub fn bindable_unbound(l: &Lists) -> Vec<String> {
    let free: Vec<(&str, pv_model::Quantity)> = l
        .pvs
        .iter()
        .filter(|p| s(&p["status"]["phase"]) == "Available" && p["spec"]["claimRef"].is_null())
        .filter(|p| s(&p["spec"]["storageClassName"]).is_empty() && p["metadata"]["deletionTimestamp"].is_null())
        .filter_map(|p| {
            Some((meta_str(p, "name"), pv_model::Quantity::parse(s(&p["spec"]["capacity"]["storage"])).ok()?))
        })
        .collect();
    let mut out = Vec::new();
    for c in &l.pvcs {
        let phase = s(&c["status"]["phase"]);
        if phase == "Bound" || phase == "Lost" || !c["metadata"]["deletionTimestamp"].is_null() {
            continue;
        }
        let class = s(&c["spec"]["storageClassName"]);
        if CLASSES.iter().any(|(n, _)| *n == class) {
            out.push(format!("claim {} of class {class} is {phase}, not Bound", key(c)));
        } else if class.is_empty() {
            let Ok(want) = pv_model::Quantity::parse(s(&c["spec"]["resources"]["requests"]["storage"])) else {
                continue;
            };
            if let Some((v, _)) = free.iter().find(|(_, cap)| *cap >= want) {
                out.push(format!("claim {} is {phase} although volume {v} is Available and large enough", key(c)));
            }
        }
    }
    out
}

/// Host-path volumes left Released although their policy reclaims them (Delete: the volume and
/// its directory go; Recycle: it is emptied and Available again).
pub fn unreclaimed(l: &Lists, root: &std::path::Path) -> Vec<String> {
    l.pvs
        .iter()
        .filter(|p| s(&p["status"]["phase"]) == "Released")
        .filter(|p| matches!(s(&p["spec"]["persistentVolumeReclaimPolicy"]), "Delete" | "Recycle"))
        .filter(|p| PathBuf::from(s(&p["spec"]["hostPath"]["path"])).parent() == Some(root))
        .filter(|p| {
            let r = &p["spec"]["claimRef"];
            !l.claims_in_use.contains(&ObjectKey::new(s(&r["namespace"]), s(&r["name"])))
        })
        .map(|p| {
            format!(
                "volume {} is Released with policy {}, not reclaimed",
                key(p),
                s(&p["spec"]["persistentVolumeReclaimPolicy"])
            )
        })
        .collect()
}
