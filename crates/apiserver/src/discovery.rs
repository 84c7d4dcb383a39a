//! Discovery and OpenAPI: what kubectl asks before it does anything.
//!
//! kubectl first asks `/api` and `/apis` for aggregated discovery (`as=APIGroupDiscoveryList`);
//! a server that answers with plain `application/json` is treated as a legacy server, and
//! kubectl then reads `/api/v1` and `/apis/<group>/<version>` (APIResourceLists). We answer the
//! legacy form only: it is smaller and every client understands it.
//!
//! OpenAPI is upstream's own: `/openapi/v3/<gv>` serves kube-apiserver's documents cut down to
//! the served resources (paths, with the `fieldValidation` parameter that tells kubectl the
//! server validates fields, and every schema they reach), so `kubectl explain`, `apply` and
//! strategic merge patches see the real schemas. `/openapi/v2` serves the same in swagger form
//! as JSON; a client that asks for v2 in protobuf gets a document with no paths (kubectl reads
//! v3).

use crate::resources::{self, Served};
use pv_store::Store;
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

/// One group as `/apis` lists it: every version served (a custom resource's storage version
/// first, as preferred).
fn group_doc(store: &Store, group: &str) -> Option<Value> {
    let versions: Vec<&str> = resources::group_versions(store)
        .into_iter()
        .filter(|(g, _)| *g == group && !g.is_empty())
        .map(|(_, v)| v)
        .collect();
    let first = *versions.first()?;
    let gv = |v: &str| json!({"groupVersion": format!("{group}/{v}"), "version": v});
    Some(
        json!({"name": group, "versions": versions.iter().map(|v| gv(v)).collect::<Vec<_>>(), "preferredVersion": gv(first)}),
    )
}

/// `/apis`.
pub fn api_groups(store: &Store) -> Value {
    let mut names: Vec<&str> = Vec::new();
    for (g, _) in resources::group_versions(store) {
        if !g.is_empty() && !names.contains(&g) {
            names.push(g);
        }
    }
    let groups: Vec<Value> = names.into_iter().filter_map(|g| group_doc(store, g)).collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

/// `/apis/<group>`.
pub fn api_group(store: &Store, group: &str) -> Option<Value> {
    let mut doc = group_doc(store, group)?;
    doc["kind"] = json!("APIGroup");
    doc["apiVersion"] = json!("v1");
    Some(doc)
}

const VERBS: &[&str] = &["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"];

/// A custom resource's verbs, in apiextensions-apiserver's order.
const CUSTOM_VERBS: &[&str] = &["delete", "deletecollection", "get", "list", "patch", "create", "update", "watch"];

fn served_in(store: &Store, group: &str, version: &str) -> Vec<Served> {
    resources::all(store).into_iter().filter(|s| s.group == group && s.version == version).collect()
}

/// `/api/v1` or `/apis/<group>/<version>`.
pub fn resource_list(store: &Store, group: &str, version: &str) -> Option<Value> {
    let served = served_in(store, group, version);
    if served.is_empty() {
        return None;
    }
    let mut res = Vec::new();
    for s in &served {
        let verbs = if s.custom() { CUSTOM_VERBS } else { VERBS };
        let mut r = json!({
            "name": s.plural(), "singularName": s.rt.singular, "namespaced": s.rt.namespaced,
            "kind": s.kind(), "verbs": verbs,
        });
        let categories = store
            .custom_definition(s.key())
            .filter(|_| s.custom())
            .and_then(|d| d.pointer("/spec/names/categories").cloned())
            .filter(|c| c.as_array().is_some_and(|a| !a.is_empty()));
        if let Some(c) = categories {
            r["categories"] = c;
        }
        if !s.events_v1 && !s.rt.short_names.is_empty() {
            r["shortNames"] = json!(s.rt.short_names);
        }
        if !s.custom() && !pv_store::categories(s.rt).is_empty() {
            r["categories"] = json!(pv_store::categories(s.rt));
        }
        res.push(r);
        if s.rt.status_subresource {
            res.push(json!({
                "name": format!("{}/status", s.plural()), "singularName": "",
                "namespaced": s.rt.namespaced, "kind": s.kind(), "verbs": ["get", "patch", "update"],
            }));
        }
    }
    // kube-apiserver lists a group version's resources by name (a subresource after its
    // resource).
    res.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str()));
    let gv = if group.is_empty() { version.to_string() } else { format!("{group}/{version}") };
    Some(json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": res}))
}

// kube-apiserver's own OpenAPI v3 documents for the served group/versions, cut down to the
// resources served here (`scripts/gen-openapi.py` writes them from a real kube-apiserver); the
// build script lists the files of `openapi/`.
include!(concat!(env!("OUT_DIR"), "/openapi_files.rs"));

/// The OpenAPI v3 document of every served built-in group version, by its path (`api/v1`,
/// `apis/<group>/<version>`), in discovery's order. Each has its file (a test holds it).
fn openapi_v3() -> impl Iterator<Item = (String, &'static str)> {
    resources::built_in_group_versions().into_iter().filter_map(|(g, v)| {
        let path = if g.is_empty() { format!("api/{v}") } else { format!("apis/{g}/{v}") };
        let stem = path.replace(['/', '.'], "_");
        OPENAPI_V3_FILES.iter().find(|(s, _)| *s == stem).map(|(_, doc)| (path, *doc))
    })
}

/// The same documents in OpenAPI v2 (swagger) form, served as JSON.
pub const OPENAPI_V2_JSON: &str = include_str!("openapi/v2.json");

/// A content hash for the `?hash=` that lets clients cache a document (FNV-1a, 64 bits).
fn content_hash(s: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in s.bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    format!("{h:016X}")
}

/// `/openapi/v3`: where each group/version's document is.
pub fn openapi_v3_root() -> Value {
    let mut paths = Map::new();
    for (p, doc) in openapi_v3() {
        paths.insert(p.clone(), json!({"serverRelativeURL": format!("/openapi/v3/{p}?hash={}", content_hash(doc))}));
    }
    json!({"paths": paths})
}

/// `/openapi/v3/api/v1`, `/openapi/v3/apis/<group>/<version>`: upstream's document, as text.
pub fn openapi_v3_doc(path: &str) -> Option<&'static str> {
    openapi_v3().find(|(p, _)| p == path).map(|(_, d)| d)
}

/// `/openapi/v2` as protobuf: a `Document` with only `swagger: "2.0"` (field 1).
pub fn openapi_v2_protobuf() -> Vec<u8> {
    let mut v = vec![0x0a, 3];
    v.extend_from_slice(b"2.0");
    v
}

/// The media type `/openapi/v2` answers protobuf in. Clients ask for it under this name or under
/// the older `...spec.v2@v1.0+protobuf`, which Go's media-type parser refuses in an answer.
pub const OPENAPI_V2_PROTOBUF: &str = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf";

/// The encodings `/openapi/v2` is served in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpenApiV2 {
    /// `application/json`.
    Json,
    /// [`OPENAPI_V2_PROTOBUF`].
    Protobuf,
}

/// Which encoding of `/openapi/v2` an `Accept` header gets, negotiated as kube-apiserver's
/// OpenAPI handler does: entries by quality (the more specific first at equal quality), the first
/// one the server can produce wins; None (406) when none can be produced.
pub fn openapi_v2_negotiate(accept: &str) -> Option<OpenApiV2> {
    let accept = if accept.trim().is_empty() { "*/*" } else { accept };
    let mut clauses: Vec<(f32, String)> = accept
        .split(',')
        .filter_map(|entry| {
            let (media, params) = crate::format::accept_entry(entry);
            let q = params.get("q").and_then(|v| v.parse::<f32>().ok()).unwrap_or(1.0);
            (q > 0.0).then_some((q, media))
        })
        .collect();
    // At equal quality the more specific entry first (`application/json` before `*/*`).
    let specificity = |m: &str| m.split('/').filter(|p| *p != "*").count();
    clauses.sort_by(|a, b| b.0.total_cmp(&a.0).then(specificity(&b.1).cmp(&specificity(&a.1))));
    let offered = [
        ("json", OpenApiV2::Json),
        ("com.github.proto-openapi.spec.v2@v1.0+protobuf", OpenApiV2::Protobuf),
        ("com.github.proto-openapi.spec.v2.v1.0+protobuf", OpenApiV2::Protobuf),
    ];
    clauses.iter().find_map(|(_, media)| {
        let (ty, sub) = media.split_once('/').unwrap_or((media.as_str(), "*"));
        if ty != "application" && ty != "*" {
            return None;
        }
        offered.iter().find(|(s, _)| sub == "*" || sub.eq_ignore_ascii_case(s)).map(|&(_, f)| f)
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn openapi_v2_is_negotiated_as_kube_apiserver_does() {
        use super::{openapi_v2_negotiate as n, OpenApiV2::*};
        assert_eq!(n(""), Some(Json));
        assert_eq!(n("*/*"), Some(Json));
        assert_eq!(n("application/json"), Some(Json));
        // What kubectl sends (client-go's openapi v2 client), and the older name.
        assert_eq!(n("application/com.github.proto-openapi.spec.v2.v1.0+protobuf"), Some(Protobuf));
        assert_eq!(n("application/com.github.proto-openapi.spec.v2@v1.0+protobuf"), Some(Protobuf));
        assert_eq!(n("application/com.github.proto-openapi.spec.v2@v1.0+protobuf, application/json"), Some(Protobuf));
        assert_eq!(
            n("application/json;q=0.5, application/com.github.proto-openapi.spec.v2.v1.0+protobuf"),
            Some(Protobuf)
        );
        assert_eq!(n("application/json, application/com.github.proto-openapi.spec.v2.v1.0+protobuf;q=0.9"), Some(Json));
        assert_eq!(n("text/html, application/*;q=0.1"), Some(Json));
        assert_eq!(n("text/html"), None);
        assert_eq!(n("application/yaml"), None);
        assert_eq!(n("application/json;q=0"), None);
    }

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
        let l = resource_list(&Store::new(), "", "v1").unwrap();
        let names: Vec<&str> = l["resources"].as_array().unwrap().iter().map(|r| r["name"].as_str().unwrap()).collect();
        assert!(names.contains(&"persistentvolumes/status"));
        assert!(!names.contains(&"storageclasses"));
        let pv = l["resources"].as_array().unwrap().iter().find(|r| r["name"] == "persistentvolumes").unwrap();
        assert_eq!(pv["shortNames"][0], "pv");
        let mut sorted = names.clone();
        sorted.sort();
        assert_eq!(names, sorted);
        // kube-apiserver 1.37's /api/v1 lists pods, replicationcontrollers and services in the
        // `all` category (`kubectl get all`); of those, `up` serves pods and services.
        let all: Vec<&str> = l["resources"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["categories"].as_array().is_some_and(|c| c.iter().any(|c| c == "all")))
            .map(|r| r["name"].as_str().unwrap())
            .collect();
        assert_eq!(all, ["pods", "services"]);
    }

    #[test]
    fn the_storage_group_serves_every_kind_of_storage_k8s_io_v1_by_name() {
        let l = resource_list(&Store::new(), "storage.k8s.io", "v1").unwrap();
        let names: Vec<&str> = l["resources"].as_array().unwrap().iter().map(|r| r["name"].as_str().unwrap()).collect();
        assert_eq!(
            names,
            [
                "csidrivers",
                "csinodes",
                "csinodes/status",
                "csistoragecapacities",
                "storageclasses",
                "volumeattachments",
                "volumeattachments/status",
                "volumeattributesclasses"
            ]
        );
        let capacities = &l["resources"][3];
        assert_eq!(capacities["namespaced"], true);
        assert_eq!(l["resources"][7]["shortNames"], json!(["vac"]));
    }

    #[test]
    fn openapi_documents_hold_the_served_kinds_with_their_schemas() {
        let root = openapi_v3_root();
        for (gv, kind) in [
            ("api/v1", "io.k8s.api.core.v1.PersistentVolumeSpec"),
            ("apis/storage.k8s.io/v1", "io.k8s.api.storage.v1.StorageClass"),
            ("apis/coordination.k8s.io/v1", "io.k8s.api.coordination.v1.Lease"),
            ("apis/events.k8s.io/v1", "io.k8s.api.events.v1.Event"),
        ] {
            assert!(root["paths"][gv]["serverRelativeURL"].as_str().unwrap().contains("?hash="), "{gv}");
            let doc: Value = serde_json::from_str(openapi_v3_doc(gv).unwrap()).unwrap();
            assert!(doc["components"]["schemas"][kind]["properties"].is_object(), "{gv}: {kind}");
        }
        let v1: Value = serde_json::from_str(openapi_v3_doc("api/v1").unwrap()).unwrap();
        let pv_patch = &v1["paths"]["/api/v1/persistentvolumes/{name}"]["patch"];
        assert!(pv_patch["parameters"].as_array().unwrap().iter().any(|p| p["name"] == "fieldValidation"));
        assert!(openapi_v3_doc("apis/apps/v1").is_none());
        let v2: Value = serde_json::from_str(OPENAPI_V2_JSON).unwrap();
        assert!(v2["definitions"]["io.k8s.api.core.v1.PersistentVolumeClaim"].is_object());
    }

    #[test]
    fn groups_are_listed_in_kube_apiservers_order() {
        let g = api_groups(&Store::new());
        let names: Vec<&str> = g["groups"].as_array().unwrap().iter().map(|r| r["name"].as_str().unwrap()).collect();
        // kube-apiserver 1.37's /apis, less the groups not served here.
        assert_eq!(
            names,
            [
                "events.k8s.io",
                "rbac.authorization.k8s.io",
                "storage.k8s.io",
                "apiextensions.k8s.io",
                "coordination.k8s.io"
            ]
        );
    }

    #[test]
    fn every_served_group_version_has_its_openapi_document_and_no_document_is_left_over() {
        let served: Vec<String> = resources::built_in_group_versions()
            .into_iter()
            .map(|(g, v)| if g.is_empty() { format!("api/{v}") } else { format!("apis/{g}/{v}") })
            .collect();
        let documents: Vec<String> = openapi_v3().map(|(p, _)| p).collect();
        assert_eq!(
            documents, served,
            "a served group version without its file in openapi/: run scripts/gen-openapi.py"
        );
        assert_eq!(OPENAPI_V3_FILES.len(), served.len(), "a file in openapi/ of a group version not served");
    }
}
