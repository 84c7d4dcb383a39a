//! The kubelet's part in recycling, for the real-cluster soak: `run` recycles a host-path volume
//! as upstream does, through a recycler pod (`recycler-for-<pv>`) that a kubelet would run, and
//! no kubelet runs here. This stand-in does what upstream's default recycler pod does
//! (`rm -rf /scrub/..?* /scrub/.[!.]* /scrub/*`): it empties the pod's host-path volume, then
//! reports the pod Succeeded through the status subresource.
//!
//! It only touches directories directly under the soak's host-path root; a recycler pod for any
//! other path is failed with a message instead, so a wrong pod is a visible failure of the
//! volume, never a deletion elsewhere on the machine.

use k8s_openapi::api::core::v1::{Pod, PodStatus};
use kube::api::{ListParams, PostParams};
use kube::{Api, Client};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The prefix of upstream's recycler pod names.
const RECYCLER_PREFIX: &str = "recycler-for-";

/// What the stand-in did.
#[derive(Default)]
pub struct KubeletStats {
    /// Recycler pods run to success.
    pub recycled: AtomicU64,
    /// Recycler pods failed (a path outside the root, a directory that could not be emptied).
    pub failed: AtomicU64,
}

/// Empties `dir` (a direct child of `root`), keeping the directory itself.
fn scrub(root: &Path, dir: &Path) -> Result<(), String> {
    if dir.parent() != Some(root) {
        return Err(format!("{} is not a volume directory under {}", dir.display(), root.display()));
    }
    let meta = std::fs::symlink_metadata(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    if !meta.is_dir() {
        return Err(format!("{} is not a directory", dir.display()));
    }
    for entry in std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))? {
        let path = entry.map_err(|e| e.to_string())?.path();
        // symlink_metadata: a link is removed, never followed.
        let removed = match std::fs::symlink_metadata(&path) {
            Ok(m) if m.is_dir() => std::fs::remove_dir_all(&path),
            Ok(_) => std::fs::remove_file(&path),
            Err(e) => Err(e),
        };
        removed.map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(())
}

/// The host-path directory a recycler pod scrubs.
fn scrubbed_path(pod: &Pod) -> Option<PathBuf> {
    pod.spec.as_ref()?.volumes.as_ref()?.iter().find_map(|v| v.host_path.as_ref().map(|h| PathBuf::from(&h.path)))
}

/// Plays the kubelet for recycler pods in `namespace` until the task is dropped.
pub async fn run(client: Client, namespace: &str, root: PathBuf, stats: Arc<KubeletStats>) {
    let pods: Api<Pod> = Api::namespaced(client, namespace);
    loop {
        if let Ok(list) = pods.list(&ListParams::default()).await {
            for pod in list.items {
                let name = pod.metadata.name.clone().unwrap_or_default();
                let done =
                    matches!(pod.status.as_ref().and_then(|s| s.phase.as_deref()), Some("Succeeded") | Some("Failed"));
                if !name.starts_with(RECYCLER_PREFIX) || done || pod.metadata.deletion_timestamp.is_some() {
                    continue;
                }
                let result = match scrubbed_path(&pod) {
                    Some(dir) => scrub(&root, &dir),
                    None => Err("the recycler pod has no hostPath volume".into()),
                };
                let (phase, message) = match &result {
                    Ok(()) => ("Succeeded", String::new()),
                    Err(e) => {
                        // Said where the run's output shows it: a failed recycle fails its volume.
                        println!("  recycler pod {name} failed: {e}");
                        ("Failed", format!("recycle failed: {e}"))
                    }
                };
                let mut finished = pod.clone();
                finished.status =
                    Some(PodStatus { phase: Some(phase.into()), message: Some(message), ..Default::default() });
                // A conflict or a broken connection: the next round tries again.
                if pods.replace_status(&name, &PostParams::default(), &finished).await.is_ok() {
                    let counter = if result.is_ok() { &stats.recycled } else { &stats.failed };
                    counter.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scrub_empties_a_volume_directory_and_refuses_anything_else() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("volumes");
        let vol = root.join("pv-1");
        std::fs::create_dir_all(vol.join("sub")).unwrap();
        std::fs::write(vol.join(".hidden"), "x").unwrap();
        std::fs::write(vol.join("sub/file"), "x").unwrap();
        let outside = tmp.path().join("outside");
        std::fs::create_dir(&outside).unwrap();
        std::fs::write(outside.join("keep"), "x").unwrap();
        std::os::unix::fs::symlink(&outside, vol.join("link")).unwrap();

        scrub(&root, &vol).unwrap();
        assert_eq!(std::fs::read_dir(&vol).unwrap().count(), 0, "the volume is empty");
        assert!(outside.join("keep").exists(), "a link is removed, not followed");
        assert!(scrub(&root, &outside).is_err(), "a directory outside the root is refused");
        assert!(scrub(&root, &root.join("pv-1/sub")).is_err(), "only direct children of the root");
    }
}
