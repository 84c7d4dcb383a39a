//! `run --shadow`: the controller beside the binder in charge (kube-controller-manager's), over
//! an API that cannot write.
//!
//! [`ShadowApi`] is the controller's [`ClusterApi`] in shadow mode. It holds a [`ReadOnly`]
//! client, whose only requests are GET and LIST: no method of it sends anything else, so no
//! code path of the controller can write, whatever it decides. Each write the controller makes
//! is recorded instead, as the fields it changes from the version it read (read back at that
//! exact resourceVersion), in a [`ShadowLog`]; the controller gets its own object back, unstored
//! and with the version it read, so its caches keep following the cluster. [`Shadow::judge`]
//! runs every half second: each decision whose settle window has passed is compared with what
//! the cluster holds then ([`pv_core::shadow`] says how), counted, and a difference is logged
//! as a warning with both values. While the cluster still holds the value the decision changes
//! (the binder in charge saw the objects in another order, or resyncs later), the decision waits,
//! up to [`UNDECIDED_WINDOWS`] settle windows, before it counts as a difference.

use async_trait::async_trait;
use k8s_openapi::api::core::v1::{Event, PersistentVolume, PersistentVolumeClaim, Pod};
use kube::api::{Api, ListParams, VersionMatch};
use kube::Client;
use pv_core::shadow::{self, ShadowLog, Target, Verdict};
use pv_core::{ApiError, ClusterApi};
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How many settle windows a decision waits while the binder in charge has not touched the field.
pub const UNDECIDED_WINDOWS: u64 = 3;

use crate::api::EVENT_DEFAULT_NAMESPACE;

/// A client that can only read: GET and LIST of volumes, claims, pods and events.
#[derive(Clone)]
pub struct ReadOnly {
    client: Client,
    timeout: Duration,
}

impl ReadOnly {
    /// Reads through `client`, each request bounded by `timeout`.
    pub fn new(client: Client, timeout: Duration) -> Self {
        ReadOnly { client, timeout }
    }

    async fn call<T>(
        &self,
        what: &str,
        fut: impl std::future::Future<Output = kube::Result<T>>,
    ) -> Result<T, ApiError> {
        crate::api::answer(what, self.timeout, tokio::time::timeout(self.timeout, fut).await)
    }

    async fn volume(&self, name: &str) -> Result<PersistentVolume, ApiError> {
        let api: Api<PersistentVolume> = Api::all(self.client.clone());
        self.call("get persistentvolume", api.get(name)).await
    }

    async fn claim(&self, namespace: &str, name: &str) -> Result<PersistentVolumeClaim, ApiError> {
        let api: Api<PersistentVolumeClaim> = Api::namespaced(self.client.clone(), namespace);
        self.call("get persistentvolumeclaim", api.get(name)).await
    }

    async fn pods(&self, namespace: &str) -> Result<Vec<Pod>, ApiError> {
        let api: Api<Pod> = Api::namespaced(self.client.clone(), namespace);
        Ok(self.call("list pods", api.list(&ListParams::default())).await?.items)
    }

    /// The object `name` as it was at `rv` (a LIST of that one name at exactly that version).
    async fn at<K>(&self, api: Api<K>, name: &str, rv: &str) -> Option<K>
    where
        K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
    {
        let lp = ListParams::default().fields(&format!("metadata.name={name}")).at(rv).matching(VersionMatch::Exact);
        self.call("list at a version", api.list(&lp)).await.ok()?.items.into_iter().next()
    }

    /// True when an event of `type_` and `reason` about the object is stored.
    async fn has_event(
        &self,
        namespace: &str,
        kind: &str,
        name: &str,
        type_: &str,
        reason: &str,
    ) -> Result<bool, ApiError> {
        let api: Api<Event> = Api::namespaced(self.client.clone(), namespace);
        let fields = format!("involvedObject.kind={kind},involvedObject.name={name},type={type_},reason={reason}");
        let list = self.call("list events", api.list(&ListParams::default().fields(&fields).limit(1))).await?;
        Ok(!list.items.is_empty())
    }
}

/// Shadow mode's state: the read-only client, the decisions and their judgements.
pub struct Shadow {
    reads: ReadOnly,
    log: Mutex<ShadowLog>,
    /// How long after a decision the cluster is read to judge it.
    settle: Duration,
    origin: Instant,
    /// The claim each volume's latest decision binds it to, `namespace/name`.
    bound_to: Mutex<HashMap<String, String>>,
    /// The volume each claim's latest decision binds it to, by `namespace/name`. A shadow's
    /// writes are not stored, so until the binder in charge binds a volume the shadow may
    /// give it to one claim and then to another: each claim keeps the volume it was given.
    volume_of: Mutex<HashMap<String, String>>,
    /// When the shadow's watch first delivered each volume (ms on the shadow's clock): a volume
    /// first seen after a decision was made was not in the state that decision came from.
    first_seen: Mutex<HashMap<String, u64>>,
    /// Whether an object (kind, name or `namespace/name`) still exists, as the controller's
    /// caches see it: what is kept of objects gone is let go ([`Shadow::forget_gone`]).
    exists: std::sync::OnceLock<Exists>,
    /// When objects gone were last let go.
    forgot_ms: std::sync::atomic::AtomicU64,
}

/// Tells whether an object (kind, name or `namespace/name`) exists.
pub type Exists = Box<dyn Fn(&str, &str) -> bool + Send + Sync>;

/// How often [`Shadow::judge`] lets go of what it keeps of objects gone.
const FORGET_EVERY_MS: u64 = 60_000;

impl Shadow {
    /// Shadow mode over `reads`, judging each decision `settle` after it was made.
    pub fn new(reads: ReadOnly, settle: Duration) -> Arc<Self> {
        Arc::new(Shadow {
            reads,
            log: Mutex::default(),
            settle,
            origin: Instant::now(),
            bound_to: Mutex::default(),
            volume_of: Mutex::default(),
            first_seen: Mutex::default(),
            exists: std::sync::OnceLock::new(),
            forgot_ms: Default::default(),
        })
    }

    /// Tells the shadow how to know that an object exists (once; the controller's caches).
    pub fn set_exists(&self, exists: Exists) {
        let _ = self.exists.set(exists);
    }

    /// Lets go of the judgements and bindings kept of objects that no longer exist, so that a
    /// long-running shadow's memory follows the cluster's size and an object made again under a
    /// name is judged afresh. Returns how many judgements were let go.
    pub fn forget_gone(&self) -> usize {
        let Some(exists) = self.exists.get() else { return 0 };
        self.bound_to.lock().unwrap().retain(|volume, _| exists("PersistentVolume", volume));
        self.volume_of.lock().unwrap().retain(|claim, _| exists("PersistentVolumeClaim", claim));
        self.first_seen.lock().unwrap().retain(|volume, _| exists("PersistentVolume", volume));
        self.log.lock().unwrap().retain_objects(|kind, object| exists(kind, object))
    }

    /// Notes that the shadow's watch delivered the volume `name` (the first time counts).
    pub fn saw_volume(&self, name: &str) {
        let now = self.now_ms();
        let mut seen = self.first_seen.lock().unwrap();
        if !seen.contains_key(name) {
            seen.insert(name.to_string(), now);
        }
    }

    /// True when the volume `name` was first seen after `decided_ms`: the decision made then
    /// could not have taken it.
    fn seen_after(&self, name: &str, decided_ms: u64) -> bool {
        self.first_seen.lock().unwrap().get(name).is_some_and(|&seen| seen > decided_ms)
    }

    fn now_ms(&self) -> u64 {
        self.origin.elapsed().as_millis() as u64
    }

    fn intend(&self, kind: &'static str, object: String, field: &str, before: String, ours: String) {
        if kind == "PersistentVolume" && field == "spec.claimRef" && !ours.is_empty() {
            self.bound_to.lock().unwrap().insert(object.clone(), ours.clone());
        }
        if kind == "PersistentVolumeClaim" && field == "spec.volumeName" && !ours.is_empty() {
            self.volume_of.lock().unwrap().insert(object.clone(), ours.clone());
        }
        let t = Target { kind, object, field: field.to_string() };
        self.log.lock().unwrap().intend(t, before, ours, self.now_ms());
    }

    fn intend_changes(
        &self,
        kind: &'static str,
        object: String,
        old: &BTreeMap<&'static str, String>,
        new: &BTreeMap<&'static str, String>,
        status: bool,
    ) {
        // A status write sets only status fields, any other write only the rest.
        for (field, before, ours) in shadow::changes(old, new) {
            if field.starts_with("status.") == status {
                self.intend(kind, object.clone(), field, before, ours);
            }
        }
    }

    /// The settle window.
    pub fn settle(&self) -> Duration {
        self.settle
    }

    /// Judges every decision whose settle window has passed. Returns how many were judged.
    pub async fn judge(&self) -> usize {
        let now = self.now_ms();
        let last = self.forgot_ms.load(std::sync::atomic::Ordering::Relaxed);
        if now.saturating_sub(last) >= FORGET_EVERY_MS {
            self.forgot_ms.store(now, std::sync::atomic::Ordering::Relaxed);
            self.forget_gone();
        }
        let settle = self.settle.as_millis() as u64;
        let due = self.log.lock().unwrap().due(now, settle);
        let mut n = 0;
        for d in due {
            let decided_ms = now.saturating_sub(d.age_ms);
            let Ok((theirs, rule)) = self.theirs(&d.target, &d.ours, decided_ms).await else { continue };
            if d.undecided(&theirs, settle * UNDECIDED_WINDOWS) {
                continue;
            }
            let decision = self.log.lock().unwrap().judge(&d.target, theirs, rule);
            let Some(d) = decision else { continue };
            n += 1;
            match d.verdict {
                Verdict::Differ => tracing::warn!(
                    kind = d.target.kind, object = %d.target.object, field = %d.target.field,
                    ours = %d.ours, theirs = %d.theirs, before = %d.before,
                    "shadow: the binder in charge decided differently"
                ),
                Verdict::Equivalent => tracing::info!(
                    kind = d.target.kind, object = %d.target.object, field = %d.target.field,
                    ours = %d.ours, theirs = %d.theirs, rule = d.rule.as_deref().unwrap_or_default(),
                    "shadow: an equivalent choice"
                ),
                Verdict::Agree => {}
            }
        }
        n
    }

    /// Judges until `shutdown`, every half second.
    pub async fn run(&self, shutdown: impl std::future::Future<Output = ()>) {
        tokio::pin!(shutdown);
        loop {
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(500)) => { self.judge().await; }
                _ = &mut shutdown => return,
            }
        }
    }

    /// The cluster's value of the target's field, and the rule that makes it as good as ours
    /// (decided at `decided_ms`).
    async fn theirs(&self, t: &Target, ours: &str, decided_ms: u64) -> Result<(String, Option<String>), ApiError> {
        if let Some(rest) = t.field.strip_prefix("event ") {
            let (type_, reason) = rest.split_once('/').unwrap_or((rest, ""));
            let (ns, name) = match t.object.split_once('/') {
                Some((ns, name)) => (ns, name),
                None => (EVENT_DEFAULT_NAMESPACE, t.object.as_str()),
            };
            let found = self.reads.has_event(ns, t.kind, name, type_, reason).await?;
            let theirs = if found { "recorded".to_string() } else { String::new() };
            let rule = if theirs != ours { self.claims_equally_entitled(t, ours, &theirs).await } else { None };
            return Ok((theirs, rule));
        }
        let fields = match t.kind {
            "PersistentVolume" => match self.reads.volume(&t.object).await {
                Ok(v) => Some(shadow::volume_fields(&v)),
                Err(e) if e.is_not_found() => None,
                Err(e) => return Err(e),
            },
            _ => {
                let (ns, name) = t.object.split_once('/').unwrap_or(("", &t.object));
                match self.reads.claim(ns, name).await {
                    Ok(c) => Some(shadow::claim_fields(&c)),
                    Err(e) if e.is_not_found() => None,
                    Err(e) => return Err(e),
                }
            }
        };
        let theirs = match (&fields, t.field.as_str()) {
            (None, "deleted") => "yes".to_string(),
            (Some(_), "deleted") => String::new(),
            (None, "exists") => String::new(),
            (Some(_), "exists") => "yes".to_string(),
            (None, _) => "<deleted>".to_string(),
            (Some(f), field) => f.get(field).cloned().unwrap_or_default(),
        };
        let rule = if theirs != ours { self.equivalence(t, ours, &theirs, decided_ms).await } else { None };
        Ok((theirs, rule))
    }

    /// When the incumbent made another choice just as good as ours, the rule: another volume
    /// for the claim (of the same size, or one we had not seen when we decided at `decided_ms`
    /// and no larger), or the volume for another claim.
    async fn equivalence(&self, t: &Target, ours: &str, theirs: &str, decided_ms: u64) -> Option<String> {
        match self.volumes_equally_good(t, ours, theirs, decided_ms).await {
            Some(rule) => Some(rule),
            None => self.claims_equally_entitled(t, ours, theirs).await,
        }
    }

    /// When the incumbent gave the volume we gave one claim to another claim just as entitled to
    /// it, the rule. The decisions that follow from that choice are judged by it too: the
    /// claim's own fields, and the event about the claim we left without a volume.
    async fn claims_equally_entitled(&self, t: &Target, ours: &str, theirs: &str) -> Option<String> {
        // The volume, the claim we gave it and the claim the incumbent gave it, each read once.
        let (volume, ours, theirs) = match (t.kind, t.field.as_str()) {
            ("PersistentVolume", "spec.claimRef") => {
                if ours.is_empty() || theirs.is_empty() || ours == theirs {
                    return None;
                }
                let v = self.reads.volume(&t.object).await.ok()?;
                (v, self.claim_by_key(ours).await?, self.claim_by_key(theirs).await?)
            }
            ("PersistentVolume", _) => return None,
            (_, field) if field.starts_with("event ") => {
                // We left this claim without a volume; the incumbent bound it to the one we gave another.
                let theirs = self.claim_by_key(&t.object).await?;
                let volume = theirs.spec.as_ref()?.volume_name.clone()?;
                let ours = self.bound_to.lock().unwrap().get(&volume).cloned()?;
                if ours == t.object {
                    return None;
                }
                (self.reads.volume(&volume).await.ok()?, self.claim_by_key(&ours).await?, theirs)
            }
            _ => {
                // We bound this claim; the incumbent gave its volume to another.
                let v = self.reads.volume(&self.ours_for_claim(&t.object)?).await.ok()?;
                let theirs = shadow::volume_fields(&v).remove("spec.claimRef")?;
                if theirs.is_empty() || theirs == t.object {
                    return None;
                }
                (v, self.claim_by_key(&t.object).await?, self.claim_by_key(&theirs).await?)
            }
        };
        shadow::equally_entitled(&volume, &ours, &theirs).then(|| shadow::EQUALLY_ENTITLED_RULE.to_string())
    }

    async fn claim_by_key(&self, key: &str) -> Option<PersistentVolumeClaim> {
        let (ns, name) = key.split_once('/')?;
        self.reads.claim(ns, name).await.ok()
    }

    /// When the incumbent bound the claim to another volume just as good as ours, the rule:
    /// one of the same size, or one we had not seen when we decided (at `decided_ms`) that is
    /// no larger than ours (the incumbent decided from a later state).
    async fn volumes_equally_good(&self, t: &Target, ours: &str, theirs: &str, decided_ms: u64) -> Option<String> {
        let (claim_key, our_volume, their_volume) = match t.kind {
            "PersistentVolumeClaim" if t.field == "spec.volumeName" && !ours.is_empty() && !theirs.is_empty() => {
                (t.object.clone(), ours.to_string(), theirs.to_string())
            }
            "PersistentVolumeClaim" => {
                // The claim's other fields follow from which volume it got.
                let (ns, name) = t.object.split_once('/')?;
                let c = self.reads.claim(ns, name).await.ok()?;
                let theirs = c.spec.as_ref()?.volume_name.clone()?;
                let ours = self.ours_for_claim(&t.object)?;
                (t.object.clone(), ours, theirs)
            }
            _ => {
                // A volume we would have bound to a claim the incumbent bound elsewhere.
                let claim_key = self.bound_to.lock().unwrap().get(&t.object).cloned()?;
                let (ns, name) = claim_key.split_once('/')?;
                let c = self.reads.claim(ns, name).await.ok()?;
                let theirs = c.spec.as_ref()?.volume_name.clone()?;
                (claim_key, t.object.clone(), theirs)
            }
        };
        if our_volume == their_volume {
            return None;
        }
        let (ns, name) = claim_key.split_once('/')?;
        let claim = self.reads.claim(ns, name).await.ok()?;
        let a = self.reads.volume(&our_volume).await.ok()?;
        let b = self.reads.volume(&their_volume).await.ok()?;
        if shadow::equally_good(&claim, &a, &b) {
            return Some(shadow::EQUALLY_GOOD_RULE.to_string());
        }
        (self.seen_after(&their_volume, decided_ms) && shadow::as_good_seen_later(&claim, &a, &b))
            .then(|| shadow::SEEN_LATER_RULE.to_string())
    }

    fn ours_for_claim(&self, claim: &str) -> Option<String> {
        self.volume_of.lock().unwrap().get(claim).cloned()
    }

    /// What `/shadow` serves: the settle window, counts, and the last differences.
    pub fn report(&self) -> serde_json::Value {
        let log = self.log.lock().unwrap();
        let mut counts = serde_json::Map::new();
        let mut total = 0;
        for ((verdict, kind), n) in log.counts() {
            total += n;
            let e = counts.entry(verdict.as_str()).or_insert_with(|| serde_json::json!({}));
            e[*kind] = serde_json::json!(n);
        }
        let differences: Vec<serde_json::Value> = log
            .differences()
            .map(|d| {
                serde_json::json!({
                    "result": d.verdict.as_str(), "kind": d.target.kind, "object": d.target.object,
                    "field": d.target.field, "before": d.before, "ours": d.ours, "theirs": d.theirs, "rule": d.rule,
                })
            })
            .collect();
        serde_json::json!({
            "settleSeconds": self.settle.as_secs_f64(),
            "decisions": total,
            "pending": log.pending(),
            "counts": counts,
            "differences": differences,
        })
    }

    /// Decisions by (result, kind), for `/metrics`: those judged (`agree`, `equivalent`,
    /// `differ`) and, as `pending`, those not judged yet.
    pub fn counts(&self) -> Vec<(&'static str, &'static str, u64)> {
        let log = self.log.lock().unwrap();
        let mut out: Vec<_> = log.counts().iter().map(|((v, k), n)| (v.as_str(), *k, *n)).collect();
        out.extend(log.pending_by_kind().into_iter().map(|(k, n)| ("pending", k, n)));
        out
    }

    /// Decisions not judged yet.
    pub fn pending(&self) -> usize {
        self.log.lock().unwrap().pending()
    }
}

/// The controller's API in shadow mode: reads through [`ReadOnly`], records every write.
pub struct ShadowApi {
    shadow: Arc<Shadow>,
}

impl ShadowApi {
    /// The API over `shadow`.
    pub fn new(shadow: Arc<Shadow>) -> Self {
        ShadowApi { shadow }
    }

    fn reads(&self) -> &ReadOnly {
        &self.shadow.reads
    }

    /// The volume as the controller read it before writing `v` (at its resourceVersion).
    async fn volume_before(&self, v: &PersistentVolume) -> Option<PersistentVolume> {
        let name = v.metadata.name.as_deref()?;
        let rv = v.metadata.resource_version.as_deref().filter(|r| !r.is_empty())?;
        self.reads().at(Api::all(self.reads().client.clone()), name, rv).await
    }

    async fn claim_before(&self, c: &PersistentVolumeClaim) -> Option<PersistentVolumeClaim> {
        let name = c.metadata.name.as_deref()?;
        let ns = c.metadata.namespace.as_deref()?;
        let rv = c.metadata.resource_version.as_deref().filter(|r| !r.is_empty())?;
        self.reads().at(Api::namespaced(self.reads().client.clone(), ns), name, rv).await
    }

    async fn record_volume(&self, v: &PersistentVolume, status: bool) {
        let old = self.volume_before(v).await.map(|o| shadow::volume_fields(&o)).unwrap_or_default();
        let name = v.metadata.name.clone().unwrap_or_default();
        self.shadow.intend_changes("PersistentVolume", name, &old, &shadow::volume_fields(v), status);
    }

    async fn record_claim(&self, c: &PersistentVolumeClaim, status: bool) {
        let old = self.claim_before(c).await.map(|o| shadow::claim_fields(&o)).unwrap_or_default();
        let key = format!(
            "{}/{}",
            c.metadata.namespace.as_deref().unwrap_or_default(),
            c.metadata.name.as_deref().unwrap_or_default()
        );
        self.shadow.intend_changes("PersistentVolumeClaim", key, &old, &shadow::claim_fields(c), status);
    }

    fn record_event(&self, e: &Event) {
        let o = &e.involved_object;
        let kind = match o.kind.as_deref() {
            Some("PersistentVolume") => "PersistentVolume",
            Some("PersistentVolumeClaim") => "PersistentVolumeClaim",
            _ => return,
        };
        let name = o.name.clone().unwrap_or_default();
        let object = match o.namespace.as_deref().filter(|n| !n.is_empty()) {
            Some(ns) => format!("{ns}/{name}"),
            None => name,
        };
        let field =
            format!("event {}/{}", e.type_.as_deref().unwrap_or_default(), e.reason.as_deref().unwrap_or_default());
        self.shadow.intend(kind, object, &field, String::new(), "recorded".into());
    }
}

#[async_trait]
impl ClusterApi for ShadowApi {
    async fn get_volume(&self, name: &str) -> Result<PersistentVolume, ApiError> {
        self.reads().volume(name).await
    }

    async fn create_volume(&self, volume: &PersistentVolume) -> Result<PersistentVolume, ApiError> {
        let name = volume.metadata.name.clone().unwrap_or_default();
        self.shadow.intend("PersistentVolume", name, "exists", String::new(), "yes".into());
        Ok(volume.clone())
    }

    async fn update_volume(&self, volume: &PersistentVolume) -> Result<PersistentVolume, ApiError> {
        self.record_volume(volume, false).await;
        Ok(volume.clone())
    }

    async fn update_volume_status(&self, volume: &PersistentVolume) -> Result<PersistentVolume, ApiError> {
        self.record_volume(volume, true).await;
        Ok(volume.clone())
    }

    async fn delete_volume(&self, name: &str) -> Result<(), ApiError> {
        self.shadow.intend("PersistentVolume", name.to_string(), "deleted", String::new(), "yes".into());
        Ok(())
    }

    async fn get_claim(&self, namespace: &str, name: &str) -> Result<PersistentVolumeClaim, ApiError> {
        self.reads().claim(namespace, name).await
    }

    async fn update_claim(&self, claim: &PersistentVolumeClaim) -> Result<PersistentVolumeClaim, ApiError> {
        self.record_claim(claim, false).await;
        Ok(claim.clone())
    }

    async fn update_claim_status(&self, claim: &PersistentVolumeClaim) -> Result<PersistentVolumeClaim, ApiError> {
        self.record_claim(claim, true).await;
        Ok(claim.clone())
    }

    async fn create_event(&self, event: &Event) -> Result<Event, ApiError> {
        self.record_event(event);
        Ok(event.clone())
    }

    async fn update_event(&self, event: &Event) -> Result<Event, ApiError> {
        self.record_event(event);
        Ok(event.clone())
    }

    async fn list_pods(&self, namespace: &str) -> Result<Vec<Pod>, ApiError> {
        self.reads().pods(namespace).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shadow() -> Arc<Shadow> {
        // Nothing is read in these tests: the client is never asked.
        let config = kube::Config::new("http://127.0.0.1:9".parse().unwrap());
        Shadow::new(ReadOnly::new(Client::try_from(config).unwrap(), Duration::from_secs(1)), Duration::ZERO)
    }

    #[tokio::test]
    async fn a_volume_counts_as_seen_after_a_decision_only_when_first_delivered_after_it() {
        let s = shadow();
        s.saw_volume("pv-big");
        std::thread::sleep(Duration::from_millis(5));
        let decided = s.now_ms();
        std::thread::sleep(Duration::from_millis(5));
        s.saw_volume("pv-small");
        // Delivered again (an update, a relist): the first time counts.
        s.saw_volume("pv-big");
        assert!(!s.seen_after("pv-big", decided));
        assert!(s.seen_after("pv-small", decided));
        // Never seen: nothing tells it was not in the state the decision came from.
        assert!(!s.seen_after("pv-other", decided));
        s.set_exists(Box::new(|_, object| object == "pv-big"));
        s.forget_gone();
        assert!(!s.seen_after("pv-small", decided));
    }

    #[tokio::test]
    async fn what_is_kept_of_objects_gone_is_let_go() {
        let s = shadow();
        s.intend("PersistentVolume", "pv-1".into(), "spec.claimRef", String::new(), "ns/c".into());
        s.intend("PersistentVolume", "pv-2".into(), "spec.claimRef", String::new(), "ns/d".into());
        s.intend("PersistentVolumeClaim", "ns/c".into(), "spec.volumeName", String::new(), "pv-1".into());
        let due = s.log.lock().unwrap().due(u64::MAX, 0);
        for d in due {
            s.log.lock().unwrap().judge(&d.target, d.ours.clone(), None);
        }
        // Without a way to tell, nothing is let go.
        assert_eq!(s.forget_gone(), 0);
        s.set_exists(Box::new(|kind, object| kind == "PersistentVolume" && object == "pv-2"));
        assert_eq!(s.forget_gone(), 2);
        assert_eq!(s.bound_to.lock().unwrap().keys().collect::<Vec<_>>(), vec!["pv-2"]);
        assert!(s.volume_of.lock().unwrap().is_empty());
        // pv-1 made again under its name: the same decision is a new one; pv-2's repeat is not.
        s.intend("PersistentVolume", "pv-1".into(), "spec.claimRef", String::new(), "ns/c".into());
        s.intend("PersistentVolume", "pv-2".into(), "spec.claimRef", String::new(), "ns/d".into());
        assert_eq!(s.pending(), 1);
    }
}
