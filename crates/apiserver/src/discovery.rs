//! Discovery and OpenAPI: what kubectl asks before it does anything.
//!
//! kubectl first asks `/api` and `/apis` for aggregated discovery (`as=APIGroupDiscoveryList`);
//! a server that answers with plain `application/json` is treated as a legacy server, and
//! kubectl then reads `/api/v1` and `/apis/<group>/<version>` (APIResourceLists). We answer the
//! legacy form only: it is smaller and every client understands it.
//!
//! OpenAPI is needed by `apply`, `edit` and `patch` only to decide two things: whether the
//! server validates fields itself (`fieldValidation` on PATCH operations in the v3 document)
//! and how to build strategic merge patches (it falls back to the types compiled into kubectl
//! when the document has no schema for a kind). So `/openapi/v3/<gv>` lists each resource's
//! PATCH operation with the `fieldValidation` parameter and an empty `components.schemas`, and
//! `/openapi/v2` is an (almost) empty protobuf document: kubectl decodes v2 only as protobuf.

use crate::resources::{self, Served};
use serde_json::{json, Map, Value};

/// The Kubernetes minor version whose API the types pin (k8s-openapi's `v1_37` feature): what
/// `/version` and the OpenAPI document report, so clients pick the right behaviour.
pub const KUBERNETES_MINOR: u32 = 37;

/// The version this server reports.
pub fn version() -> Value {
    json!({
        "major": "1", "minor": KUBERNETES_MINOR.to_string(),
        "gitVersion": format!("v1.{KUBERNETES_MINOR}.0+pv-controller"),
        "gitCommit": "0000000000000000000000000000000000000000", "gitTreeState": "clean",
        "buildDate": "2025-01-01T00:00:00Z", "goVersion": "n/a", "compiler": "rustc",
        "platform": format!("{}/{}", std::env::consts::OS, if cfg!(target_arch = "x86_64") { "amd64" } else { std::env::consts::ARCH }),
    })
}

/// `/api`.
pub fn api_versions(server_address: &str) -> Value {
    json!({
        "kind": "APIVersions", "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}],
    })
}

/// `/apis`.
pub fn api_groups() -> Value {
    let groups: Vec<Value> = resources::group_versions()
        .into_iter()
        .filter(|(g, _)| !g.is_empty())
        .map(|(g, v)| {
            let gv = json!({"groupVersion": format!("{g}/{v}"), "version": v});
            json!({"name": g, "versions": [gv.clone()], "preferredVersion": gv})
        })
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

/// `/apis/<group>`.
pub fn api_group(group: &str) -> Option<Value> {
    let v = resources::group_versions().into_iter().find(|(g, _)| *g == group && !g.is_empty())?.1;
    let gv = json!({"groupVersion": format!("{group}/{v}"), "version": v});
    Some(
        json!({"kind": "APIGroup", "apiVersion": "v1", "name": group, "versions": [gv.clone()], "preferredVersion": gv}),
    )
}

const VERBS: &[&str] = &["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"];

fn served_in(group: &str, version: &str) -> Vec<Served> {
    resources::all().into_iter().filter(|s| s.group == group && s.version == version).collect()
}

/// `/api/v1` or `/apis/<group>/<version>`.
pub fn resource_list(group: &str, version: &str) -> Option<Value> {
    let served = served_in(group, version);
    if served.is_empty() {
        return None;
    }
    let mut res = Vec::new();
    for s in &served {
        let mut r = json!({
            "name": s.plural(), "singularName": s.rt.singular, "namespaced": s.rt.namespaced,
            "kind": s.kind(), "verbs": VERBS,
        });
        if !s.events_v1 && !s.rt.short_names.is_empty() {
            r["shortNames"] = json!(s.rt.short_names);
        }
        if s.kind() == "Pod" {
            r["categories"] = json!(["all"]);
        }
        res.push(r);
        if s.rt.status_subresource {
            res.push(json!({
                "name": format!("{}/status", s.plural()), "singularName": "",
                "namespaced": s.rt.namespaced, "kind": s.kind(), "verbs": ["get", "patch", "update"],
            }));
        }
    }
    let gv = if group.is_empty() { version.to_string() } else { format!("{group}/{version}") };
    Some(json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": res}))
}

/// `/openapi/v3`: where each group/version's document is.
pub fn openapi_v3_root() -> Value {
    let mut paths = Map::new();
    for (g, v) in resources::group_versions() {
        let p = gv_path(g, v);
        paths.insert(p.clone(), json!({"serverRelativeURL": format!("/openapi/v3/{p}?hash=pv-controller-1")}));
    }
    json!({"paths": paths})
}

fn gv_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// `/openapi/v3/api/v1`, `/openapi/v3/apis/<group>/<version>`: one PATCH operation per
/// resource declaring `fieldValidation`, no schemas.
pub fn openapi_v3_doc(path: &str) -> Option<Value> {
    let (group, version) = match path.split('/').collect::<Vec<_>>()[..] {
        ["api", v] => ("", v),
        ["apis", g, v] => (g, v),
        _ => return None,
    };
    let served = served_in(group, version);
    if served.is_empty() {
        return None;
    }
    let mut paths = Map::new();
    let field_validation =
        json!({"name": "fieldValidation", "in": "query", "schema": {"type": "string", "uniqueItems": true}});
    for s in served {
        let gvk = json!([{"group": s.group, "version": s.version, "kind": s.kind()}]);
        let base = if s.rt.namespaced {
            format!("/{}/namespaces/{{namespace}}/{}/{{name}}", gv_path(group, version), s.plural())
        } else {
            format!("/{}/{}/{{name}}", gv_path(group, version), s.plural())
        };
        let op = json!({
            "operationId": format!("patch{}", s.kind()),
            "parameters": [field_validation.clone()],
            "x-kubernetes-action": "patch",
            "x-kubernetes-group-version-kind": gvk[0].clone(),
            "responses": {"200": {"description": "OK"}},
        });
        let mut ops = Map::new();
        for verb in ["patch", "put", "post"] {
            let mut o = op.clone();
            o["operationId"] = json!(format!("{verb}{}", s.kind()));
            ops.insert(verb.into(), o);
        }
        paths.insert(base, Value::Object(ops));
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": format!("v1.{KUBERNETES_MINOR}.0")},
        "paths": paths,
        "components": {"schemas": {}},
    }))
}

/// `/openapi/v2` as protobuf: a `Document` with only `swagger: "2.0"` (field 1).
pub fn openapi_v2_protobuf() -> Vec<u8> {
    let mut v = vec![0x0a, 3];
    v.extend_from_slice(b"2.0");
    v
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_reported_version_is_the_one_the_api_types_pin() {
        let manifest = include_str!("../../../Cargo.toml");
        let feature = manifest
            .lines()
            .find(|l| l.starts_with("k8s-openapi ="))
            .and_then(|l| l.split("\"v1_").nth(1))
            .and_then(|r| r.split('"').next())
            .expect("the k8s-openapi version feature in the workspace Cargo.toml");
        let v = super::version();
        assert_eq!(v["minor"], feature, "{v}");
        assert_eq!(v["gitVersion"], format!("v1.{feature}.0+pv-controller"));
    }

    use super::*;

    #[test]
    fn core_list_has_status_subresources_and_short_names() {
        let l = resource_list("", "v1").unwrap();
        let names: Vec<&str> = l["resources"].as_array().unwrap().iter().map(|r| r["name"].as_str().unwrap()).collect();
        assert!(names.contains(&"persistentvolumes/status"));
        assert!(!names.contains(&"storageclasses"));
        assert_eq!(l["resources"][0]["shortNames"][0], "pv");
    }

    #[test]
    fn groups_list_storage_coordination_and_events() {
        let g = api_groups();
        let names: Vec<&str> = g["groups"].as_array().unwrap().iter().map(|r| r["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["storage.k8s.io", "coordination.k8s.io", "events.k8s.io"]);
    }
}
