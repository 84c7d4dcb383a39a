//! The pv-protection and pvc-protection controllers of kube-controller-manager, for servers
//! that add their finalizers.
//!
//! An API server with the StorageObjectInUseProtection admission (kube-apiserver by default,
//! `up` too) puts `kubernetes.io/pv-protection` on every new volume and
//! `kubernetes.io/pvc-protection` on every new claim. Deleting either then only marks it; the
//! object goes once the finalizer is removed, which is these controllers' job:
//! - a claim being deleted loses its finalizer when no scheduled Pod (one with a `nodeName`)
//!   mounts it through a `persistentVolumeClaim` volume (the pods the watch delivered, then a
//!   live list of the namespace's pods, so a pod not yet delivered still keeps it);
//! - a volume being deleted loses its finalizer when it is not Bound.
//!
//! Against a real cluster kube-controller-manager runs them; `up` runs this module beside the
//! binder, over the same [`ClusterApi`]. State is small and kept here: which scheduled pods use
//! which claims. Work is a queue of keys; a key whose write fails (a conflict, a server error)
//! is tried again shortly, and every relevant change (a pod going away, a volume leaving Bound)
//! queues the keys it may unblock.

use crate::api::ClusterApi;
use crate::controller::ObjectEvent;
use pv_model::k8s::{PersistentVolume, PersistentVolumeClaim, Pod};
use pv_model::ObjectKey;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::mpsc;

/// The finalizer that keeps a volume while it is bound.
pub const PV_PROTECTION_FINALIZER: &str = "kubernetes.io/pv-protection";
/// The finalizer that keeps a claim while a pod uses it.
pub const PVC_PROTECTION_FINALIZER: &str = "kubernetes.io/pvc-protection";

/// How long a key whose write failed waits before it is tried again.
const RETRY_AFTER: Duration = Duration::from_millis(200);

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Key {
    Volume(String),
    Claim(ObjectKey),
}

/// Which of the two controllers run (kube-controller-manager's
/// `persistentvolume-protection-controller` and `persistentvolumeclaim-protection-controller`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Scope {
    /// pv-protection: volumes.
    pub volumes: bool,
    /// pvc-protection: claims.
    pub claims: bool,
}

impl Scope {
    /// Both, as kube-controller-manager runs them by default.
    pub const ALL: Scope = Scope { volumes: true, claims: true };
}

/// The two protection controllers.
pub struct Protection {
    api: Arc<dyn ClusterApi>,
    scope: Scope,
    /// Claims (`namespace/name`) used by each scheduled pod (`namespace/name`).
    pods: Mutex<HashMap<ObjectKey, Vec<ObjectKey>>>,
    tx: mpsc::UnboundedSender<Key>,
    rx: Mutex<Option<mpsc::UnboundedReceiver<Key>>>,
}

fn has(finalizers: &Option<Vec<String>>, f: &str) -> bool {
    finalizers.as_ref().is_some_and(|l| l.iter().any(|x| x == f))
}

/// The claims a pod keeps: only a scheduled pod's `persistentVolumeClaim` volumes.
fn claims_of(pod: &Pod) -> Vec<ObjectKey> {
    let ns = pod.metadata.namespace.clone().unwrap_or_default();
    let Some(spec) = &pod.spec else { return Vec::new() };
    if spec.node_name.as_deref().unwrap_or("").is_empty() {
        return Vec::new();
    }
    spec.volumes
        .iter()
        .flatten()
        .filter_map(|v| v.persistent_volume_claim.as_ref())
        .map(|c| ObjectKey::new(&ns, &c.claim_name))
        .collect()
}

impl Protection {
    /// Controllers that write through `api`; [`Protection::run`] does the work.
    pub fn new(api: Arc<dyn ClusterApi>, scope: Scope) -> Arc<Self> {
        let (tx, rx) = mpsc::unbounded_channel();
        Arc::new(Protection { api, scope, pods: Mutex::new(HashMap::new()), tx, rx: Mutex::new(Some(rx)) })
    }

    fn enqueue(&self, key: Key) {
        let _ = self.tx.send(key);
    }

    /// A volume changed: one being deleted with its finalizer is looked at.
    pub fn on_volume(&self, ev: ObjectEvent<PersistentVolume>) {
        if !self.scope.volumes {
            return;
        }
        if let ObjectEvent::Applied(v) = ev {
            if v.metadata.deletion_timestamp.is_some() && has(&v.metadata.finalizers, PV_PROTECTION_FINALIZER) {
                self.enqueue(Key::Volume(v.metadata.name.unwrap_or_default()));
            }
        }
    }

    /// A claim changed: one being deleted with its finalizer is looked at.
    pub fn on_claim(&self, ev: ObjectEvent<PersistentVolumeClaim>) {
        if !self.scope.claims {
            return;
        }
        if let ObjectEvent::Applied(c) = ev {
            if c.metadata.deletion_timestamp.is_some() && has(&c.metadata.finalizers, PVC_PROTECTION_FINALIZER) {
                self.enqueue(Key::Claim(ObjectKey::of(&c.metadata)));
            }
        }
    }

    /// A pod changed: the claims it no longer uses are looked at again.
    pub fn on_pod(&self, ev: ObjectEvent<Pod>) {
        if !self.scope.claims {
            return;
        }
        let (pod, deleted) = match ev {
            ObjectEvent::Applied(p) => (p, false),
            ObjectEvent::Deleted(p) => (p, true),
        };
        let key = ObjectKey::of(&pod.metadata);
        let now: Vec<ObjectKey> = if deleted { Vec::new() } else { claims_of(&pod) };
        let before = {
            let mut pods = self.pods.lock().unwrap();
            if now.is_empty() {
                pods.remove(&key)
            } else {
                pods.insert(key, now.clone())
            }
        };
        for claim in before.into_iter().flatten().filter(|c| !now.contains(c)) {
            self.enqueue(Key::Claim(claim));
        }
    }

    fn claim_in_use(&self, key: &str) -> bool {
        self.pods.lock().unwrap().values().any(|claims| claims.iter().any(|c| c.as_str() == key))
    }

    /// Works the queue until `shutdown` completes.
    pub async fn run(self: Arc<Self>, shutdown: impl std::future::Future<Output = ()>) {
        let Some(mut rx) = self.rx.lock().unwrap().take() else { return };
        tokio::pin!(shutdown);
        let mut pending: HashSet<Key> = HashSet::new();
        loop {
            let key = tokio::select! {
                _ = &mut shutdown => return,
                k = rx.recv() => match k { Some(k) => k, None => return },
            };
            pending.insert(key);
            // Take whatever else is queued, so a burst of events for one key is one sync.
            while let Ok(k) = rx.try_recv() {
                pending.insert(k);
            }
            for key in std::mem::take(&mut pending) {
                if let Err(e) = self.sync(&key).await {
                    tracing::debug!(?key, error = %e, "protection: will retry");
                    let this = self.clone();
                    tokio::spawn(async move {
                        tokio::time::sleep(RETRY_AFTER).await;
                        this.enqueue(key);
                    });
                }
            }
        }
    }

    async fn sync(&self, key: &Key) -> Result<(), crate::ApiError> {
        match key {
            Key::Volume(name) => {
                let mut v = match self.api.get_volume(name).await {
                    Err(e) if e.is_not_found() => return Ok(()),
                    other => other?,
                };
                let bound = v.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound");
                if v.metadata.deletion_timestamp.is_none()
                    || bound
                    || !has(&v.metadata.finalizers, PV_PROTECTION_FINALIZER)
                {
                    return Ok(());
                }
                if let Some(f) = v.metadata.finalizers.as_mut() {
                    f.retain(|x| x != PV_PROTECTION_FINALIZER);
                }
                tracing::info!(volume = %name, "removed the pv-protection finalizer: the volume is not bound");
                match self.api.update_volume(&v).await {
                    Err(e) if e.is_not_found() => Ok(()),
                    other => other.map(drop),
                }
            }
            Key::Claim(key) => {
                let (ns, name) = (key.namespace(), key.name());
                let mut c = match self.api.get_claim(ns, name).await {
                    Err(e) if e.is_not_found() => return Ok(()),
                    other => other?,
                };
                if c.metadata.deletion_timestamp.is_none()
                    || !has(&c.metadata.finalizers, PVC_PROTECTION_FINALIZER)
                    || self.claim_in_use(key)
                {
                    return Ok(());
                }
                // The pod watch may not have delivered a pod that uses the claim yet: ask the
                // server before letting the claim go, as upstream's controller does. A pod found
                // here reaches `on_pod` through the watch too, and its deletion requeues the claim.
                if self.api.list_pods(ns).await?.iter().any(|p| claims_of(p).iter().any(|c| c == key)) {
                    tracing::debug!(pvc = %key, "kept: a pod the watch has not delivered yet uses the claim");
                    return Ok(());
                }
                if let Some(f) = c.metadata.finalizers.as_mut() {
                    f.retain(|x| x != PVC_PROTECTION_FINALIZER);
                }
                tracing::info!(pvc = %key, "removed the pvc-protection finalizer: no pod uses the claim");
                match self.api.update_claim(&c).await {
                    Err(e) if e.is_not_found() => Ok(()),
                    other => other.map(drop),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(node: Option<&str>, claim: &str) -> Pod {
        serde_json::from_value(json!({"metadata": {"name": "p", "namespace": "ns"},
            "spec": {"nodeName": node, "containers": [], "volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": claim}}]}}))
        .unwrap()
    }

    #[test]
    fn only_a_scheduled_pod_keeps_its_claims() {
        assert_eq!(claims_of(&pod(Some("n1"), "data")), ["ns/data"]);
        assert!(claims_of(&pod(None, "data")).is_empty());
    }
}
