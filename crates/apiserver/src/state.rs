//! What every request handler shares: [`AppState`] (re-exported at the crate root).
//!
//! Sits just above [`crate::limits`] and [`crate::paging`], whose types it holds; dispatch,
//! the verbs, watch, health and the server use it.

use crate::{limits, paging};
use pv_store::Store;
use std::sync::Arc;

/// What every request handler shares.
pub struct AppState {
    /// The object store.
    pub store: Arc<Store>,
    /// The bearer token.
    pub token: String,
    /// `host:port` as clients reach the server.
    pub server_address: String,
    /// Becomes true on shutdown (ends watches).
    pub shutdown: tokio::sync::watch::Receiver<bool>,
    /// Paged lists being continued.
    pub pages: paging::Snapshots,
    /// Writes running off the async workers; shutdown waits for them, so that no write is left
    /// half-done against a store about to close, even when its client has gone.
    pub writes: tokio_util::task::TaskTracker,
    /// Per-request bounds (body size, timeouts, YAML depth).
    pub limits: limits::Limits,
}
