//! Volume plugins: what provisions, deletes and recycles storage assets.
//!
//! The controller finds plugins by name (a class's provisioner, a PV's `provisioned-by`) or by the
//! PV's volume source, with upstream's error messages when none matches.

use async_trait::async_trait;
use pv_model::k8s::{Node, PersistentVolume, PersistentVolumeClaim, StorageClass};
use std::collections::BTreeMap;
use std::sync::Arc;

/// A plugin failure.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct PluginError {
    /// What failed.
    pub message: String,
    /// The asset is still in use by its backend: deletion should wait, not fail.
    pub in_use: bool,
}

impl PluginError {
    /// A plain failure.
    pub fn new(message: impl Into<String>) -> Self {
        PluginError { message: message.into(), in_use: false }
    }
}

/// What a provisioner gets.
#[derive(Clone, Debug)]
pub struct ProvisionOptions {
    /// Name the PV will have (`pvc-<claim uid>`).
    pub pv_name: String,
    /// The claim.
    pub claim: Arc<PersistentVolumeClaim>,
    /// Its class.
    pub class: Arc<StorageClass>,
    /// Reclaim policy from the class.
    pub reclaim_policy: String,
    /// Mount options from the class.
    pub mount_options: Vec<String>,
    /// Class parameters.
    pub parameters: BTreeMap<String, String>,
    /// The node the scheduler selected, for delayed binding.
    pub selected_node: Option<Node>,
}

/// A volume plugin.
#[async_trait]
pub trait VolumePlugin: Send + Sync {
    /// Plugin name (`kubernetes.io/host-path`).
    fn name(&self) -> &str;
    /// True when it can provision.
    fn can_provision(&self) -> bool;
    /// True when provisioned volumes accept mount options.
    fn supports_mount_options(&self) -> bool;
    /// True when it handles this PV's volume source.
    fn can_support(&self, volume: &PersistentVolume) -> bool;
    /// True when it can delete assets it supports.
    fn can_delete(&self) -> bool;
    /// True when it can recycle assets it supports.
    fn can_recycle(&self) -> bool;
    /// Creates an asset and returns the PV describing it (name, spec; no claimRef yet).
    async fn provision(&self, options: &ProvisionOptions) -> Result<PersistentVolume, PluginError>;
    /// Deletes the asset behind a PV.
    async fn delete(&self, volume: &PersistentVolume) -> Result<(), PluginError>;
    /// Empties the asset behind a PV. What the recycler reports on the way (a recycler pod's
    /// events) goes to `events`, which the controller records on the volume.
    async fn recycle(&self, volume: &PersistentVolume, events: &dyn RecyclerEvents) -> Result<(), PluginError>;
    /// Names of the assets this plugin keeps locally that look provisioned by it (host-path:
    /// the `pvc-<uid>` directories under its root), for the sweep of assets an interrupted
    /// provisioning left behind. A plugin whose assets live elsewhere lists none.
    async fn provisioned_assets(&self) -> Result<Vec<String>, PluginError> {
        Ok(Vec::new())
    }
    /// The asset name (as [`VolumePlugin::provisioned_assets`] lists it) behind `volume`, if
    /// this plugin keeps it.
    fn asset_of(&self, _volume: &PersistentVolume) -> Option<String> {
        None
    }
    /// Removes a listed asset that nothing refers to, but only while it holds nothing (a
    /// provisioning interrupted before its volume was created leaves it empty); `Ok(false)`
    /// when it was kept.
    async fn remove_unused_asset(&self, _name: &str) -> Result<bool, PluginError> {
        Ok(false)
    }
}

/// Where a recycler reports progress: the controller records each report as a `RecyclerPod`
/// event on the volume (`Recycler pod: <message>`), as upstream relays its recycler pod's events.
#[async_trait]
pub trait RecyclerEvents: Send + Sync {
    /// One report: `event_type` is `Normal` or `Warning`.
    async fn report(&self, event_type: &str, message: &str);
}

/// Discards reports (recyclers that have nothing to report, tests).
pub struct NoRecyclerEvents;

#[async_trait]
impl RecyclerEvents for NoRecyclerEvents {
    async fn report(&self, _event_type: &str, _message: &str) {}
}

/// The plugins the controller knows.
#[derive(Clone, Default)]
pub struct PluginRegistry {
    plugins: Vec<Arc<dyn VolumePlugin>>,
}

impl PluginRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a plugin.
    pub fn register(&mut self, plugin: Arc<dyn VolumePlugin>) {
        self.plugins.push(plugin);
    }

    /// Adds a plugin that is asked before every plugin already registered (so it wins where both
    /// support a volume, e.g. a recycler pod before the in-process host-path recycler).
    pub fn register_first(&mut self, plugin: Arc<dyn VolumePlugin>) {
        self.plugins.insert(0, plugin);
    }

    /// The provisioning plugin with this name.
    pub fn provisionable_by_name(&self, name: &str) -> Result<Arc<dyn VolumePlugin>, String> {
        self.plugins
            .iter()
            .find(|p| p.name() == name && p.can_provision())
            .cloned()
            .ok_or_else(|| format!("no volume plugin matched name: {name}"))
    }

    /// The deleting plugin with this name.
    pub fn deletable_by_name(&self, name: &str) -> Result<Arc<dyn VolumePlugin>, String> {
        self.plugins
            .iter()
            .find(|p| p.name() == name && p.can_delete())
            .cloned()
            .ok_or_else(|| format!("no volume plugin matched name: {name}"))
    }

    /// The deleting plugin for this PV's source.
    pub fn deletable_by_spec(&self, volume: &PersistentVolume) -> Result<Arc<dyn VolumePlugin>, String> {
        self.by_spec(volume, |p| p.can_delete(), "deletable")
    }

    /// The plugin for this PV's source that can `what`, with upstream's `VolumePluginMgr`
    /// errors: "no <what> volume plugin matched" when a plugin supports the source but cannot,
    /// "no volume plugin matched" when none supports it at all. Which sources a plugin supports
    /// is kube-controller-manager's answer ([`kcm_supports`]) where none of these plugins
    /// does: its NFS, FC and iSCSI plugins support their sources without deleting them.
    fn by_spec(
        &self,
        volume: &PersistentVolume,
        can: impl Fn(&dyn VolumePlugin) -> bool,
        what: &str,
    ) -> Result<Arc<dyn VolumePlugin>, String> {
        let mut supporting = self.plugins.iter().filter(|p| p.can_support(volume)).peekable();
        if supporting.peek().is_none() && !kcm_supports(volume) {
            return Err("no volume plugin matched".to_string());
        }
        supporting.find(|p| can(p.as_ref())).cloned().ok_or_else(|| format!("no {what} volume plugin matched"))
    }

    /// Every plugin that provisions.
    pub fn provisioners(&self) -> impl Iterator<Item = &Arc<dyn VolumePlugin>> {
        self.plugins.iter().filter(|p| p.can_provision())
    }

    /// The recycling plugin for this PV's source.
    pub fn recyclable_by_spec(&self, volume: &PersistentVolume) -> Result<Arc<dyn VolumePlugin>, String> {
        self.by_spec(volume, |p| p.can_recycle(), "recyclable")
    }
}

/// True when one of kube-controller-manager's binder plugins supports the volume's source (its
/// `probeControllerVolumePlugins`: host-path, NFS, FC, iSCSI and CSI).
fn kcm_supports(volume: &PersistentVolume) -> bool {
    volume.spec.as_ref().is_some_and(|s| {
        s.host_path.is_some() || s.nfs.is_some() || s.fc.is_some() || s.iscsi.is_some() || s.csi.is_some()
    })
}
