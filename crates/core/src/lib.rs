//! The PersistentVolume controller, written once.
//!
//! Every mode (`up`, `run`, `simulate`, tests) runs this code; only the adapters differ. The
//! controller talks to the cluster through [`ClusterApi`], to storage through [`VolumePlugin`]s,
//! and to time through [`Clock`], so a simulation can run it on virtual time with no waiting.
//!
//! ## Design: the two-way pointer
//! A binding is `pv.spec.claimRef` ↔ `pvc.spec.volumeName`. There are no transactions, so a bind
//! writes the PV first (claimRef, then phase) and the PVC second (volumeName and annotations, then
//! phase). Any write may fail, any object may change or vanish between writes, and another
//! controller may race us. Every sync therefore reads the state it finds, decides, writes at most
//! what differs, and stops at the first error: the next sync of either object lands in a branch
//! that finishes (or rolls back) the work. That idempotence is what makes faults survivable.
//!
//! ## Flow
//! Watch events update the caches ([`caches::Caches`], the read side) and enqueue what they say
//! to wake on two de-duplicating work queues ([`queue`]). Workers run
//! [`Controller::sync_volume_key`] / [`Controller::sync_claim_key`]: each computes a plan
//! ([`plan`]: pure functions over the caches, through [`View`], deciding by the one rule of who
//! holds a volume, `pv_model::binding`) and the executor ([`Controller`]) carries the plan's
//! variant out, writing each object through its writer (the volume sync's plan is a list of
//! steps, [`steps`]: each write an edit of the volume as the step before left it); long operations (provision, delete,
//! recycle) go to the [`operations`] scheduler, keyed by name, at most one per key; events go
//! through a bounded queue that one task writes ([`events`]). A resync enqueues periodically
//! everything but the bound pairs that are settled.

pub mod api;
pub mod cache;
pub mod caches;
pub mod clock;
pub mod controller;
pub mod error;
pub mod events;
pub mod informer;
pub mod metrics;
pub mod operations;
pub mod plan;
pub mod plugin;
pub mod pods;
pub mod protection;
pub mod queue;
pub mod runner;
pub mod runtime;
pub mod shadow;
pub mod steps;
pub mod view;

mod exec;
mod writer;

/// The log target of the lines that tell what the controller changed or recorded (a phase, a
/// bind, a finalizer, an event): upstream logs them at V(2) or V(3), so `run` shows them from
/// `-v` on, while `up` shows them by default.
pub const PROGRESS: &str = "pv_core::progress";

pub use api::{ApiError, Call, ClusterApi, Intercepted, Interceptor};
pub use cache::{Counts, ObjectEvent};
pub use caches::Caches;
pub use clock::{Clock, SimClock, SystemClock};
pub use controller::{Config, Controller, Observer, WATCHED_KINDS};
pub use error::{Error, Result};
pub use plan::{Provisioning, UnboundClaimPlan};
pub use plugin::{NoRecyclerEvents, PluginError, PluginRegistry, ProvisionOptions, RecyclerEvents, VolumePlugin};
pub use protection::Protection;
pub use pv_model::binding::is_volume_unclaimed;
pub use pv_model::binding::phase_after_first_sync;
pub use steps::claim::{waiting_for_consumer_event, FIRST_CONSUMER_HINT, NO_CLASS_MESSAGE, WAITING_FOR_FIRST_CONSUMER};
pub use view::View;
