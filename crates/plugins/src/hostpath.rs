//! The host-path plugin: one directory per volume under a root.

use async_trait::async_trait;
use pv_core::{PluginError, ProvisionOptions, VolumePlugin};
use pv_model::annotations::{CREATED_BY, HOST_PATH_PLUGIN};
use pv_model::helpers;
use pv_model::k8s::{K8sQuantity, ObjectMeta, PersistentVolume, PersistentVolumeSpec};
use std::path::{Component, Path, PathBuf};

/// Provisions, deletes and recycles directories under `root`.
#[derive(Debug, Clone)]
pub struct HostPathPlugin {
    root: PathBuf,
}

impl HostPathPlugin {
    /// A plugin rooted at `root` (created if missing).
    pub fn new(root: PathBuf) -> Self {
        let _ = std::fs::create_dir_all(&root);
        let root = std::fs::canonicalize(&root).unwrap_or(root);
        HostPathPlugin { root }
    }

    /// The root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The volume's directory, if it lies strictly inside the root (no `..`, no symlink escape).
    fn checked_path(&self, volume: &PersistentVolume) -> Result<PathBuf, PluginError> {
        let path = volume
            .spec
            .as_ref()
            .and_then(|s| s.host_path.as_ref())
            .map(|h| PathBuf::from(&h.path))
            .ok_or_else(|| PluginError::new("volume has no hostPath source"))?;
        let outside = || {
            PluginError::new(format!(
                "host_path deleter only supports paths under {} but received provided {}",
                self.root.display(),
                path.display()
            ))
        };
        if !path.is_absolute() || path.components().any(|c| matches!(c, Component::ParentDir)) {
            return Err(outside());
        }
        // Resolve symlinks of whatever exists of the path.
        let resolved = match std::fs::canonicalize(&path) {
            Ok(p) => p,
            Err(_) => match path.parent().map(std::fs::canonicalize) {
                Some(Ok(parent)) => parent.join(path.file_name().unwrap_or_default()),
                _ => path.clone(),
            },
        };
        if resolved == self.root || !resolved.starts_with(&self.root) {
            return Err(outside());
        }
        Ok(resolved)
    }
}

#[async_trait]
impl VolumePlugin for HostPathPlugin {
    fn name(&self) -> &str {
        HOST_PATH_PLUGIN
    }
    fn can_provision(&self) -> bool {
        true
    }
    fn supports_mount_options(&self) -> bool {
        false
    }
    fn can_support(&self, volume: &PersistentVolume) -> bool {
        volume.spec.as_ref().is_some_and(|s| s.host_path.is_some())
    }
    fn can_delete(&self) -> bool {
        true
    }
    fn can_recycle(&self) -> bool {
        true
    }

    async fn provision(&self, o: &ProvisionOptions) -> Result<PersistentVolume, PluginError> {
        if o.pv_name.is_empty() || o.pv_name.contains('/') || o.pv_name.starts_with('.') {
            return Err(PluginError::new(format!("invalid volume name {:?}", o.pv_name)));
        }
        // As upstream's host-path provisioner: a directory is no block device.
        if helpers::claim_volume_mode(&o.claim) == "Block" {
            return Err(PluginError::new(format!("{} does not support block volume provisioning", self.name())));
        }
        let dir = self.root.join(&o.pv_name);
        std::fs::create_dir_all(&dir).map_err(|e| PluginError::new(format!("creating {}: {e}", dir.display())))?;
        let spec = o.claim.spec.clone().unwrap_or_default();
        let modes = spec.access_modes.clone().filter(|m| !m.is_empty()).unwrap_or_else(|| vec!["ReadWriteOnce".into()]);
        let request = helpers::claim_request(&o.claim);
        Ok(PersistentVolume {
            metadata: ObjectMeta {
                name: Some(o.pv_name.clone()),
                annotations: Some([(CREATED_BY.to_string(), "hostpath-dynamic-provisioner".to_string())].into()),
                ..Default::default()
            },
            spec: Some(PersistentVolumeSpec {
                persistent_volume_reclaim_policy: Some(o.reclaim_policy.clone()),
                access_modes: Some(modes),
                capacity: Some([("storage".to_string(), K8sQuantity(request.to_string()))].into()),
                host_path: Some(k8s_openapi::api::core::v1::HostPathVolumeSource {
                    path: dir.to_string_lossy().into_owned(),
                    type_: None,
                }),
                ..Default::default()
            }),
            status: None,
        })
    }

    async fn delete(&self, volume: &PersistentVolume) -> Result<(), PluginError> {
        let dir = self.checked_path(volume)?;
        match std::fs::remove_dir_all(&dir) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(PluginError::new(format!("removing {}: {e}", dir.display()))),
        }
    }

    async fn recycle(&self, volume: &PersistentVolume) -> Result<(), PluginError> {
        let dir = self.checked_path(volume).map_err(|e| PluginError::new(e.message.replace("deleter", "recycler")))?;
        let entries =
            std::fs::read_dir(&dir).map_err(|e| PluginError::new(format!("reading {}: {e}", dir.display())))?;
        for entry in entries {
            let entry = entry.map_err(|e| PluginError::new(e.to_string()))?;
            let p = entry.path();
            let r = if entry.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                std::fs::remove_dir_all(&p)
            } else {
                std::fs::remove_file(&p)
            };
            r.map_err(|e| PluginError::new(format!("removing {}: {e}", p.display())))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::HostPathVolumeSource;

    fn pv_at(path: &str) -> PersistentVolume {
        PersistentVolume {
            spec: Some(PersistentVolumeSpec {
                host_path: Some(HostPathVolumeSource { path: path.into(), type_: None }),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[tokio::test]
    async fn delete_removes_the_directory_and_refuses_paths_outside_the_root() {
        let root = tempfile::tempdir().unwrap();
        let p = HostPathPlugin::new(root.path().to_path_buf());
        let dir = p.root().join("pv1");
        std::fs::create_dir_all(dir.join("sub")).unwrap();
        p.delete(&pv_at(dir.to_str().unwrap())).await.unwrap();
        assert!(!dir.exists());
        let outside = tempfile::tempdir().unwrap();
        let err = p.delete(&pv_at(outside.path().to_str().unwrap())).await.unwrap_err();
        assert!(err.message.contains("only supports paths under"), "{err}");
        assert!(outside.path().exists());
        let traversal = format!("{}/../../etc", p.root().display());
        assert!(p.delete(&pv_at(&traversal)).await.is_err());
        assert!(p.delete(&pv_at(p.root().to_str().unwrap())).await.is_err(), "the root itself is not a volume");
    }

    #[tokio::test]
    async fn recycle_empties_the_directory_but_keeps_it() {
        let root = tempfile::tempdir().unwrap();
        let p = HostPathPlugin::new(root.path().to_path_buf());
        let dir = p.root().join("pv1");
        std::fs::create_dir_all(dir.join("a/b")).unwrap();
        std::fs::write(dir.join("f"), "data").unwrap();
        p.recycle(&pv_at(dir.to_str().unwrap())).await.unwrap();
        assert!(dir.exists());
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
    }

    #[tokio::test]
    async fn symlink_escaping_the_root_is_refused() {
        let root = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let p = HostPathPlugin::new(root.path().to_path_buf());
        let link = p.root().join("link");
        std::os::unix::fs::symlink(outside.path(), &link).unwrap();
        assert!(p.delete(&pv_at(link.to_str().unwrap())).await.is_err());
        assert!(outside.path().exists());
    }
}
