//! The cluster state `explain` reads, and the controller's view of it.
//!
//! Whether the objects come from a file (the same input `simulate` takes) or from a live cluster,
//! they end up in one [`Snapshot`] of typed objects. [`Snapshot::view`] puts them in a
//! [`pv_core::view::Objects`]: the volumes in the controller's own index, the classes and pods
//! beside it, read by the same plan functions the controller's syncs execute. No controller,
//! API or store is behind it, and asking what the controller would do writes nothing.

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Event;
use k8s_openapi::api::storage::v1::{CSIDriver, CSINode, CSIStorageCapacity, VolumeAttachment};
use pv_core::view::Objects;
use pv_core::PluginRegistry;
use pv_model::k8s::{Node, PersistentVolume, PersistentVolumeClaim, Pod, StorageClass};
use pv_sim::{InputObject, Simulation, SimulationError};
use serde::de::DeserializeOwned;

/// Why a snapshot could not be built from input objects.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    /// An object was refused while loading it (validation, duplicate name).
    #[error(transparent)]
    Load(Box<SimulationError>),
    /// A stored object could not be decoded as its kind.
    #[error("decoding stored {kind} {name:?}: {message}")]
    Decode {
        /// Kind.
        kind: &'static str,
        /// Name.
        name: String,
        /// Decoder message.
        message: String,
    },
}

/// Every object `explain` looks at, as stored.
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    /// PersistentVolumes.
    pub volumes: Vec<PersistentVolume>,
    /// PersistentVolumeClaims.
    pub claims: Vec<PersistentVolumeClaim>,
    /// StorageClasses.
    pub classes: Vec<StorageClass>,
    /// Pods (they tell which claims wait for a consumer).
    pub pods: Vec<Pod>,
    /// Nodes.
    pub nodes: Vec<Node>,
    /// CSIDriver objects (past the binder: is the provisioner's driver installed).
    pub csi_drivers: Vec<CSIDriver>,
    /// CSINode objects (which drivers run on a node).
    pub csi_nodes: Vec<CSINode>,
    /// CSIStorageCapacity objects (what a driver says it has room for).
    pub capacities: Vec<CSIStorageCapacity>,
    /// Leases (a provisioner's leader election).
    pub leases: Vec<Lease>,
    /// Events (a provisioner's answers on a claim, the scheduler's on a pod).
    pub events: Vec<Event>,
    /// VolumeAttachments (which volume is attached where, and attach errors).
    pub attachments: Vec<VolumeAttachment>,
    /// The CSI objects above were read (from a cluster, or a dump holding some): an empty
    /// `csi_drivers` then means "no CSIDriver", not "not looked at".
    pub read_csi: bool,
}

fn decode<T: DeserializeOwned>(kind: &'static str, items: &[pv_store::Object]) -> Result<Vec<T>, SnapshotError> {
    items
        .iter()
        .map(|o| o.decode::<T>().map_err(|e| SnapshotError::Decode { kind, name: o.key().1, message: e.to_string() }))
        .collect()
}

impl Snapshot {
    /// Loads input objects exactly as `simulate` does (validated, defaulted, UIDs kept or
    /// generated deterministically) and reads them back as stored.
    pub fn from_input(objects: Vec<InputObject>) -> Result<Snapshot, SnapshotError> {
        let (store, _) = Simulation::load(objects).map_err(|e| SnapshotError::Load(Box::new(e)))?;
        // The input holds the binder's kinds only: nothing past the binder was read.
        Ok(Snapshot { read_csi: false, ..Self::from_store(&store)? })
    }

    /// Every kind `explain` reads, as `store` holds it now (each kind listed from the store's
    /// latest version): what `up`'s stand-ins decide over.
    pub fn from_store(store: &pv_store::Store) -> Result<Snapshot, SnapshotError> {
        let list =
            |resource: &str| store.list(resource, &Default::default()).map(|(items, _)| items).unwrap_or_default();
        Ok(Snapshot {
            volumes: decode("PersistentVolume", &list("persistentvolumes"))?,
            claims: decode("PersistentVolumeClaim", &list("persistentvolumeclaims"))?,
            classes: decode("StorageClass", &list("storageclasses"))?,
            pods: decode("Pod", &list("pods"))?,
            nodes: decode("Node", &list("nodes"))?,
            csi_drivers: decode("CSIDriver", &list("csidrivers"))?,
            csi_nodes: decode("CSINode", &list("csinodes"))?,
            capacities: decode("CSIStorageCapacity", &list("csistoragecapacities"))?,
            attachments: decode("VolumeAttachment", &list("volumeattachments"))?,
            read_csi: true,
            ..Default::default()
        })
    }

    /// Adds the objects of other kinds a dump holds (`kubectl get ... -o yaml` of CSIDriver,
    /// CSINode, CSIStorageCapacity, Lease, Event): what `explain` reads past the binder. Objects
    /// of any other kind are left out. When the dump holds any CSIDriver, CSINode or Lease, the
    /// dump is taken to hold all of them.
    pub fn add_others(&mut self, others: Vec<serde_json::Value>) -> Result<(), SnapshotError> {
        fn one<T: DeserializeOwned>(
            kind: &'static str,
            v: serde_json::Value,
            out: &mut Vec<T>,
        ) -> Result<(), SnapshotError> {
            let name = v.pointer("/metadata/name").and_then(|n| n.as_str()).unwrap_or("").to_string();
            let o =
                serde_json::from_value(v).map_err(|e| SnapshotError::Decode { kind, name, message: e.to_string() })?;
            out.push(o);
            Ok(())
        }
        for v in others {
            match v.get("kind").and_then(|k| k.as_str()).unwrap_or("") {
                "CSIDriver" => one("CSIDriver", v, &mut self.csi_drivers)?,
                "CSINode" => one("CSINode", v, &mut self.csi_nodes)?,
                "CSIStorageCapacity" => one("CSIStorageCapacity", v, &mut self.capacities)?,
                "Lease" => one("Lease", v, &mut self.leases)?,
                "VolumeAttachment" => one("VolumeAttachment", v, &mut self.attachments)?,
                // core/v1 Events (what `kubectl get events -o yaml` prints); events.k8s.io's differ.
                "Event" if v.get("apiVersion").and_then(|a| a.as_str()) == Some("v1") => {
                    one("Event", v, &mut self.events)?
                }
                _ => continue,
            }
        }
        self.read_csi |= !self.csi_drivers.is_empty()
            || !self.csi_nodes.is_empty()
            || !self.leases.is_empty()
            || !self.events.is_empty()
            || !self.capacities.is_empty()
            || !self.attachments.is_empty();
        Ok(())
    }

    /// This snapshot as the controller sees it once every volume has had its first sync: an
    /// unclaimed volume that is not Available yet (a new PV has no phase) becomes Available
    /// before any claim is matched, exactly as the volume sync does it. Returns the names of the
    /// volumes whose phase was changed so.
    pub fn after_first_volume_syncs(&self) -> (Snapshot, Vec<String>) {
        let mut s = self.clone();
        let mut changed = Vec::new();
        for v in &mut s.volumes {
            if let Some(phase) = pv_core::phase_after_first_sync(v) {
                v.status.get_or_insert_with(Default::default).phase = Some(phase.to_string());
                changed.push(v.metadata.name.clone().unwrap_or_default());
            }
        }
        (s, changed)
    }

    /// The claim `namespace/name`.
    pub fn claim(&self, namespace: &str, name: &str) -> Option<&PersistentVolumeClaim> {
        self.claims.iter().find(|c| {
            c.metadata.namespace.as_deref().unwrap_or("") == namespace && c.metadata.name.as_deref() == Some(name)
        })
    }

    /// The controller's view of this snapshot: its volumes in the controller's own index, its
    /// classes and pods, and `plugins`. Nothing runs and nothing is written.
    pub fn view(&self, plugins: PluginRegistry) -> Objects {
        let mut view = Objects::new(plugins);
        for o in &self.classes {
            view = view.class(o.clone());
        }
        for o in &self.pods {
            view = view.pod(o.clone());
        }
        for o in &self.nodes {
            view = view.node(o.clone());
        }
        for o in &self.volumes {
            view = view.volume(o.clone());
        }
        view
    }
}

/// The plugins `explain` assumes the controller runs with: the same as `simulate`, host-path
/// included. A plan only names the plugin it would use, so its root is never touched.
pub fn plugins() -> PluginRegistry {
    pv_plugins::registry(Some(std::path::PathBuf::from(HOSTPATH_ROOT)))
}

/// The host-path root `explain`'s plugin is given; nothing is ever created there.
const HOSTPATH_ROOT: &str = "/var/lib/pv-controller/volumes";
