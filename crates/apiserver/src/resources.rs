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

/// Served `(group, version)` pairs, core first, without duplicates.
pub fn group_versions(store: &Store) -> Vec<(&'static str, &'static str)> {
    let mut out: Vec<(&str, &str)> = Vec::new();
    for s in all(store) {
        if !out.contains(&(s.group, s.version)) {
            out.push((s.group, s.version));
        }
    }
    out
}
