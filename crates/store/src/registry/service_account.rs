//! ServiceAccounts (`pkg/registry/core/serviceaccount`): namespaced, only their metadata
//! checked; their `secrets` references kept by name.

use crate::kinds::ResourceType;
use crate::validation::config;
use serde_json::Value;

pub(crate) const RESOURCE: ResourceType = ResourceType {
    group: "",
    version: "v1",
    kind: "ServiceAccount",
    plural: "serviceaccounts",
    key: "serviceaccounts",
    singular: "serviceaccount",
    namespaced: true,
    status_subresource: false,
    short_names: &["sa"],
};

pub(crate) struct Strategy;

impl super::strategy::Strategy for Strategy {
    fn resource(&self) -> &'static ResourceType {
        &RESOURCE
    }

    fn roundtrip(&self, value: &serde_json::Value) -> Result<serde_json::Value, String> {
        crate::typed::through::<k8s_openapi::api::core::v1::ServiceAccount>(value)
    }

    fn default(&self, obj: &mut Value) {
        config::trim_secret_references(obj);
    }
}
