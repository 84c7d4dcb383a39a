//! The API server over HTTP, started in-process on a free port (plain HTTP: reqwest here sends
//! the token either way; kubectl over HTTPS is covered by `scripts/e2e-apiserver.sh`).

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use std::time::Duration;

mod common;
use common::{start, Api};

impl Api {
    async fn req(&self, m: Method, path: &str, ct: &str, body: Option<Value>) -> (StatusCode, Value) {
        let mut r = self.request(m, path);
        if let Some(b) = body {
            let raw = match b {
                Value::String(s) => s,
                other => other.to_string(),
            };
            r = r.header("content-type", ct).body(raw);
        }
        let resp = r.send().await.unwrap();
        let code = resp.status();
        let text = resp.text().await.unwrap();
        (code, serde_json::from_str(&text).unwrap_or(Value::String(text)))
    }
    async fn get(&self, path: &str) -> (StatusCode, Value) {
        self.req(Method::GET, path, "", None).await
    }
    async fn post(&self, path: &str, body: Value) -> (StatusCode, Value) {
        self.req(Method::POST, path, "application/json", Some(body)).await
    }
    async fn put(&self, path: &str, body: Value) -> (StatusCode, Value) {
        self.req(Method::PUT, path, "application/json", Some(body)).await
    }
    async fn patch(&self, path: &str, ct: &str, body: Value) -> (StatusCode, Value) {
        self.req(Method::PATCH, path, ct, Some(body)).await
    }
}

fn pv(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name},
           "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "hostPath": {"path": "/tmp/x"}}})
}

fn pvc(name: &str) -> Value {
    json!({"metadata": {"name": name},
           "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}})
}

const PVS: &str = "/api/v1/persistentvolumes";
const PVCS: &str = "/api/v1/namespaces/default/persistentvolumeclaims";

#[tokio::test]
async fn discovery_answers_what_kubectl_asks() {
    let d = tempfile::tempdir().unwrap();
    let a = start(d.path()).await;
    assert_eq!(a.get("/version").await.1["major"], "1");
    assert_eq!(a.get("/api").await.1["versions"][0], "v1");
    let (_, groups) = a.get("/apis").await;
    assert!(groups["groups"].as_array().unwrap().iter().any(|g| g["name"] == "storage.k8s.io"));
    let (_, core) = a.get("/api/v1").await;
    assert!(core["resources"]
        .as_array()
        .unwrap()
        .iter()
        .any(|r| r["name"] == "persistentvolumeclaims" && r["namespaced"] == true && r["shortNames"][0] == "pvc"));
    let (_, st) = a.get("/apis/storage.k8s.io/v1").await;
    let kinds: Vec<&str> = st["resources"].as_array().unwrap().iter().map(|r| r["kind"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        [
            "CSIDriver",
            "CSINode",
            "CSINode",
            "CSIStorageCapacity",
            "StorageClass",
            "VolumeAttachment",
            "VolumeAttachment",
            "VolumeAttributesClass"
        ]
    );
    let (code, v3) = a.get("/openapi/v3").await;
    assert_eq!(code, StatusCode::OK);
    assert!(v3["paths"]["api/v1"]["serverRelativeURL"].is_string());
    assert_eq!(a.get("/apis/nope.io/v1").await.0, StatusCode::NOT_FOUND);
    a.h.shutdown().await.unwrap();
}

#[tokio::test]
async fn crud_round_trip_with_kubernetes_status_errors() {
    let d = tempfile::tempdir().unwrap();
    let a = start(d.path()).await;
    let (code, created) = a.post(PVS, pv("v1")).await;
    assert_eq!(code, StatusCode::CREATED, "{created}");
    assert_eq!(created["status"]["phase"], "Pending");
    let (code, dup) = a.post(PVS, pv("v1")).await;
    assert_eq!(code, StatusCode::CONFLICT);
    assert_eq!(dup["reason"], "AlreadyExists");
    assert_eq!(dup["kind"], "Status");
    let (code, missing) = a.get(&format!("{PVS}/nope")).await;
    assert_eq!(code, StatusCode::NOT_FOUND);
    assert_eq!(missing["message"], "persistentvolumes \"nope\" not found");
    assert_eq!(missing["details"]["name"], "nope");
    let (code, inv) = a.post(PVS, json!({"metadata": {"name": "bad"}, "spec": {"accessModes": ["ReadWriteOnce"], "hostPath": {"path": "/x"}}})).await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(inv["reason"], "Invalid");
    assert_eq!(inv["details"]["causes"][0]["field"], "spec.capacity");
    assert_eq!(inv["details"]["causes"][0]["message"], "Required value");
    let (code, garbage) = a.req(Method::POST, PVS, "application/json", Some(Value::String("{nope".into()))).await;
    assert_eq!(code, StatusCode::BAD_REQUEST, "{garbage}");
    assert_eq!(garbage["kind"], "Status");

    // Update, then a stale update.
    let mut upd = created.clone();
    upd["metadata"]["labels"] = json!({"a": "b"});
    let (code, updated) = a.put(&format!("{PVS}/v1"), upd.clone()).await;
    assert_eq!(code, StatusCode::OK);
    assert_ne!(updated["metadata"]["resourceVersion"], created["metadata"]["resourceVersion"]);
    upd["metadata"]["labels"] = json!({"a": "c"});
    let (code, stale) = a.put(&format!("{PVS}/v1"), upd).await;
    assert_eq!(code, StatusCode::CONFLICT);
    assert_eq!(stale["reason"], "Conflict");

    // Lists with selectors and paging.
    a.post(PVS, pv("v2")).await;
    a.post(PVS, pv("v3")).await;
    let (_, l) = a.get(&format!("{PVS}?labelSelector=a%3Db")).await;
    assert_eq!(l["kind"], "PersistentVolumeList");
    assert_eq!(l["items"].as_array().unwrap().len(), 1);
    let (_, l) = a.get(&format!("{PVS}?fieldSelector=metadata.name%3Dv2")).await;
    assert_eq!(l["items"][0]["metadata"]["name"], "v2");
    let (_, p1) = a.get(&format!("{PVS}?limit=2")).await;
    assert_eq!(p1["items"].as_array().unwrap().len(), 2);
    assert_eq!(p1["metadata"]["remainingItemCount"], 1);
    let tok = p1["metadata"]["continue"].as_str().unwrap();
    let (_, p2) = a.get(&format!("{PVS}?limit=2&continue={tok}")).await;
    assert_eq!(p2["items"][0]["metadata"]["name"], "v3");
    assert!(p2["metadata"].get("continue").is_none());

    // Delete with a failing precondition, then for real.
    let (code, _) = a
        .req(Method::DELETE, &format!("{PVS}/v2"), "application/json", Some(json!({"preconditions": {"uid": "other"}})))
        .await;
    assert_eq!(code, StatusCode::CONFLICT);
    // The StorageObjectInUseProtection admission gave the volume its finalizer: the delete marks
    // it, and it goes when the finalizer is removed (kube-controller-manager's pv-protection
    // controller does that; no controller runs here).
    let (code, marked) = a.req(Method::DELETE, &format!("{PVS}/v2"), "", None).await;
    assert_eq!(code, StatusCode::OK);
    assert!(marked["metadata"]["deletionTimestamp"].is_string(), "{marked}");
    assert_eq!(marked["metadata"]["finalizers"], json!(["kubernetes.io/pv-protection"]));
    assert_eq!(a.get(&format!("{PVS}/v2")).await.0, StatusCode::OK);
    let (code, _) =
        a.patch(&format!("{PVS}/v2"), "application/merge-patch+json", json!({"metadata": {"finalizers": null}})).await;
    assert_eq!(code, StatusCode::OK);
    assert_eq!(a.get(&format!("{PVS}/v2")).await.0, StatusCode::NOT_FOUND);
    a.h.shutdown().await.unwrap();
}

#[tokio::test]
async fn namespaces_generate_name_and_finalizers() {
    let d = tempfile::tempdir().unwrap();
    let a = start(d.path()).await;
    let (code, nf) = a.post("/api/v1/namespaces/ghost/persistentvolumeclaims", pvc("c")).await;
    assert_eq!(code, StatusCode::NOT_FOUND);
    assert_eq!(nf["message"], "namespaces \"ghost\" not found");
    let (code, c) = a.post(PVCS, json!({"metadata": {"generateName": "claim-"}, "spec": pvc("x")["spec"]})).await;
    assert_eq!(code, StatusCode::CREATED);
    let name = c["metadata"]["name"].as_str().unwrap();
    assert!(name.starts_with("claim-") && name.len() == 11, "{name}");
    assert_eq!(c["metadata"]["namespace"], "default");
    let mut f = pvc("held");
    f["metadata"]["finalizers"] = json!(["kubernetes.io/pvc-protection"]);
    a.post(PVCS, f).await;
    let (code, marked) = a.req(Method::DELETE, &format!("{PVCS}/held"), "", None).await;
    assert_eq!(code, StatusCode::OK);
    assert!(marked["metadata"]["deletionTimestamp"].is_string());
    let (code, _) = a
        .patch(&format!("{PVCS}/held"), "application/merge-patch+json", json!({"metadata": {"finalizers": null}}))
        .await;
    assert_eq!(code, StatusCode::OK);
    assert_eq!(a.get(&format!("{PVCS}/held")).await.0, StatusCode::NOT_FOUND);
    a.h.shutdown().await.unwrap();
}

#[tokio::test]
async fn three_patch_types_and_the_status_subresource() {
    let d = tempfile::tempdir().unwrap();
    let a = start(d.path()).await;
    a.post(PVS, pv("v")).await;
    let p = format!("{PVS}/v");
    let (code, o) = a.patch(&p, "application/merge-patch+json", json!({"metadata": {"labels": {"m": "1"}}})).await;
    assert_eq!(code, StatusCode::OK, "{o}");
    let (_, o) = a
        .patch(&p, "application/json-patch+json", json!([{"op": "add", "path": "/metadata/labels/j", "value": "2"}]))
        .await;
    assert_eq!(o["metadata"]["labels"], json!({"m": "1", "j": "2"}));
    let (_, o) = a
        .patch(
            &p,
            "application/strategic-merge-patch+json",
            json!({"metadata": {"finalizers": ["example.com/a"]}, "spec": {"capacity": {"storage": "2Gi"}}}),
        )
        .await;
    assert_eq!(o["spec"]["capacity"]["storage"], "2Gi", "{o}");
    // Finalizers merge (patchStrategy merge) with the one admission added; apimachinery puts the
    // patch's items first when the live list does not order them.
    assert_eq!(o["metadata"]["finalizers"], json!(["example.com/a", "kubernetes.io/pv-protection"]));
    let (code, _) = a.patch(&p, "text/plain", json!({})).await;
    assert_eq!(code, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    // A stale pinned resourceVersion in a patch conflicts.
    let (code, _) = a
        .patch(&p, "application/merge-patch+json", json!({"metadata": {"resourceVersion": "1", "labels": {"z": "1"}}}))
        .await;
    assert_eq!(code, StatusCode::CONFLICT);
    // Main-resource writes ignore status; /status writes only status.
    let (_, o) = a.patch(&p, "application/merge-patch+json", json!({"status": {"phase": "Available"}})).await;
    assert_eq!(o["status"]["phase"], "Pending");
    let (code, o) = a
        .patch(&format!("{p}/status"), "application/merge-patch+json", json!({"status": {"phase": "Available"}}))
        .await;
    assert_eq!(code, StatusCode::OK);
    assert_eq!(o["status"]["phase"], "Available");
    let (_, s) = a.get(&format!("{p}/status")).await;
    assert_eq!(s["status"]["phase"], "Available");
    let mut put = s.clone();
    put["status"]["phase"] = json!("Released");
    let (code, o) = a.put(&format!("{p}/status"), put).await;
    assert_eq!(code, StatusCode::OK);
    assert_eq!(o["status"]["phase"], "Released");
    // Server-side apply creates, then merges.
    let (code, o) = a.req(Method::PATCH, &format!("{PVS}/applied?fieldManager=t"), "application/apply-patch+yaml",
        Some(Value::String("apiVersion: v1\nkind: PersistentVolume\nmetadata:\n  name: applied\nspec:\n  capacity: {storage: 1Gi}\n  accessModes: [ReadWriteOnce]\n  hostPath: {path: /a}\n".into()))).await;
    assert_eq!(code, StatusCode::CREATED, "{o}");
    a.h.shutdown().await.unwrap();
}

#[tokio::test]
async fn unauthenticated_requests_get_401() {
    let d = tempfile::tempdir().unwrap();
    let a = start(d.path()).await;
    for auth in [None, Some("wrong")] {
        let mut r = a.c.get(format!("{}/api/v1/persistentvolumes", a.h.url()));
        if let Some(t) = auth {
            r = r.bearer_auth(t);
        }
        let resp = r.send().await.unwrap();
        assert_eq!(resp.status(), StatusCode::UNAUTHORIZED);
        let s: Value = resp.json().await.unwrap();
        assert_eq!(s["reason"], "Unauthorized");
    }
    a.h.shutdown().await.unwrap();
}

#[tokio::test]
async fn tables_have_kubectl_columns() {
    let d = tempfile::tempdir().unwrap();
    let a = start(d.path()).await;
    a.post(PVS, pv("v")).await;
    let resp =
        a.c.get(format!("{}{PVS}", a.h.url()))
            .bearer_auth(a.h.token())
            .header("accept", "application/json;as=Table;v=v1;g=meta.k8s.io,application/json")
            .send()
            .await
            .unwrap();
    let t: Value = resp.json().await.unwrap();
    assert_eq!(t["kind"], "Table");
    let cols: Vec<&str> =
        t["columnDefinitions"].as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(
        cols,
        [
            "Name",
            "Capacity",
            "Access Modes",
            "Reclaim Policy",
            "Status",
            "Claim",
            "StorageClass",
            "VolumeAttributesClass",
            "Reason",
            "Age",
            "VolumeMode"
        ]
    );
    assert_eq!(t["rows"][0]["cells"][0], "v");
    a.h.shutdown().await.unwrap();
}

/// A paged list is one snapshot: an object changed between two pages must show up either in the
/// pages or in a watch from the version they report. (Paging the live store loses it: its page was
/// read before the change, and the watch starts after it.)
#[tokio::test]
async fn paged_lists_are_one_snapshot_and_a_watch_from_them_misses_nothing() {
    let d = tempfile::tempdir().unwrap();
    let a = start(d.path()).await;
    for n in ["a", "b", "c"] {
        a.post(PVS, pv(n)).await;
    }
    let (_, p1) = a.get(&format!("{PVS}?limit=2")).await;
    let rv = p1["metadata"]["resourceVersion"].as_str().unwrap().to_string();
    // Between pages: change an object of the first page, add one.
    let (_, mut va) = a.get(&format!("{PVS}/a")).await;
    va["metadata"]["labels"] = json!({"changed": "yes"});
    assert_eq!(a.put(&format!("{PVS}/a"), va).await.0, StatusCode::OK);
    a.post(PVS, pv("d")).await;
    let tok = p1["metadata"]["continue"].as_str().unwrap();
    let (_, p2) = a.get(&format!("{PVS}?limit=2&continue={tok}")).await;
    assert_eq!(p2["metadata"]["resourceVersion"], rv.as_str(), "every page reports the first page's version");
    let names: Vec<&str> =
        p2["items"].as_array().unwrap().iter().map(|o| o["metadata"]["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["c"], "the continuation reads the snapshot, not the store as it is now");
    let mut w =
        a.c.get(format!("{}{PVS}?watch=true&resourceVersion={rv}", a.h.url()))
            .bearer_auth(a.h.token())
            .send()
            .await
            .unwrap();
    let ev = read_events(&mut w, 2).await;
    assert_eq!(
        (ev[0]["type"].as_str(), ev[0]["object"]["metadata"]["labels"]["changed"].as_str()),
        (Some("MODIFIED"), Some("yes"))
    );
    assert_eq!((ev[1]["type"].as_str(), ev[1]["object"]["metadata"]["name"].as_str()), (Some("ADDED"), Some("d")));
    // A token whose snapshot the server no longer holds: 410, and the client lists again.
    let bogus = {
        use base64::Engine;
        base64::engine::general_purpose::URL_SAFE_NO_PAD
            .encode(format!(r#"{{"rv":{rv},"snapshot":999,"start":["","a"]}}"#))
    };
    let (code, st) = a.get(&format!("{PVS}?limit=2&continue={bogus}")).await;
    assert_eq!((code, st["reason"].as_str()), (StatusCode::GONE, Some("Expired")));
    a.h.shutdown().await.unwrap();
}

async fn read_events(resp: &mut reqwest::Response, n: usize) -> Vec<Value> {
    let mut buf = String::new();
    let mut out = Vec::new();
    while out.len() < n {
        let chunk = tokio::time::timeout(Duration::from_secs(5), resp.chunk()).await.expect("event in time").unwrap();
        let Some(chunk) = chunk else { break };
        buf.push_str(std::str::from_utf8(&chunk).unwrap());
        while let Some(i) = buf.find('\n') {
            out.push(serde_json::from_str(&buf[..i]).unwrap());
            buf.drain(..=i);
        }
    }
    out
}

#[tokio::test]
async fn watch_replays_from_a_version_streams_changes_and_expires() {
    let d = tempfile::tempdir().unwrap();
    let a = start(d.path()).await;
    let (_, first) = a.post(PVS, pv("a")).await;
    let rv = first["metadata"]["resourceVersion"].as_str().unwrap().to_string();
    a.post(PVS, pv("b")).await;
    let mut w =
        a.c.get(format!("{}{PVS}?watch=true&resourceVersion={rv}&allowWatchBookmarks=true", a.h.url()))
            .bearer_auth(a.h.token())
            .send()
            .await
            .unwrap();
    let ev = read_events(&mut w, 1).await;
    assert_eq!(ev[0]["type"], "ADDED");
    assert_eq!(ev[0]["object"]["metadata"]["name"], "b");
    // Held by the protection finalizer: a MODIFIED with deletionTimestamp, then DELETED when the
    // finalizer goes.
    a.req(Method::DELETE, &format!("{PVS}/a"), "", None).await;
    let ev = read_events(&mut w, 1).await;
    assert_eq!(ev[0]["type"], "MODIFIED");
    assert!(ev[0]["object"]["metadata"]["deletionTimestamp"].is_string());
    a.patch(&format!("{PVS}/a"), "application/merge-patch+json", json!({"metadata": {"finalizers": null}})).await;
    let ev = read_events(&mut w, 1).await;
    assert_eq!(ev[0]["type"], "DELETED");
    // Without a version: current objects first.
    let mut w2 =
        a.c.get(format!("{}{PVS}?watch=1&timeoutSeconds=1", a.h.url())).bearer_auth(a.h.token()).send().await.unwrap();
    let ev = read_events(&mut w2, 2).await;
    assert_eq!(ev.len(), 1, "one object left, then the stream ends at the timeout: {ev:?}");
    // A version older than history: 410 as an ERROR event.
    let a_dir = tempfile::tempdir().unwrap();
    let b = start(a_dir.path()).await;
    b.post(PVS, pv("x")).await;
    drop(b.h.shutdown().await);
    let b = start(a_dir.path()).await;
    let mut w3 =
        b.c.get(format!("{}{PVS}?watch=true&resourceVersion=1", b.h.url()))
            .bearer_auth(b.h.token())
            .send()
            .await
            .unwrap();
    let ev = read_events(&mut w3, 1).await;
    assert_eq!(ev[0]["type"], "ERROR");
    assert_eq!(ev[0]["object"]["code"], 410);
    assert_eq!(ev[0]["object"]["reason"], "Expired");
    b.h.shutdown().await.unwrap();
    a.h.shutdown().await.unwrap();
}

#[tokio::test]
async fn restart_on_the_same_data_dir_keeps_objects_token_and_versions() {
    let d = tempfile::tempdir().unwrap();
    let a = start(d.path()).await;
    let token = a.h.token().to_string();
    a.post(PVS, pv("keep")).await;
    let (_, c) = a.post(PVCS, pvc("claim")).await;
    let last: u64 = c["metadata"]["resourceVersion"].as_str().unwrap().parse().unwrap();
    a.h.shutdown().await.unwrap();
    let b = start(d.path()).await;
    assert_eq!(b.h.token(), token);
    assert_eq!(b.get(&format!("{PVS}/keep")).await.0, StatusCode::OK);
    assert_eq!(b.get(&format!("{PVCS}/claim")).await.0, StatusCode::OK);
    let (_, n) = b.post(PVS, pv("next")).await;
    let next: u64 = n["metadata"]["resourceVersion"].as_str().unwrap().parse().unwrap();
    assert_eq!(next, last + 1, "the counter continues");
    b.h.shutdown().await.unwrap();
}

#[tokio::test]
async fn events_are_served_in_both_apis() {
    let d = tempfile::tempdir().unwrap();
    let a = start(d.path()).await;
    let (code, e) = a
        .post(
            "/apis/events.k8s.io/v1/namespaces/default/events",
            json!({
        "metadata": {"name": "e1"}, "regarding": {"kind": "PersistentVolume", "name": "v", "uid": "u1"},
        "note": "hello", "reason": "Testing", "type": "Normal", "reportingController": "t",
        "reportingInstance": "t-1", "action": "Test", "eventTime": "2025-01-01T00:00:00.000000Z"}),
        )
        .await;
    assert_eq!(code, StatusCode::CREATED, "{e}");
    assert_eq!(e["apiVersion"], "events.k8s.io/v1");
    assert_eq!(e["note"], "hello");
    let (_, l) = a.get("/api/v1/namespaces/default/events?fieldSelector=involvedObject.uid%3Du1,involvedObject.kind%3DPersistentVolume").await;
    assert_eq!(l["items"][0]["message"], "hello");
    assert_eq!(l["items"][0]["involvedObject"]["name"], "v");
    a.h.shutdown().await.unwrap();
}

#[tokio::test]
async fn shutdown_ends_open_watches() {
    let d = tempfile::tempdir().unwrap();
    let a = start(d.path()).await;
    let mut w = a.c.get(format!("{}{PVS}?watch=true", a.h.url())).bearer_auth(a.h.token()).send().await.unwrap();
    let reader = tokio::spawn(async move { while let Ok(Some(_)) = w.chunk().await {} });
    tokio::time::timeout(Duration::from_secs(3), a.h.shutdown()).await.expect("shutdown in time").unwrap();
    tokio::time::timeout(Duration::from_secs(3), reader).await.expect("watch ended").unwrap();
}

/// Durable creates per second through HTTP with 8 concurrent clients:
/// `cargo test -p pv-apiserver --release --test api http_write_throughput -- --ignored --nocapture`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore]
async fn http_write_throughput() {
    let d = tempfile::tempdir_in(".").unwrap();
    let a = std::sync::Arc::new(start(d.path()).await);
    let n = 4000;
    let t0 = std::time::Instant::now();
    let mut tasks = Vec::new();
    for w in 0..8 {
        let a = a.clone();
        tasks.push(tokio::spawn(async move {
            for i in 0..n / 8 {
                let (code, _) = a.post(PVS, pv(&format!("w{w}-{i}"))).await;
                assert_eq!(code, StatusCode::CREATED);
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let secs = t0.elapsed().as_secs_f64();
    println!("{n} creates over HTTP in {secs:.2}s: {:.0}/s", n as f64 / secs);
}

#[tokio::test]
async fn json_reads_written_from_stored_text_are_what_every_other_encoding_gives() {
    let dir = tempfile::tempdir().unwrap();
    let a = start(dir.path()).await;
    let mut labelled = pv("b");
    labelled["metadata"]["labels"] = json!({"tier": "gold"});
    labelled["metadata"]["annotations"] = json!({"example.com/note": "say \"hi\"\n\\ é"});
    for v in [pv("a"), labelled, pv("c")] {
        assert_eq!(a.post(PVS, v).await.0, StatusCode::CREATED);
    }
    assert_eq!(a.post(PVCS, pvc("c1")).await.0, StatusCode::CREATED);
    let one = format!("{PVS}/b");
    let json = a.request(Method::GET, &one).send().await.unwrap().text().await.unwrap();
    let yaml = a.request(Method::GET, &one).header("accept", "application/yaml").send().await.unwrap();
    let yaml: Value = serde_saphyr::from_str(&yaml.text().await.unwrap()).unwrap();
    let got: Value = serde_json::from_str(&json).unwrap();
    assert_eq!((got["kind"].as_str(), &got), (Some("PersistentVolume"), &yaml), "a GET as JSON and as YAML");
    assert_eq!(json, serde_json::to_string(&got).unwrap());
    for path in [PVS.to_string(), format!("{PVS}?limit=2"), PVCS.to_string(), "/api/v1/persistentvolumeclaims".into()] {
        let json = a.request(Method::GET, &path).send().await.unwrap().text().await.unwrap();
        let yaml = a.request(Method::GET, &path).header("accept", "application/yaml").send().await.unwrap();
        let yaml: Value = serde_saphyr::from_str(&yaml.text().await.unwrap()).unwrap();
        let list: Value = serde_json::from_str(&json).unwrap();
        let continued = |v: &Value| v["metadata"]["continue"].as_str().map(str::len);
        assert_eq!(continued(&list), continued(&yaml), "{path}: both pages continue");
        let strip = |mut v: Value| {
            v["metadata"].as_object_mut().unwrap().remove("continue");
            v
        };
        assert_eq!(strip(list.clone()), strip(yaml), "{path}: the same list as YAML");
        assert_eq!(json, serde_json::to_string(&list).unwrap(), "{path}: the bytes serializing its value gives");
        let items = list["items"].as_array().unwrap();
        assert!(!items.is_empty() && items.iter().all(|i| i.get("kind").is_none() && i.get("apiVersion").is_none()));
        assert!(items.iter().all(|i| i["metadata"]["uid"].is_string()), "{path}");
    }
    let (_, l) = a.get(PVS).await;
    assert_eq!(l["items"][1]["metadata"]["annotations"]["example.com/note"], "say \"hi\"\n\\ é");
}

#[tokio::test]
async fn a_watch_asking_for_bookmarks_gets_one_two_seconds_before_its_timeout() {
    let d = tempfile::tempdir().unwrap();
    let a = start(d.path()).await;
    let (_, first) = a.post(PVS, pv("a")).await;
    let rv = first["metadata"]["resourceVersion"].as_str().unwrap().to_string();
    let watch = |seconds: u32| {
        let url = format!(
            "{}{PVS}?watch=true&resourceVersion={rv}&allowWatchBookmarks=true&timeoutSeconds={seconds}",
            a.h.url()
        );
        a.c.get(url).bearer_auth(a.h.token()).send()
    };
    let started = std::time::Instant::now();
    let mut w = watch(4).await.unwrap();
    // kube-apiserver's cacher bookmarks 2 s before the deadline, well before the periodic one.
    let ev = read_events(&mut w, 1).await;
    let at = started.elapsed();
    assert_eq!(ev[0]["type"], "BOOKMARK", "{ev:?}");
    assert_eq!(ev[0]["object"]["metadata"]["resourceVersion"], rv.as_str());
    assert!(at >= Duration::from_millis(1500), "bookmark after {at:?}");
    // Then nothing more: the stream ends at the timeout.
    assert!(read_events(&mut w, 1).await.is_empty());
    // Without the timeout's 2 s to spare, no such bookmark: the stream just ends.
    let mut w = watch(1).await.unwrap();
    assert!(read_events(&mut w, 1).await.is_empty());
    a.h.shutdown().await.unwrap();
}
