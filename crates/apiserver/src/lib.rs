//! A Kubernetes-compatible API server for the storage API subset, over [`pv_store::Store`],
//! persisted durably in redb.
//!
//! This is what `pv-controller up` runs: kubectl and the controller (through the same HTTP
//! client code it uses against a real cluster) talk to it as to a kube-apiserver. It serves
//! discovery and enough OpenAPI for kubectl, the core/v1, storage.k8s.io/v1,
//! coordination.k8s.io/v1 and events.k8s.io/v1 resources with get, list (selectors, paging),
//! watch (bookmarks, 410), create, update, patch (merge, JSON, strategic, apply), delete and
//! the status subresource, server-side Tables for `kubectl get`, and kube-apiserver's `Status`
//! errors. Requests need the bearer token written into the kubeconfig, over HTTPS with a
//! generated CA ([`tls`]); the server listens on loopback unless told otherwise.
//!
//! Modules, in the order a request meets them: [`dispatch`] (auth, routing, body),
//! [`routes`] (paths), [`handlers`] and [`watch`] (verbs; [`listing`] writes lists as they are read), [`patch`], [`select`], [`tables`],
//! [`events`] (the events.k8s.io conversion), [`protobuf`] (the wire format client-go
//! prefers), [`discovery`], [`health`], [`error`]; [`durable`] persists the store; [`server`]
//! starts and stops everything, and [`conn`] serves each connection within the bounds of
//! [`limits`].

pub mod auth;
pub mod conn;
pub mod custom;
pub mod decode;
pub mod discovery;
pub mod dispatch;
pub mod durable;
pub mod error;
pub mod events;
pub mod handlers;
pub mod health;
pub mod inflight;
pub mod limits;
pub mod listing;
pub mod listopts;
pub mod paging;
pub mod patch;
pub mod protobuf;
pub mod resources;
pub mod routes;
pub mod select;
pub mod server;
pub mod shape;
pub mod tables;
pub mod tls;
pub mod warnings;
pub mod watch;

pub use error::ApiError;
pub use server::{open_store, Server, ServerConfig, ServerHandle, DEFAULT_COMMIT_DELAY};

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
