//! What a client that asks for a large list or watch and then does not read costs the server,
//! counted by the allocator: the answer's snapshot (a pointer per object) and the piece being
//! written, never the collection in its encoding.
//!
//! One test in its own binary, so that nothing else allocates while it counts.

use axum::body::BodyDataStream;
use futures_util::StreamExt;
use pv_apiserver::limits;
use pv_apiserver::AppState;
use pv_store::Store;
use serde_json::json;
use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};
use std::alloc::System;
use std::sync::Arc;

mod inproc;
use inproc::app_state;

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// Bytes allocated and not freed since the region began.
fn live(r: &Region<'_, System>) -> isize {
    let c = r.change();
    c.bytes_allocated as isize - c.bytes_deallocated as isize
}

/// Sends a GET and reads the first piece of the answer's body, as a client that reads a little
/// and then stops; the rest of the body is returned unread.
async fn open(st: &Arc<AppState>, uri: &str, accept: &str) -> (usize, BodyDataStream) {
    let mut body = inproc::open(st, uri, accept).await;
    let first = body.next().await.unwrap().unwrap();
    (first.len(), body)
}

const OBJECTS: usize = 10_000;
/// The piece a list or watch is rendered in (`pv_apiserver::listing::CHUNK`).
const CHUNK: usize = 64 * 1024;
const JSON: &str = "application/json";
const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";

#[tokio::test(flavor = "current_thread")]
async fn unread_lists_and_watches_hold_their_snapshot_and_one_piece_whatever_the_store_holds() {
    let store = Store::builder().limits(limits::store_limits()).build();
    for i in 0..OBJECTS {
        store
            .create(
                "persistentvolumes",
                json!({"metadata": {"name": format!("pv-{i:05}"), "annotations": {"pad": "x".repeat(1000)}},
                       "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                                "hostPath": {"path": format!("/v/{i}")}}}),
            )
            .unwrap();
    }
    let (items, _) = store.list("persistentvolumes", &Default::default()).unwrap();
    let stored: usize = items.iter().map(pv_store::Object::len).sum();
    drop(items);
    let st = app_state(store);
    const PVS: &str = "/api/v1/persistentvolumes";
    let watch_list = format!("{PVS}?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan");
    let table = "application/json;as=Table;v=v1;g=meta.k8s.io";
    let partial = "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io";
    let answers: Vec<(String, &str)> = vec![
        (format!("{PVS}?watch=true"), JSON),
        (format!("{PVS}?watch=true"), PROTOBUF),
        (watch_list, JSON),
        (PVS.into(), JSON),
        (PVS.into(), "application/yaml"),
        (PVS.into(), PROTOBUF),
        (format!("{PVS}?includeObject=Object"), table),
        (PVS.into(), partial),
    ];
    let region = Region::new(GLOBAL);
    let mut unread = Vec::new();
    for (uri, accept) in &answers {
        for _ in 0..2 {
            let (first, rest) = open(&st, uri, accept).await;
            assert!(first <= CHUNK + 4096, "{uri} as {accept}: a first piece of {first} bytes");
            unread.push(rest);
        }
    }
    let held = live(&region);
    let per_client = held / unread.len() as isize;
    eprintln!(
        "{} unread answers over {OBJECTS} objects ({stored} bytes of JSON): {held} bytes held, {per_client} each",
        unread.len()
    );
    // The snapshot is 16 bytes an object (160 KB); the first piece went out already.
    assert!(
        per_client < 512 * 1024,
        "{} unread answers over {OBJECTS} objects ({stored} bytes of JSON) hold {held} bytes, {per_client} each",
        unread.len()
    );
    // Each still gives the whole answer when read.
    let mut read = 0;
    for mut body in unread {
        while let Some(piece) = body.next().now_or_never_ok() {
            read += piece;
        }
    }
    assert!(read >= stored * 6, "{read} bytes read after the first pieces");
}

/// Reads what a body has ready without waiting (a watch's body waits for changes at its end).
trait NowOrNever {
    fn now_or_never_ok(self) -> Option<usize>;
}

impl<F: std::future::Future<Output = Option<Result<axum::body::Bytes, axum::Error>>>> NowOrNever for F {
    fn now_or_never_ok(self) -> Option<usize> {
        futures_util::FutureExt::now_or_never(self).flatten().map(|b| b.unwrap().len())
    }
}
