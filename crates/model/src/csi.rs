//! CSI migration: in-tree plugin names and the CSI drivers they migrated to.
//!
//! Migration is on for all of them in current Kubernetes, so volumes and claims of these
//! provisioners are left to the CSI driver's external provisioner, and the controller marks them
//! with `pv.kubernetes.io/migrated-to`.

/// `(in-tree plugin, CSI driver)` pairs.
pub const MIGRATED_PLUGINS: &[(&str, &str)] = &[
    ("kubernetes.io/aws-ebs", "ebs.csi.aws.com"),
    ("kubernetes.io/gce-pd", "pd.csi.storage.gke.io"),
    ("kubernetes.io/azure-disk", "disk.csi.azure.com"),
    ("kubernetes.io/azure-file", "file.csi.azure.com"),
    ("kubernetes.io/cinder", "cinder.csi.openstack.org"),
    ("kubernetes.io/vsphere-volume", "csi.vsphere.vmware.com"),
    ("kubernetes.io/portworx-volume", "pxd.portworx.com"),
];

/// The CSI driver an in-tree plugin migrated to, if it did.
pub fn migrated_driver(plugin: &str) -> Option<&'static str> {
    MIGRATED_PLUGINS.iter().find(|(p, _)| *p == plugin).map(|(_, d)| *d)
}

/// Updates the `migrated-to` annotation in `annotations` for an object provisioned by
/// `provisioner` (None when the object names no provisioner). Returns true when it changed.
pub fn update_migration_annotation(
    annotations: &mut std::collections::BTreeMap<String, String>,
    provisioner: Option<&str>,
) -> bool {
    let Some(p) = provisioner else { return false };
    let current = annotations.get(crate::annotations::MIGRATED_TO).cloned();
    match migrated_driver(p) {
        Some(driver) if current.as_deref() != Some(driver) => {
            annotations.insert(crate::annotations::MIGRATED_TO.into(), driver.into());
            true
        }
        Some(_) => false,
        None if current.is_some() => {
            annotations.remove(crate::annotations::MIGRATED_TO);
            true
        }
        None => false,
    }
}

/// Updates the `migrated-to` annotation of a volume's (`claim` false: by `provisioned-by`) or a
/// claim's (by `storage-provisioner`, else its beta name) annotations, as upstream's
/// `updateMigrationAnnotations`. Returns true when it changed.
pub fn anneal_migration_annotations(annotations: &mut std::collections::BTreeMap<String, String>, claim: bool) -> bool {
    use crate::annotations as ann;
    let provisioner = if claim {
        annotations.get(ann::STORAGE_PROVISIONER).or_else(|| annotations.get(ann::BETA_STORAGE_PROVISIONER))
    } else {
        annotations.get(ann::PROVISIONED_BY)
    };
    let provisioner = provisioner.cloned();
    update_migration_annotation(annotations, provisioner.as_deref())
}

/// Adds or removes the controller's deletion-protection finalizer on a provisioned volume as its
/// reclaim policy says (upstream's `modifyDeletionFinalizers`): removed for a migrated plugin;
/// for an in-tree one, added under Delete, removed under Retain and Recycle, and an external
/// provisioner's taken off. Returns true when the finalizers changed.
pub fn modify_deletion_finalizers(volume: &mut crate::k8s::PersistentVolume) -> bool {
    let Some(provisioner) =
        crate::helpers::annotation(&volume.metadata, crate::annotations::PROVISIONED_BY).map(str::to_string)
    else {
        return false;
    };
    let mut fins = volume.metadata.finalizers.clone().unwrap_or_default();
    let before = fins.clone();
    if migrated_driver(&provisioner).is_some() {
        fins.retain(|f| f != crate::finalizers::PV_CONTROLLER);
    } else if provisioner.starts_with(crate::annotations::IN_TREE_PREFIX) {
        let has = fins.iter().any(|f| f == crate::finalizers::PV_CONTROLLER);
        match crate::phase::ReclaimPolicy::of(volume) {
            // A volume being deleted never gains a finalizer (the API server refuses it anyway).
            Some(crate::phase::ReclaimPolicy::Delete) if !has && volume.metadata.deletion_timestamp.is_none() => {
                fins.push(crate::finalizers::PV_CONTROLLER.to_string());
            }
            Some(crate::phase::ReclaimPolicy::Retain | crate::phase::ReclaimPolicy::Recycle) if has => {
                fins.retain(|f| f != crate::finalizers::PV_CONTROLLER);
            }
            Some(
                crate::phase::ReclaimPolicy::Delete
                | crate::phase::ReclaimPolicy::Retain
                | crate::phase::ReclaimPolicy::Recycle,
            )
            | None => {}
        }
        fins.retain(|f| f != crate::finalizers::EXTERNAL_PROVISIONER);
    } else {
        return false;
    }
    if fins == before {
        return false;
    }
    volume.metadata.finalizers = if fins.is_empty() { None } else { Some(fins) };
    true
}
