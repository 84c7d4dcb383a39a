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
//!
//! Layers, bottom to top; a module uses only modules of its own layer or below, and no source
//! file reaches back to one that uses it (`scripts/import-circles.py` finds no circle):
//! 1. leaves: [`error`], [`resources`], [`auth`], [`events`], [`durable`];
//! 2. request pieces: [`query`], [`decoded`], [`paging`], [`routes`], [`select`], [`tls`],
//!    [`tables`], [`listopts`], [`inflight`];
//! 3. bounds and shared state: [`limits`], then [`shape`], [`conn`], [`state`] ([`AppState`])
//!    and [`health`];
//! 4. bodies and encodings: [`protobuf`], [`format`](mod@format) (content negotiation),
//!    [`discovery`], [`listing`], [`custom`], [`decode`], [`patch`];
//! 5. verbs: [`handlers`], then [`watch`];
//! 6. [`dispatch`], then [`server`].

pub mod auth;
pub mod conn;
pub mod custom;
pub mod decode;
pub mod decoded;
pub mod discovery;
pub mod dispatch;
pub mod durable;
pub mod error;
pub mod events;
pub mod format;
pub mod handlers;
pub mod health;
pub mod inflight;
pub mod limits;
pub mod listing;
pub mod listopts;
pub mod paging;
pub mod patch;
pub mod protobuf;
pub mod query;
pub mod resources;
pub mod routes;
pub mod select;
pub mod server;
pub mod shape;
pub mod state;
pub mod tables;
pub mod tls;
pub mod watch;

pub use error::ApiError;
pub use server::{open_store, Server, ServerConfig, ServerHandle, DEFAULT_COMMIT_DELAY};
pub use state::AppState;
