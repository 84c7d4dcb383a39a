//! Protobuf over HTTP, as client-go speaks it: bodies that upstream's Go code encoded
//! (`tests/protobuf/*.pb`) are created, read back, listed and watched in protobuf.

use pv_apiserver::protobuf;
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use std::path::Path;
use std::time::Duration;

const PROTO: &str = "application/vnd.kubernetes.protobuf";
const CLIENT_GO_ACCEPT: &str = "application/vnd.kubernetes.protobuf, application/json";
const PVS: &str = "/api/v1/persistentvolumes";

mod common;
use common::{start, Api};

fn golden(name: &str) -> Vec<u8> {
    std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/protobuf").join(name)).unwrap()
}

impl Api {
    /// A request as client-go sends it: protobuf body, protobuf preferred in the answer.
    async fn proto(&self, m: Method, path: &str, body: Option<Vec<u8>>) -> (StatusCode, String, Value) {
        let mut r = self.request(m, path).header("accept", CLIENT_GO_ACCEPT);
        if let Some(b) = body {
            r = r.header("content-type", PROTO).body(b);
        }
        let resp = r.send().await.unwrap();
        let code = resp.status();
        let ct = resp.headers()["content-type"].to_str().unwrap().to_string();
        let bytes = resp.bytes().await.unwrap();
        assert_eq!(ct, PROTO, "answer to a protobuf client: {}", String::from_utf8_lossy(&bytes));
        (code, ct, protobuf::decode("", &bytes).unwrap())
    }

    async fn json(&self, path: &str) -> Value {
        self.request(Method::GET, path).send().await.unwrap().json().await.unwrap()
    }
}

async fn read_frames(resp: &mut reqwest::Response, n: usize) -> Vec<(String, Value)> {
    let mut buf = Vec::new();
    loop {
        // Frames are only split where a whole one has arrived.
        let mut complete = 0;
        let mut count = 0;
        while let Some(len) = buf.get(complete..complete + 4) {
            let len = u32::from_be_bytes(len.try_into().unwrap()) as usize;
            if buf.len() < complete + 4 + len {
                break;
            }
            complete += 4 + len;
            count += 1;
        }
        if count >= n {
            return protobuf::read_watch_frames(&buf[..complete]).unwrap();
        }
        let chunk = tokio::time::timeout(Duration::from_secs(5), resp.chunk()).await.expect("event in time").unwrap();
        buf.extend_from_slice(&chunk.expect("stream still open"));
    }
}

#[tokio::test]
async fn client_go_protobuf_create_get_list_watch_update_delete() {
    let d = tempfile::tempdir().unwrap();
    let a = start(d.path()).await;
    let mut w = a
        .request(Method::GET, &format!("{PVS}?watch=true&resourceVersion=0"))
        .header("accept", CLIENT_GO_ACCEPT)
        .send()
        .await
        .unwrap();
    assert_eq!(w.headers()["content-type"], "application/vnd.kubernetes.protobuf;stream=watch");

    // Create with the bytes upstream's client would send.
    let (code, _, created) = a.proto(Method::POST, PVS, Some(golden("create-persistentvolume.pb"))).await;
    assert_eq!(code, StatusCode::CREATED, "{created}");
    assert_eq!(created["kind"], "PersistentVolume");
    assert_eq!(created["spec"]["capacity"]["storage"], "2Gi");
    assert_eq!(created["spec"]["hostPath"]["path"], "/tmp/from-go");
    assert_eq!(created["metadata"]["labels"]["made-by"], "client-go");
    assert!(!created["metadata"]["uid"].as_str().unwrap_or("").is_empty());

    // A JSON client sees the same object a JSON create of the same object makes.
    let same: Value = serde_json::from_slice(&golden("create-persistentvolume.json")).unwrap();
    let mut same = same;
    same["metadata"]["name"] = json!("from-json");
    let r = a.request(Method::POST, PVS).json(&same).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::CREATED);
    let (p, j) = (a.json(&format!("{PVS}/from-go")).await, a.json(&format!("{PVS}/from-json")).await);
    assert_eq!(p["spec"], j["spec"]);
    assert_eq!(p["status"], j["status"]);

    // Get and list in protobuf.
    let (code, _, got) = a.proto(Method::GET, &format!("{PVS}/from-go"), None).await;
    assert_eq!(code, StatusCode::OK);
    assert_eq!(got, created);
    let (_, _, list) = a.proto(Method::GET, PVS, None).await;
    assert_eq!(list["kind"], "PersistentVolumeList");
    let names: Vec<&str> =
        list["items"].as_array().unwrap().iter().map(|i| i["metadata"]["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["from-go", "from-json"]);
    assert!(!list["metadata"]["resourceVersion"].as_str().unwrap().is_empty());

    // Update in protobuf.
    let mut changed = got.clone();
    changed["spec"]["persistentVolumeReclaimPolicy"] = json!("Delete");
    let body = protobuf::encode(&changed).unwrap();
    let (code, _, updated) = a.proto(Method::PUT, &format!("{PVS}/from-go"), Some(body)).await;
    assert_eq!(code, StatusCode::OK, "{updated}");
    assert_eq!(updated["spec"]["persistentVolumeReclaimPolicy"], "Delete");

    // Delete with protobuf DeleteOptions whose precondition fails, then one that holds.
    let opts = |uid: &str| {
        protobuf::encode(&json!({"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"uid": uid}})).unwrap()
    };
    let (code, _, status) = a.proto(Method::DELETE, &format!("{PVS}/from-go"), Some(opts("wrong"))).await;
    assert_eq!(code, StatusCode::CONFLICT, "{status}");
    assert_eq!(status["kind"], "Status");
    assert_eq!(status["reason"], "Conflict");
    let uid = created["metadata"]["uid"].as_str().unwrap();
    let (code, _, _) = a.proto(Method::DELETE, &format!("{PVS}/from-go"), Some(opts(uid))).await;
    assert_eq!(code, StatusCode::OK);
    // The delete marks the volume (its protection finalizer holds it); releasing the finalizer ends it.
    let r = a
        .request(Method::PATCH, &format!("{PVS}/from-go"))
        .header("content-type", "application/merge-patch+json")
        .body(r#"{"metadata":{"finalizers":null}}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);

    let events = read_frames(&mut w, 5).await;
    let seen: Vec<(&str, &str)> =
        events.iter().map(|(t, o)| (t.as_str(), o["metadata"]["name"].as_str().unwrap_or(""))).collect();
    assert_eq!(
        seen,
        [
            ("ADDED", "from-go"),
            ("ADDED", "from-json"),
            ("MODIFIED", "from-go"),
            ("MODIFIED", "from-go"),
            ("DELETED", "from-go")
        ]
    );
    assert!(events[3].1["metadata"]["deletionTimestamp"].is_string());
    assert_eq!(events[0].1["spec"]["capacity"]["storage"], "2Gi");
    a.h.shutdown().await.unwrap();
}

#[tokio::test]
async fn every_served_kind_is_created_and_read_in_protobuf() {
    let d = tempfile::tempdir().unwrap();
    let a = start(d.path()).await;
    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "data"}});
    assert_eq!(
        a.proto(Method::POST, "/api/v1/namespaces", Some(protobuf::encode(&ns).unwrap())).await.0,
        StatusCode::CREATED
    );
    // (fixture, collection, objects listed there afterwards: both event APIs share storage)
    let cases = [
        ("persistentvolumeclaim", "/api/v1/namespaces/data/persistentvolumeclaims", 1),
        ("storageclass", "/apis/storage.k8s.io/v1/storageclasses", 1),
        ("lease", "/apis/coordination.k8s.io/v1/namespaces/data/leases", 1),
        ("event", "/api/v1/namespaces/data/events", 1),
        ("event-v1", "/apis/events.k8s.io/v1/namespaces/data/events", 2),
        ("node", "/api/v1/nodes", 1),
        ("pod", "/api/v1/namespaces/data/pods", 1),
    ];
    for (fixture, path, listed) in cases {
        let mut obj: Value = serde_json::from_slice(&golden(&format!("{fixture}.json"))).unwrap();
        let meta = obj["metadata"].as_object_mut().unwrap();
        for server_set in
            ["uid", "resourceVersion", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds"]
        {
            meta.remove(server_set);
        }
        if fixture == "lease" {
            obj["metadata"]["namespace"] = json!("data");
        }
        let body = protobuf::encode(&obj).unwrap();
        let (code, _, created) = a.proto(Method::POST, path, Some(body)).await;
        assert_eq!(code, StatusCode::CREATED, "{fixture}: {created}");
        let name = created["metadata"]["name"].as_str().unwrap();
        let (code, _, got) = a.proto(Method::GET, &format!("{path}/{name}"), None).await;
        assert_eq!(code, StatusCode::OK, "{fixture}");
        assert_eq!(got["kind"], obj["kind"], "{fixture}");
        assert_eq!(got["apiVersion"], obj["apiVersion"], "{fixture}");
        let (_, _, list) = a.proto(Method::GET, path, None).await;
        assert_eq!(list["kind"], format!("{}List", obj["kind"].as_str().unwrap()), "{fixture}");
        assert_eq!(list["items"].as_array().map(Vec::len), Some(listed), "{fixture}: {list}");
    }
    a.h.shutdown().await.unwrap();
}

#[tokio::test]
async fn errors_are_protobuf_status_and_tables_stay_json() {
    let d = tempfile::tempdir().unwrap();
    let a = start(d.path()).await;
    let (code, _, status) = a.proto(Method::GET, &format!("{PVS}/missing"), None).await;
    assert_eq!(code, StatusCode::NOT_FOUND);
    assert_eq!(status["kind"], "Status");
    assert_eq!(status["reason"], "NotFound");
    assert_eq!(status["code"], 404);
    let (code, _, status) = a.proto(Method::POST, PVS, Some(b"not protobuf".to_vec())).await;
    assert_eq!(code, StatusCode::BAD_REQUEST);
    assert!(status["message"].as_str().unwrap().contains("protobuf"), "{status}");
    let r = a
        .request(Method::GET, PVS)
        .header("accept", "application/json;as=Table;v=v1;g=meta.k8s.io,application/json")
        .send()
        .await
        .unwrap();
    assert_eq!(r.headers()["content-type"], "application/json");
    assert_eq!(r.json::<Value>().await.unwrap()["kind"], "Table");
    a.h.shutdown().await.unwrap();
}
