//! The resource types the store knows, with the facts the API layers need about each.

/// One resource type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ResourceType {
    /// API group ("" for core).
    pub group: &'static str,
    /// Version served.
    pub version: &'static str,
    /// Kind.
    pub kind: &'static str,
    /// Plural resource name, as paths and discovery name it.
    pub plural: &'static str,
    /// The store's name for the resource: the plural of a built-in kind, `plural.group` for a
    /// custom resource (two groups may serve the same plural).
    pub key: &'static str,
    /// Singular name.
    pub singular: &'static str,
    /// Namespaced or cluster-scoped.
    pub namespaced: bool,
    /// Has a `/status` subresource with spec/status separation.
    pub status_subresource: bool,
    /// kubectl short names.
    pub short_names: &'static [&'static str],
}

impl ResourceType {
    /// `apiVersion` as objects carry it.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_string()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// Resource name qualified by group, as error messages print it (`storageclasses.storage.k8s.io`).
    pub fn qualified(&self) -> String {
        if self.group.is_empty() {
            self.plural.to_string()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }

    /// Kind qualified by group (`StorageClass.storage.k8s.io`), as kube-apiserver names the
    /// object in a failed delete precondition.
    pub fn qualified_kind(&self) -> String {
        if self.group.is_empty() {
            self.kind.to_string()
        } else {
            format!("{}.{}", self.kind, self.group)
        }
    }

    /// Looks up a built-in resource by plural name (its store key).
    pub fn by_plural(plural: &str) -> Option<&'static ResourceType> {
        RESOURCE_TYPES.iter().find(|r| r.plural == plural)
    }

    /// True for a resource that a CustomResourceDefinition defines.
    pub fn is_custom(&self) -> bool {
        self.key.contains('.')
    }

    /// Looks up by kind.
    pub fn by_kind(kind: &str) -> Option<&'static ResourceType> {
        RESOURCE_TYPES.iter().find(|r| r.kind == kind)
    }
}

/// Every resource type the store serves, each declared beside its strategy in
/// [`crate::registry`]. `events.k8s.io/v1` Events share the `events` storage.
pub const RESOURCE_TYPES: &[ResourceType] = {
    use crate::registry::*;
    &[
        persistent_volume::RESOURCE,
        persistent_volume_claim::RESOURCE,
        pod::RESOURCE,
        node::RESOURCE,
        namespace::RESOURCE,
        service::RESOURCE,
        event::RESOURCE,
        storage_class::RESOURCE,
        csi_driver::RESOURCE,
        csi_node::RESOURCE,
        volume_attachment::RESOURCE,
        csi_storage_capacity::RESOURCE,
        volume_attributes_class::RESOURCE,
        lease::RESOURCE,
        secret::RESOURCE,
        config_map::RESOURCE,
        service_account::RESOURCE,
        custom_resource_definition::RESOURCE,
    ]
};
