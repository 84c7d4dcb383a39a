//! Writes over HTTP as kube-apiserver answers them: dry runs that check everything and store
//! nothing, bodies decoded into their typed objects (field validation, wrong types, media
//! types), strategic merge patches that follow the API definitions, the namespace lifecycle,
//! field selectors per kind.

use reqwest::header::HeaderMap;
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

mod common;
use common::{start, Api};

struct Answer {
    code: StatusCode,
    body: Value,
    headers: HeaderMap,
}

impl Api {
    async fn send(&self, m: Method, path: &str, ct: Option<&str>, body: Option<String>) -> Answer {
        let mut r = self.request(m, path);
        if let Some(ct) = ct {
            r = r.header("content-type", ct);
        }
        if let Some(b) = body {
            r = r.body(b);
        }
        let resp = r.send().await.unwrap();
        let (code, headers) = (resp.status(), resp.headers().clone());
        let text = resp.text().await.unwrap();
        Answer { code, body: serde_json::from_str(&text).unwrap_or(Value::String(text)), headers }
    }
    async fn get(&self, path: &str) -> Answer {
        self.send(Method::GET, path, None, None).await
    }
    async fn post(&self, path: &str, body: &Value) -> Answer {
        self.send(Method::POST, path, Some("application/json"), Some(body.to_string())).await
    }
    async fn put(&self, path: &str, body: &Value) -> Answer {
        self.send(Method::PUT, path, Some("application/json"), Some(body.to_string())).await
    }
    async fn patch(&self, path: &str, ct: &str, body: &Value) -> Answer {
        self.send(Method::PATCH, path, Some(ct), Some(body.to_string())).await
    }
    async fn delete(&self, path: &str, body: Option<&Value>) -> Answer {
        let ct = body.map(|_| "application/json");
        self.send(Method::DELETE, path, ct, body.map(Value::to_string)).await
    }
}

fn pv(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name},
           "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "hostPath": {"path": "/tmp/x"}}})
}

fn pvc(ns: &str, name: &str) -> Value {
    json!({"metadata": {"name": name, "namespace": ns},
           "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}})
}

const PVS: &str = "/api/v1/persistentvolumes";

fn pvcs(ns: &str) -> String {
    format!("/api/v1/namespaces/{ns}/persistentvolumeclaims")
}

#[tokio::test]
async fn dry_run_deletes_nothing_whether_options_come_in_the_body_or_the_query() {
    let d = tempfile::tempdir().unwrap();
    let a = start(d.path()).await;
    for n in ["a", "b"] {
        assert_eq!(a.post(PVS, &pv(n)).await.code, StatusCode::CREATED);
    }
    // What `kubectl delete --dry-run=server` sends.
    let opts =
        json!({"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background", "dryRun": ["All"]});
    let r = a.delete(&format!("{PVS}/a"), Some(&opts)).await;
    assert_eq!(r.code, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["metadata"]["name"], "a");
    assert_eq!(a.get(&format!("{PVS}/a")).await.code, StatusCode::OK, "a dry-run delete must not delete");
    let r = a.delete(&format!("{PVS}?dryRun=All"), None).await;
    assert_eq!(r.code, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["items"].as_array().unwrap().len(), 2);
    assert_eq!(a.get(PVS).await.body["items"].as_array().unwrap().len(), 2, "nor a dry-run collection delete");
    let r = a.delete(PVS, Some(&json!({"dryRun": ["All"]}))).await;
    assert_eq!(r.code, StatusCode::OK);
    assert_eq!(a.get(PVS).await.body["items"].as_array().unwrap().len(), 2);
    // The body wins over the query, as in kube-apiserver.
    // (A real delete: the volume is marked, held by the protection finalizer admission gave it.)
    let r = a.delete(&format!("{PVS}/a?dryRun=All"), Some(&json!({"propagationPolicy": "Background"}))).await;
    assert_eq!(r.code, StatusCode::OK);
    assert!(a.get(&format!("{PVS}/a")).await.body["metadata"]["deletionTimestamp"].is_string());
    // Unknown dryRun values are refused.
    let r = a.delete(&format!("{PVS}/b"), Some(&json!({"dryRun": ["Yes"]}))).await;
    assert_eq!(r.code, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(
        r.body["message"],
        "DeleteOptions.meta.k8s.io \"\" is invalid: dryRun: Unsupported value: [\"Yes\"]: supported values: \"All\""
    );
    let r = a.post(&format!("{PVS}?dryRun=true"), &pv("c")).await;
    assert_eq!(r.code, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(
        r.body["message"],
        "CreateOptions.meta.k8s.io \"\" is invalid: dryRun: Unsupported value: [\"true\"]: supported values: \"All\""
    );
    a.h.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_namespaced_collection_is_deleted_one_namespace_at_a_time() {
    let d = tempfile::tempdir().unwrap();
    let a = start(d.path()).await;
    for ns in ["one", "two"] {
        assert_eq!(a.post("/api/v1/namespaces", &json!({"metadata": {"name": ns}})).await.code, StatusCode::CREATED);
        assert_eq!(a.post(&pvcs(ns), &pvc(ns, "c")).await.code, StatusCode::CREATED);
    }
    // The all-namespaces path lists and watches, but takes no DELETE (nor a dry run of one).
    for q in ["", "?dryRun=All", "?labelSelector=x%3Dy"] {
        let r = a.delete(&format!("/api/v1/persistentvolumeclaims{q}"), None).await;
        assert_eq!(r.code, StatusCode::METHOD_NOT_ALLOWED, "{q}: {}", r.body);
        assert_eq!(r.body["reason"], "MethodNotAllowed");
    }
    let r = a.delete("/apis/coordination.k8s.io/v1/leases", None).await;
    assert_eq!(r.code, StatusCode::METHOD_NOT_ALLOWED, "{}", r.body);
    for ns in ["one", "two"] {
        let c = a.get(&format!("{}/c", pvcs(ns))).await;
        assert!(c.body["metadata"]["deletionTimestamp"].is_null(), "{ns}/c untouched: {}", c.body);
    }
    // One namespace's collection is deleted, the other's is not.
    let r = a.delete(&pvcs("one"), None).await;
    assert_eq!(r.code, StatusCode::OK, "{}", r.body);
    assert!(a.get(&format!("{}/c", pvcs("one"))).await.body["metadata"]["deletionTimestamp"].is_string());
    assert!(a.get(&format!("{}/c", pvcs("two"))).await.body["metadata"]["deletionTimestamp"].is_null());
    a.h.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_patches_without_a_resource_version_all_apply() {
    const CLIENTS: usize = 8;
    const PATCHES: usize = 40;
    let d = tempfile::tempdir().unwrap();
    let a = start(d.path()).await;
    assert_eq!(a.post(PVS, &pv("raced")).await.code, StatusCode::CREATED);
    let (url, token) = (format!("{}{PVS}/raced", a.h.url()), a.h.token().to_string());
    let mut tasks = Vec::new();
    for c in 0..CLIENTS {
        let (client, url, token) = (a.c.clone(), url.clone(), token.clone());
        tasks.push(tokio::spawn(async move {
            let mut codes = Vec::new();
            for p in 0..PATCHES {
                let body = json!({"metadata": {"annotations": {format!("c{c}-p{p}"): "x"}}});
                let kinds = ["application/merge-patch+json", "application/strategic-merge-patch+json"];
                let r = client
                    .patch(&url)
                    .bearer_auth(&token)
                    .header("content-type", kinds[p % 2])
                    .body(body.to_string())
                    .send()
                    .await
                    .unwrap();
                codes.push(r.status());
            }
            codes
        }));
    }
    for t in tasks {
        for code in t.await.unwrap() {
            assert_eq!(code, StatusCode::OK, "a patch without a resourceVersion is retried until it applies");
        }
    }
    // And none was lost: every client's every annotation is there.
    let got = a.get(&format!("{PVS}/raced")).await.body;
    assert_eq!(got["metadata"]["annotations"].as_object().unwrap().len(), CLIENTS * PATCHES, "{got}");
    // A patch that pins a stale resourceVersion still conflicts.
    let stale = json!({"metadata": {"resourceVersion": "1", "labels": {"a": "b"}}});
    let r = a.patch(&format!("{PVS}/raced"), "application/merge-patch+json", &stale).await;
    assert_eq!(r.code, StatusCode::CONFLICT, "{}", r.body);
    a.h.shutdown().await.unwrap();
}

#[tokio::test]
async fn dry_run_writes_answer_as_the_real_write_would_without_storing() {
    let d = tempfile::tempdir().unwrap();
    let a = start(d.path()).await;
    let created = a.post(PVS, &pv("a")).await.body;
    let rv = a.get(PVS).await.body["metadata"]["resourceVersion"].clone();
    let r = a.post(&format!("{PVS}?dryRun=All"), &pv("a")).await;
    assert_eq!(r.code, StatusCode::CONFLICT, "{}", r.body);
    assert_eq!(r.body["reason"], "AlreadyExists");
    let r = a.post(&format!("{PVS}?dryRun=All"), &pv("new")).await;
    assert_eq!(r.code, StatusCode::CREATED);
    assert_eq!(r.body["spec"]["persistentVolumeReclaimPolicy"], "Retain", "defaulted as a real create");
    assert_eq!(a.get(&format!("{PVS}/new")).await.code, StatusCode::NOT_FOUND);
    let mut bad = pv("bad");
    bad["spec"]["capacity"] = json!({});
    assert_eq!(a.post(&format!("{PVS}?dryRun=All"), &bad).await.code, StatusCode::UNPROCESSABLE_ENTITY);

    // Update: a source change is refused as by the real write; a label change is not stored.
    let mut upd = created.clone();
    upd["spec"]["hostPath"]["path"] = json!("/elsewhere");
    let r = a.put(&format!("{PVS}/a?dryRun=All"), &upd).await;
    assert_eq!(r.code, StatusCode::UNPROCESSABLE_ENTITY, "{}", r.body);
    let mut upd = created.clone();
    upd["metadata"]["labels"] = json!({"x": "1"});
    let r = a.put(&format!("{PVS}/a?dryRun=All"), &upd).await;
    assert_eq!(r.code, StatusCode::OK);
    assert_eq!(r.body["metadata"]["labels"]["x"], "1");
    upd["metadata"]["resourceVersion"] = json!("999");
    assert_eq!(a.put(&format!("{PVS}/a?dryRun=All"), &upd).await.code, StatusCode::CONFLICT);
    let r = a
        .patch(
            &format!("{PVS}/a?dryRun=All"),
            "application/merge-patch+json",
            &json!({"spec": {"accessModes": ["Bogus"]}}),
        )
        .await;
    assert_eq!(r.code, StatusCode::UNPROCESSABLE_ENTITY, "{}", r.body);
    let r = a
        .patch(
            &format!("{PVS}/a?dryRun=All"),
            "application/merge-patch+json",
            &json!({"metadata": {"labels": {"y": "2"}}}),
        )
        .await;
    assert_eq!(r.code, StatusCode::OK);
    assert_eq!(r.body["metadata"]["labels"]["y"], "2");
    let now = a.get(&format!("{PVS}/a")).await.body;
    assert!(now["metadata"].get("labels").is_none(), "{now}");
    assert_eq!(a.get(PVS).await.body["metadata"]["resourceVersion"], rv, "no write happened");
    a.h.shutdown().await.unwrap();
}

#[tokio::test]
async fn bodies_are_decoded_into_their_types_under_field_validation() {
    let d = tempfile::tempdir().unwrap();
    let a = start(d.path()).await;
    let mut v = pv("strict");
    v["spec"]["bogusField"] = json!(42);
    let r = a.post(&format!("{PVS}?fieldValidation=Strict"), &v).await;
    assert_eq!(r.code, StatusCode::BAD_REQUEST);
    assert_eq!(
        r.body["message"],
        "PersistentVolume in version \"v1\" cannot be handled as a PersistentVolume: strict decoding error: unknown field \"spec.bogusField\""
    );
    assert_eq!(a.get(&format!("{PVS}/strict")).await.code, StatusCode::NOT_FOUND);

    let r = a.post(PVS, &v).await;
    assert_eq!(r.code, StatusCode::CREATED);
    assert_eq!(r.headers.get("warning").unwrap(), "299 - \"unknown field \\\"spec.bogusField\\\"\"");
    assert!(r.body["spec"].get("bogusField").is_none());
    assert!(a.get(&format!("{PVS}/strict")).await.body["spec"].get("bogusField").is_none());

    let mut v = pv("ignored");
    v["spec"]["bogusField"] = json!(42);
    let r = a.post(&format!("{PVS}?fieldValidation=Ignore"), &v).await;
    assert_eq!(r.code, StatusCode::CREATED);
    assert!(r.headers.get("warning").is_none());

    // Wrong types never reach the store, so typed lists keep decoding.
    let mut v = pv("typed");
    v["spec"]["storageClassName"] = json!(123);
    v["spec"]["mountOptions"] = json!("ro");
    let r = a.post(PVS, &v).await;
    assert_eq!(r.code, StatusCode::BAD_REQUEST, "{}", r.body);
    assert!(r.body["message"].as_str().unwrap().starts_with(
        "PersistentVolume in version \"v1\" cannot be handled as a PersistentVolume: json: cannot unmarshal"
    ));
    let r = a
        .patch(&format!("{PVS}/ignored"), "application/merge-patch+json", &json!({"spec": {"mountOptions": "ro"}}))
        .await;
    assert_eq!(r.code, StatusCode::BAD_REQUEST, "{}", r.body);
    let list = a.get(PVS).await.body;
    let _: k8s_openapi::List<k8s_openapi::api::core::v1::PersistentVolume> = serde_json::from_value(list).unwrap();

    // Duplicate keys.
    let raw = r#"{"metadata": {"name": "dup", "name": "dup"}, "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "hostPath": {"path": "/x"}}}"#;
    let r = a
        .send(Method::POST, &format!("{PVS}?fieldValidation=Strict"), Some("application/json"), Some(raw.into()))
        .await;
    assert_eq!(r.code, StatusCode::BAD_REQUEST);
    assert!(r.body["message"].as_str().unwrap().ends_with("strict decoding error: duplicate field \"metadata.name\""));
    let r = a.post(&format!("{PVS}?fieldValidation=Sometimes"), &pv("x")).await;
    assert_eq!(r.code, StatusCode::UNPROCESSABLE_ENTITY);

    // Media types kube-apiserver does not read.
    for ct in ["text/plain", "application/x-www-form-urlencoded", "application/xml"] {
        let r = a.send(Method::POST, PVS, Some(ct), Some(pv("m").to_string())).await;
        assert_eq!(r.code, StatusCode::UNSUPPORTED_MEDIA_TYPE, "{ct}");
        assert_eq!(r.body["reason"], "UnsupportedMediaType");
    }
    a.h.shutdown().await.unwrap();
}

#[tokio::test]
async fn strategic_merge_replaces_atomic_lists_such_as_taints() {
    let d = tempfile::tempdir().unwrap();
    let a = start(d.path()).await;
    let node = json!({"metadata": {"name": "n1"}, "spec": {"taints": [
        {"key": "a", "effect": "NoSchedule"}, {"key": "b", "effect": "NoSchedule"}]}});
    assert_eq!(a.post("/api/v1/nodes", &node).await.code, StatusCode::CREATED);
    // `kubectl taint node n1 a-` sends the remaining taints.
    let p = json!({"spec": {"taints": [{"key": "b", "effect": "NoSchedule"}]}});
    let r = a.patch("/api/v1/nodes/n1", "application/strategic-merge-patch+json", &p).await;
    assert_eq!(r.code, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["spec"]["taints"], json!([{"key": "b", "effect": "NoSchedule"}]));
    a.h.shutdown().await.unwrap();
}

#[tokio::test]
async fn namespaces_terminate_with_their_contents_and_have_no_collection_delete() {
    let d = tempfile::tempdir().unwrap();
    let a = start(d.path()).await;
    let r = a.delete("/api/v1/namespaces", None).await;
    assert_eq!(r.code, StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(a.get("/api/v1/namespaces/default").await.code, StatusCode::OK);
    let r = a.delete("/api/v1/namespaces/default", None).await;
    assert_eq!(r.code, StatusCode::FORBIDDEN, "{}", r.body);

    let r = a.post("/api/v1/namespaces", &json!({"metadata": {"name": "demo"}})).await;
    assert_eq!(r.code, StatusCode::CREATED);
    assert_eq!(r.body["spec"]["finalizers"], json!(["kubernetes"]));
    assert_eq!(r.body["metadata"]["labels"]["kubernetes.io/metadata.name"], "demo");
    assert_eq!(a.post(&pvcs("demo"), &pvc("demo", "plain")).await.code, StatusCode::CREATED);
    let mut held = pvc("demo", "held");
    held["metadata"]["finalizers"] = json!(["example.com/hold"]);
    assert_eq!(a.post(&pvcs("demo"), &held).await.code, StatusCode::CREATED);

    let r = a.delete("/api/v1/namespaces/demo", None).await;
    assert_eq!(r.code, StatusCode::OK);
    assert_eq!(r.body["status"]["phase"], "Terminating");
    // Contents are deleted: `plain` is marked, held by its pvc-protection finalizer until that is
    // released (kube-controller-manager's pvc-protection controller; none runs here).
    let mut waited = 0;
    loop {
        let plain = a.get(&format!("{}/plain", pvcs("demo"))).await;
        if plain.body["metadata"]["deletionTimestamp"].is_string() {
            break;
        }
        waited += 1;
        assert!(waited < 2000, "never marked: {}", plain.body);
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let p = json!({"metadata": {"finalizers": null}});
    let r = a.patch(&format!("{}/plain", pvcs("demo")), "application/merge-patch+json", &p).await;
    assert_eq!(r.code, StatusCode::OK, "{}", r.body);
    assert_eq!(a.get(&format!("{}/plain", pvcs("demo"))).await.code, StatusCode::NOT_FOUND);
    let r = a.post(&pvcs("demo"), &pvc("demo", "late")).await;
    assert_eq!(r.code, StatusCode::FORBIDDEN);
    assert_eq!(
        r.body["message"],
        "persistentvolumeclaims \"late\" is forbidden: unable to create new content in namespace demo because it is being terminated"
    );
    // Releasing the last finalizer finishes the namespace.
    let p = json!({"metadata": {"finalizers": null}});
    let r = a.patch(&format!("{}/held", pvcs("demo")), "application/merge-patch+json", &p).await;
    assert_eq!(r.code, StatusCode::OK, "{}", r.body);
    a.gone("/api/v1/namespaces/demo").await;
    a.h.shutdown().await.unwrap();
}

impl Api {
    /// Waits (up to 20 s) until `path` answers 404.
    async fn gone(&self, path: &str) {
        for _ in 0..2000 {
            if self.get(path).await.code == StatusCode::NOT_FOUND {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        panic!("{path} still there: {}", self.get(path).await.body);
    }
}

#[tokio::test]
async fn a_namespace_left_terminating_by_a_killed_process_is_finished_at_start() {
    let d = tempfile::tempdir().unwrap();
    {
        // A process that marked the namespace and died before sweeping it: no finisher ran.
        let store = pv_apiserver::open_store(&d.path().join("store"), pv_apiserver::DEFAULT_COMMIT_DELAY).unwrap();
        store.create("namespaces", json!({"metadata": {"name": "doomed"}})).unwrap();
        for i in 0..50 {
            let lease = json!({"metadata": {"name": format!("l{i}"), "namespace": "doomed"}, "spec": {}});
            store.create("leases", lease).unwrap();
        }
        store.delete("namespaces", "", "doomed", None, None).unwrap();
        assert_eq!(store.list("leases", &Default::default()).unwrap().0.len(), 50);
    }
    let a = start(d.path()).await;
    a.gone("/api/v1/namespaces/doomed").await;
    let r = a.get("/apis/coordination.k8s.io/v1/namespaces/doomed/leases").await;
    assert_eq!(r.body["items"], json!([]), "{}", r.body);
    a.h.shutdown().await.unwrap();
}

#[tokio::test]
async fn field_selectors_support_each_kinds_fields_and_refuse_others() {
    let d = tempfile::tempdir().unwrap();
    let a = start(d.path()).await;
    let ev = |name: &str, source: &str| {
        json!({"metadata": {"name": name, "namespace": "default"}, "reason": "R", "type": "Normal",
               "involvedObject": {"kind": "PersistentVolumeClaim", "name": "c", "namespace": "default"},
               "source": {"component": source}})
    };
    let events = "/api/v1/namespaces/default/events";
    assert_eq!(a.post(events, &ev("e1", "persistentvolume-controller")).await.code, StatusCode::CREATED);
    assert_eq!(a.post(events, &ev("e2", "someone-else")).await.code, StatusCode::CREATED);
    let r = a.get(&format!("{events}?fieldSelector=source%3Dpersistentvolume-controller")).await;
    assert_eq!(r.code, StatusCode::OK);
    assert_eq!(r.body["items"].as_array().unwrap().len(), 1);
    assert_eq!(r.body["items"][0]["metadata"]["name"], "e1");
    let r = a.get(&format!("{events}?fieldSelector=foo%3Dbar")).await;
    assert_eq!(r.code, StatusCode::BAD_REQUEST);
    assert_eq!(r.body["message"], "field label not supported: foo");
    let r = a.get(&format!("{events}?fieldSelector=foo%3Dbar&watch=1")).await;
    assert_eq!(r.code, StatusCode::BAD_REQUEST);
    let r = a.get("/apis/events.k8s.io/v1/namespaces/default/events?fieldSelector=regarding.name%3Dc").await;
    assert_eq!(r.body["items"].as_array().unwrap().len(), 2);
    let r = a.get("/api/v1/persistentvolumes?fieldSelector=spec.storageClassName%3Dx").await;
    assert_eq!(r.code, StatusCode::BAD_REQUEST);
    let r = a.get("/api/v1/persistentvolumes?labelSelector=a%20b%3Dc").await;
    assert_eq!(r.code, StatusCode::BAD_REQUEST);
    a.h.shutdown().await.unwrap();
}

#[tokio::test]
async fn services_are_served_for_cluster_info_and_recycle_is_allowed_beyond_host_path() {
    let d = tempfile::tempdir().unwrap();
    let a = start(d.path()).await;
    let core = a.get("/api/v1").await.body;
    assert!(core["resources"].as_array().unwrap().iter().any(|r| r["name"] == "services"));
    let r = a.get("/api/v1/namespaces/kube-system/services?labelSelector=kubernetes.io%2Fcluster-service%3Dtrue").await;
    assert_eq!(r.code, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["kind"], "ServiceList");

    let mut v = pv("csi-recycle");
    v["spec"].as_object_mut().unwrap().remove("hostPath");
    v["spec"]["csi"] = json!({"driver": "d.example.com", "volumeHandle": "h"});
    v["spec"]["persistentVolumeReclaimPolicy"] = json!("Recycle");
    let r = a.post(PVS, &v).await;
    assert_eq!(r.code, StatusCode::CREATED, "{}", r.body);
    let mut root = pv("root-recycle");
    root["spec"]["hostPath"]["path"] = json!("/");
    root["spec"]["persistentVolumeReclaimPolicy"] = json!("Recycle");
    let r = a.post(PVS, &root).await;
    assert_eq!(r.code, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(
        r.body["details"]["causes"][0]["message"],
        "Forbidden: may not be 'recycle' for a hostPath mount of '/'"
    );
    a.h.shutdown().await.unwrap();
}
