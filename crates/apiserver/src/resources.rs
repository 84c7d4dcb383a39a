//! What the server serves: every store resource type at its group/version, plus
//! `events.k8s.io/v1` Events, which share the core `events` storage and are converted on the
//! way in and out (see [`crate::events`]).

use pv_store::{ResourceType, Store, RESOURCE_TYPES};

/// One resource as served at one group/version.
#[derive(Clone, Copy, Debug)]
pub struct Served {
    /// The stored type.
    pub rt: &'static ResourceType,
    /// Group served at ("" for core).
    pub group: &'static str,
    /// Version served at.
    pub version: &'static str,
    /// True for `events.k8s.io/v1` events (converted to/from core events).
    pub events_v1: bool,
}

/// The `events.k8s.io` group.
pub const EVENTS_GROUP: &str = "events.k8s.io";

impl Served {
    /// `apiVersion` of objects at this endpoint.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_string()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// Kind.
    pub fn kind(&self) -> &'static str {
        self.rt.kind
    }

    /// Plural name.
    pub fn plural(&self) -> &'static str {
        self.rt.plural
    }

    /// The store's name for the resource.
    pub fn key(&self) -> &'static str {
        self.rt.key
    }

    /// True for a custom resource (a CustomResourceDefinition's).
    pub fn custom(&self) -> bool {
        self.rt.is_custom()
    }
}

fn of(rt: &'static ResourceType) -> Served {
    Served { rt, group: rt.group, version: rt.version, events_v1: false }
}

/// Every built-in resource, core first.
pub fn built_in() -> Vec<Served> {
    let mut v: Vec<Served> = RESOURCE_TYPES.iter().map(of).collect();
    if let Some(ev) = ResourceType::by_plural("events") {
        v.push(Served { rt: ev, group: EVENTS_GROUP, version: "v1", events_v1: true });
    }
    v
}

/// Every served resource: the built-in ones, then each custom resource `store` serves.
pub fn all(store: &Store) -> Vec<Served> {
    let mut v = built_in();
    v.extend(store.custom_resources().into_iter().map(of));
    v
}

/// The resource `plural` at `group/version`.
pub fn lookup(store: &Store, group: &str, version: &str, plural: &str) -> Option<Served> {
    let found = |s: &Served| s.group == group && s.version == version && s.plural() == plural;
    built_in().into_iter().find(found).or_else(|| store.custom_resources().into_iter().map(of).find(found))
}

/// The priority kube-apiserver's aggregator gives a built-in group (`DefaultGenericAPIServicePriorities`
/// and kube-apiserver's own additions, `pkg/controlplane/apiserver/aggregator.go`): discovery
/// lists groups by it, highest first, and by name between equals. Custom resources' groups have
/// 1000, as the aggregator gives a CustomResourceDefinition's APIService.
fn group_priority(group: &str) -> u32 {
    match group {
        "" => 18000,
        "apiregistration.k8s.io" => 18000,
        "apps" => 17800,
        "events.k8s.io" => 17750,
        "authentication.k8s.io" => 17700,
        "authorization.k8s.io" => 17600,
        "autoscaling" => 17500,
        "batch" => 17400,
        "certificates.k8s.io" => 17300,
        "networking.k8s.io" => 17200,
        "policy" => 17100,
        "rbac.authorization.k8s.io" => 17000,
        "storage.k8s.io" => 16800,
        "apiextensions.k8s.io" | "admissionregistration.k8s.io" => 16700,
        "scheduling.k8s.io" => 16600,
        "coordination.k8s.io" => 16500,
        "node.k8s.io" => 16300,
        "discovery.k8s.io" => 16200,
        "flowcontrol.apiserver.k8s.io" => 16100,
        _ => 1000,
    }
}

/// The built-in `(group, version)` pairs, without duplicates, in kube-apiserver's order: core
/// first, then by the aggregator's group priority, then by group name.
pub fn built_in_group_versions() -> Vec<(&'static str, &'static str)> {
    let mut out: Vec<(&str, &str)> = Vec::new();
    for s in built_in() {
        if !out.contains(&(s.group, s.version)) {
            out.push((s.group, s.version));
        }
    }
    out.sort_by(|a, b| group_priority(b.0).cmp(&group_priority(a.0)).then(a.0.cmp(b.0)));
    out
}

/// Served `(group, version)` pairs, without duplicates, in kube-apiserver's order: core first,
/// then by the aggregator's group priority, then by group name (custom resources' groups after the
/// built-in ones, in the order their definitions were made, among equals).
pub fn group_versions(store: &Store) -> Vec<(&'static str, &'static str)> {
    let mut out = built_in_group_versions();
    for s in store.custom_resources().into_iter().map(of) {
        if !out.contains(&(s.group, s.version)) {
            out.push((s.group, s.version));
        }
    }
    out
}
