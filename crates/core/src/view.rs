//! What the plans read: the controller's caches, read-only. [`crate::Controller`] is one view;
//! the plans' unit tests build another from a handful of objects, with no API behind it.

use crate::plugin::VolumePlugin;
use pv_model::k8s::{PersistentVolume, PersistentVolumeClaim, StorageClass};
use std::sync::Arc;

/// The caches as the plans see them.
pub trait View {
    /// The cached volume with this name.
    fn volume(&self, name: &str) -> Option<Arc<PersistentVolume>>;
    /// The volume the binder would choose for `claim` now (upstream's `findBestMatchForClaim`,
    /// skipping volumes promised to another claim); `delay_binding` for a class that binds on
    /// first consumer.
    fn best_match(&self, claim: &PersistentVolumeClaim, delay_binding: bool) -> Option<Arc<PersistentVolume>>;
    /// The cached class with this name.
    fn class(&self, name: &str) -> Option<Arc<StorageClass>>;
    /// The name of the default class a claim without class is given, if any.
    fn default_class(&self) -> Option<String>;
    /// Pods that use `claim` and are not scheduled yet, by name.
    fn unscheduled_pods_using(&self, claim: &PersistentVolumeClaim) -> Vec<String>;
    /// The in-process plugin that provisions for this provisioner name.
    fn provisioning_plugin(&self, provisioner: &str) -> Result<Arc<dyn VolumePlugin>, String>;
    /// Whether dynamic provisioning is switched on.
    fn dynamic_provisioning(&self) -> bool;
}
