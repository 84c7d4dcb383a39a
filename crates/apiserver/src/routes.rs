//! Request paths, parsed into what they address.
//!
//! Kubernetes paths are regular enough to parse by hand, which keeps one dispatcher in charge
//! of authentication, body limits and error shapes instead of a large route table:
//! `/api/v1[/namespaces/NS]/RESOURCE[/NAME[/SUBRESOURCE]]` and the same under
//! `/apis/GROUP/VERSION`. `/api/v1/namespaces/NS` and `/api/v1/namespaces/NS/status` address
//! the Namespace object itself.

use crate::resources::{self, Served};
use pv_store::Store;

/// What a resource path addresses.
#[derive(Clone, Debug)]
pub struct Target {
    /// The resource.
    pub served: Served,
    /// Namespace from the path (None: all namespaces, or a cluster-scoped resource).
    pub namespace: Option<String>,
    /// Object name (None: the collection).
    pub name: Option<String>,
    /// Subresource (`status`).
    pub subresource: Option<String>,
}

/// Every path the server answers.
#[derive(Clone, Debug)]
pub enum Route {
    /// `/version`.
    Version,
    /// `/healthz`, `/livez`, `/readyz`, optionally with one check (`/readyz/storage`); no
    /// token needed.
    Health {
        /// `healthz`, `livez` or `readyz`.
        probe: &'static str,
        /// One named check, or None for all of them.
        check: Option<String>,
    },
    /// `/api`.
    Api,
    /// `/apis`.
    Apis,
    /// `/apis/<group>`.
    ApiGroup(String),
    /// `/api/v1`, `/apis/<group>/<version>`.
    ResourceList(String, String),
    /// `/openapi/v2`.
    OpenApiV2,
    /// `/openapi/v3`.
    OpenApiV3Root,
    /// `/openapi/v3/<gv path>`.
    OpenApiV3(String),
    /// A resource collection or object.
    Resource(Target),
}

/// Parses a request path; None when nothing lives there (custom resources are those `store`
/// serves now).
pub fn parse(path: &str, store: &Store) -> Option<Route> {
    let segs: Vec<&str> = path.trim_matches('/').split('/').filter(|s| !s.is_empty()).collect();
    match segs.as_slice() {
        ["version"] => Some(Route::Version),
        [p @ ("healthz" | "livez" | "readyz"), rest @ ..] => Some(Route::Health {
            probe: match *p {
                "healthz" => "healthz",
                "livez" => "livez",
                _ => "readyz",
            },
            check: (!rest.is_empty()).then(|| rest.join("/")),
        }),
        ["api"] => Some(Route::Api),
        ["apis"] => Some(Route::Apis),
        ["openapi", "v2"] | ["swagger-2.0.0.pb-v1"] => Some(Route::OpenApiV2),
        ["openapi", "v3"] => Some(Route::OpenApiV3Root),
        ["openapi", "v3", rest @ ..] => Some(Route::OpenApiV3(rest.join("/"))),
        ["apis", g] => Some(Route::ApiGroup(g.to_string())),
        ["api", v] => Some(Route::ResourceList(String::new(), v.to_string())),
        ["apis", g, v] => Some(Route::ResourceList(g.to_string(), v.to_string())),
        ["api", v, rest @ ..] => resource(store, "", v, rest),
        ["apis", g, v, rest @ ..] => resource(store, g, v, rest),
        _ => None,
    }
}

fn resource(store: &Store, group: &str, version: &str, rest: &[&str]) -> Option<Route> {
    let target = |plural: &str, ns: Option<&str>, name: Option<&str>, sub: Option<&str>| {
        let served = resources::lookup(store, group, version, plural)?;
        if served.rt.namespaced != ns.is_some() && !(served.rt.namespaced && name.is_none()) {
            return None;
        }
        Some(Route::Resource(Target {
            served,
            namespace: ns.map(str::to_string),
            name: name.map(str::to_string),
            subresource: sub.map(str::to_string),
        }))
    };
    match rest {
        ["namespaces", ns] => target("namespaces", None, Some(ns), None),
        ["namespaces", ns, sub @ ("status" | "finalize")] => target("namespaces", None, Some(ns), Some(sub)),
        ["namespaces", ns, res] => target(res, Some(ns), None, None),
        ["namespaces", ns, res, name] => target(res, Some(ns), Some(name), None),
        ["namespaces", ns, res, name, sub] => target(res, Some(ns), Some(name), Some(sub)),
        [res] => target(res, None, None, None),
        [res, name] => target(res, None, Some(name), None),
        [res, name, sub] => target(res, None, Some(name), Some(sub)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(p: &str) -> Option<Route> {
        super::parse(p, &Store::new())
    }

    fn target(p: &str) -> Target {
        match parse(p) {
            Some(Route::Resource(t)) => t,
            other => panic!("{p}: {other:?}"),
        }
    }

    #[test]
    fn paths_address_collections_objects_and_subresources() {
        let t = target("/api/v1/namespaces/ns/persistentvolumeclaims/c/status");
        assert_eq!(t.served.plural(), "persistentvolumeclaims");
        assert_eq!(t.namespace.as_deref(), Some("ns"));
        assert_eq!(t.name.as_deref(), Some("c"));
        assert_eq!(t.subresource.as_deref(), Some("status"));
        let t = target("/api/v1/persistentvolumeclaims");
        assert!(t.namespace.is_none() && t.name.is_none());
        let t = target("/api/v1/namespaces/ns");
        assert_eq!(t.served.plural(), "namespaces");
        assert_eq!(t.name.as_deref(), Some("ns"));
        let t = target("/apis/storage.k8s.io/v1/storageclasses/fast");
        assert_eq!(t.served.kind(), "StorageClass");
        let t = target("/apis/events.k8s.io/v1/namespaces/d/events");
        assert!(t.served.events_v1);
    }

    #[test]
    fn scope_mismatches_and_unknown_resources_do_not_route() {
        assert!(parse("/api/v1/namespaces/ns/persistentvolumes/x").is_none());
        assert!(parse("/api/v1/persistentvolumeclaims/x").is_none());
        assert!(parse("/api/v1/widgets").is_none());
        assert!(parse("/nope").is_none());
    }
}
