//! The controller against a real Kubernetes API server, over kube-rs.
//!
//! `pv-core` holds the controller, written against the [`pv_core::ClusterApi`] trait and fed by
//! watch-event handlers. This crate is its adapter for an API server over HTTP: `pv-controller
//! run`, against a real cluster or against `pv-controller up`'s server. (`up`'s own controller
//! shares a process with the store and reads and writes it directly, through `pv_local`
//! and `pv_local::MemApi`, with no HTTP between them.)
//!
//! - [`api`]: [`KubeApi`], the controller's writes as kube-rs requests, with timeouts and error
//!   classification;
//! - [`informers`]: one watcher per kind feeding the handlers, relist-safe; [`lean`]: what they
//!   and the writes' answers decode, objects without the tree of their `managedFields`;
//! - [`runner`]: [`start`] wires both, [`run_workers`] starts the workers once caches are synced;
//! - [`lease`]: leader election over a Lease, so replicas never write concurrently;
//! - [`metrics`] and [`http`]: `/metrics` with upstream's names, `/healthz`, `/readyz`; [`secure`]:
//!   the same over HTTPS with authn/authz delegated to the API server (`--metrics-secure`);
//! - [`recycler`]: recycling NFS and host-path volumes with a recycler pod, as upstream;
//! - [`connect`]: building a client as kubectl does, and a preflight check.

pub mod api;
pub mod connect;
pub mod foreign;
pub mod http;
pub mod informers;
pub mod lean;
pub mod lease;
pub mod metrics;
pub mod recycler;
pub mod runner;
pub mod secure;
pub mod shadow;
pub mod token;

pub use api::{KubeApi, RequestCounts};
pub use informers::{start_informers, Informers};
pub use lease::{Elector, KubeLeaseStore, LeaderElectionConfig, LeaderState};
pub use runner::{run_workers, start, ControllerOptions, Wiring};
