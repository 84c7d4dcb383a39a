//! The syncs as lists of steps: what a sync reads, writes, records and hands on, in upstream's
//! order, computed by pure functions of the object, what the sync has read so far and (for
//! claims) a read-only [`crate::View`]. The executor (`exec/`) only carries the steps out; tests
//! and tools read the same lists without an API.
//!
//! Each write is an edit of its object *as the step before it left it*, never a whole object made
//! up front, so a list stays right whatever version an earlier write saved; an edit that changes
//! nothing writes nothing.
//!
//! - [`volume`]: the volume sync (upstream's `syncVolume`).
//! - [`claim`]: the claim syncs (`syncUnboundClaim`, `syncBoundClaim`, and the bind they share).
//! - [`report`]: a sync as carried out, step by step, for an observer
//!   ([`crate::controller::Observer`]; `simulate -o changes` shows them).
//!
//! Each step says itself in a few words naming the objects it acts on (`describe`): the one
//! wording of `explain`'s next sync ([`dry_run`]) and of the steps a simulation reports.
//!
//! Layer: above [`crate::plan`] (whose decisions they spell out), below `exec/` (which runs
//! them); `claim` uses `volume`'s edits, never the other way; `report` reads both.

pub mod claim;
pub mod report;
pub mod volume;

pub use claim::{claim_steps, dry_run, ClaimEdit, ClaimStep, ClaimSteps, Detail};
pub use report::{Outcome, Step, SyncReport, Synced, Taken};
pub use volume::{volume_steps, Edit, On, Read, Reclaim, VolumeStep};
