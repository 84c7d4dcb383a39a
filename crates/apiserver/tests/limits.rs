//! What a careless or hostile client can cost the server: every bound of `pv_apiserver::limits`
//! exercised against a running server (plain HTTP) or the request handler in process.

use axum::body::Body;
use axum::extract::State;
use axum::http::Request;
use futures_util::StreamExt;
use proptest::prelude::*;
use pv_apiserver::limits::Limits;
use pv_apiserver::{dispatch, AppState};
use pv_store::{Backend, Mutation, Snapshot, Store};
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const PVS: &str = "/api/v1/persistentvolumes";

mod common;
use common::{start, start_with, Api};

impl Api {
    async fn send(&self, m: Method, path: &str, ct: &str, body: Option<Vec<u8>>) -> (StatusCode, Value) {
        let mut r = self.request(m, path);
        if let Some(b) = body {
            r = r.header("content-type", ct).body(b);
        }
        let resp = r.send().await.unwrap();
        let code = resp.status();
        let text = resp.text().await.unwrap();
        (code, serde_json::from_str(&text).unwrap_or(Value::String(text)))
    }
    async fn json(&self, m: Method, path: &str, ct: &str, body: &Value) -> (StatusCode, Value) {
        self.send(m, path, ct, Some(body.to_string().into_bytes())).await
    }
}

/// A volume carrying `pad` bytes in a mount option (annotations are capped at 256 KiB, and a
/// volume's source may not change).
fn pv(name: &str, pad: usize) -> Value {
    json!({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name},
           "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "mountOptions": ["x".repeat(pad)],
                    "nfs": {"server": "s", "path": "/x"}}})
}

/// A merge patch setting the mount options to `n` options of `pad` bytes.
fn options(n: usize, pad: usize, c: char) -> Value {
    json!({"spec": {"mountOptions": vec![c.to_string().repeat(pad); n]}})
}

const MERGE: &str = "application/merge-patch+json";

async fn read_lines(resp: &mut reqwest::Response, n: usize) -> Vec<Value> {
    let mut out = Vec::new();
    let mut buf = Vec::new();
    while out.len() < n {
        match tokio::time::timeout(Duration::from_secs(30), resp.chunk()).await {
            Ok(Ok(Some(c))) => buf.extend_from_slice(&c),
            _ => break,
        }
        while let Some(pos) = buf.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = buf.drain(..=pos).collect();
            out.push(serde_json::from_slice(&line).unwrap());
        }
    }
    out
}

#[tokio::test]
async fn a_watch_with_the_largest_timeout_seconds_streams_instead_of_panicking() {
    let d = tempfile::tempdir().unwrap();
    let a = start(d.path()).await;
    a.json(Method::POST, PVS, "application/json", &pv("a", 1)).await;
    let mut w =
        a.c.get(format!("{}{PVS}?watch=1&timeoutSeconds=9223372036854775807", a.h.url()))
            .bearer_auth(a.h.token())
            .send()
            .await
            .unwrap();
    assert_eq!(w.status(), StatusCode::OK);
    let ev = read_lines(&mut w, 1).await;
    assert_eq!(ev[0]["type"], "ADDED");
    // A number that is not one is kube-apiserver's 400, not a silent default.
    let (code, s) = a.send(Method::GET, &format!("{PVS}?watch=1&timeoutSeconds=soon"), "", None).await;
    assert_eq!((code.as_u16(), s["kind"].as_str()), (400, Some("Status")), "{s}");
    drop(w);
    // A negative timeout is kept as given, as kube-apiserver keeps it: the watch is over at once,
    // before its first event (it would otherwise stream the object above, then wait).
    let w = a.c.get(format!("{}{PVS}?watch=1&timeoutSeconds=-1", a.h.url())).bearer_auth(a.h.token()).send();
    let w = w.await.unwrap();
    assert_eq!(w.status(), StatusCode::OK);
    assert_eq!(w.text().await.unwrap(), "");
    // A watch from a version past 2^64 - 1, or not a number: the storage layer's parse error,
    // in kube-apiserver's words, as the client's error (kube-apiserver: a 500).
    for (rv, why) in [("18446744073709551616", "value out of range"), ("-1", "invalid syntax")] {
        let (code, s) = a.send(Method::GET, &format!("{PVS}?watch=1&resourceVersion={rv}"), "", None).await;
        assert_eq!((code.as_u16(), s["reason"].as_str()), (400, Some("BadRequest")), "{s}");
        let want = format!("resourceVersion: Invalid value: \"{rv}\": strconv.ParseUint: parsing \"{rv}\": {why}");
        assert_eq!(s["message"], want.as_str());
        // A list says the same as a 400.
        let (code, s) = a.send(Method::GET, &format!("{PVS}?resourceVersion={rv}"), "", None).await;
        assert_eq!((code.as_u16(), s["reason"].as_str()), (400, Some("BadRequest")), "{s}");
        assert_eq!(s["message"], format!("invalid resource version: {want}").as_str());
    }
    a.h.shutdown().await.unwrap();
}

#[tokio::test]
async fn objects_over_the_size_limit_are_refused_however_they_are_made() {
    let d = tempfile::tempdir().unwrap();
    let a = start(d.path()).await;
    // A plain create of 1.6 MB: etcd's refusal, as kube-apiserver passes it on.
    let (code, s) = a.json(Method::POST, PVS, "application/json", &pv("big", 1_600_000)).await;
    assert_eq!(code.as_u16(), 500, "{s}");
    assert_eq!(s["message"], "etcdserver: request is too large");
    assert!(s.get("reason").is_none(), "{s}");
    // A body over 3 MiB: 413 before it is parsed.
    let (code, s) = a.json(Method::POST, PVS, "application/json", &pv("huge", 3_200_000)).await;
    assert_eq!((code.as_u16(), s["reason"].as_str()), (413, Some("RequestEntityTooLarge")), "{s}");
    assert_eq!(s["message"], "Request entity too large: limit is 3145728");

    // A 1 KB JSON patch of copies doubling the object: stopped at 3 MiB of copies.
    a.json(Method::POST, PVS, "application/json", &pv("p", 1000)).await;
    let mut ops = vec![json!({"op": "add", "path": "/spec/mountOptions", "value": []})];
    for _ in 0..17 {
        ops.push(json!({"op": "copy", "from": "/spec", "path": "/spec/mountOptions/-"}));
    }
    let (code, s) = a.json(Method::PATCH, &format!("{PVS}/p"), "application/json-patch+json", &json!(ops)).await;
    assert_eq!(code.as_u16(), 422, "{s}");
    assert!(s["message"].as_str().unwrap().starts_with("Unable to complete the copy"), "{s}");
    // Too many operations: 413.
    let many: Vec<Value> =
        (0..10_001).map(|_| json!({"op": "test", "path": "/kind", "value": "PersistentVolume"})).collect();
    let (code, s) = a.json(Method::PATCH, &format!("{PVS}/p"), "application/json-patch+json", &json!(many)).await;
    assert_eq!(code.as_u16(), 413, "{s}");
    assert_eq!(s["message"], "The allowed maximum operations in a JSON patch is 10000, got 10001");

    // Merge patches that each grow the object by 600 KB: the third would pass 1.5 MiB.
    for n in [1, 2] {
        let (code, s) = a.json(Method::PATCH, &format!("{PVS}/p"), MERGE, &options(n, 600_000, 'a')).await;
        assert_eq!(code.as_u16(), 200, "{s}");
    }
    let (code, s) = a.json(Method::PATCH, &format!("{PVS}/p"), MERGE, &options(3, 600_000, 'a')).await;
    assert_eq!((code.as_u16(), s["message"].as_str()), (500, Some("etcdserver: request is too large")));
    let (_, o) = a.send(Method::GET, &format!("{PVS}/p"), "", None).await;
    assert_eq!(o["spec"]["mountOptions"].as_array().unwrap().len(), 2, "the refused patch left no trace");
    a.h.shutdown().await.unwrap();
}

/// A client that opens a watch and never reads it, while one large object is rewritten many
/// times: the server ends that watch instead of queueing every change for it, and the history
/// forgets the oldest versions by size (410 for a watch from before them).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watcher_that_never_reads_is_cut_off_and_history_is_bounded_by_bytes() {
    let d = tempfile::tempdir().unwrap();
    let a = start(d.path()).await;
    let (_, first) = a.json(Method::POST, PVS, "application/json", &pv("big", 200_000)).await;
    let first_rv = first["metadata"]["resourceVersion"].as_str().unwrap().to_string();
    let mut slow =
        a.c.get(format!("{}{PVS}?watch=true&resourceVersion={first_rv}", a.h.url()))
            .bearer_auth(a.h.token())
            .send()
            .await
            .unwrap();
    let updates = 400;
    for i in 0..updates {
        let c = if i % 2 == 0 { 'y' } else { 'z' };
        let (code, s) = a.json(Method::PATCH, &format!("{PVS}/big"), MERGE, &options(1, 200_000, c)).await;
        assert_eq!(code, StatusCode::OK, "{s}");
    }
    // 400 changes of 200 KB = 80 MB: more than the history keeps, so the first version is gone.
    let mut late =
        a.c.get(format!("{}{PVS}?watch=true&resourceVersion={first_rv}", a.h.url()))
            .bearer_auth(a.h.token())
            .send()
            .await
            .unwrap();
    let ev = read_lines(&mut late, 1).await;
    assert_eq!((ev[0]["type"].as_str(), ev[0]["object"]["code"].as_u64()), (Some("ERROR"), Some(410)), "{:?}", ev[0]);
    // The slow client now reads: it gets what was queued before it fell behind, then the end.
    let mut got = 0;
    let mut buf = Vec::new();
    let ended = loop {
        match tokio::time::timeout(Duration::from_secs(30), slow.chunk()).await {
            Ok(Ok(Some(c))) => buf.extend_from_slice(&c),
            Ok(Ok(None)) => break true,
            Ok(Err(_)) => break true,
            Err(_) => break false,
        }
        while let Some(pos) = buf.iter().position(|b| *b == b'\n') {
            buf.drain(..=pos);
            got += 1;
        }
    };
    assert!(ended, "the stream of a watcher that fell behind must end (got {got} events)");
    assert!(got < updates, "{got} of {updates} changes were queued for a client that read nothing");
    a.h.shutdown().await.unwrap();
}

/// Four times as many silent connections as the server serves at once (half of them stop in
/// the middle of their headers), with a header timeout too long to help: the client still gets
/// in, because a connection that never completed a request makes room for a new one.
#[tokio::test]
async fn connections_that_never_send_headers_do_not_lock_out_a_client() {
    let d = tempfile::tempdir().unwrap();
    let limits = Limits { max_connections: 8, header_read_timeout: Duration::from_secs(3600), ..Limits::default() };
    let a = start_with(d.path(), limits).await;
    let addr = a.h.local_addr();
    let mut silent = Vec::new();
    for i in 0..32 {
        let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
        if i % 2 == 0 {
            s.write_all(b"GET /api/v1/persistentvolumes HTTP/1.1\r\nHost: x\r\n").await.unwrap();
        }
        silent.push(s);
    }
    for _ in 0..3 {
        let r = tokio::time::timeout(
            Duration::from_secs(60),
            a.c.get(format!("{}{PVS}", a.h.url())).bearer_auth(a.h.token()).send(),
        )
        .await
        .expect("an authenticated client was locked out by silent connections")
        .unwrap();
        assert_eq!(r.status(), StatusCode::OK);
    }
    drop(silent);
    a.h.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_connection_that_never_finishes_its_headers_is_closed() {
    let d = tempfile::tempdir().unwrap();
    let limits = Limits { header_read_timeout: Duration::from_secs(1), ..Limits::default() };
    let a = start_with(d.path(), limits).await;
    let mut s = tokio::net::TcpStream::connect(a.h.local_addr()).await.unwrap();
    s.write_all(b"GET /version HTTP/1.1\r\n").await.unwrap();
    let mut buf = [0u8; 512];
    tokio::time::timeout(Duration::from_secs(60), async {
        while let Ok(n) = s.read(&mut buf).await {
            if n == 0 {
                break;
            }
        }
    })
    .await
    .expect("a connection that never sent its headers was still open after a minute");
    a.h.shutdown().await.unwrap();
}

#[tokio::test]
async fn deeply_nested_yaml_is_refused_before_parsing() {
    let d = tempfile::tempdir().unwrap();
    let a = start(d.path()).await;
    let body = format!("apiVersion: v1\nkind: PersistentVolume\nmetadata: {}", "{a: ".repeat(100_000));
    let (code, s) = a.send(Method::POST, PVS, "application/yaml", Some(body.into_bytes())).await;
    assert_eq!((code.as_u16(), s["reason"].as_str()), (400, Some("BadRequest")), "{s}");
    assert!(s["message"].as_str().unwrap().contains("deeper than 100 levels"), "{s}");
    let (code, s) = a
        .send(Method::PATCH, &format!("{PVS}/x"), "application/apply-patch+yaml", Some("[".repeat(50_000).into_bytes()))
        .await;
    assert_eq!(code.as_u16(), 400, "{s}");
    // Ordinary YAML still works.
    let ok = "apiVersion: v1\nkind: PersistentVolume\nmetadata: {name: plain}\nspec: {capacity: {storage: 1Gi}, accessModes: [ReadWriteOnce], nfs: {server: s, path: /x}}\n";
    let (code, s) = a.send(Method::POST, PVS, "application/yaml", Some(ok.as_bytes().to_vec())).await;
    assert_eq!(code.as_u16(), 201, "{s}");
    a.h.shutdown().await.unwrap();
}

#[tokio::test]
async fn probes_and_version_are_public_but_a_wrong_token_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let a = start(d.path()).await;
    for path in ["/healthz", "/livez", "/readyz", "/readyz/storage", "/version"] {
        let r = a.c.get(format!("{}{path}", a.h.url())).send().await.unwrap();
        assert_eq!(r.status(), StatusCode::OK, "{path} without a token");
        let r = a.c.get(format!("{}{path}", a.h.url())).bearer_auth("wrong").send().await.unwrap();
        assert_eq!(r.status(), StatusCode::UNAUTHORIZED, "{path} with a wrong token");
        let r = a.c.get(format!("{}{path}", a.h.url())).bearer_auth(a.h.token()).send().await.unwrap();
        assert_eq!(r.status(), StatusCode::OK, "{path} with the token");
    }
    let r = a.c.get(format!("{}/readyz?verbose", a.h.url())).send().await.unwrap();
    let body = r.text().await.unwrap();
    assert!(body.contains("[+]storage ok") && body.ends_with("readyz check passed\n"), "{body}");
    let r = a.c.get(format!("{}/readyz/nothing", a.h.url())).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    // Discovery still needs the token.
    let r = a.c.get(format!("{}/api", a.h.url())).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    a.h.shutdown().await.unwrap();
}

/// A backend whose every commit fails, as a full disk does.
struct FullDisk;
impl Backend for FullDisk {
    fn commit(&self, _rv: u64, _m: &Mutation<'_>) -> Result<(), String> {
        Err("No space left on device (os error 28)".into())
    }
    fn persist_counter(&self, _rv: u64) -> Result<(), String> {
        Err("No space left on device (os error 28)".into())
    }
}

fn app_state(store: Store) -> (Arc<AppState>, tokio::sync::watch::Sender<bool>) {
    let (stop, shutdown) = tokio::sync::watch::channel(false);
    let st = AppState {
        store: Arc::new(store),
        token: "t".repeat(64),
        server_address: "127.0.0.1:1".into(),
        shutdown,
        pages: Default::default(),
        writes: tokio_util::task::TaskTracker::new(),
        limits: Limits::default(),
    };
    (Arc::new(st), stop)
}

async fn call(st: &Arc<AppState>, method: &str, uri: &str, body: &[u8]) -> (u16, Vec<u8>) {
    let req = Request::builder()
        .method(method)
        .uri(uri)
        .header("authorization", format!("Bearer {}", st.token))
        .header("content-type", "application/json")
        .body(Body::from(body.to_vec()))
        .unwrap();
    let resp = dispatch::dispatch(State(st.clone()), req).await;
    let code = resp.status().as_u16();
    // Only the first chunk: a watch streams on.
    let mut data = resp.into_body().into_data_stream();
    let first = tokio::time::timeout(Duration::from_millis(50), data.next()).await;
    let bytes = match first {
        Ok(Some(Ok(b))) => b.to_vec(),
        _ => Vec::new(),
    };
    (code, bytes)
}

#[tokio::test]
async fn probes_fail_while_writes_cannot_be_made_durable() {
    let (st, _stop) = app_state(Store::builder().backend(Box::new(FullDisk), Snapshot::default()).build());
    let (code, _) = call(&st, "GET", "/readyz", b"").await;
    assert_eq!(code, 200);
    let (code, _) = call(&st, "POST", PVS, pv("a", 1).to_string().as_bytes()).await;
    assert_eq!(code, 500);
    for probe in ["/readyz", "/healthz"] {
        let (code, body) = call(&st, "GET", probe, b"").await;
        let body = String::from_utf8(body).unwrap();
        assert_eq!(code, 500, "{probe}: {body}");
        assert!(body.contains("[-]storage failed"), "{probe}: {body}");
    }
    // Liveness is the process answering: restarting it would not bring disk space back.
    assert_eq!(call(&st, "GET", "/livez", b"").await.0, 200);
}

/// Query parameters a client could send, with values from the plausible to the absurd.
fn query() -> impl Strategy<Value = Vec<(String, String)>> {
    let key = prop::sample::select(vec![
        "watch",
        "timeoutSeconds",
        "limit",
        "continue",
        "resourceVersion",
        "resourceVersionMatch",
        "labelSelector",
        "fieldSelector",
        "allowWatchBookmarks",
        "sendInitialEvents",
        "gracePeriodSeconds",
        "propagationPolicy",
        "dryRun",
        "includeObject",
        "orphanDependents",
        "fieldManager",
        "verbose",
    ]);
    let value = prop_oneof![
        Just("true".to_string()),
        Just("1".to_string()),
        Just("0".to_string()),
        Just(String::new()),
        Just(i64::MAX.to_string()),
        Just(i64::MIN.to_string()),
        Just(u64::MAX.to_string()),
        Just("99999999999999999999999".to_string()),
        Just("-1".to_string()),
        Just("1e309".to_string()),
        any::<i64>().prop_map(|n| n.to_string()),
        "[a-z=!,()0-9. -]{0,24}",
        any::<String>(),
    ];
    prop::collection::vec((key.prop_map(str::to_string), value), 0..6)
}

fn encode(q: &[(String, String)]) -> String {
    let enc = |s: &str| -> String {
        s.bytes()
            .map(|b| {
                if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
                    (b as char).to_string()
                } else {
                    format!("%{b:02X}")
                }
            })
            .collect()
    };
    q.iter().map(|(k, v)| format!("{k}={}", enc(v))).collect::<Vec<_>>().join("&")
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Whatever the query, the handler answers without panicking, and a refusal is a
    /// kube-apiserver `Status` carrying the HTTP code, never a server error.
    #[test]
    fn any_query_gets_an_answer_never_a_panic(q in query(), path in prop::sample::select(vec![
        "/api/v1/persistentvolumes",
        "/api/v1/persistentvolumes/a",
        "/api/v1/namespaces/default/persistentvolumeclaims",
        "/apis/storage.k8s.io/v1/storageclasses",
        "/readyz",
        "/version",
    ]), method in prop::sample::select(vec!["GET", "DELETE", "PATCH"])) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let (code, body) = rt.block_on(async {
            let (st, _stop) = app_state(Store::new());
            st.store.create("persistentvolumes", pv("a", 1)).unwrap();
            let uri = format!("{path}?{}", encode(&q));
            let body = if method == "PATCH" { b"{}".to_vec() } else { Vec::new() };
            let mut req = Request::builder().method(method).uri(&uri)
                .header("authorization", format!("Bearer {}", st.token));
            if method == "PATCH" {
                req = req.header("content-type", "application/merge-patch+json");
            }
            let resp = dispatch::dispatch(State(st.clone()), req.body(Body::from(body)).unwrap()).await;
            let code = resp.status();
            let bytes = if code.is_success() {
                Vec::new()
            } else {
                axum::body::to_bytes(resp.into_body(), 1 << 20).await.unwrap().to_vec()
            };
            (code, bytes)
        });
        // 504 only as kube-apiserver answers a resourceVersion newer than any it has (a
        // `Timeout` Status with cause ResourceVersionTooLarge).
        prop_assert!(code.as_u16() < 500 || code.as_u16() == 504, "{method} {path}?{}: {code}", encode(&q));
        if code.as_u16() >= 400 {
            let s: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
            if code.as_u16() == 504 {
                prop_assert_eq!(&s["details"]["causes"][0]["reason"], "ResourceVersionTooLarge", "{}", s);
            }
            prop_assert_eq!(&s["kind"], "Status", "{} {}: {}", method, code, String::from_utf8_lossy(&body));
            prop_assert_eq!(s["code"].as_u64(), Some(code.as_u16() as u64));
        }
    }
}
