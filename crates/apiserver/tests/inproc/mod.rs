//! The API server's state over a store, for tests that call `dispatch` in process (no socket):
//! what they measure or pace is the answer's body itself.

use axum::body::{Body, BodyDataStream};
use axum::extract::State;
use axum::http::Request;
use pv_apiserver::limits::Limits;
use pv_apiserver::{dispatch, AppState};
use pv_store::Store;
use std::sync::Arc;

/// The state `dispatch` answers from, over `store`, with token `t`.
pub fn app_state(store: Store) -> Arc<AppState> {
    // Watches end when the shutdown sender goes: it stays for the test's life.
    let (stop, shutdown) = tokio::sync::watch::channel(false);
    std::mem::forget(stop);
    Arc::new(AppState {
        store: Arc::new(store),
        token: "t".into(),
        server_address: "127.0.0.1:1".into(),
        shutdown,
        pages: Default::default(),
        writes: tokio_util::task::TaskTracker::new(),
        limits: Limits::default(),
    })
}

/// Sends a GET with the token and `accept`, and returns the 200 answer's body unread.
pub async fn open(st: &Arc<AppState>, uri: &str, accept: &str) -> BodyDataStream {
    let req = Request::builder()
        .uri(uri)
        .header("authorization", "Bearer t")
        .header("accept", accept)
        .body(Body::empty())
        .unwrap();
    let resp = dispatch::dispatch(State(st.clone()), req).await;
    assert_eq!(resp.status(), 200, "{uri} as {accept}");
    resp.into_body().into_data_stream()
}
