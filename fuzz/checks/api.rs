//! What the API server's fuzz targets check, shared by `cargo fuzz` (nightly, libFuzzer) and by
//! the stable test that replays `fuzz/regressions/` and `fuzz/corpus/`
//! (`crates/apiserver/tests/fuzz_replay.rs`).
//!
//! Every input becomes an HTTP request that goes through the server's one entry point,
//! [`dispatch::dispatch`], as a client's request does after the connection layer: the bearer
//! token, routing, the body size and nesting limits, protobuf decoding at the edge, the verb
//! handlers and the store (in memory, with the limits and admission plugins `pv-controller up`
//! runs with). Each function panics when a property fails:
//! - [`write`]: a create, update, patch (merge, JSON, strategic, apply) or delete of any served
//!   kind, its body JSON, YAML or protobuf, with dry run, field validation and the status
//!   subresource chosen by the input. A refusal is a `Status` whose `code` is the HTTP code, a
//!   4xx (or etcd's 500 "request is too large"), and leaves the store as it was. An accepted
//!   write answers the object the store then serves; that object decodes as its k8s-openapi
//!   type and serializes back to itself, is served in protobuf, and passes the store's own
//!   validation again. A dry run stores nothing.
//! - [`read`]: a GET of any path with any query and `Accept` (lists with label and field
//!   selectors, paging, resource versions, Tables, PartialObjectMetadata, watches). An answer
//!   is a 2xx whose objects decode as their types, or a `Status` as above (a 504 only for a
//!   resourceVersion the store has not reached).
//!
//! A panic in the server fails the input; so does an allocation past libFuzzer's
//! `-malloc_limit_mb` (the same as `-rss_limit_mb`, 2048 MB by default).

#![allow(dead_code)]

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, Method, StatusCode};
use futures_util::{FutureExt, StreamExt};
use pv_apiserver::resources::{self, Served};
use pv_apiserver::routes::{self, Route};
use pv_apiserver::{dispatch, limits, protobuf, AppState};
use pv_store::Store;
use serde_json::{json, Value};
use std::sync::{Arc, OnceLock};

/// The bearer token every request carries.
const TOKEN: &str = "fuzz";
/// The namespace of namespaced fixtures.
const NS: &str = "fuzz";
/// The name of every fixture.
const NAME: &str = "fz";
/// Largest answer read back (a List of the fixtures is a few kB).
const MAX_ANSWER: usize = 64 << 20;

/// A valid object of each kind, named [`NAME`], labelled for selectors to find.
fn fixture(plural: &str) -> Option<Value> {
    let m = |ns: bool| {
        let mut m = json!({"name": NAME, "labels": {"app": "a", "tier": "b", "x.example.com/y": ""}});
        if ns {
            m["namespace"] = json!(NS);
        }
        m
    };
    Some(match plural {
        "persistentvolumes" => json!({"metadata": m(false), "spec": {"capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteOnce"], "hostPath": {"path": "/tmp/fz"}, "storageClassName": "fz"}}),
        "persistentvolumeclaims" => json!({"metadata": m(true), "spec": {"accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "1Gi"}}, "storageClassName": "fz"}}),
        "pods" => json!({"metadata": m(true), "spec": {"containers": [{"name": "c", "image": "i"}],
            "volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": NAME}}]}}),
        "nodes" => json!({"metadata": m(false)}),
        "namespaces" => json!({"metadata": m(false)}),
        "services" => json!({"metadata": m(true), "spec": {"ports": [{"port": 80}]}}),
        "events" => json!({"metadata": m(true), "involvedObject": {"kind": "Pod", "name": NAME, "namespace": NS},
            "reason": "R", "message": "m", "type": "Normal"}),
        "storageclasses" => json!({"metadata": m(false), "provisioner": "example.com/x"}),
        "leases" => json!({"metadata": m(true), "spec": {"holderIdentity": "a"}}),
        "csidrivers" => json!({"metadata": m(false), "spec": {"tokenRequests": [{"audience": "a"}]}}),
        "csinodes" => json!({"metadata": m(false), "spec": {"drivers": [{"name": "csi.example.com", "nodeID": NAME}]}}),
        "volumeattachments" => json!({"metadata": m(false), "spec": {"attacher": "csi.example.com",
            "source": {"persistentVolumeName": NAME}, "nodeName": NAME}}),
        "csistoragecapacities" => json!({"metadata": m(true), "storageClassName": "fz", "capacity": "1Gi"}),
        "volumeattributesclasses" => json!({"metadata": m(false), "driverName": "csi.example.com",
            "parameters": {"iops": "1"}}),
        _ => return None,
    })
}

/// A fresh server over an in-memory store with `up`'s limits and admission plugins, the
/// namespaces `default`, `kube-system` and [`NS`], and one fixture of each kind.
fn state() -> Arc<AppState> {
    static SHUTDOWN: OnceLock<tokio::sync::watch::Sender<bool>> = OnceLock::new();
    let rx = SHUTDOWN.get_or_init(|| tokio::sync::watch::channel(false).0).subscribe();
    let store =
        Store::builder().limits(limits::store_limits()).admission(pv_store::Admission::kube_apiserver()).build();
    for ns in ["default", "kube-system"] {
        store.create("namespaces", json!({"metadata": {"name": ns}})).expect("namespace");
    }
    for rt in pv_store::RESOURCE_TYPES {
        if let Some(o) = fixture(rt.plural) {
            store.create(rt.plural, o).unwrap_or_else(|e| panic!("fixture {}: {e}", rt.plural));
        }
    }
    Arc::new(AppState {
        store: Arc::new(store),
        token: TOKEN.into(),
        server_address: "127.0.0.1:1".into(),
        shutdown: rx,
        pages: Default::default(),
        writes: Default::default(),
        limits: limits::Limits::default(),
    })
}

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    thread_local! {
        static RT: tokio::runtime::Runtime =
            tokio::runtime::Builder::new_current_thread().enable_time().build().expect("runtime");
    }
    RT.with(|rt| rt.block_on(f))
}

/// An answer: code, headers and body (for a watch, what the stream had ready at once).
struct Answer {
    code: StatusCode,
    headers: HeaderMap,
    body: Vec<u8>,
    /// The URI as sent.
    uri: axum::http::Uri,
}

impl Answer {
    fn content_type(&self) -> &str {
        self.headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("")
    }
}

/// Sends one request through the dispatcher. None when no HTTP client could send it (a URI or
/// header value hyper refuses before the server sees it).
fn send(
    st: &Arc<AppState>,
    method: Method,
    uri: &str,
    headers: &[(header::HeaderName, &str)],
    body: Vec<u8>,
) -> Option<Answer> {
    let mut b = Request::builder().method(method).uri(uri).header(header::AUTHORIZATION, format!("Bearer {TOKEN}"));
    for (k, v) in headers {
        if !v.is_empty() {
            b = b.header(k, header::HeaderValue::from_str(v).ok()?);
        }
    }
    let req = b.body(Body::from(body)).ok()?;
    let watch = is_watch(req.uri());
    let uri = req.uri().clone();
    Some(block_on(async {
        let resp = dispatch::dispatch(State(st.clone()), req).await;
        let (parts, body) = resp.into_parts();
        let body = if watch && parts.status.is_success() {
            // A watch runs until its timeout: take what it has ready now (the initial events).
            let mut out = Vec::new();
            let mut stream = body.into_data_stream();
            while let Some(Some(chunk)) = stream.next().now_or_never() {
                out.extend_from_slice(&chunk.expect("watch stream"));
                assert!(out.len() <= MAX_ANSWER, "watch answer past {MAX_ANSWER} bytes");
            }
            out
        } else {
            axum::body::to_bytes(body, MAX_ANSWER).await.expect("answer body").to_vec()
        };
        Answer { code: parts.status, headers: parts.headers, body, uri }
    }))
}

/// Whether kube-apiserver takes the request for a watch: it reads the first `watch` of the
/// query, and any value but `0` and `false` (in any case) is true, the empty one included.
fn is_watch(uri: &axum::http::Uri) -> bool {
    let Ok(pairs) = axum::extract::Query::<Vec<(String, String)>>::try_from_uri(uri) else { return false };
    pairs.0.iter().find(|(k, _)| k == "watch").is_some_and(|(_, v)| v != "0" && !v.eq_ignore_ascii_case("false"))
}

/// A body in the media type it was sent as, as JSON.
fn parse(content_type: &str, kind: &str, body: &[u8]) -> Result<Value, String> {
    let media = content_type.split(';').next().unwrap_or("").trim();
    match media {
        "application/json" => serde_json::from_slice(body).map_err(|e| e.to_string()),
        "application/yaml" => std::str::from_utf8(body)
            .map_err(|e| e.to_string())
            .and_then(|t| serde_saphyr::from_str::<Value>(t).map_err(|e| e.to_string())),
        m if m == protobuf::MEDIA_TYPE => protobuf::decode(kind, body).map_err(|e| e.to_string()),
        other => Err(format!("unexpected content type {other:?}")),
    }
}

/// A refusal: a `Status` in the answer's media type whose code is the HTTP code, a 4xx (500
/// only for etcd's "request is too large"; 504 only where `timeout_ok` allows it), or the
/// plain 404 of a path outside the API.
fn refusal(a: &Answer, what: &str, timeout_ok: &dyn Fn(&Value) -> bool) -> Value {
    if a.code == StatusCode::NOT_FOUND && a.content_type().starts_with("text/plain") {
        // Outside the API (an unknown `/readyz/<check>`) kube-apiserver answers as Go's
        // `http.NotFound` does.
        assert_eq!(a.body, b"404 page not found\n", "{what}");
        return Value::Null;
    }
    let s = parse(a.content_type(), "Status", &a.body)
        .unwrap_or_else(|e| panic!("{what}: refused with {} and a body that is not a Status: {e}", a.code));
    assert_eq!(s["kind"], "Status", "{what}: {s}");
    assert_eq!(s["status"], "Failure", "{what}: {s}");
    assert_eq!(s["code"], json!(a.code.as_u16()), "{what}: the Status code is not the HTTP code: {s}");
    assert!(s["message"].as_str().is_some_and(|m| !m.is_empty()), "{what}: no message: {s}");
    let code = a.code.as_u16();
    let allowed = a.code.is_client_error()
        || (code == 500 && s["message"] == "etcdserver: request is too large")
        || (code == 504 && timeout_ok(&s));
    assert!(allowed, "{what}: refused with {code}: {s}");
    s
}

/// The object as its k8s-openapi type reads it, serialized back.
fn through<T: serde::de::DeserializeOwned + serde::Serialize>(v: &Value) -> Result<Value, String> {
    let t: T = serde_json::from_value(v.clone()).map_err(|e| e.to_string())?;
    serde_json::to_value(&t).map_err(|e| e.to_string())
}

/// Checks that `obj` decodes as the served kind's k8s-openapi type and serializes back to
/// itself (type fields added where a List's items leave them out).
fn typed_roundtrip(served: &Served, obj: &Value, what: &str) {
    use k8s_openapi::api::{coordination, core, events, storage};
    let mut obj = obj.clone();
    if let Some(o) = obj.as_object_mut() {
        o.entry("apiVersion").or_insert_with(|| json!(served.api_version()));
        o.entry("kind").or_insert_with(|| json!(served.kind()));
    }
    let back = match (served.events_v1, served.kind()) {
        (true, _) => through::<events::v1::Event>(&obj),
        (_, "PersistentVolume") => through::<core::v1::PersistentVolume>(&obj),
        (_, "PersistentVolumeClaim") => through::<core::v1::PersistentVolumeClaim>(&obj),
        (_, "Pod") => through::<core::v1::Pod>(&obj),
        (_, "Node") => through::<core::v1::Node>(&obj),
        (_, "Namespace") => through::<core::v1::Namespace>(&obj),
        (_, "Event") => through::<core::v1::Event>(&obj),
        (_, "Service") => through::<core::v1::Service>(&obj),
        (_, "StorageClass") => through::<storage::v1::StorageClass>(&obj),
        (_, "CSIDriver") => through::<storage::v1::CSIDriver>(&obj),
        (_, "CSINode") => through::<storage::v1::CSINode>(&obj),
        (_, "VolumeAttachment") => through::<storage::v1::VolumeAttachment>(&obj),
        (_, "CSIStorageCapacity") => through::<storage::v1::CSIStorageCapacity>(&obj),
        (_, "VolumeAttributesClass") => through::<storage::v1::VolumeAttributesClass>(&obj),
        (_, "Lease") => through::<coordination::v1::Lease>(&obj),
        (_, "Secret") => through::<core::v1::Secret>(&obj),
        (_, "ConfigMap") => through::<core::v1::ConfigMap>(&obj),
        (_, "ServiceAccount") => through::<core::v1::ServiceAccount>(&obj),
        (_, "Role") => through::<k8s_openapi::api::rbac::v1::Role>(&obj),
        (_, "ClusterRole") => through::<k8s_openapi::api::rbac::v1::ClusterRole>(&obj),
        (_, "RoleBinding") => through::<k8s_openapi::api::rbac::v1::RoleBinding>(&obj),
        (_, "ClusterRoleBinding") => through::<k8s_openapi::api::rbac::v1::ClusterRoleBinding>(&obj),
        (_, "CustomResourceDefinition") => through::<
            k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
        >(&obj),
        (_, other) => panic!("{what}: no type for kind {other}"),
    };
    match back {
        Err(e) => panic!("{what}: not readable as a {}: {e}\n{obj}", served.kind()),
        Ok(back) => assert_eq!(
            without_empty(&back),
            without_empty(&obj),
            "{what}: a {} that does not serialize back to itself",
            served.kind()
        ),
    }
}

/// The object without fields that are `null` or an empty list: Go writes a nil list as `null`
/// (a CSINode's `drivers`, a VolumeAttachment error's unset `time`), as kube-apiserver serves
/// them, where the typed object writes `[]` or nothing; for a typed client all three are unset.
fn without_empty(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(_, x)| !x.is_null() && x.as_array().is_none_or(|a| !a.is_empty()))
                .map(|(k, x)| (k.clone(), without_empty(x)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(without_empty).collect()),
        other => other.clone(),
    }
}

/// Checks a successful answer to a GET: each object it carries decodes as its type.
fn check_read_answer(served: &Served, a: &Answer, watch: bool, what: &str) {
    if watch {
        if protobuf::is_protobuf(a.content_type()) {
            let events = protobuf::read_watch_frames(&a.body).unwrap_or_else(|e| panic!("{what}: watch frames: {e}"));
            for (ty, obj) in events {
                check_event(served, &ty, &obj, what);
            }
        } else {
            for line in a.body.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
                let ev: Value = serde_json::from_slice(line).unwrap_or_else(|e| panic!("{what}: watch line: {e}"));
                check_event(served, ev["type"].as_str().unwrap_or(""), &ev["object"], what);
            }
        }
        return;
    }
    let v = parse(a.content_type(), served.kind(), &a.body).unwrap_or_else(|e| panic!("{what}: answer: {e}"));
    check_answer_object(served, &v, what);
}

fn check_event(served: &Served, ty: &str, obj: &Value, what: &str) {
    match ty {
        "ADDED" | "MODIFIED" | "DELETED" | "BOOKMARK" => check_answer_object(served, obj, what),
        "ERROR" => assert_eq!(obj["kind"], "Status", "{what}: ERROR event without a Status: {obj}"),
        other => panic!("{what}: watch event type {other:?}"),
    }
}

/// An object, a List, a Table or PartialObjectMetadata as a GET answers it.
fn check_answer_object(served: &Served, v: &Value, what: &str) {
    let kind = v["kind"].as_str().unwrap_or_default();
    match kind {
        "Table" => assert!(v["rows"].is_array() || v["rows"].is_null(), "{what}: Table without rows: {v}"),
        "PartialObjectMetadata" | "PartialObjectMetadataList" => {}
        k if k.ends_with("List") => {
            for item in v["items"].as_array().map(Vec::as_slice).unwrap_or_default() {
                typed_roundtrip(served, item, what);
            }
        }
        // A BOOKMARK carries only the kind and a resourceVersion.
        _ if v["metadata"]["name"].is_null() => {
            assert_eq!(kind, served.kind(), "{what}: {v}");
        }
        _ => typed_roundtrip(served, v, what),
    }
}

/// A GET: the first line is the path and query, the second the `Accept` header.
pub fn read(data: &[u8]) {
    static STATE: OnceLock<Arc<AppState>> = OnceLock::new();
    let st = STATE.get_or_init(state);
    let Ok(text) = std::str::from_utf8(data) else { return };
    let (uri, accept) = text.split_once('\n').unwrap_or((text, ""));
    if !uri.starts_with('/') {
        return;
    }
    let Some(a) = send(st, Method::GET, uri, &[(header::ACCEPT, accept)], Vec::new()) else { return };
    let what = format!("GET {uri} (Accept: {accept})");
    if !a.code.is_success() {
        refusal(&a, &what, &|s| s["details"]["causes"][0]["reason"] == "ResourceVersionTooLarge");
        return;
    }
    let path = uri.split('?').next().unwrap_or("");
    if let Some(Route::Resource(t)) = routes::parse(path, &st.store) {
        check_read_answer(&t.served, &a, is_watch(&a.uri), &what);
    }
}

fn served(b: u8) -> Served {
    let all = resources::built_in();
    all[b as usize % all.len()]
}

/// The path of the served kind's collection in namespace `ns` (ignored when cluster-scoped).
fn collection(served: &Served, ns: &str) -> String {
    let base = if served.group.is_empty() {
        format!("/api/{}", served.version)
    } else {
        format!("/apis/{}/{}", served.group, served.version)
    };
    if served.rt.namespaced {
        format!("{base}/namespaces/{ns}/{}", served.plural())
    } else {
        format!("{base}/{}", served.plural())
    }
}

const VERBS: [&str; 7] = ["create", "update", "merge-patch", "json-patch", "strategic-patch", "apply", "delete"];

/// A write: `[verb, kind, options, options, body...]`.
///
/// Byte 2: the body's content type (bits 0-1: JSON, YAML, protobuf, none), the status
/// subresource (bit 2), `dryRun=All` (bit 3), `fieldValidation` (bits 4-5: Strict, Warn,
/// Ignore, none), `Accept` (bits 6-7: JSON, YAML, protobuf, none). Byte 3: `fieldManager`
/// (bit 0), `force=true` (bit 1), the namespace `default` instead of the fixtures' (bit 2).
pub fn write(data: &[u8]) {
    let [verb, kind, o1, o2, body @ ..] = data else { return };
    let verb = (verb % VERBS.len() as u8) as usize;
    let served = served(*kind);
    let st = state();
    let ns = if o2 & 4 != 0 { "default" } else { NS };
    let status = o1 & 4 != 0 && verb != 0;
    let body_type = ["application/json", "application/yaml", protobuf::MEDIA_TYPE, ""][(o1 & 3) as usize];
    // A delete with a body takes its options from the body alone, as kube-apiserver does: the
    // query's `dryRun` then does not count.
    let dry = if verb == 6 && !body.is_empty() {
        parse(if body_type.is_empty() { "application/json" } else { body_type }, "DeleteOptions", body)
            .is_ok_and(|o| o["dryRun"].as_array().is_some_and(|a| !a.is_empty()))
    } else {
        o1 & 8 != 0
    };
    let mut path = collection(&served, ns);
    if verb != 0 {
        path = format!("{path}/{NAME}");
        if status {
            path.push_str("/status");
        }
    }
    let mut query = vec![
        ["fieldValidation=Strict", "fieldValidation=Warn", "fieldValidation=Ignore", ""][((o1 >> 4) & 3) as usize],
    ];
    if o1 & 8 != 0 {
        query.push("dryRun=All");
    }
    if o2 & 1 != 0 {
        query.push("fieldManager=fuzz");
    }
    if o2 & 2 != 0 {
        query.push("force=true");
    }
    query.retain(|q| !q.is_empty());
    let uri = if query.is_empty() { path.clone() } else { format!("{path}?{}", query.join("&")) };
    let (method, ct) = match verb {
        0 => (Method::POST, body_type),
        1 => (Method::PUT, body_type),
        2 => (Method::PATCH, "application/merge-patch+json"),
        3 => (Method::PATCH, "application/json-patch+json"),
        4 => (Method::PATCH, "application/strategic-merge-patch+json"),
        5 => (Method::PATCH, "application/apply-patch+yaml"),
        _ => (Method::DELETE, body_type),
    };
    let accept = ["application/json", "application/yaml", protobuf::MEDIA_TYPE, ""][(o1 >> 6) as usize];
    let what = format!("{} {uri} ({ct}, Accept: {accept})", VERBS[verb]);
    let before = st.store.resource_version();
    let headers = [(header::CONTENT_TYPE, ct), (header::ACCEPT, accept)];
    let Some(a) = send(&st, method, &uri, &headers, body.to_vec()) else { return };
    if !a.code.is_success() {
        refusal(&a, &what, &|_| false);
        assert_eq!(st.store.resource_version(), before, "{what}: refused with {}, yet the store changed", a.code);
        return;
    }
    let answered = parse(a.content_type(), if verb == 6 { "Status" } else { served.kind() }, &a.body)
        .unwrap_or_else(|e| panic!("{what}: the answer does not parse: {e}"));
    if dry {
        assert_eq!(st.store.resource_version(), before, "{what}: a dry run changed the store");
        return;
    }
    if verb == 6 {
        // Gone, or (with finalizers) marked for deletion.
        let Some(g) = send(&st, Method::GET, &format!("{}/{NAME}", collection(&served, ns)), &[], Vec::new()) else {
            return;
        };
        if g.code.is_success() {
            let obj: Value = serde_json::from_slice(&g.body).expect("JSON");
            assert!(!obj["metadata"]["deletionTimestamp"].is_null(), "{what}: deleted, yet still there: {obj}");
        } else {
            assert_eq!(g.code, StatusCode::NOT_FOUND, "{what}: deleted, then GET answers {}", g.code);
        }
        return;
    }
    // What the write answered is what the store serves, in every representation.
    let name = answered["metadata"]["name"]
        .as_str()
        .unwrap_or_else(|| panic!("{what}: an accepted object without a name: {answered}"))
        .to_string();
    let obj_path = format!("{}/{name}", collection(&served, answered["metadata"]["namespace"].as_str().unwrap_or(ns)));
    let got = send(&st, Method::GET, &obj_path, &[], Vec::new()).expect("GET");
    assert_eq!(got.code, StatusCode::OK, "{what}: accepted, then GET {obj_path} answers {}", got.code);
    let stored: Value = serde_json::from_slice(&got.body).expect("JSON");
    if a.content_type().starts_with("application/json") {
        assert_eq!(answered, stored, "{what}: the answer is not what the store serves");
    }
    typed_roundtrip(&served, &stored, &what);
    let pb = send(&st, Method::GET, &obj_path, &[(header::ACCEPT, protobuf::MEDIA_TYPE)], Vec::new()).expect("GET");
    assert_eq!(
        pb.code,
        StatusCode::OK,
        "{what}: accepted, then not served in protobuf: {}",
        String::from_utf8_lossy(&pb.body)
    );
    protobuf::decode(served.kind(), &pb.body).unwrap_or_else(|e| panic!("{what}: its protobuf does not decode: {e}"));
    // Valid for the store as it stands (the update of an object to itself).
    let raw = st
        .store
        .get(
            served.plural(),
            if served.rt.namespaced { answered["metadata"]["namespace"].as_str().unwrap_or(ns) } else { "" },
            &name,
        )
        .expect("stored");
    if let Err(e) = st.store.update_dry_run(served.plural(), raw.value(), false) {
        panic!("{what}: the stored object fails the store's own validation: {e}\n{}", raw.text());
    }
}
