//! Nodes (`pkg/registry/core/node`): cluster-scoped; the status a kubelet creates them with is
//! kept.

use crate::kinds::ResourceType;
use crate::validation::other;
use serde_json::Value;

pub(crate) const RESOURCE: ResourceType = ResourceType {
    group: "",
    version: "v1",
    kind: "Node",
    plural: "nodes",
    key: "nodes",
    singular: "node",
    namespaced: false,
    status_subresource: true,
    short_names: &["no"],
};

pub(crate) struct Strategy;

impl super::strategy::Strategy for Strategy {
    fn resource(&self) -> &'static ResourceType {
        &RESOURCE
    }

    fn roundtrip(&self, value: &serde_json::Value) -> Result<serde_json::Value, String> {
        crate::typed::through::<k8s_openapi::api::core::v1::Node>(value)
    }

    /// A kubelet creates its Node with its status.
    fn reset_status_for_create(&self, _obj: &mut Value) {}

    fn default(&self, obj: &mut Value) {
        other::default_node(obj);
    }
}
