//! The in-memory adapter and the deterministic simulation behind `pv-controller simulate`.
//!
//! [`MemApi`] implements the controller's `ClusterApi` over a [`pv_store::Store`] in the same
//! process (in memory for simulate and tests, durable under `up`, attached by [`pv_local`]);
//! [`input`] reads Kubernetes objects (YAML or JSON, multi-document or `kind: List`) with errors
//! that name the document, object and field; [`Simulation`] loads them into a store and runs the
//! whole controller on a virtual clock until nothing changes any more.

pub mod changes;
pub mod driver;
pub mod hooks;
pub mod input;
pub mod invariants;
pub mod output;
pub mod scenario;
pub mod workload;

pub use changes::Changes;
pub use driver::{Simulation, SimulationError, SimulationOptions, SyncRecord};
pub use input::{load, load_documents, InputError, InputObject, Loaded};
pub use pv_local::MemApi;
