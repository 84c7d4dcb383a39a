//! Event reasons, each defined once, spelled exactly as upstream emits them.

/// A claim could not be bound (no class and no match, or its requested volume is taken).
pub const FAILED_BINDING: &str = "FailedBinding";
/// A requested volume does not satisfy the claim.
pub const VOLUME_MISMATCH: &str = "VolumeMismatch";
/// Recycling failed or is blocked.
pub const VOLUME_FAILED_RECYCLE: &str = "VolumeFailedRecycle";
/// Recycling succeeded.
pub const VOLUME_RECYCLED: &str = "VolumeRecycled";
/// Message relayed from a recycler.
pub const RECYCLER_POD: &str = "RecyclerPod";
/// Deletion is waiting (the volume is still in use by its backend).
pub const VOLUME_DELETE: &str = "VolumeDelete";
/// Deletion of the storage asset failed.
pub const VOLUME_FAILED_DELETE: &str = "VolumeFailedDelete";
/// The claim waits for an external provisioner.
pub const EXTERNAL_PROVISIONING: &str = "ExternalProvisioning";
/// Provisioning failed.
pub const PROVISIONING_FAILED: &str = "ProvisioningFailed";
/// A provisioned asset could not be cleaned up after its PV could not be saved.
pub const PROVISIONING_CLEANUP_FAILED: &str = "ProvisioningCleanupFailed";
/// Provisioning succeeded.
pub const PROVISIONING_SUCCEEDED: &str = "ProvisioningSucceeded";
/// A delayed-binding claim waits for a pod that uses it.
pub const WAIT_FOR_FIRST_CONSUMER: &str = "WaitForFirstConsumer";
/// A delayed-binding claim waits for its pod to be scheduled.
pub const WAIT_FOR_POD_SCHEDULED: &str = "WaitForPodScheduled";
/// A bound claim lost its volume.
pub const CLAIM_LOST: &str = "ClaimLost";
/// A bound claim's volume is bound to another claim.
pub const CLAIM_MISBOUND: &str = "ClaimMisbound";
/// A volume names a reclaim policy the controller does not know.
pub const VOLUME_UNKNOWN_RECLAIM_POLICY: &str = "VolumeUnknownReclaimPolicy";

/// Event type of normal events.
pub const NORMAL: &str = "Normal";
/// Event type of warnings.
pub const WARNING: &str = "Warning";
/// Another binder wrote fields only a binder writes (this project's, not upstream's).
pub const FOREIGN_BINDER_WRITE: &str = "ForeignBinderWrite";
/// A Retain volume bound again to a re-created claim of its earlier claim's name, on request of
/// its `pv-controller.io/rebind: same-name` annotation (this project's, not upstream's).
pub const REBOUND: &str = "Rebound";
