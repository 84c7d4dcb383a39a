//! Annotation keys, finalizers and well-known values, each defined once.
//!
//! The keys are upstream's: users, other controllers (external provisioners, the scheduler) and
//! tools read them, so they are part of the observable behaviour.

/// On a PVC: the lifecycle has passed the initial binding. Changes how later syncs read the claim.
pub const BIND_COMPLETED: &str = "pv.kubernetes.io/bind-completed";
/// On a PV or PVC: the binding was made by the controller, not pre-bound by a user.
pub const BOUND_BY_CONTROLLER: &str = "pv.kubernetes.io/bound-by-controller";
/// On a PV: the plugin (or external provisioner) that provisioned it.
pub const PROVISIONED_BY: &str = "pv.kubernetes.io/provisioned-by";
/// On a PV or PVC: the CSI driver an in-tree volume was migrated to.
pub const MIGRATED_TO: &str = "pv.kubernetes.io/migrated-to";
/// On a PVC: the provisioner that should provision it.
pub const STORAGE_PROVISIONER: &str = "volume.kubernetes.io/storage-provisioner";
/// Deprecated beta form of [`STORAGE_PROVISIONER`], still written for compatibility.
pub const BETA_STORAGE_PROVISIONER: &str = "volume.beta.kubernetes.io/storage-provisioner";
/// On a PVC: the node the scheduler selected (delayed binding asks for provisioning with it).
pub const SELECTED_NODE: &str = "volume.kubernetes.io/selected-node";
/// Deprecated beta storage-class annotation; wins over `spec.storageClassName` when present.
pub const BETA_STORAGE_CLASS: &str = "volume.beta.kubernetes.io/storage-class";
/// On a StorageClass: it is the cluster default.
pub const IS_DEFAULT_CLASS: &str = "storageclass.kubernetes.io/is-default-class";
/// Beta form of [`IS_DEFAULT_CLASS`].
pub const BETA_IS_DEFAULT_CLASS: &str = "storageclass.beta.kubernetes.io/is-default-class";
/// On a PV: the capacity before an expansion started (claims bind with this capacity).
pub const PRE_RESIZE_CAPACITY: &str = "volume.alpha.kubernetes.io/pre-resize-capacity";
/// On a PV created by the host-path provisioner.
pub const CREATED_BY: &str = "kubernetes.io/createdby";

/// Prefix of in-tree plugin names: a provisioner is external only when its name lacks it.
pub const IN_TREE_PREFIX: &str = "kubernetes.io/";
/// Name of the in-tree host-path plugin.
pub const HOST_PATH_PLUGIN: &str = "kubernetes.io/host-path";
/// Event source component, as upstream's controller reports it.
pub const EVENT_COMPONENT: &str = "persistentvolume-controller";
/// Opt-in of a Retain volume to be bound again to a re-created claim of the same namespace and
/// name (this project's, not upstream's): value [`REBIND_SAME_NAME`].
pub const REBIND: &str = "pv-controller.io/rebind";
/// The one value of [`REBIND`].
pub const REBIND_SAME_NAME: &str = "same-name";
