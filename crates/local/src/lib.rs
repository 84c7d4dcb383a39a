//! The controller attached to a store in the same process: what `pv-controller up` runs, and
//! what the simulator drives.
//!
//! `up` serves the store over HTTP to kubectl and other clients, and its own controller reads and
//! writes the same store directly: [`informers`] that list and watch the store, and [`MemApi`]
//! for writes. Nothing between them is HTTP, TLS or JSON text, so the API server's capacity goes
//! to its clients; the store's rules are the same for both (resourceVersions, 409 on stale
//! writes, the status subresource, validation, a write acknowledged only once durable).
//! `pv-controller run` is the path that talks to an API server over the network (`pv-kube`).

pub mod informers;
pub mod memapi;

pub use informers::{deliver, list_into, start, start_protection, step_of, LocalInformers};
pub use memapi::MemApi;
