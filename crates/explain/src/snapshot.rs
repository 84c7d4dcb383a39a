//! The cluster state `explain` reads, and the controller built over it.
//!
//! Whether the objects come from a file (the same input `simulate` takes) or from a live cluster,
//! they end up in one [`Snapshot`] of typed objects. [`Snapshot::controller`] then builds a real
//! [`Controller`] and feeds every object through its watch-event handlers, in the order
//! `simulate`'s informers list them, without ever running a sync: the controller's caches and
//! index hold exactly what they would hold in production, and asking it what it would do writes
//! nothing. The controller sits on an empty in-memory API that nothing ever writes to.

use pv_core::operations::Mode;
use pv_core::{Config, Controller, ObjectEvent, PluginRegistry, SimClock};
use pv_model::k8s::{Node, PersistentVolume, PersistentVolumeClaim, Pod, StorageClass};
use pv_sim::{InputObject, MemApi, Simulation, SimulationError, SimulationOptions};
use serde::de::DeserializeOwned;
use std::sync::Arc;

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
}

fn decode<T: DeserializeOwned>(kind: &'static str, items: &[Arc<serde_json::Value>]) -> Result<Vec<T>, SnapshotError> {
    items
        .iter()
        .map(|v| {
            T::deserialize(&**v).map_err(|e| SnapshotError::Decode {
                kind,
                name: v["metadata"]["name"].as_str().unwrap_or("").to_string(),
                message: e.to_string(),
            })
        })
        .collect()
}

impl Snapshot {
    /// Loads input objects exactly as `simulate` does (validated, defaulted, UIDs kept or
    /// generated deterministically) and reads them back as stored.
    pub fn from_input(objects: Vec<InputObject>) -> Result<Snapshot, SnapshotError> {
        let sim = Simulation::new(objects, PluginRegistry::new(), SimulationOptions::default())
            .map_err(|e| SnapshotError::Load(Box::new(e)))?;
        let store = sim.store();
        let list =
            |resource: &str| store.list(resource, &Default::default()).map(|(items, _)| items).unwrap_or_default();
        Ok(Snapshot {
            volumes: decode("PersistentVolume", &list("persistentvolumes"))?,
            claims: decode("PersistentVolumeClaim", &list("persistentvolumeclaims"))?,
            classes: decode("StorageClass", &list("storageclasses"))?,
            pods: decode("Pod", &list("pods"))?,
            nodes: decode("Node", &list("nodes"))?,
        })
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

    /// A controller whose caches hold this snapshot, fed through its watch handlers in the order
    /// `simulate` lists kinds (classes, nodes, pods, volumes, claims). No sync ever runs.
    pub fn controller(&self, plugins: PluginRegistry) -> Arc<Controller> {
        let clock = SimClock::new(jiff::Timestamp::UNIX_EPOCH);
        let api = Arc::new(MemApi::new(Arc::new(pv_store::Store::new())));
        let config = Config { operations: Mode::Deferred, ..Config::default() };
        let c = Controller::new(api, plugins, clock, config);
        for o in &self.classes {
            c.on_class(ObjectEvent::Applied(o.clone()));
        }
        for o in &self.nodes {
            c.on_node(ObjectEvent::Applied(o.clone()));
        }
        for o in &self.pods {
            c.on_pod(ObjectEvent::Applied(o.clone()));
        }
        for o in &self.volumes {
            c.on_volume(ObjectEvent::Applied(o.clone()));
        }
        for o in &self.claims {
            c.on_claim(ObjectEvent::Applied(o.clone()));
        }
        c
    }
}

/// The plugins `explain` assumes the controller runs with: the same as `simulate` (host-path
/// included), rooted in a throw-away directory because nothing is ever provisioned here.
pub fn plugins() -> (PluginRegistry, Option<tempfile::TempDir>) {
    match tempfile::tempdir() {
        Ok(dir) => (pv_plugins::registry(Some(dir.path().to_path_buf())), Some(dir)),
        Err(_) => (PluginRegistry::new(), None),
    }
}
