//! What the plans read: the controller's caches, read-only. [`crate::Caches`] is one view;
//! [`Objects`] is another, made of a handful of objects with no API behind it (`explain` and the
//! plans' unit tests).

use crate::plugin::{PluginRegistry, VolumePlugin};
use pv_model::helpers;
use pv_model::index::VolumeIndex;
use pv_model::k8s::{Node, PersistentVolume, PersistentVolumeClaim, Pod, StorageClass};
use std::collections::BTreeMap;
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
    /// The cached node with this name.
    fn node(&self, name: &str) -> Option<Arc<Node>>;
    /// The name of the default class a claim without class is given, if any.
    fn default_class(&self) -> Option<String>;
    /// Pods that use `claim` and are not scheduled yet, by name.
    fn unscheduled_pods_using(&self, claim: &PersistentVolumeClaim) -> Vec<String>;
    /// The in-process plugin that provisions for this provisioner name.
    fn provisioning_plugin(&self, provisioner: &str) -> Result<Arc<dyn VolumePlugin>, String>;
    /// Whether dynamic provisioning is switched on.
    fn dynamic_provisioning(&self) -> bool;
}

/// A view made of objects handed to it, with the controller's own volume index choosing the best
/// match: what `pv-controller explain` reads and what the plans' unit tests build. It holds no
/// API and never writes; nothing is reserved by a bind in flight.
pub struct Objects {
    index: VolumeIndex,
    classes: BTreeMap<String, Arc<StorageClass>>,
    nodes: BTreeMap<String, Arc<Node>>,
    pods: Vec<Arc<Pod>>,
    plugins: PluginRegistry,
    dynamic_provisioning: bool,
}

impl Objects {
    /// No objects yet; `plugins` provision (dynamic provisioning on, as by default).
    pub fn new(plugins: PluginRegistry) -> Self {
        Objects {
            index: VolumeIndex::default(),
            classes: BTreeMap::new(),
            nodes: BTreeMap::new(),
            pods: Vec::new(),
            plugins,
            dynamic_provisioning: true,
        }
    }

    /// Switches dynamic provisioning on or off (`--enable-dynamic-provisioning`).
    pub fn dynamic_provisioning(mut self, on: bool) -> Self {
        self.dynamic_provisioning = on;
        self
    }

    /// Adds (or replaces) a volume.
    pub fn volume(mut self, volume: PersistentVolume) -> Self {
        self.index.apply(Arc::new(volume));
        self
    }

    /// Adds (or replaces) a class.
    pub fn class(mut self, class: StorageClass) -> Self {
        self.classes.insert(helpers::name(&class.metadata).to_string(), Arc::new(class));
        self
    }

    /// Adds (or replaces) a node.
    pub fn node(mut self, node: Node) -> Self {
        self.nodes.insert(helpers::name(&node.metadata).to_string(), Arc::new(node));
        self
    }

    /// Adds a pod.
    pub fn pod(mut self, pod: Pod) -> Self {
        self.pods.push(Arc::new(pod));
        self
    }
}

impl View for Objects {
    fn volume(&self, name: &str) -> Option<Arc<PersistentVolume>> {
        self.index.get(name)
    }

    fn best_match(&self, claim: &PersistentVolumeClaim, delay_binding: bool) -> Option<Arc<PersistentVolume>> {
        self.index.find_best_match(claim, delay_binding, &|_| false)
    }

    fn class(&self, name: &str) -> Option<Arc<StorageClass>> {
        self.classes.get(name).cloned()
    }

    fn node(&self, name: &str) -> Option<Arc<Node>> {
        self.nodes.get(name).cloned()
    }

    fn default_class(&self) -> Option<String> {
        helpers::default_class(self.classes.values().map(|c| &**c)).map(|c| helpers::name(&c.metadata).to_string())
    }

    fn unscheduled_pods_using(&self, claim: &PersistentVolumeClaim) -> Vec<String> {
        let namespace = claim.metadata.namespace.as_deref().unwrap_or("");
        let name = helpers::name(&claim.metadata);
        let mut pods: Vec<String> = self
            .pods
            .iter()
            .filter(|p| p.metadata.namespace.as_deref().unwrap_or("") == namespace)
            .filter(|p| !helpers::is_pod_terminated(p) && !helpers::pod_is_scheduled(p))
            .filter(|p| helpers::pod_claim_names(p).iter().any(|c| c == name))
            .map(|p| helpers::name(&p.metadata).to_string())
            .collect();
        pods.sort();
        pods.dedup();
        pods
    }

    fn provisioning_plugin(&self, provisioner: &str) -> Result<Arc<dyn VolumePlugin>, String> {
        self.plugins.provisionable_by_name(provisioner)
    }

    fn dynamic_provisioning(&self) -> bool {
        self.dynamic_provisioning
    }
}
