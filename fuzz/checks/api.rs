//! What the API server's fuzz targets check, shared by `cargo fuzz` (nightly, libFuzzer) and by
//! the stable regression test that replays the kept corpus (`crates/apiserver/tests/fuzz_corpus.rs`).
//!
//! Each function takes the raw input and panics when a property fails:
//! - [`write`]: a create, update or patch (merge, JSON, strategic, apply) of any served kind,
//!   its body JSON, YAML or protobuf, through the same handlers as HTTP requests. A refusal is a
//!   `Status` with its code (4xx; 500 only for etcd's "request is too large") and writes
//!   nothing; an acceptance stores an object that a typed client can read, that the store's own
//!   validation accepts again, and that encodes to protobuf.
//! - [`selectors`]: label and field selectors, parsed and matched against objects of every kind.
//! - [`path`]: request paths and the query parameters a list or watch reads.

#![allow(dead_code)]

use pv_apiserver::handlers::{self, Format, Query};
use pv_apiserver::resources::{self, Served};
use pv_apiserver::routes::{self, Route, Target};
use pv_apiserver::select::{FieldSelector, LabelSelector};
use pv_apiserver::{decode, limits, protobuf, ApiError, AppState};
use pv_store::Store;
use serde_json::{json, Value};
use std::sync::{Arc, OnceLock};

/// The namespace of namespaced fixtures.
const NS: &str = "fuzz";
/// The name of every fixture.
const NAME: &str = "fz";

/// A valid object of each kind, named [`NAME`].
fn fixture(plural: &str) -> Option<Value> {
    let m = |ns: bool| if ns { json!({"name": NAME, "namespace": NS}) } else { json!({"name": NAME}) };
    Some(match plural {
        "persistentvolumes" => json!({"metadata": m(false), "spec": {"capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteOnce"], "hostPath": {"path": "/tmp/fz"}}}),
        "persistentvolumeclaims" => json!({"metadata": m(true), "spec": {"accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "1Gi"}}}}),
        "pods" => json!({"metadata": m(true), "spec": {"containers": [{"name": "c", "image": "i"}]}}),
        "nodes" => json!({"metadata": m(false)}),
        "namespaces" => json!({"metadata": m(false)}),
        "services" => json!({"metadata": m(true), "spec": {"ports": [{"port": 80}]}}),
        "events" => json!({"metadata": m(true), "involvedObject": {"kind": "Pod", "name": "x", "namespace": NS},
            "reason": "R", "message": "m", "type": "Normal"}),
        "storageclasses" => json!({"metadata": m(false), "provisioner": "example.com/x"}),
        "leases" => json!({"metadata": m(true), "spec": {"holderIdentity": "a"}}),
        _ => return None,
    })
}

/// A fresh server state with namespaces `default` and [`NS`] and one fixture per kind.
fn state() -> AppState {
    static SHUTDOWN: OnceLock<tokio::sync::watch::Sender<bool>> = OnceLock::new();
    let rx = SHUTDOWN.get_or_init(|| tokio::sync::watch::channel(false).0).subscribe();
    let store = Store::builder().limits(limits::store_limits()).build();
    for ns in ["default", NS] {
        store.create("namespaces", json!({"metadata": {"name": ns}})).expect("namespace");
    }
    for rt in pv_store::RESOURCE_TYPES {
        if let Some(o) = fixture(rt.plural) {
            store.create(rt.plural, o).unwrap_or_else(|e| panic!("fixture {}: {e}", rt.plural));
        }
    }
    AppState {
        store: Arc::new(store),
        token: "t".into(),
        server_address: "127.0.0.1:1".into(),
        shutdown: rx,
        pages: Default::default(),
        writes: Default::default(),
        limits: limits::Limits::default(),
    }
}

/// A refusal must be a proper `Status`.
fn proper_status(e: &ApiError, what: &str) {
    let code = e.code();
    let s = e.status();
    assert_eq!(s["kind"], "Status", "{what}: {s}");
    assert_eq!(s["status"], "Failure", "{what}: {s}");
    assert_eq!(s["code"], json!(code), "{what}: {s}");
    assert!(s["message"].as_str().is_some_and(|m| !m.is_empty()), "{what}: no message: {s}");
    assert!((400..500).contains(&code) || e.to_string().contains("request is too large"), "{what}: {code} {e}");
}

fn served(b: u8) -> Served {
    let all = resources::all();
    all[b as usize % all.len()]
}

/// Create, update or patch: `[verb, kind, content type, options, body...]`.
pub fn write(data: &[u8]) {
    if data.len() < 4 {
        return;
    }
    let (verb, served, ct_b, opt_b, body) = (data[0] % 6, served(data[1]), data[2] % 3, data[3], &data[4..]);
    let st = state();
    let ns = served.rt.namespaced.then(|| NS.to_string());
    let status = opt_b & 4 != 0 && verb != 0;
    let t = Target {
        served,
        namespace: ns.clone(),
        name: (verb != 0).then(|| NAME.to_string()),
        subresource: status.then(|| "status".to_string()),
    };
    let mut q = Query::new();
    q.insert("fieldValidation".into(), ["Strict", "Warn", "Ignore", ""][(opt_b & 3) as usize].into());
    let dry = opt_b & 8 != 0;
    if dry {
        q.insert("dryRun".into(), "All".into());
    }
    let before = st.store.resource_version();
    let result = (|| {
        let mut bytes = body.to_vec();
        let ct = match verb {
            0 | 1 => match ct_b {
                0 => "application/json",
                1 => "application/yaml",
                _ => {
                    // As the dispatcher does: protobuf is decoded at the edge into JSON.
                    let v = protobuf::decode(served.kind(), body)?;
                    bytes = serde_json::to_vec(&v).expect("JSON");
                    "application/json"
                }
            },
            2 => "application/merge-patch+json",
            3 => "application/json-patch+json",
            4 => "application/strategic-merge-patch+json",
            _ => "application/apply-patch+yaml",
        };
        if ct_b != 2 || verb > 1 {
            limits::check_depth(&bytes, limits::Limits::default().max_yaml_depth)?;
        }
        match verb {
            0 => handlers::create(&st, &t, &q, ct, &bytes),
            1 => handlers::update(&st, &t, &q, ct, &bytes),
            _ => handlers::patch(&st, &t, &q, ct, &bytes),
        }
    })();
    match result {
        Err(e) => {
            proper_status(&e, &format!("{} {}", ["create", "update", "merge", "json", "strategic", "apply"][verb as usize], served.plural()));
            assert_eq!(st.store.resource_version(), before, "a refused write changed the store: {e}");
        }
        Ok(((_, answered), _)) => {
            if dry {
                assert_eq!(st.store.resource_version(), before, "a dry run wrote");
                return;
            }
            let name = answered["metadata"]["name"].as_str().expect("a stored object has a name").to_string();
            let stored = st
                .store
                .get(served.plural(), ns.as_deref().unwrap_or(""), &name)
                .unwrap_or_else(|e| panic!("the answered object is not stored: {e}"));
            let shown = handlers::out(&t, &stored);
            if let Err(e) = decode::typed(&served, shown.clone(), decode::FieldValidation::Strict) {
                panic!("stored {} is not readable as its type: {e}\n{shown}", served.plural());
            }
            if let Err(e) = protobuf::encode(&shown) {
                panic!("stored {} does not encode to protobuf: {e}\n{shown}", served.plural());
            }
            if let Err(e) = st.store.update_dry_run(served.plural(), (*stored).clone(), false) {
                panic!("stored {} fails the store's own validation: {e}\n{stored}", served.plural());
            }
        }
    }
}

fn objects() -> Vec<(Served, Value)> {
    resources::all()
        .into_iter()
        .filter_map(|s| {
            let mut o = fixture(s.plural())?;
            o["metadata"]["labels"] = json!({"app": "a", "tier": "b", "x.example.com/y": ""});
            Some((s, o))
        })
        .collect()
}

/// Label and field selectors: `[kind, label selector \n field selector]`.
pub fn selectors(data: &[u8]) {
    if data.is_empty() {
        return;
    }
    let served = served(data[0]);
    let text = String::from_utf8_lossy(&data[1..]);
    let (label, field) = text.split_once('\n').unwrap_or((&text, ""));
    match LabelSelector::parse(label) {
        Ok(sel) => {
            for (_, o) in objects() {
                sel.matches(&o);
            }
        }
        Err(e) => proper_status(&e, &format!("labelSelector {label:?}")),
    }
    match FieldSelector::parse(field).and_then(|f| f.for_endpoint(&served)) {
        Ok(sel) => {
            let _ = sel.pinned_name();
            for (_, o) in objects() {
                sel.matches(&o);
            }
        }
        Err(e) => proper_status(&e, &format!("fieldSelector {field:?}")),
    }
    let mut q = Query::new();
    q.insert("labelSelector".into(), label.to_string());
    q.insert("fieldSelector".into(), field.to_string());
    if let Err(e) = handlers::selectors(&q) {
        proper_status(&e, "selectors");
    }
}

/// A request path with its query: `/api/v1/...?limit=..&continue=..`. GET and LIST of what it
/// addresses run against the fixtures.
pub fn path(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let (path, query) = text.split_once('?').unwrap_or((&text, ""));
    let mut q = Query::new();
    for pair in query.split('&') {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        q.insert(k.to_string(), v.to_string());
    }
    let _ = limits::watch_timeout(&q).map_err(|e| proper_status(&e, "timeoutSeconds"));
    let _ = limits::int_param(&q, "limit").map_err(|e| proper_status(&e, "limit"));
    let Some(Route::Resource(t)) = routes::parse(path) else { return };
    let st = state();
    let accept = q.get("accept").cloned().unwrap_or_default();
    let format = Format::new(&accept, &q);
    let r = if t.name.is_some() { handlers::get(&st, &t, &q, format) } else { handlers::list(&st, &t, &q, format) };
    if let Err(e) = r {
        proper_status(&e, &format!("GET {text}"));
    }
}
