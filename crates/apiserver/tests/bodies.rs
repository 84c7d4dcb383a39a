//! Bodies whose cost is out of proportion to their size, Pods and Services kube-apiserver would
//! refuse, and requests beyond the in-flight limits, against a running server (plain HTTP).

use pv_apiserver::limits::Limits;
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

mod common;
use common::{start, start_with, Api};

const PODS: &str = "/api/v1/namespaces/default/pods";
const SERVICES: &str = "/api/v1/namespaces/default/services";

async fn send(a: &Api, path: &str, ct: &str, body: Vec<u8>) -> (StatusCode, Value) {
    let resp = a.request(Method::POST, path).header("content-type", ct).body(body).send().await.unwrap();
    let code = resp.status();
    let text = resp.text().await.unwrap();
    (code, serde_json::from_str(&text).unwrap_or(Value::String(text)))
}

/// The reported body: a Pod of a million empty containers, about 3 MB of JSON.
fn million_containers_json() -> Vec<u8> {
    let mut b = br#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"containers":["#.to_vec();
    b.extend_from_slice(&vec!["{}"; 1_000_000].join(",").into_bytes());
    b.extend_from_slice(b"]}}");
    b
}

fn varint(out: &mut Vec<u8>, mut v: usize) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn field(out: &mut Vec<u8>, num: u8, bytes: &[u8]) {
    out.push(num << 3 | 2);
    varint(out, bytes.len());
    out.extend_from_slice(bytes);
}

/// The same Pod in protobuf: a million empty `containers` messages (two bytes each).
fn million_containers_protobuf() -> Vec<u8> {
    let spec = [0x12u8, 0x00].repeat(1_000_000); // PodSpec.containers = 2
    let mut meta = Vec::new();
    field(&mut meta, 1, b"p");
    let mut pod = Vec::new();
    field(&mut pod, 1, &meta);
    field(&mut pod, 2, &spec);
    let mut type_meta = Vec::new();
    field(&mut type_meta, 1, b"v1");
    field(&mut type_meta, 2, b"Pod");
    let mut out = b"k8s\0".to_vec();
    field(&mut out, 1, &type_meta);
    field(&mut out, 2, &pod);
    out
}

#[tokio::test]
async fn a_million_empty_containers_are_refused_before_decoding_dry_run_or_not() {
    let d = tempfile::tempdir().unwrap();
    let a = start(d.path()).await;
    let bodies = [
        ("application/json", million_containers_json()),
        ("application/vnd.kubernetes.protobuf", million_containers_protobuf()),
    ];
    for (ct, body) in bodies {
        assert!(body.len() <= pv_apiserver::limits::MAX_BODY, "{ct}: within the body limit");
        for path in [PODS.to_string(), format!("{PODS}?dryRun=All")] {
            let (code, s) = send(&a, &path, ct, body.clone()).await;
            assert_eq!(code.as_u16(), 413, "{ct} {path}: {s}");
            assert_eq!(s["reason"], "RequestEntityTooLarge", "{s}");
            assert!(s["message"].as_str().unwrap().contains("16384 objects"), "{s}");
        }
    }
    let got = a.request(Method::GET, &format!("{PODS}/p")).send().await.unwrap();
    assert_eq!(got.status(), StatusCode::NOT_FOUND, "nothing stored");
    a.h.shutdown().await.unwrap();
}

#[tokio::test]
async fn pods_and_services_are_validated_as_kube_apiserver_validates_them() {
    let d = tempfile::tempdir().unwrap();
    let a = start(d.path()).await;
    let pod = |containers: Value| json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": containers}});
    let cases = [
        (PODS, pod(json!([])), vec!["spec.containers: Required value"]),
        (
            PODS,
            pod(json!([{}, {}])),
            vec![
                "spec.containers[0].name: Required value",
                "spec.containers[0].image: Required value",
                "spec.containers[1].name: Required value",
                "spec.containers[1].image: Required value",
                "spec.containers[1].name: Duplicate value: \"\"",
            ],
        ),
        (
            PODS,
            pod(json!([{"name": "a", "image": "i"}, {"name": "a", "image": "i"}])),
            vec!["spec.containers[1].name: Duplicate value: \"a\""],
        ),
        (
            SERVICES,
            json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}, "spec": {"ports": [{"port": -1, "targetPort": 80}]}}),
            vec!["spec.ports[0].port: Invalid value: -1: must be between 1 and 65535, inclusive"],
        ),
    ];
    for dry in ["", "?dryRun=All"] {
        for (path, body, want) in &cases {
            let (code, s) = send(&a, &format!("{path}{dry}"), "application/json", body.to_string().into_bytes()).await;
            assert_eq!((code.as_u16(), s["reason"].as_str()), (422, Some("Invalid")), "{body}: {s}");
            let causes: Vec<String> = s["details"]["causes"]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| format!("{}: {}", c["field"].as_str().unwrap(), c["message"].as_str().unwrap()))
                .collect();
            assert_eq!(&causes, want, "{s}");
        }
    }
    let ok = pod(json!([{"name": "a", "image": "busybox"}]));
    assert_eq!(send(&a, PODS, "application/json", ok.to_string().into_bytes()).await.0, StatusCode::CREATED);
    a.h.shutdown().await.unwrap();
}

/// Sends a request's headers and half its body, and leaves it unfinished: it holds a slot.
async fn unfinished_write(a: &Api) -> tokio::net::TcpStream {
    let mut s = tokio::net::TcpStream::connect(a.h.local_addr()).await.unwrap();
    let head = format!(
        "POST {PODS} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{{",
        a.h.token()
    );
    s.write_all(head.as_bytes()).await.unwrap();
    s
}

#[tokio::test]
async fn writes_beyond_the_in_flight_limit_get_429_with_retry_after() {
    let d = tempfile::tempdir().unwrap();
    let limits = Limits { max_mutating_requests_inflight: 2, max_requests_inflight: 1, ..Limits::default() };
    let a = start_with(d.path(), limits).await;
    let mut slow = vec![unfinished_write(&a).await, unfinished_write(&a).await];
    let body = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "a", "image": "i"}]}});
    // Until the server has read both unfinished requests' headers, a write may still get in.
    let mut refused = None;
    for _ in 0..100 {
        let resp = a.request(Method::POST, PODS).json(&body).send().await.unwrap();
        if resp.status() == StatusCode::TOO_MANY_REQUESTS {
            refused = Some(resp);
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let resp = refused.expect("a third write in flight is refused");
    assert_eq!(resp.headers()["retry-after"], "1");
    assert_eq!(resp.text().await.unwrap(), "Too many requests, please try again later.\n");
    // Reads have their own limit, and a watch is not counted against it.
    let watch = a.request(Method::GET, &format!("{PODS}?watch=true")).send().await.unwrap();
    assert_eq!(watch.status(), StatusCode::OK);
    assert_eq!(a.request(Method::GET, PODS).send().await.unwrap().status(), StatusCode::OK);
    drop(watch);
    // A slow write finishes, the other client hangs up: their slots are free again.
    slow[0].write_all(format!("{}}}", " ".repeat(98)).as_bytes()).await.unwrap();
    let mut answer = [0u8; 10];
    slow[0].read_exact(&mut answer).await.unwrap();
    assert_eq!(&answer, b"HTTP/1.1 4", "an empty Pod is refused");
    drop(slow);
    let mut last = StatusCode::TOO_MANY_REQUESTS;
    for _ in 0..100 {
        last = a.request(Method::POST, PODS).json(&body).send().await.unwrap().status();
        if last != StatusCode::TOO_MANY_REQUESTS {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(last == StatusCode::CREATED || last == StatusCode::CONFLICT, "{last}");
    a.h.shutdown().await.unwrap();
}
