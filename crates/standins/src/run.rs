//! The loop that carries the stand-ins' plans out on `up`'s store.
//!
//! Level-triggered: whenever the store has changed (checked every 50 ms), and at least once a
//! second so that a failed write is tried again, it reads every kind the plans look at into one
//! snapshot, plans, and writes through the store's own paths (the volume's and the claim's
//! updates, the pod's `binding`, the VolumeAttachment's create and delete, the Node's status),
//! each acknowledged once durable. A write that loses a race (409) is simply planned again from
//! the next snapshot.

use crate::{attach, schedule};
use pv_core::events::Recorder;
use pv_core::{ClusterApi, SystemClock};
use pv_explain::Snapshot;
use pv_model::annotations as ann;
use pv_store::{Store, StoreError, Written};
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Which stand-ins run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StandIns {
    /// kube-scheduler's volume step and pod binding (`up --scheduler`).
    pub scheduler: bool,
    /// kube-controller-manager's attach-detach controller (`--controllers '*,attachdetach'`).
    pub attach_detach: bool,
}

impl StandIns {
    /// Whether any runs.
    pub fn any(&self) -> bool {
        self.scheduler || self.attach_detach
    }
}

/// What the loop remembers between plans.
struct State {
    store: Arc<Store>,
    scheduler_events: Recorder,
    attach_events: Recorder,
    /// VolumeAttachments created and not yet listed in their Node's status.
    created: BTreeSet<String>,
    /// The last FailedScheduling message per pod, and the Multi-Attach events given, so that a
    /// plan repeated on every change does not repeat its events.
    unschedulable: BTreeMap<(String, String), String>,
    multi_attach: BTreeSet<((String, String), String)>,
}

/// Runs the stand-ins `which` selects over `store` until `shutdown`.
pub async fn run(store: Arc<Store>, which: StandIns, shutdown: impl std::future::Future<Output = ()>) {
    let api: Arc<dyn ClusterApi> = Arc::new(pv_local::MemApi::new(store.clone()));
    let mut st = State {
        scheduler_events: Recorder::new(api.clone(), SystemClock::new()).with_component("default-scheduler"),
        attach_events: Recorder::new(api, SystemClock::new()).with_component("attachdetach-controller"),
        store,
        created: BTreeSet::new(),
        unschedulable: BTreeMap::new(),
        multi_attach: BTreeSet::new(),
    };
    tokio::pin!(shutdown);
    let mut seen = None;
    let mut last = Instant::now();
    loop {
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(50)) => {}
            _ = &mut shutdown => return,
        }
        let rv = st.store.resource_version();
        if seen == Some(rv) && last.elapsed() < Duration::from_secs(1) {
            continue;
        }
        seen = Some(rv);
        last = Instant::now();
        let snapshot = match Snapshot::from_store(&st.store) {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!("stand-ins: reading the store: {e}");
                continue;
            }
        };
        if which.scheduler {
            let steps = schedule::plan(&snapshot, k8s_openapi::jiff::Timestamp::now());
            st.schedule(&snapshot, steps).await;
        }
        if which.attach_detach {
            let steps = attach::plan(&snapshot, &st.created);
            st.attach(&snapshot, steps).await;
        }
        st.scheduler_events.flush().await;
        st.attach_events.flush().await;
    }
}

async fn durable(store: &Arc<Store>, w: pv_store::Result<Written>) -> pv_store::Result<Arc<Value>> {
    w?.durable(store).await
}

fn pod_of<'a>(snapshot: &'a Snapshot, (ns, name): &(String, String)) -> Option<&'a pv_model::k8s::Pod> {
    snapshot.pods.iter().find(|p| {
        p.metadata.namespace.as_deref() == Some(ns.as_str()) && p.metadata.name.as_deref() == Some(name.as_str())
    })
}

fn log_failed(what: &str, r: pv_store::Result<Arc<Value>>) -> bool {
    match r {
        Ok(_) => true,
        // Lost a race, or the object went: the next plan sees what happened.
        Err(StoreError::Conflict { .. } | StoreError::NotFound { .. } | StoreError::AlreadyExists { .. }) => false,
        Err(e) => {
            tracing::warn!("stand-ins: {what}: {e}");
            false
        }
    }
}

impl State {
    async fn schedule(&mut self, snapshot: &Snapshot, steps: Vec<schedule::Step>) {
        let mut unschedulable = BTreeMap::new();
        for step in steps {
            match step {
                schedule::Step::BindVolume { namespace, claim, volume } => {
                    let r = self.bind_volume(&namespace, &claim, &volume).await;
                    log_failed(&format!("binding volume {volume} to claim {namespace}/{claim}"), r);
                }
                schedule::Step::SelectNode { namespace, claim, node } => {
                    let r = match self.store.get("persistentvolumeclaims", &namespace, &claim) {
                        Ok(o) => {
                            let mut c = o.value();
                            c["metadata"]["annotations"][ann::SELECTED_NODE] = json!(node);
                            durable(&self.store, self.store.update_written("persistentvolumeclaims", c, false)).await
                        }
                        Err(e) => Err(e),
                    };
                    log_failed(&format!("selecting node {node} for claim {namespace}/{claim}"), r);
                }
                schedule::Step::BindPod { namespace, pod, node } => {
                    let r = durable(&self.store, self.store.bind_pod_written(&namespace, &pod, &node, None)).await;
                    if log_failed(&format!("binding pod {namespace}/{pod} to node {node}"), r) {
                        if let Some(p) = pod_of(snapshot, &(namespace.clone(), pod.clone())) {
                            let message = format!("Successfully assigned {namespace}/{pod} to {node}");
                            self.scheduler_events.event(p, "Normal", "Scheduled", message).await;
                        }
                    }
                }
                schedule::Step::LiftNotReadyTaint { node } => {
                    let r = match self.store.get("nodes", "", &node) {
                        Ok(o) => {
                            let mut n = o.value();
                            if let Some(taints) = n.pointer_mut("/spec/taints").and_then(Value::as_array_mut) {
                                taints.retain(|t| {
                                    !(t["key"] == schedule::NOT_READY_TAINT && t["effect"] == "NoSchedule")
                                });
                                if taints.is_empty() {
                                    n["spec"].as_object_mut().map(|s| s.remove("taints"));
                                }
                            }
                            durable(&self.store, self.store.update_written("nodes", n, false)).await
                        }
                        Err(e) => Err(e),
                    };
                    log_failed(&format!("lifting the not-ready taint of node {node}"), r);
                }
                schedule::Step::Unschedulable { namespace, pod, message } => {
                    let key = (namespace, pod);
                    if self.unschedulable.get(&key) != Some(&message) {
                        if let Some(p) = pod_of(snapshot, &key) {
                            self.scheduler_events.event(p, "Warning", "FailedScheduling", message.clone()).await;
                        }
                    }
                    unschedulable.insert(key, message);
                }
            }
        }
        self.unschedulable = unschedulable;
    }

    /// The scheduler's static binding: the volume's `claimRef` names the claim (with its uid and
    /// version) and `pv.kubernetes.io/bound-by-controller` is set; the binder completes it.
    async fn bind_volume(&self, namespace: &str, claim: &str, volume: &str) -> pv_store::Result<Arc<Value>> {
        let c = self.store.get("persistentvolumeclaims", namespace, claim)?.value();
        let mut v = self.store.get("persistentvolumes", "", volume)?.value();
        if v.pointer("/spec/claimRef").is_some_and(|r| !r.is_null()) {
            return Ok(Arc::new(v));
        }
        v["spec"]["claimRef"] = json!({
            "kind": "PersistentVolumeClaim",
            "namespace": namespace,
            "name": claim,
            "uid": c.pointer("/metadata/uid"),
            "apiVersion": "v1",
            "resourceVersion": c.pointer("/metadata/resourceVersion"),
        });
        v["metadata"]["annotations"][ann::BOUND_BY_CONTROLLER] = json!("yes");
        durable(&self.store, self.store.update_written("persistentvolumes", v, false)).await
    }

    async fn attach(&mut self, snapshot: &Snapshot, steps: Vec<attach::Step>) {
        let mut multi = BTreeSet::new();
        for step in steps {
            match step {
                attach::Step::Attach(a) => {
                    let va = json!({
                        "apiVersion": "storage.k8s.io/v1",
                        "kind": "VolumeAttachment",
                        "metadata": {"name": a.name},
                        "spec": {"attacher": a.driver, "nodeName": a.node, "source": {"persistentVolumeName": a.volume}},
                    });
                    self.created.insert(a.name.clone());
                    let r = durable(&self.store, self.store.create_written("volumeattachments", va)).await;
                    log_failed(&format!("creating VolumeAttachment {}", a.name), r);
                }
                attach::Step::Report(a) => {
                    let unique = a.unique_name();
                    let r = self
                        .node_status(&a.node, |list| {
                            if !list.iter().any(|v| v["name"] == unique.as_str()) {
                                list.push(json!({"name": unique, "devicePath": ""}));
                            }
                        })
                        .await;
                    if log_failed(&format!("listing {} in node {}'s status", a.volume, a.node), r) {
                        self.created.remove(&a.name);
                        for p in a.pods.iter().filter_map(|p| pod_of(snapshot, p)) {
                            let message = format!("AttachVolume.Attach succeeded for volume {:?} ", a.volume);
                            self.attach_events.event(p, "Normal", "SuccessfulAttachVolume", message).await;
                        }
                    }
                }
                attach::Step::Detach { name, node, unique_name } => {
                    // Ours until the VolumeAttachment's deletion is acknowledged.
                    self.created.insert(name.clone());
                    let r = self.node_status(&node, |list| list.retain(|v| v["name"] != unique_name.as_str())).await;
                    if !log_failed(&format!("taking {unique_name} off node {node}'s status"), r) {
                        continue;
                    }
                    match durable(&self.store, self.store.delete_written("volumeattachments", "", &name, None, None))
                        .await
                    {
                        Ok(_) | Err(StoreError::NotFound { .. }) => {
                            self.created.remove(&name);
                        }
                        Err(e) => tracing::warn!("stand-ins: deleting VolumeAttachment {name}: {e}"),
                    }
                }
                attach::Step::MultiAttach { pod, volume, message } => {
                    let key = (pod, volume);
                    if !self.multi_attach.contains(&key) {
                        if let Some(p) = pod_of(snapshot, &key.0) {
                            self.attach_events.event(p, "Warning", "FailedAttachVolume", message).await;
                        }
                    }
                    multi.insert(key);
                }
            }
        }
        self.multi_attach = multi;
    }

    /// Changes the Node's `status.volumesAttached` with `f` (nothing written when it is as it was).
    async fn node_status(&self, node: &str, f: impl FnOnce(&mut Vec<Value>)) -> pv_store::Result<Arc<Value>> {
        let mut n = self.store.get("nodes", "", node)?.value();
        let before = n.pointer("/status/volumesAttached").cloned();
        let mut list = before.as_ref().and_then(Value::as_array).cloned().unwrap_or_default();
        f(&mut list);
        if before.as_ref().and_then(Value::as_array) == Some(&list) || (before.is_none() && list.is_empty()) {
            return Ok(Arc::new(n));
        }
        let status = n.as_object_mut().unwrap().entry("status").or_insert_with(|| json!({}));
        if list.is_empty() {
            status.as_object_mut().map(|s| s.remove("volumesAttached"));
        } else {
            status["volumesAttached"] = Value::Array(list);
        }
        durable(&self.store, self.store.update_written("nodes", n, true)).await
    }
}
