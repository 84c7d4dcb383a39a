//! Every finalizer the controller, the protection controllers and the embedded API server put on
//! or take off objects, defined once.

/// The controller's, on in-tree provisioned volumes with policy Delete: lifted only after the
/// storage asset is deleted (HonorPVReclaimPolicy).
pub const PV_CONTROLLER: &str = "kubernetes.io/pv-controller";
/// External provisioners', on the volumes they provision; taken off when an in-tree plugin owns
/// the volume again.
pub const EXTERNAL_PROVISIONER: &str = "external-provisioner.volume.kubernetes.io/finalizer";
/// StorageObjectInUseProtection's, on volumes: keeps a volume while it is bound.
pub const PV_PROTECTION: &str = "kubernetes.io/pv-protection";
/// StorageObjectInUseProtection's, on claims: keeps a claim while a pod uses it.
pub const PVC_PROTECTION: &str = "kubernetes.io/pvc-protection";
/// The namespace lifecycle's, in a namespace's `spec.finalizers`.
pub const NAMESPACE: &str = "kubernetes";
