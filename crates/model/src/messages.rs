//! Upstream's event and status message texts, word for word, in one place (their reasons are in
//! [`crate::reasons`]): what matches kube-controller-manager's events (alerts, log pipelines,
//! runbooks) matches this controller's. The texts this controller adds (detailed events, rebinds)
//! are at the end.

/// A claim with no class finds no volume (FailedBinding).
pub const NO_CLASS: &str = "no persistent volumes available for this claim and no storage class is set";

/// A claim of a WaitForFirstConsumer class with no pod yet (WaitForFirstConsumer).
pub const WAITING_FOR_FIRST_CONSUMER: &str = "waiting for first consumer to be created before binding";

/// A claim of a WaitForFirstConsumer class whose pods are not scheduled (WaitForPodScheduled).
pub fn waiting_for_pods(pods: &[String]) -> String {
    match pods {
        [pod] => format!("waiting for pod {pod} to be scheduled"),
        _ => format!("waiting for pods {} to be scheduled", pods.join(",")),
    }
}

/// A claim pre-bound to a volume that does not fit it (VolumeMismatch).
pub fn cannot_bind_to_requested(volume: &str, why: &str) -> String {
    format!("Cannot bind to requested volume {volume:?}: {why}")
}

/// A claim pre-bound to a volume another claim holds (FailedBinding).
pub fn already_bound_elsewhere(volume: &str) -> String {
    format!("volume {volume:?} already bound to a different claim.")
}

/// On the volume, when its pre-bound claim's volume mode differs (VolumeMismatch).
pub fn volume_mode_mismatch_on_volume(claim: &str) -> String {
    format!("Cannot bind PersistentVolume to requested PersistentVolumeClaim {claim:?} due to incompatible volumeMode.")
}

/// On the claim, when its pre-bound volume's volume mode differs (VolumeMismatch).
pub fn volume_mode_mismatch_on_claim(volume: &str) -> String {
    format!(
        "Cannot bind PersistentVolume {volume:?} to requested PersistentVolumeClaim due to incompatible volumeMode."
    )
}

/// A bound claim whose volume lost its reference to it (ClaimLost).
pub const LOST_REFERENCE: &str = "Bound claim has lost reference to PersistentVolume. Data on the volume is lost!";
/// A bound claim whose volume is gone (ClaimLost).
pub const LOST_VOLUME: &str = "Bound claim has lost its PersistentVolume. Data on the volume is lost!";
/// A bound claim whose volume is bound to another claim (ClaimMisbound).
pub const MISBOUND: &str = "Two claims are bound to the same volume, this one is bound incorrectly";
/// The Failed volume's message (and its VolumeUnknownReclaimPolicy event's) when its reclaim
/// policy is none of Retain, Recycle and Delete.
pub const UNKNOWN_RECLAIM_POLICY: &str = "Volume has unrecognized PersistentVolumeReclaimPolicy";

/// A claim of a class that does not exist (ProvisioningFailed).
pub fn class_not_found(class: &str) -> String {
    format!("storageclass.storage.k8s.io {class:?} not found")
}

/// A claim handed to an external provisioner (ExternalProvisioning).
pub fn external_provisioning(provisioner: &str) -> String {
    format!(
        "Waiting for a volume to be created either by the external provisioner '{provisioner}' or manually by the system administrator. If volume creation is delayed, please verify that the provisioner is running and correctly registered."
    )
}

/// The claim's provisioner annotation could not be saved (ProvisioningFailed).
pub fn error_saving_claim(error: &str) -> String {
    format!("Error saving claim: {error}")
}

/// A claim asking for a data source of a plugin that is not CSI (ProvisioningFailed).
pub fn data_source_not_csi(plugin: &str) -> String {
    format!("plugin {plugin:?} is not a CSI plugin. Only CSI plugin can provision a claim with a datasource")
}

/// A class with mount options its plugin does not support (ProvisioningFailed).
pub fn mount_options_not_supported(class: &str, options: &[String]) -> String {
    format!(
        "Mount options are not supported by the provisioner but StorageClass {class:?} has mount options [{}]",
        options.join(" ")
    )
}

/// The node a WaitForFirstConsumer claim selected is not known (ProvisioningFailed).
pub fn node_not_found(node: &str) -> String {
    format!("Failed to get target node: node {node:?} not found")
}

/// The plugin failed to provision (ProvisioningFailed).
pub fn failed_to_provision(class: &str, error: &str) -> String {
    format!("Failed to provision volume with StorageClass {class:?}: {error}")
}

/// The provisioned volume's PV could not be saved (ProvisioningFailed).
pub fn error_creating_pv(claim: &str, error: &str) -> String {
    format!("Error creating provisioned PV object for claim {claim}: {error}. Deleting the volume.")
}

/// The asset of a PV that could not be saved could not be deleted (ProvisioningCleanupFailed).
pub fn error_cleaning_volume(claim: &str, error: &str) -> String {
    format!("Error cleaning provisioned volume for claim {claim}: {error}. Please delete manually.")
}

/// A volume provisioned (ProvisioningSucceeded).
pub fn provisioned(volume: &str, plugin: &str) -> String {
    format!("Successfully provisioned volume {volume} using {plugin}")
}

/// What a recycler pod reports (RecyclerPod).
pub fn recycler_pod(report: &str) -> String {
    format!("Recycler pod: {report}")
}

/// A volume to recycle that pods still use (VolumeFailedRecycle).
pub fn used_by_pods(pods: &[String]) -> String {
    format!("Volume is used by pods: {}", pods.join(","))
}

/// A volume recycled (VolumeRecycled).
pub const RECYCLED: &str = "Volume recycled";

/// The recycler failed (VolumeFailedRecycle).
pub fn recycle_failed(error: &str) -> String {
    format!("Recycle failed: {error}")
}

/// No plugin deletes the volume (VolumeFailedDelete, and the volume's message).
pub fn no_deleter(volume: &str, error: &str) -> String {
    format!("error getting deleter volume plugin for volume {volume:?}: {error}")
}

// ---- this controller's own texts ---------------------------------------------------------------

/// What ends the wait for a first consumer, appended to upstream's message with detailed events.
/// Where no scheduler runs (`pv-controller up`), a user can do what the scheduler would.
pub const FIRST_CONSUMER_HINT: &str = "a scheduler ends the wait when it places a pod that uses the claim, by \
     setting annotation volume.kubernetes.io/selected-node=NODE on the claim (then a volume is provisioned \
     for that node) or by pre-binding a matching volume (claim spec.volumeName); with no scheduler, do \
     either by hand";

/// On a re-created claim a retained volume is bound to again (Rebound).
pub fn rebound_claim(volume: &str, earlier_uid: &str) -> String {
    format!(
        "Bound to volume {volume:?}, retained from an earlier claim of this name (uid {earlier_uid}); the volume asks for it with {}: {}",
        crate::annotations::REBIND,
        crate::annotations::REBIND_SAME_NAME
    )
}

/// On a retained volume bound again to a re-created claim (Rebound).
pub fn rebound_volume(claim: &str, uid: &str, earlier_uid: &str) -> String {
    format!(
        "Bound again to claim {claim} (uid {uid}), re-created after its earlier claim (uid {earlier_uid}) was deleted; asked for by {}: {}",
        crate::annotations::REBIND,
        crate::annotations::REBIND_SAME_NAME
    )
}
