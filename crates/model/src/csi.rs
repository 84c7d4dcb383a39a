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
