//! What the server serves: every store resource type at its group/version, plus
//! `events.k8s.io/v1` Events, which share the core `events` storage and are converted on the
//! way in and out (see [`crate::events`]).

use pv_store::{ResourceType, RESOURCE_TYPES};

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
}

/// Every served resource, core first.
pub fn all() -> Vec<Served> {
    let mut v: Vec<Served> =
        RESOURCE_TYPES.iter().map(|rt| Served { rt, group: rt.group, version: rt.version, events_v1: false }).collect();
    if let Some(ev) = ResourceType::by_plural("events") {
        v.push(Served { rt: ev, group: EVENTS_GROUP, version: "v1", events_v1: true });
    }
    v
}

/// The resource `plural` at `group/version`.
pub fn lookup(group: &str, version: &str, plural: &str) -> Option<Served> {
    all().into_iter().find(|s| s.group == group && s.version == version && s.plural() == plural)
}

/// Served `(group, version)` pairs, core first, without duplicates.
pub fn group_versions() -> Vec<(&'static str, &'static str)> {
    let mut out: Vec<(&str, &str)> = Vec::new();
    for s in all() {
        if !out.contains(&(s.group, s.version)) {
            out.push((s.group, s.version));
        }
    }
    out
}
