//! Every served kind against upstream: `tests/protobuf/NAME.json` is an object as
//! kube-apiserver serves it, `NAME.pb` upstream's protobuf of it and `NAME.go.json` upstream's
//! JSON of it, both written by `conformance/protoclient/golden` from the Go types.

use super::*;
use serde_json::json;
use std::path::PathBuf;

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/protobuf")
}

/// Go writes `null` for nil lists, maps and zero times; the decoder leaves them out.
fn without_nulls(v: &Value) -> Value {
    match v {
        Value::Object(m) => {
            Value::Object(m.iter().filter(|(_, v)| !v.is_null()).map(|(k, v)| (k.clone(), without_nulls(v))).collect())
        }
        Value::Array(a) => Value::Array(a.iter().map(without_nulls).collect()),
        v => v.clone(),
    }
}

fn fixtures() -> Vec<(String, Value, Vec<u8>, Value)> {
    let mut names: Vec<String> = std::fs::read_dir(dir())
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter_map(|n| n.strip_suffix(".pb").map(str::to_string))
        .collect();
    names.sort();
    names
        .into_iter()
        .map(|n| {
            let read = |ext: &str| std::fs::read(dir().join(format!("{n}{ext}"))).unwrap();
            let json: Value = serde_json::from_slice(&read(".json")).unwrap();
            let go_json: Value = serde_json::from_slice(&read(".go.json")).unwrap();
            let pb = read(".pb");
            (n, json, pb, go_json)
        })
        .collect()
}

#[test]
fn every_served_kind_is_covered_by_a_fixture() {
    let names: Vec<String> = fixtures().into_iter().map(|f| f.0).collect();
    for kind in [
        "persistentvolume",
        "persistentvolumeclaim",
        "pod",
        "node",
        "namespace",
        "event",
        "event-v1",
        "storageclass",
        "csidriver",
        "csinode",
        "volumeattachment",
        "csistoragecapacity",
        "volumeattributesclass",
        "lease",
        "persistentvolumelist",
        "status",
        "deleteoptions",
    ] {
        assert!(names.iter().any(|n| n == kind), "no fixture for {kind}");
    }
}

#[test]
fn encoding_is_byte_for_byte_what_upstream_writes() {
    for (name, json, pb, _) in fixtures() {
        let ours = encode(&json).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(ours == pb, "{name}: encodings differ\n ours:     {ours:02x?}\n upstream: {pb:02x?}");
    }
}

#[test]
fn decoding_upstreams_protobuf_gives_upstreams_json() {
    for (name, _, pb, go_json) in fixtures() {
        let ours = decode("", &pb).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(ours, without_nulls(&go_json), "{name}");
    }
}

#[test]
fn json_to_protobuf_and_back_is_the_same_object() {
    for (name, json, _, go_json) in fixtures() {
        let back = decode("", &encode(&json).unwrap()).unwrap();
        // Objects as the server serves them come back unchanged; a create body comes back as
        // upstream's JSON of it (with the empty `status: {}` Go writes).
        if !name.starts_with("create-") {
            assert_eq!(back, without_nulls(&json), "{name}");
        }
        assert_eq!(back, without_nulls(&go_json), "{name}");
    }
}

#[test]
fn a_namespace_from_kubectl_create_decodes() {
    // `kubectl create namespace foo` with a label, as kubectl's typed client sends it.
    let v = decode(
        "Namespace",
        &encode(&json!({"apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": "foo", "labels": {"team": "a"}}}))
        .unwrap(),
    )
    .unwrap();
    assert_eq!(v["metadata"]["name"], "foo");
    assert_eq!(v["metadata"]["labels"]["team"], "a");
    assert_eq!(v["spec"], json!({}));
}

#[test]
fn garbage_unknown_kinds_and_encoded_content_are_refused() {
    assert_eq!(decode("Namespace", b"nope").unwrap_err().code(), 400);
    assert_eq!(decode("Namespace", b"k8s\0\x12\x7f").unwrap_err().code(), 400);
    let envelope = |kind: &str, encoding: &str| {
        let mut tm = Vec::new();
        put_len(&mut tm, 1, b"v1");
        put_len(&mut tm, 2, kind.as_bytes());
        let mut b = MAGIC.to_vec();
        put_len(&mut b, 1, &tm);
        put_len(&mut b, 2, b"");
        put_len(&mut b, 3, encoding.as_bytes());
        b
    };
    let e = decode("Deployment", &envelope("Deployment", "")).unwrap_err();
    assert_eq!(e.code(), 400, "{e}");
    assert!(e.to_string().contains("Deployment"), "{e}");
    assert!(decode("Namespace", &envelope("Namespace", "")).is_ok());
    let gzip = envelope("Namespace", "gzip");
    assert_eq!(decode("Namespace", &gzip).unwrap_err().code(), 415);
}

#[test]
fn a_wrongly_typed_stored_field_is_named_when_encoding() {
    let e = encode(&json!({"apiVersion": "v1", "kind": "PersistentVolume", "spec": {"storageClassName": 123}}))
        .unwrap_err();
    assert!(e.to_string().contains("spec.storageClassName: expected a string"), "{e}");
}

#[test]
fn watch_frames_carry_each_object_in_its_envelope() {
    let pv =
        json!({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "a"}, "spec": {}, "status": {}});
    let status = json!({"apiVersion": "v1", "kind": "Status", "metadata": {}, "status": "Failure", "code": 410,
        "reason": "Expired", "message": "too old resource version"});
    let stream = [watch_frame("ADDED", &pv).unwrap(), watch_frame("ERROR", &status).unwrap()].concat();
    let events = read_watch_frames(&stream).unwrap();
    assert_eq!(events, vec![("ADDED".to_string(), pv), ("ERROR".to_string(), status)]);
}

#[test]
fn the_first_producible_accepted_type_decides() {
    assert!(accepts("application/vnd.kubernetes.protobuf, application/json"));
    assert!(accepts("application/vnd.kubernetes.protobuf;stream=watch"));
    assert!(!accepts("application/json, application/vnd.kubernetes.protobuf"));
    assert!(!accepts("application/json;as=Table;v=v1;g=meta.k8s.io,application/json"));
    assert!(!accepts("application/vnd.kubernetes.protobuf;as=Table;v=v1;g=meta.k8s.io,application/json"));
    assert!(!accepts("*/*"));
    assert!(!accepts(""));
    assert!(is_protobuf("application/vnd.kubernetes.protobuf"));
    assert!(!is_protobuf("application/json"));
}
