//! Recycling NFS and host-path volumes with a recycler pod, as kube-controller-manager does.
//!
//! Why a pod: the controller cannot reach an NFS export or another node's disk; a pod scheduled
//! by the cluster can. Upstream's recycler (`pkg/volume/util/recyclerclient`) creates the pod
//! `recycler-for-<pv name>` from a template (its own, or the file given by
//! `--pv-recycler-pod-template-filepath-{nfs,hostpath}`) with the volume mounted at `/scrub`,
//! watches it until it succeeds or fails, relays the events about the pod to the volume
//! (`RecyclerPod`, "Recycler pod: ..."), and deletes the pod in every case. This module does the
//! same through the API, with the same pod, names, messages and timeout arithmetic; the
//! controller turns the outcome into `VolumeRecycled` or `VolumeFailedRecycle`.
//!
//! The pod's `activeDeadlineSeconds` is the larger of the minimum timeout and the increment
//! times the volume's size in whole GiB (rounded down), so the kubelet kills a recycler that
//! runs too long and the pod fails. The watch has no deadline of its own, as upstream's.
//!
//! One difference: a watch the API server ends normally (its request timeout) is resumed from
//! the last version seen; upstream gives up with "watch channel had been closed" and tries again
//! on a later sync.

use async_trait::async_trait;
use futures_util::{Stream, StreamExt};
use k8s_openapi::api::core::v1::{
    Container, Event, HostPathVolumeSource, NFSVolumeSource, PersistentVolume, Pod, PodSpec, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{DeleteParams, PostParams, WatchEvent, WatchParams};
use kube::{Api, Client};
use pv_core::{PluginError, ProvisionOptions, RecyclerEvents, VolumePlugin};
use pv_model::helpers;
use std::path::Path;
use std::pin::Pin;
use std::time::Duration;

/// Upstream's recycler image (`NewPersistentVolumeRecyclerPodTemplate`, Kubernetes 1.37).
pub const DEFAULT_IMAGE: &str = "registry.k8s.io/build-image/debian-base:bookworm-v1.0.6";

/// Upstream's recycler command: empty `/scrub` and check that it is empty.
pub const DEFAULT_SCRUB: &str =
    "test -e /scrub && find /scrub -mindepth 1 -delete && test -z \"$(ls -A /scrub)\" || exit 1";

/// Bound on each create/delete request (the watch itself is not bounded).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// Pause before watching again after a watch failed.
const REWATCH_PAUSE: Duration = Duration::from_secs(1);

/// Which volume source a recycler handles.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// `spec.nfs`.
    Nfs,
    /// `spec.hostPath`.
    HostPath,
}

impl Source {
    /// The in-tree plugin name upstream's recycler belongs to.
    pub fn plugin_name(self) -> &'static str {
        match self {
            Source::Nfs => "kubernetes.io/nfs",
            Source::HostPath => "kubernetes.io/host-path",
        }
    }
}

/// A recycler's pod template and timeouts (upstream's `VolumeConfig`).
#[derive(Clone, Debug)]
pub struct RecyclerConfig {
    /// The pod; its first volume's source is replaced by the volume's.
    pub template: Pod,
    /// Least `activeDeadlineSeconds` (`--pv-recycler-minimum-timeout-*`).
    pub minimum_timeout: i64,
    /// Seconds added per GiB (`--pv-recycler-increment-timeout-nfs`,
    /// `--pv-recycler-timeout-increment-hostpath`).
    pub timeout_increment: i64,
}

impl RecyclerConfig {
    /// Upstream's defaults for NFS: its template, at least 300 s, 30 s per GiB.
    pub fn nfs() -> Self {
        RecyclerConfig { template: default_template(), minimum_timeout: 300, timeout_increment: 30 }
    }

    /// Upstream's defaults for host-path: its template, at least 60 s, 30 s per GiB.
    pub fn host_path() -> Self {
        RecyclerConfig { template: default_template(), minimum_timeout: 60, timeout_increment: 30 }
    }
}

/// The recyclers of `run`: one per volume source, as kube-controller-manager configures them.
#[derive(Clone, Debug)]
pub struct PodRecyclers {
    /// For NFS volumes.
    pub nfs: RecyclerConfig,
    /// For host-path volumes.
    pub host_path: RecyclerConfig,
}

impl Default for PodRecyclers {
    fn default() -> Self {
        PodRecyclers { nfs: RecyclerConfig::nfs(), host_path: RecyclerConfig::host_path() }
    }
}

impl PodRecyclers {
    /// Puts both recyclers in front of `registry`'s plugins, so that recycling goes through a pod
    /// even where an in-process plugin (host-path under a root) could recycle.
    pub fn register(&self, client: &Client, registry: &mut pv_core::PluginRegistry) {
        registry.register_first(std::sync::Arc::new(PodRecycler::new(
            client.clone(),
            Source::HostPath,
            self.host_path.clone(),
        )));
        registry.register_first(std::sync::Arc::new(PodRecycler::new(client.clone(), Source::Nfs, self.nfs.clone())));
    }
}

/// Upstream's default recycler pod: namespace `default`, one volume `vol` mounted at `/scrub`,
/// `restartPolicy: Never`, a 60 s deadline (replaced per volume).
pub fn default_template() -> Pod {
    Pod {
        metadata: ObjectMeta {
            generate_name: Some("pv-recycler-".into()),
            namespace: Some("default".into()),
            ..Default::default()
        },
        spec: Some(PodSpec {
            active_deadline_seconds: Some(60),
            restart_policy: Some("Never".into()),
            volumes: Some(vec![Volume { name: "vol".into(), ..Default::default() }]),
            containers: vec![Container {
                name: "pv-recycler".into(),
                image: Some(DEFAULT_IMAGE.into()),
                command: Some(vec!["/bin/sh".into()]),
                args: Some(vec!["-c".into(), DEFAULT_SCRUB.into()]),
                volume_mounts: Some(vec![VolumeMount {
                    name: "vol".into(),
                    mount_path: "/scrub".into(),
                    ..Default::default()
                }]),
                ..Default::default()
            }],
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// Why a pod template file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum TemplateError {
    /// The file could not be read.
    #[error("{path}: {source}")]
    Read {
        /// File.
        path: String,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
    /// The file is not a Pod.
    #[error("{path}: {message}")]
    Decode {
        /// File.
        path: String,
        /// What is wrong, with the field.
        message: String,
    },
}

/// Reads a recycler pod template (YAML or JSON, `kind: Pod`), as upstream's `LoadPodFromFile`
/// and `ValidateRecyclerPodTemplate`: it must declare at least one volume.
pub fn load_template(path: &Path) -> Result<Pod, TemplateError> {
    let shown = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| TemplateError::Read { path: shown.clone(), source })?;
    let decode = |message: String| TemplateError::Decode { path: shown.clone(), message };
    let value: serde_json::Value =
        serde_saphyr::from_str(&text).map_err(|e| decode(format!("not YAML or JSON: {e}")))?;
    match value.get("kind").and_then(|k| k.as_str()) {
        Some("Pod") => {}
        Some(other) => return Err(decode(format!("kind: must be Pod, not {other:?}"))),
        None => return Err(decode("kind: Required value (a Pod)".into())),
    }
    let de: Pod =
        serde_path_to_error::deserialize(value).map_err(|e| decode(format!("{}: {}", e.path(), e.inner())))?;
    if de.spec.as_ref().and_then(|s| s.volumes.as_ref()).is_none_or(|v| v.is_empty()) {
        return Err(decode(format!("pod specification ({shown}): does not contain any volume(s)")));
    }
    Ok(de)
}

/// `activeDeadlineSeconds` for recycling `volume`: `increment` seconds per whole GiB of capacity,
/// at least `minimum` (upstream's `CalculateTimeoutForVolume`).
pub fn timeout_for(volume: &PersistentVolume, minimum: i64, increment: i64) -> i64 {
    const GI: i128 = 1 << 30;
    let gib = helpers::volume_capacity(volume).value() / GI;
    let timeout = i64::try_from(gib.saturating_mul(i128::from(increment))).unwrap_or(i64::MAX);
    timeout.max(minimum)
}

/// The recycler pod for `volume`, from `config`: named `recycler-for-<pv name>`, the volume's
/// source in place of the template's first volume, the computed deadline.
pub fn recycler_pod(volume: &PersistentVolume, source: Source, config: &RecyclerConfig) -> Result<Pod, PluginError> {
    let spec = volume.spec.as_ref();
    // The pod's volume: only the volume's source, as upstream sets it.
    let mut scrubbed = Volume::default();
    match source {
        Source::Nfs => {
            let nfs = spec
                .and_then(|s| s.nfs.as_ref())
                .ok_or_else(|| PluginError::new("spec.PersistentVolumeSource.NFS is nil"))?;
            scrubbed.nfs =
                Some(NFSVolumeSource { server: nfs.server.clone(), path: nfs.path.clone(), read_only: None });
        }
        Source::HostPath => {
            let hp = spec
                .and_then(|s| s.host_path.as_ref())
                .ok_or_else(|| PluginError::new("spec.PersistentVolume.Spec.HostPath is nil"))?;
            scrubbed.host_path = Some(HostPathVolumeSource { path: hp.path.clone(), type_: None });
        }
    }
    let mut pod = config.template.clone();
    pod.metadata.name = Some(format!("recycler-for-{}", helpers::name(&volume.metadata)));
    pod.metadata.generate_name = None;
    pod.metadata.resource_version = None;
    pod.metadata.uid = None;
    if pod.metadata.namespace.as_deref().is_none_or(str::is_empty) {
        pod.metadata.namespace = Some("default".into());
    }
    pod.status = None;
    let pod_spec = pod.spec.get_or_insert_with(Default::default);
    pod_spec.active_deadline_seconds = Some(timeout_for(volume, config.minimum_timeout, config.timeout_increment));
    match pod_spec.volumes.as_mut().and_then(|v| v.first_mut()) {
        Some(first) => {
            scrubbed.name = std::mem::take(&mut first.name);
            *first = scrubbed;
        }
        None => return Err(PluginError::new("recycler pod template does not contain any volume(s)")),
    }
    Ok(pod)
}

/// A volume plugin that only recycles, by running a recycler pod.
pub struct PodRecycler {
    client: Client,
    source: Source,
    config: RecyclerConfig,
}

impl PodRecycler {
    /// Recycles volumes with `source` through `client`.
    pub fn new(client: Client, source: Source, config: RecyclerConfig) -> Self {
        PodRecycler { client, source, config }
    }
}

#[async_trait]
impl VolumePlugin for PodRecycler {
    fn name(&self) -> &str {
        self.source.plugin_name()
    }
    fn can_provision(&self) -> bool {
        false
    }
    fn supports_mount_options(&self) -> bool {
        false
    }
    fn can_support(&self, volume: &PersistentVolume) -> bool {
        let spec = volume.spec.as_ref();
        match self.source {
            Source::Nfs => spec.is_some_and(|s| s.nfs.is_some()),
            Source::HostPath => spec.is_some_and(|s| s.host_path.is_some()),
        }
    }
    fn can_delete(&self) -> bool {
        false
    }
    fn can_recycle(&self) -> bool {
        true
    }
    async fn provision(&self, _: &ProvisionOptions) -> Result<PersistentVolume, PluginError> {
        Err(PluginError::new(format!("{} does not provision", self.name())))
    }
    async fn delete(&self, _: &PersistentVolume) -> Result<(), PluginError> {
        Err(PluginError::new(format!("{} does not delete", self.name())))
    }
    async fn recycle(&self, volume: &PersistentVolume, events: &dyn RecyclerEvents) -> Result<(), PluginError> {
        let pod = recycler_pod(volume, self.source, &self.config)?;
        recycle_with_pod(&self.client, pod, events).await.map_err(PluginError::new)
    }
}

async fn bounded<T>(fut: impl std::future::Future<Output = kube::Result<T>>) -> Result<T, String> {
    match tokio::time::timeout(REQUEST_TIMEOUT, fut).await {
        Ok(r) => r.map_err(|e| e.to_string()),
        Err(_) => Err(format!("timed out after {REQUEST_TIMEOUT:?}")),
    }
}

fn already_exists(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.is_already_exists())
}

/// Creates `pod`, waits until it succeeds or fails, relays the events about it, and deletes it
/// (upstream's `RecycleVolumeByWatchingPodUntilCompletion`). The error texts are upstream's.
pub async fn recycle_with_pod(client: &Client, pod: Pod, events: &dyn RecyclerEvents) -> Result<(), String> {
    let name = pod.metadata.name.clone().unwrap_or_default();
    let namespace = pod.metadata.namespace.clone().unwrap_or_else(|| "default".into());
    let pods: Api<Pod> = Api::namespaced(client.clone(), &namespace);
    let event_api: Api<Event> = Api::namespaced(client.clone(), &namespace);
    tracing::debug!(pod = %name, "creating recycler pod");
    // Watch before creating, so that no change of the pod is missed.
    let mut watch = PodWatch::start(pods.clone(), event_api, &name).await?;
    match tokio::time::timeout(REQUEST_TIMEOUT, pods.create(&PostParams::default(), &pod)).await {
        Ok(Ok(_)) => {}
        Ok(Err(e)) if already_exists(&e) => {
            // A pod of an earlier attempt (or one planted to block recycling): remove it; a
            // later sync tries again.
            bounded(pods.delete(&name, &DeleteParams::default()))
                .await
                .map_err(|e| format!("failed to delete old recycler pod {namespace}/{name}: {e}"))?;
            return Err("old recycler pod found, will retry later".into());
        }
        Ok(Err(e)) => return Err(format!("unexpected error creating recycler pod:  {e}")),
        Err(_) => return Err(format!("unexpected error creating recycler pod:  timed out after {REQUEST_TIMEOUT:?}")),
    }
    let outcome = watch.wait(events).await;
    tracing::info!(pod = %pv_model::ObjectKey::new(&namespace, &name), "deleting recycler pod");
    let deleted = match tokio::time::timeout(REQUEST_TIMEOUT, pods.delete(&name, &DeleteParams::default())).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(kube::Error::Api(s))) if s.is_not_found() => Ok(()),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err(format!("timed out after {REQUEST_TIMEOUT:?}")),
    };
    if let Err(e) = &deleted {
        tracing::warn!(pod = %name, error = %e, "failed to delete recycler pod");
    }
    outcome.map_err(|e| format!("failed to recycle volume: {e}"))?;
    deleted.map_err(|e| format!("failed to delete recycler pod: {e}"))
}

type WatchStream<K> = Pin<Box<dyn Stream<Item = kube::Result<WatchEvent<K>>> + Send>>;

/// Watches of one pod and of the events about it, resumed when the server ends them.
struct PodWatch {
    name: String,
    pods: Api<Pod>,
    events: Api<Event>,
    pod_stream: WatchStream<Pod>,
    pod_version: String,
    event_stream: WatchStream<Event>,
    event_version: String,
}

impl PodWatch {
    async fn start(pods: Api<Pod>, events: Api<Event>, name: &str) -> Result<Self, String> {
        let pod_stream = watch_pods(&pods, name, "").await?;
        let event_stream = watch_events(&events, name, "").await?;
        Ok(PodWatch {
            name: name.into(),
            pods,
            events,
            pod_stream,
            pod_version: String::new(),
            event_stream,
            event_version: String::new(),
        })
    }

    /// Until the pod succeeds (Ok) or fails (its status message), relaying events as they come.
    async fn wait(&mut self, reporter: &dyn RecyclerEvents) -> Result<(), String> {
        let closed = || format!("recycler pod {:?} watch channel had been closed", self.name);
        loop {
            tokio::select! {
                biased;
                e = self.event_stream.next() => match e {
                    Some(Ok(WatchEvent::Added(ev))) => {
                        remember(&mut self.event_version, &ev.metadata);
                        let type_ = ev.type_.as_deref().unwrap_or("Normal");
                        reporter.report(type_, ev.message.as_deref().unwrap_or("")).await;
                    }
                    Some(Ok(WatchEvent::Modified(ev) | WatchEvent::Deleted(ev))) => {
                        remember(&mut self.event_version, &ev.metadata)
                    }
                    Some(Ok(WatchEvent::Bookmark(b))) => self.event_version = b.metadata.resource_version,
                    None => {
                        self.event_stream = watch_events(&self.events, &self.name, &self.event_version)
                            .await
                            .map_err(|_| closed())?;
                    }
                    Some(Ok(WatchEvent::Error(_)) | Err(_)) => {
                        // The version may be too old (410): start afresh, after a pause so that
                        // a failing watch does not spin. A replayed event is recorded once.
                        tokio::time::sleep(REWATCH_PAUSE).await;
                        self.event_version.clear();
                        self.event_stream =
                            watch_events(&self.events, &self.name, "").await.map_err(|_| closed())?;
                    }
                },
                p = self.pod_stream.next() => match p {
                    Some(Ok(WatchEvent::Added(pod) | WatchEvent::Modified(pod))) => {
                        remember(&mut self.pod_version, &pod.metadata);
                        let status = pod.status.unwrap_or_default();
                        tracing::debug!(pod = %self.name, phase = ?status.phase, "recycler pod update");
                        match status.phase.as_deref() {
                            Some("Succeeded") => return Ok(()),
                            Some("Failed") => {
                                return Err(status
                                    .message
                                    .filter(|m| !m.is_empty())
                                    .unwrap_or_else(|| "pod failed, pod.Status.Message unknown".into()))
                            }
                            _ => {}
                        }
                    }
                    Some(Ok(WatchEvent::Deleted(_))) => return Err("recycler pod was deleted".into()),
                    Some(Ok(WatchEvent::Bookmark(b))) => self.pod_version = b.metadata.resource_version,
                    Some(Ok(WatchEvent::Error(_))) => return Err("recycler pod watcher failed".into()),
                    None => {
                        self.pod_stream =
                            watch_pods(&self.pods, &self.name, &self.pod_version).await.map_err(|_| closed())?;
                    }
                    Some(Err(_)) => {
                        tokio::time::sleep(REWATCH_PAUSE).await;
                        self.pod_stream =
                            watch_pods(&self.pods, &self.name, &self.pod_version).await.map_err(|_| closed())?;
                    }
                },
            }
        }
    }
}

fn remember(version: &mut String, meta: &ObjectMeta) {
    if let Some(v) = meta.resource_version.as_ref().filter(|v| !v.is_empty()) {
        v.clone_into(version);
    }
}

async fn watch_pods(pods: &Api<Pod>, name: &str, version: &str) -> Result<WatchStream<Pod>, String> {
    let wp = WatchParams::default().fields(&format!("metadata.name={name}"));
    let s = bounded(pods.watch(&wp, version)).await.map_err(|e| format!("cannot watch recycler pod {name}: {e}"))?;
    Ok(s.boxed())
}

async fn watch_events(events: &Api<Event>, name: &str, version: &str) -> Result<WatchStream<Event>, String> {
    let wp = WatchParams::default().fields(&format!("involvedObject.name={name}"));
    let s = bounded(events.watch(&wp, version))
        .await
        .map_err(|e| format!("cannot watch events of recycler pod {name}: {e}"))?;
    Ok(s.boxed())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pv(capacity: &str, source: serde_json::Value) -> PersistentVolume {
        let mut spec = serde_json::json!({"capacity": {"storage": capacity}, "accessModes": ["ReadWriteOnce"]});
        spec.as_object_mut().unwrap().extend(source.as_object().unwrap().clone());
        serde_json::from_value(serde_json::json!({"metadata": {"name": "pv-1"}, "spec": spec})).unwrap()
    }

    #[test]
    fn timeout_is_the_increment_per_whole_gib_or_the_minimum() {
        let nfs = serde_json::json!({"nfs": {"server": "s", "path": "/p"}});
        // Upstream's defaults for NFS: 300 s minimum, 30 s per GiB.
        assert_eq!(timeout_for(&pv("1Gi", nfs.clone()), 300, 30), 300);
        assert_eq!(timeout_for(&pv("100Gi", nfs.clone()), 300, 30), 3000);
        // Whole GiB, rounded down: 10.5 GiB counts as 10.
        assert_eq!(timeout_for(&pv("10752Mi", nfs.clone()), 60, 30), 300);
        // Decimal units: 20G is 18.6 GiB, so 18.
        assert_eq!(timeout_for(&pv("20G", nfs.clone()), 60, 30), 540);
        assert_eq!(timeout_for(&pv("512Mi", nfs), 60, 30), 60);
    }

    #[test]
    fn the_pod_is_upstreams_template_with_the_volume_and_deadline_filled_in() {
        let v = pv("10Gi", serde_json::json!({"nfs": {"server": "nfs.example", "path": "/exports/a"}}));
        let pod = recycler_pod(&v, Source::Nfs, &RecyclerConfig::nfs()).unwrap();
        let got = serde_json::to_value(&pod).unwrap();
        assert_eq!(
            got,
            serde_json::json!({
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "recycler-for-pv-1", "namespace": "default"},
                "spec": {
                    "activeDeadlineSeconds": 300,
                    "restartPolicy": "Never",
                    "volumes": [{"name": "vol", "nfs": {"server": "nfs.example", "path": "/exports/a"}}],
                    "containers": [{
                        "name": "pv-recycler",
                        "image": DEFAULT_IMAGE,
                        "command": ["/bin/sh"],
                        "args": ["-c", DEFAULT_SCRUB],
                        "volumeMounts": [{"name": "vol", "mountPath": "/scrub"}]
                    }]
                }
            })
        );
        let hp = pv("3Gi", serde_json::json!({"hostPath": {"path": "/data/pv-1"}}));
        let pod = recycler_pod(&hp, Source::HostPath, &RecyclerConfig::host_path()).unwrap();
        let spec = pod.spec.unwrap();
        assert_eq!(spec.active_deadline_seconds, Some(90));
        let vol = &spec.volumes.unwrap()[0];
        assert_eq!(vol.host_path.as_ref().map(|h| h.path.as_str()), Some("/data/pv-1"));
        assert!(vol.nfs.is_none());
        assert!(recycler_pod(&hp, Source::Nfs, &RecyclerConfig::nfs()).is_err());
    }

    #[test]
    fn a_template_file_must_be_a_pod_with_a_volume() {
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, text: &str| {
            let p = dir.path().join(name);
            std::fs::write(&p, text).unwrap();
            p
        };
        let ok = write(
            "ok.yaml",
            "apiVersion: v1\nkind: Pod\nmetadata: {namespace: recyclers}\nspec:\n  volumes: [{name: scratch}]\n  \
             containers: [{name: c, image: busybox, volumeMounts: [{name: scratch, mountPath: /scrub}]}]\n",
        );
        let pod = load_template(&ok).unwrap();
        let v = pv("1Gi", serde_json::json!({"hostPath": {"path": "/d"}}));
        let config = RecyclerConfig { template: pod, minimum_timeout: 5, timeout_increment: 1 };
        let made = recycler_pod(&v, Source::HostPath, &config).unwrap();
        assert_eq!(made.metadata.namespace.as_deref(), Some("recyclers"));
        assert_eq!(made.spec.as_ref().unwrap().volumes.as_ref().unwrap()[0].name, "scratch");

        let no_volume = write("nov.yaml", "kind: Pod\nspec: {containers: [{name: c}]}\n");
        let e = load_template(&no_volume).unwrap_err().to_string();
        assert!(e.contains("does not contain any volume(s)") && e.contains("nov.yaml"), "{e}");
        let not_pod = write("svc.yaml", "kind: Service\n");
        assert!(load_template(&not_pod).unwrap_err().to_string().contains("kind: must be Pod"));
        let bad_field = write("bad.yaml", "kind: Pod\nspec: {activeDeadlineSeconds: soon, volumes: [{name: v}]}\n");
        let e = load_template(&bad_field).unwrap_err().to_string();
        assert!(e.contains("spec.activeDeadlineSeconds"), "{e}");
        assert!(load_template(&dir.path().join("missing.yaml")).is_err());
    }
}
