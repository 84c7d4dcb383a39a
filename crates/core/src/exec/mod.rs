//! Carrying out the plans: each file is the part of the executor (`impl Controller`) that matches
//! the variants [`crate::plan`] decided for one kind of work and writes, each object through its
//! writer ([`crate::writer`]), handing long operations to [`crate::operations`]. What it reads,
//! it reads from [`crate::caches::Caches`] or the API; what to do, the plan's variant says.
//!
//! - [`volume`]: the volume sync (upstream's `syncVolume`): the steps [`crate::steps::volume_steps`]
//!   lists, carried out in order.
//! - [`claim`]: the claim syncs (`syncUnboundClaim`, `syncBoundClaim`), after
//!   [`crate::plan::plan_unbound_claim`] and [`crate::plan::plan_bound_claim`].
//! - [`bind`]: the two-way pointer written in upstream's order (`bind`, `unbindVolume`).
//! - [`provision`]: provisioning operations, in-process and external.
//! - [`reclaim`]: Retain, Recycle and Delete of released volumes.
//! - [`save`]: each write of a volume or a claim, in the object's write turn.

pub(crate) mod bind;
pub(crate) mod claim;
pub(crate) mod provision;
pub(crate) mod reclaim;
pub(crate) mod save;
pub(crate) mod volume;
