//! ServiceAccounts (`pkg/registry/core/serviceaccount`): namespaced, only their metadata
//! checked.

use crate::kinds::ResourceType;

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

impl super::Strategy for Strategy {
    fn resource(&self) -> &'static ResourceType {
        &RESOURCE
    }
}
