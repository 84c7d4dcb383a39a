//! Watches whose initial events are read slowly: every object, then the initial-events-end
//! bookmark, then the changes made meanwhile, in order; and a watcher whose changes overflow
//! while it is still taking its initial events ends after what it was sent, as any slow
//! watcher does.

use axum::body::BodyDataStream;
use futures_util::StreamExt;
use pv_apiserver::limits;
use pv_store::{Store, StoreLimits};
use serde_json::{json, Value};

mod inproc;
use inproc::{app_state, open};

fn pv(name: &str, pad: usize) -> Value {
    json!({"metadata": {"name": name, "annotations": {"pad": "x".repeat(pad)}},
           "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "hostPath": {"path": "/v"}}})
}

fn store_with(limits: StoreLimits, n: usize) -> Store {
    let store = Store::builder().limits(limits).build();
    for i in 0..n {
        store.create("persistentvolumes", pv(&format!("pv-{i:05}"), 500)).unwrap();
    }
    store
}

fn touch(store: &Store, name: &str, i: usize) {
    let mut o = store.get("persistentvolumes", "", name).unwrap().value();
    o["metadata"]["labels"] = json!({"i": i.to_string()});
    store.update("persistentvolumes", o, false).unwrap();
}

/// (type, name, resourceVersion, initial-events-end) of each event in JSON lines or protobuf
/// frames.
fn events(bytes: &[u8], protobuf: bool) -> Vec<(String, String, String, bool)> {
    let parsed: Vec<(String, Value)> = if protobuf {
        pv_apiserver::protobuf::read_watch_frames(bytes).unwrap()
    } else {
        bytes
            .split(|b| *b == b'\n')
            .filter(|l| !l.is_empty())
            .map(|l| {
                let v: Value = serde_json::from_slice(l).unwrap();
                (v["type"].as_str().unwrap().to_string(), v["object"].clone())
            })
            .collect()
    };
    parsed
        .into_iter()
        .map(|(ty, o)| {
            let meta = &o["metadata"];
            let s = |k: &str| meta[k].as_str().unwrap_or("").to_string();
            (ty, s("name"), s("resourceVersion"), meta["annotations"]["k8s.io/initial-events-end"] == "true")
        })
        .collect()
}

/// Reads pieces until `n` events arrived (the body of a watch never ends by itself).
async fn read_events(body: &mut BodyDataStream, n: usize, protobuf: bool) -> Vec<(String, String, String, bool)> {
    let mut bytes = Vec::new();
    loop {
        let got = events(&bytes, protobuf);
        if got.len() >= n {
            return got;
        }
        match body.next().await {
            Some(piece) => bytes.extend_from_slice(&piece.unwrap()),
            None => return got,
        }
    }
}

#[tokio::test]
async fn a_slowly_read_watch_sends_every_object_then_the_bookmark_then_the_changes_made_meanwhile() {
    const N: usize = 3000;
    for (accept, protobuf) in [("application/json", false), ("application/vnd.kubernetes.protobuf", true)] {
        let st = app_state(store_with(limits::store_limits(), N));
        let snapshot = st.store.delivered_version().to_string();
        let uri = "/api/v1/persistentvolumes?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan\
                   &allowWatchBookmarks=true";
        let mut body = open(&st, uri, accept).await;
        let first = body.next().await.unwrap().unwrap();
        // Changes made while the initial events are still being taken.
        for i in 0..5 {
            touch(&st.store, "pv-00001", i);
        }
        st.store.create("persistentvolumes", pv("pv-new", 10)).unwrap();
        // A piece holds whole events.
        let mut got = events(&first, protobuf);
        assert!(got.len() < N, "{accept}: the first piece holds {} events", got.len());
        let more = read_events(&mut body, N + 7 - got.len(), protobuf).await;
        got.extend(more);
        assert_eq!(got.len(), N + 7, "{accept}");
        for (i, e) in got[..N].iter().enumerate() {
            assert_eq!((e.0.as_str(), e.1.as_str()), ("ADDED", format!("pv-{i:05}").as_str()), "{accept}");
        }
        assert_eq!((got[N].0.as_str(), got[N].2.as_str(), got[N].3), ("BOOKMARK", snapshot.as_str(), true), "{accept}");
        let live: Vec<(&str, &str)> = got[N + 1..].iter().map(|e| (e.0.as_str(), e.1.as_str())).collect();
        let mut want = vec![("MODIFIED", "pv-00001"); 5];
        want.push(("ADDED", "pv-new"));
        assert_eq!(live, want, "{accept}");
    }
}

#[tokio::test]
async fn a_watcher_whose_changes_overflow_while_it_takes_its_initial_events_ends_after_what_it_was_sent() {
    const N: usize = 2000;
    let limits = StoreLimits { watch_events: Some(10), ..limits::store_limits() };
    let st = app_state(store_with(limits, N));
    let mut body = open(&st, "/api/v1/persistentvolumes?watch=true", "application/json").await;
    let mut bytes = body.next().await.unwrap().unwrap().to_vec();
    for i in 0..30 {
        touch(&st.store, "pv-00002", i);
    }
    while let Some(piece) = body.next().await {
        bytes.extend_from_slice(&piece.unwrap());
    }
    let got = events(&bytes, false);
    assert_eq!(got.len(), N + 10, "every object, then the ten changes queued before the watcher fell behind");
    assert!(got[..N].iter().all(|e| e.0 == "ADDED"));
    assert!(got[N..].iter().all(|e| (e.0.as_str(), e.1.as_str()) == ("MODIFIED", "pv-00002")));
}
