//! The object store behind every API the controller talks to.
//!
//! One store with kube-apiserver's semantics that the controller relies on: a single
//! cluster-wide, increasing resourceVersion; optimistic concurrency (a write carrying a stale
//! resourceVersion gets 409); `status` written through its own call; deletion that honours
//! finalizers; watch events replayable from a recent resourceVersion (older ones answer 410 Gone);
//! kube-apiserver's validation and defaulting for the storage kinds.
//!
//! Objects are kept as compact JSON text ([`Object`]) so the same store serves typed controller
//! adapters and the HTTP API for any kind it knows, at a fraction of a JSON tree's memory. Persistence sits *under* the store through [`Backend`]: the
//! in-memory mode has none, `up` plugs a durable database in. Faults (409, 500, timeouts, lost
//! responses) are injected here, at the API boundary, so every client sees them the same way.
//!
//! The files form layers, each calling only those below it (`scripts/import-circles.py`):
//! 1. leaves: [`error`], `meta`, `object`, [`kinds`] (one [`ResourceType`]), [`faults`],
//!    [`typed`], [`table`] (Table columns), [`namespaces`] (the lifecycle's rules), the
//!    finisher's queue;
//! 2. the kinds' validation, defaults and warnings (`validation/`);
//! 3. the strategies: the `Strategy` trait, each kind's file, [`custom`] resources' strategy,
//!    then `registry/mod.rs` with the lists of them ([`RESOURCE_TYPES`], made by the build script
//!    from the files of `registry/`) and the lookups;
//! 4. what goes through a kind's strategy: [`validation`]'s dispatch, [`admission`], [`watch`];
//! 5. the [`store`]: `store.rs` with `commit.rs` and `content.rs`, one type over three files
//!    (the one circle left), and its builder, deletion and namespace sweep;
//! 6. the [`NamespaceFinisher`], the thread that drives the sweep.

pub mod admission;
pub mod custom;
pub mod error;
pub mod faults;
pub mod finisher;
pub mod kinds;
mod meta;
pub mod namespaces;
mod object;
mod registry;
pub mod store;
pub mod table;
pub mod typed;
pub mod validation;
pub mod watch;

pub use admission::Admission;
pub use error::{FieldError, FieldErrorKind, StoreError};
pub use faults::{FaultKind, FaultSpec};
pub use finisher::NamespaceFinisher;
pub use kinds::ResourceType;
pub use object::Object;
pub use registry::{
    categories, columns, field_labels, returns_deleted_object, roundtrip, selectable_value, warnings, FieldLabels,
    RESOURCE_TYPES,
};
pub use store::{
    format_time, Backend, Deciding, ListOptions, Mutation, Pending, PendingWrite, Snapshot, Store, StoreBuilder,
    UidMode, WatchEvent, WatchEventType, Written,
};
pub use watch::{json_size, StoreLimits, Watcher};

/// Reads the crash points of the robustness tests from `FAILPOINTS` (see `crash_point!` in
/// store/commit.rs); only in a build with the `failpoints` feature.
#[cfg(feature = "failpoints")]
pub fn setup_failpoints() {
    // Kept for the life of the process: the points stay configured.
    std::mem::forget(fail::FailScenario::setup());
}

/// Result with a [`StoreError`].
pub type Result<T, E = StoreError> = std::result::Result<T, E>;
