//! `pv-controller run` recycling released volumes with recycler pods, as kube-controller-manager
//! does, against the embedded API server. No kubelet runs here, so the test plays one: it finds
//! the recycler pod, reports an event about it, and marks it Succeeded or Failed.

use k8s_openapi::api::core::v1::{Event, ObjectReference, PersistentVolume, Pod, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{ListParams, PostParams};
use kube::{Api, Client};
use pv_apiserver::{Server, ServerConfig, ServerHandle};
use std::future::Future;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::util::BIN;
const WAIT: Duration = Duration::from_secs(30);

async fn start_server(dir: &Path) -> (ServerHandle, Client) {
    let server = Server::start(ServerConfig::new(dir.join("api"), "127.0.0.1:0".parse().unwrap()))
        .await
        .expect("API server starts");
    let opts = pv_kube::connect::ClientOptions {
        kubeconfig: Some(server.kubeconfig_path().to_path_buf()),
        ..Default::default()
    };
    let config = pv_kube::connect::load_config(&opts).await.expect("config");
    (server, pv_kube::connect::client(config, &opts).expect("client"))
}

/// `pv-controller run` as a child process, killed on drop; its log in a file.
struct Controller {
    child: Child,
    log: PathBuf,
}

impl Controller {
    fn start(dir: &Path, kubeconfig: &Path, extra: &[&str]) -> Controller {
        let log = dir.join("run.log");
        let child = Command::new(BIN)
            .args(["run", "--metrics-addr", "127.0.0.1:0", "--resync-period", "2s", "--workers", "2", "--kubeconfig"])
            .arg(kubeconfig)
            .args(extra)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("log file"))
            .spawn()
            .expect("pv-controller starts");
        Controller { child, log }
    }

    fn logs(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Controller {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn eventually<T, F, Fut>(timeout: Duration, mut check: F) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let start = Instant::now();
    while start.elapsed() < timeout {
        if let Some(v) = check().await {
            return Some(v);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    None
}

/// A volume released by a claim that no longer exists, with reclaim policy Recycle.
fn released_volume(name: &str, capacity: &str, source: serde_json::Value) -> PersistentVolume {
    let mut spec = serde_json::json!({
        "capacity": {"storage": capacity},
        "accessModes": ["ReadWriteOnce"],
        "persistentVolumeReclaimPolicy": "Recycle",
        "claimRef": {"kind": "PersistentVolumeClaim", "namespace": "default", "name": "gone", "uid": "uid-of-gone"}
    });
    spec.as_object_mut().unwrap().extend(source.as_object().unwrap().clone());
    serde_json::from_value(serde_json::json!({"metadata": {"name": name}, "spec": spec})).unwrap()
}

/// The events about `kind/name`, as (type, reason, message).
async fn events_about(c: &Client, name: &str) -> Vec<(String, String, String)> {
    let lp = ListParams::default().fields(&format!("involvedObject.name={name}"));
    let list = Api::<Event>::namespaced(c.clone(), "default").list(&lp).await.map(|l| l.items).unwrap_or_default();
    list.into_iter()
        .map(|e| (e.type_.unwrap_or_default(), e.reason.unwrap_or_default(), e.message.unwrap_or_default()))
        .collect()
}

async fn phase(c: &Client, volume: &str) -> Option<String> {
    Api::<PersistentVolume>::all(c.clone()).get(volume).await.ok()?.status?.phase
}

/// Plays the kubelet for one recycler pod: waits for it, reports `event` about it, waits until
/// the controller has relayed that to the volume, then ends the pod in `phase` with `message`.
/// Returns the pod as the controller created it.
async fn fake_kubelet(c: &Client, volume: &str, event: &str, phase: &str, message: &str) -> Pod {
    let pods = Api::<Pod>::namespaced(c.clone(), "default");
    let name = format!("recycler-for-{volume}");
    let pod = eventually(WAIT, || async { pods.get(&name).await.ok() }).await.expect("the recycler pod is created");
    let report = Event {
        metadata: ObjectMeta { name: Some(format!("{name}.started")), ..Default::default() },
        involved_object: ObjectReference {
            kind: Some("Pod".into()),
            namespace: Some("default".into()),
            name: Some(name.clone()),
            uid: pod.metadata.uid.clone(),
            ..Default::default()
        },
        reason: Some("Started".into()),
        message: Some(event.into()),
        type_: Some("Normal".into()),
        ..Default::default()
    };
    Api::<Event>::namespaced(c.clone(), "default").create(&PostParams::default(), &report).await.expect("event");
    let relayed = format!("Recycler pod: {event}");
    let seen = eventually(WAIT, || async {
        events_about(c, volume)
            .await
            .iter()
            .any(|(t, r, m)| t == "Normal" && r == "RecyclerPod" && *m == relayed)
            .then_some(())
    })
    .await;
    assert!(seen.is_some(), "the pod's event is relayed to the volume: {:?}", events_about(c, volume).await);
    let mut finished = pods.get(&name).await.expect("pod");
    finished.status =
        Some(PodStatus { phase: Some(phase.into()), message: Some(message.into()), ..Default::default() });
    pods.replace_status(&name, &PostParams::default(), &finished).await.expect("status");
    pod
}

/// Whether the recycler pod with `uid` is deleted. (After a failure the controller tries again
/// at its next sync, as upstream does, so a new pod of the same name may follow.)
async fn pod_gone(c: &Client, volume: &str, uid: Option<&str>) -> bool {
    let pods = Api::<Pod>::namespaced(c.clone(), "default");
    let name = format!("recycler-for-{volume}");
    eventually(WAIT, || async {
        match pods.get_opt(&name).await {
            Ok(None) => Some(()),
            Ok(Some(p)) if p.metadata.uid.as_deref() != uid => Some(()),
            _ => None,
        }
    })
    .await
    .is_some()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_nfs_volume_is_recycled_by_a_pod_that_succeeds() {
    let dir = tempfile::tempdir().unwrap();
    let (server, c) = start_server(dir.path()).await;
    let nfs = serde_json::json!({"nfs": {"server": "nfs.example", "path": "/exports/a"}});
    let pv = released_volume("nfs-1", "20Gi", nfs);
    Api::<PersistentVolume>::all(c.clone()).create(&PostParams::default(), &pv).await.expect("create PV");
    let run = Controller::start(dir.path(), server.kubeconfig_path(), &[]);

    let pod = fake_kubelet(&c, "nfs-1", "Started container pv-recycler", "Succeeded", "").await;
    let spec = pod.spec.expect("spec");
    // Upstream's template and timeouts: 300 s at least, 30 s per GiB, so 600 s for 20 GiB.
    assert_eq!(spec.active_deadline_seconds, Some(600));
    assert_eq!(spec.restart_policy.as_deref(), Some("Never"));
    let vol = &spec.volumes.expect("volumes")[0];
    let nfs = vol.nfs.as_ref().expect("the volume's NFS source");
    assert_eq!((vol.name.as_str(), nfs.server.as_str(), nfs.path.as_str()), ("vol", "nfs.example", "/exports/a"));
    assert_eq!(spec.containers[0].image.as_deref(), Some(pv_kube::recycler::DEFAULT_IMAGE));

    let available =
        eventually(WAIT, || async { (phase(&c, "nfs-1").await.as_deref() == Some("Available")).then_some(()) });
    assert!(available.await.is_some(), "volume Available; log:\n{}", run.logs());
    let events = events_about(&c, "nfs-1").await;
    assert!(events.contains(&("Normal".into(), "VolumeRecycled".into(), "Volume recycled".into())), "{events:?}");
    assert!(pod_gone(&c, "nfs-1", pod.metadata.uid.as_deref()).await, "the recycler pod is deleted");
    drop(run);
    server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_recycler_pod_fails_the_volume_with_the_pods_message() {
    let dir = tempfile::tempdir().unwrap();
    let (server, c) = start_server(dir.path()).await;
    // A host-path volume under --hostpath-root: recycled by a pod all the same, as upstream.
    let root = dir.path().join("volumes");
    let hp = serde_json::json!({"hostPath": {"path": root.join("hp-1").to_str().unwrap()}});
    let pv = released_volume("hp-1", "3Gi", hp);
    Api::<PersistentVolume>::all(c.clone()).create(&PostParams::default(), &pv).await.expect("create PV");
    let template = dir.path().join("recycler.yaml");
    std::fs::write(
        &template,
        "apiVersion: v1\nkind: Pod\nmetadata: {namespace: default}\nspec:\n  restartPolicy: Never\n  \
         volumes: [{name: target}]\n  containers: [{name: wipe, image: busybox, command: [rm, -rf, /target/x], \
         volumeMounts: [{name: target, mountPath: /target}]}]\n",
    )
    .unwrap();
    let run = Controller::start(
        dir.path(),
        server.kubeconfig_path(),
        &[
            "--hostpath-root",
            root.to_str().unwrap(),
            "--pv-recycler-pod-template-filepath-hostpath",
            template.to_str().unwrap(),
            "--pv-recycler-minimum-timeout-hostpath",
            "20",
            "--pv-recycler-timeout-increment-hostpath",
            "10",
        ],
    );

    let deadline = "Pod was active on the node longer than the specified deadline";
    let pod = fake_kubelet(&c, "hp-1", "Pulling image busybox", "Failed", deadline).await;
    let spec = pod.spec.expect("spec");
    assert_eq!(spec.active_deadline_seconds, Some(30), "10 s per GiB for 3 GiB, above the 20 s minimum");
    let vol = &spec.volumes.expect("volumes")[0];
    assert_eq!(vol.name, "target", "the template's volume, its source replaced");
    assert_eq!(vol.host_path.as_ref().map(|h| h.path.clone()), Some(root.join("hp-1").to_str().unwrap().to_string()));
    assert_eq!(spec.containers[0].name, "wipe");

    let failed = eventually(WAIT, || async { (phase(&c, "hp-1").await.as_deref() == Some("Failed")).then_some(()) });
    assert!(failed.await.is_some(), "volume Failed; log:\n{}", run.logs());
    let want = format!("Recycle failed: failed to recycle volume: {deadline}");
    let events = events_about(&c, "hp-1").await;
    assert!(events.contains(&("Warning".into(), "VolumeFailedRecycle".into(), want)), "{events:?}");
    let gone = pod_gone(&c, "hp-1", pod.metadata.uid.as_deref()).await;
    assert!(gone, "the recycler pod is deleted after a failure too; log:\n{}", run.logs());
    drop(run);
    server.shutdown().await.unwrap();
}

#[test]
fn a_bad_recycler_template_stops_run_at_start_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let template = dir.path().join("bad.yaml");
    std::fs::write(&template, "kind: Pod\nspec: {containers: [{name: c, image: x}]}\n").unwrap();
    let out = Command::new(BIN)
        .args(["run", "--kubeconfig", "/nonexistent", "--pv-recycler-pod-template-filepath-nfs"])
        .arg(&template)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("--pv-recycler-pod-template-filepath-nfs")
            && stderr.contains("bad.yaml")
            && stderr.contains("does not contain any volume(s)"),
        "{stderr}"
    );
}
