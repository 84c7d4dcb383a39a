//! One resource type the store serves, with the facts the API layers need about it. The list of
//! them, and the lookups by kind and by plural, are in `registry/mod.rs`, beside their strategies.

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

    /// True for a resource that a CustomResourceDefinition defines.
    pub fn is_custom(&self) -> bool {
        self.key.contains('.')
    }
}
