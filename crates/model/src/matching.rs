//! The matching rules: may this volume be bound to this claim, and if not, which rule fails first.
//!
//! Rules are checked in upstream's order (`FindMatchingVolume` in component-helpers), so that the
//! first failing rule reported here is the reason the controller skipped the volume. The controller
//! binds through the [`crate::VolumeIndex`], which applies the same [`evaluate`] to the few
//! candidates it looks at; `explain` applies it to every volume.

use crate::helpers::{self, AccessModes};
use crate::k8s::{PersistentVolume, PersistentVolumeClaim};
use crate::selector;

/// The rule a volume fails for a claim, or `Match`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum VerdictKind {
    /// The volume may be bound to the claim.
    Match,
    /// The volume does not offer every access mode the claim asks for.
    AccessModes,
    /// The volume is claimed by (or pre-bound to) another claim.
    ClaimedByOther,
    /// The volume is smaller than the request.
    Capacity,
    /// Filesystem vs Block.
    VolumeMode,
    /// `volumeAttributesClassName` differs.
    VolumeAttributesClass,
    /// The volume is being deleted.
    BeingDeleted,
    /// The claim's class binds on first consumer: the controller leaves free volumes to the scheduler.
    DelayBinding,
    /// The volume is not Available (Pending, Released, Failed or Bound).
    Phase,
    /// The volume's labels do not satisfy the claim's selector.
    Selector,
    /// The volume's class differs from the claim's.
    StorageClass,
}

impl VerdictKind {
    /// The name `explain --output json` uses.
    pub fn as_str(&self) -> &'static str {
        match self {
            VerdictKind::Match => "match",
            VerdictKind::AccessModes => "accessModes",
            VerdictKind::ClaimedByOther => "claimedByOther",
            VerdictKind::Capacity => "capacity",
            VerdictKind::VolumeMode => "volumeMode",
            VerdictKind::VolumeAttributesClass => "volumeAttributesClass",
            VerdictKind::BeingDeleted => "beingDeleted",
            VerdictKind::DelayBinding => "delayBinding",
            VerdictKind::Phase => "phase",
            VerdictKind::Selector => "selector",
            VerdictKind::StorageClass => "storageClass",
        }
    }

    /// A short plural noun phrase for breakdowns ("7 too small").
    pub fn breakdown_label(&self) -> &'static str {
        match self {
            VerdictKind::Match => "matching",
            VerdictKind::AccessModes => "access modes",
            VerdictKind::ClaimedByOther => "claimed by other claims",
            VerdictKind::Capacity => "too small",
            VerdictKind::VolumeMode => "volume mode",
            VerdictKind::VolumeAttributesClass => "volume attributes class",
            VerdictKind::BeingDeleted => "being deleted",
            VerdictKind::DelayBinding => "waiting for first consumer",
            VerdictKind::Phase => "not available",
            VerdictKind::Selector => "selector",
            VerdictKind::StorageClass => "class",
        }
    }
}

/// A verdict with a short detail a person can read ("5Gi < requested 10Gi").
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verdict {
    /// Which rule decided.
    pub kind: VerdictKind,
    /// True for a match because the volume is pre-bound to this claim (it beats smaller volumes).
    pub prebound: bool,
    /// Human detail; empty for a plain match.
    pub detail: String,
}

impl Verdict {
    fn fail(kind: VerdictKind, detail: String) -> Self {
        Verdict { kind, prebound: false, detail }
    }

    /// True for a match.
    pub fn is_match(&self) -> bool {
        self.kind == VerdictKind::Match
    }
}

/// Evaluates one volume for one claim, checking the rules in upstream's order.
///
/// `delay_binding` is true when the claim's class waits for the first consumer: free volumes are
/// then left to the scheduler, but a volume pre-bound to this claim still matches.
/// Access modes are checked first: upstream's index never lists a volume lacking a requested mode.
pub fn evaluate(claim: &PersistentVolumeClaim, volume: &PersistentVolume, delay_binding: bool) -> Verdict {
    let wanted = helpers::claim_access_modes(claim);
    let offered = helpers::volume_access_modes(volume);
    if !offered.contains_all(wanted) {
        return Verdict::fail(
            VerdictKind::AccessModes,
            format!("offers {} but {} requested", or_none(offered), AccessModes(wanted.0 & !offered.0).short()),
        );
    }
    evaluate_in_mode_set(claim, volume, delay_binding)
}

/// [`evaluate`] without the access-mode rule (the index has already applied it).
pub fn evaluate_in_mode_set(claim: &PersistentVolumeClaim, volume: &PersistentVolume, delay_binding: bool) -> Verdict {
    let relation = crate::binding::classify(volume, claim);
    if !relation.may_bind() {
        let by = helpers::claim_ref(volume).map(helpers::claim_ref_key).unwrap_or_default();
        return Verdict::fail(VerdictKind::ClaimedByOther, format!("claimed by {by}"));
    }
    let requested = helpers::claim_request(claim);
    let capacity = helpers::volume_capacity(volume);
    if capacity < requested {
        return Verdict::fail(VerdictKind::Capacity, format!("{capacity} < requested {requested}"));
    }
    if helpers::volume_mode_mismatch(claim, volume) {
        return Verdict::fail(
            VerdictKind::VolumeMode,
            format!("volume mode {} ≠ requested {}", helpers::volume_mode(volume), helpers::claim_volume_mode(claim)),
        );
    }
    let (cvac, vvac) = (helpers::claim_vac(claim), helpers::volume_vac(volume));
    if cvac != vvac {
        return Verdict::fail(
            VerdictKind::VolumeAttributesClass,
            format!("volume attributes class {} ≠ requested {}", quoted(vvac), quoted(cvac)),
        );
    }
    if volume.metadata.deletion_timestamp.is_some() {
        return Verdict::fail(VerdictKind::BeingDeleted, "volume is being deleted".into());
    }
    if let crate::binding::Relation::ThisClaim { .. } = relation {
        return Verdict { kind: VerdictKind::Match, prebound: true, detail: "pre-bound to this claim".into() };
    }
    if relation == (crate::binding::Relation::EarlierOfSameName { rebind: true }) {
        // As a pre-binding, whatever the phase and binding mode, once selector and class still fit.
        return match selector_and_class(claim, volume) {
            Some(fail) => fail,
            None => Verdict {
                kind: VerdictKind::Match,
                prebound: true,
                detail: format!(
                    "retained from an earlier claim of this name: binds again ({}: {})",
                    crate::annotations::REBIND,
                    crate::annotations::REBIND_SAME_NAME
                ),
            },
        };
    }
    if delay_binding {
        return Verdict::fail(
            VerdictKind::DelayBinding,
            "class binds on first consumer: the scheduler picks the volume".into(),
        );
    }
    // As the volume's own sync leaves it: a new volume (no phase yet) counts as Available.
    let phase = crate::binding::settled_volume_phase(volume);
    if phase != helpers::pv_phase::AVAILABLE {
        return Verdict::fail(VerdictKind::Phase, format!("phase {} is not Available", helpers::or_dash(phase)));
    }
    selector_and_class(claim, volume).unwrap_or(Verdict {
        kind: VerdictKind::Match,
        prebound: false,
        detail: String::new(),
    })
}

/// The selector and class rules: the first one the volume fails, if any.
fn selector_and_class(claim: &PersistentVolumeClaim, volume: &PersistentVolume) -> Option<Verdict> {
    if let Some(sel) = claim.spec.as_ref().and_then(|s| s.selector.as_ref()) {
        match selector::matches(sel, volume.metadata.labels.as_ref()) {
            Ok(true) => {}
            Ok(false) => {
                return Some(Verdict::fail(
                    VerdictKind::Selector,
                    format!("labels do not match selector {}", selector::describe(sel)),
                ))
            }
            Err(e) => return Some(Verdict::fail(VerdictKind::Selector, format!("invalid selector: {e}"))),
        }
    }
    let (cc, vc) = (helpers::claim_class(claim), helpers::volume_class(volume));
    if cc != vc {
        return Some(Verdict::fail(
            VerdictKind::StorageClass,
            format!("class {} ≠ requested {}", quoted(vc), quoted(cc)),
        ));
    }
    None
}

/// Why a volume a claim names in `spec.volumeName` cannot be bound to it: the failed rule, with
/// upstream's message as the detail (the VolumeMismatch event's text). `None` when it may be bound.
///
/// Upstream checks a requested volume with its own, shorter list (no phase, selector or
/// delayed-binding rule) and in its own order, so this is not [`evaluate`].
pub fn check_requested_volume(volume: &PersistentVolume, claim: &PersistentVolumeClaim) -> Option<Verdict> {
    let fail = |kind, detail: &str| Some(Verdict::fail(kind, detail.to_string()));
    if volume.metadata.deletion_timestamp.is_some() {
        return Some(Verdict::fail(
            VerdictKind::BeingDeleted,
            format!("the volume is marked for deletion {:?}", helpers::name(&volume.metadata)),
        ));
    }
    if helpers::volume_capacity(volume).value() < helpers::claim_request(claim).value() {
        return fail(VerdictKind::Capacity, "requested PV is too small");
    }
    if helpers::volume_class(volume) != helpers::claim_class(claim) {
        return fail(VerdictKind::StorageClass, "storageClassName does not match");
    }
    if helpers::claim_vac(claim) != helpers::volume_vac(volume) {
        return fail(VerdictKind::VolumeAttributesClass, "volumeAttributesClassName does not match");
    }
    if helpers::volume_mode_mismatch(claim, volume) {
        return fail(VerdictKind::VolumeMode, "incompatible volumeMode");
    }
    if !helpers::volume_access_modes(volume).contains_all(helpers::claim_access_modes(claim)) {
        return fail(VerdictKind::AccessModes, "incompatible accessMode");
    }
    None
}

/// Finds the best volume by a plain scan in upstream's order: mode sets with the fewest modes
/// first; within the first set that has a match, a volume pre-bound to the claim wins, else the
/// smallest (ties by name). The index must return exactly this; it is also what `explain` shows.
pub fn best_match_by_scan<'a>(
    claim: &PersistentVolumeClaim,
    volumes: impl IntoIterator<Item = &'a PersistentVolume>,
    delay_binding: bool,
) -> Option<&'a PersistentVolume> {
    let wanted = helpers::claim_access_modes(claim);
    let mut sets: std::collections::BTreeMap<(u32, u8), Vec<&PersistentVolume>> = Default::default();
    for v in volumes {
        let m = helpers::volume_access_modes(v);
        if m.contains_all(wanted) {
            sets.entry((m.len(), m.0)).or_default().push(v);
        }
    }
    for (_, vols) in sets {
        let mut best: Option<&PersistentVolume> = None;
        for v in vols {
            let verdict = evaluate_in_mode_set(claim, v, delay_binding);
            if !verdict.is_match() {
                continue;
            }
            if verdict.prebound {
                return Some(v);
            }
            let better = match best {
                None => true,
                Some(b) => {
                    let (cb, cv) = (helpers::volume_capacity(b), helpers::volume_capacity(v));
                    cv < cb || (cv == cb && helpers::name(&v.metadata) < helpers::name(&b.metadata))
                }
            };
            if better {
                best = Some(v);
            }
        }
        if best.is_some() {
            return best;
        }
    }
    None
}

fn quoted(s: &str) -> String {
    if s.is_empty() {
        "\"\"".into()
    } else {
        s.to_string()
    }
}

fn or_none(m: AccessModes) -> String {
    if m.is_empty() {
        "none".into()
    } else {
        m.short()
    }
}
