//! A volume's phase and reclaim policy as values to match on, with no catch-all: an unknown or
//! unset one is `None`, which the caller decides about explicitly.

use crate::k8s::PersistentVolume;

/// PersistentVolume phases.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PvPhase {
    /// Created, not yet processed.
    Pending,
    /// Free to be bound.
    Available,
    /// Bound to a claim.
    Bound,
    /// Its claim is gone; waiting for reclaim.
    Released,
    /// Reclaim failed.
    Failed,
}

impl PvPhase {
    /// The phase as the API writes it.
    pub const fn as_str(self) -> &'static str {
        match self {
            PvPhase::Pending => "Pending",
            PvPhase::Available => "Available",
            PvPhase::Bound => "Bound",
            PvPhase::Released => "Released",
            PvPhase::Failed => "Failed",
        }
    }

    /// The phase with this name, if it is one.
    pub fn parse(s: &str) -> Option<PvPhase> {
        [PvPhase::Pending, PvPhase::Available, PvPhase::Bound, PvPhase::Released, PvPhase::Failed]
            .into_iter()
            .find(|p| p.as_str() == s)
    }

    /// The volume's `status.phase`; `None` when unset or not a phase.
    pub fn of(volume: &PersistentVolume) -> Option<PvPhase> {
        PvPhase::parse(volume.status.as_ref().and_then(|s| s.phase.as_deref()).unwrap_or(""))
    }
}

impl std::fmt::Display for PvPhase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What happens to a volume when its claim is gone.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReclaimPolicy {
    /// Keep the volume and its data.
    Retain,
    /// Empty the volume and make it Available again.
    Recycle,
    /// Delete the storage asset and the PV.
    Delete,
}

impl ReclaimPolicy {
    /// The policy as the API writes it.
    pub const fn as_str(self) -> &'static str {
        match self {
            ReclaimPolicy::Retain => "Retain",
            ReclaimPolicy::Recycle => "Recycle",
            ReclaimPolicy::Delete => "Delete",
        }
    }

    /// The policy with this name, if it is one.
    pub fn parse(s: &str) -> Option<ReclaimPolicy> {
        [ReclaimPolicy::Retain, ReclaimPolicy::Recycle, ReclaimPolicy::Delete].into_iter().find(|p| p.as_str() == s)
    }

    /// The volume's `spec.persistentVolumeReclaimPolicy`; `None` when unset (the API server
    /// defaults it to Retain) or unknown.
    pub fn of(volume: &PersistentVolume) -> Option<ReclaimPolicy> {
        ReclaimPolicy::parse(
            volume.spec.as_ref().and_then(|s| s.persistent_volume_reclaim_policy.as_deref()).unwrap_or(""),
        )
    }
}

impl std::fmt::Display for ReclaimPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_anything_else_is_none() {
        for p in [PvPhase::Pending, PvPhase::Available, PvPhase::Bound, PvPhase::Released, PvPhase::Failed] {
            assert_eq!(PvPhase::parse(p.as_str()), Some(p));
        }
        for p in [ReclaimPolicy::Retain, ReclaimPolicy::Recycle, ReclaimPolicy::Delete] {
            assert_eq!(ReclaimPolicy::parse(p.as_str()), Some(p));
        }
        assert_eq!(PvPhase::parse(""), None);
        assert_eq!(PvPhase::parse("bound"), None);
        assert_eq!(ReclaimPolicy::parse("Erase"), None);
    }
}
