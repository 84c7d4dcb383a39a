//! The decisions of the syncs, as values: pure functions of the objects the sync looked up (the
//! volume sync, the bound-claim sync) or of a read-only [`View`] of the caches (the unbound-claim
//! sync), so that every branch is testable without an API, the sync only carries the plan out,
//! and `pv-controller explain` reports the same decision.
//!
//! Upstream's `syncVolume` and `syncBoundClaim` (pkg/controller/volume/persistentvolume/
//! pv_controller.go) interleave these decisions with their writes; the branches and their order
//! are the same here.

use crate::plugin::VolumePlugin;
use crate::view::View;
use pv_model::annotations as ann;
use pv_model::binding::{self, Holder, Relation};
use pv_model::helpers;
use pv_model::k8s::{Node, PersistentVolume, PersistentVolumeClaim, StorageClass};
use pv_model::messages;
use pv_model::phase::{PvPhase, ReclaimPolicy};
use pv_model::{csi, matching, ObjectKey};
use std::sync::Arc;

/// What the controller does next for an unbound claim: the decision half of its sync, computed
/// from the caches by [`plan_unbound_claim`] and then executed. Kept as a value so the
/// decision has one home that both the sync and `explain` use.
#[derive(Clone, Debug)]
pub enum UnboundClaimPlan {
    /// Bind the claim to this volume: the best match, or the volume the claim names.
    Bind {
        /// The volume.
        volume: Arc<PersistentVolume>,
        /// The binder chose it (the claim names no volume): promise it to this claim while the
        /// bind is in flight, so that no other worker picks it for another claim.
        reserve: bool,
    },
    /// No volume matches and the claim names no class: give it the default class (then re-sync).
    AssignDefaultClass(String),
    /// The class binds on first consumer and no node is selected yet: wait for the scheduler.
    WaitForFirstConsumer {
        /// Pods using the claim that are not scheduled yet.
        pods: Vec<String>,
    },
    /// No volume matches and the claim has a class: provision one.
    Provision(Provisioning),
    /// No volume matches and the claim's class is `""`: nothing to do (FailedBinding).
    NoClass,
    /// The claim names a volume that does not exist (yet).
    VolumeNotFound(String),
    /// The claim names an unclaimed volume that does not fit it (VolumeMismatch).
    VolumeMismatch {
        /// The named volume.
        volume: Arc<PersistentVolume>,
        /// The rule it fails, with upstream's message as detail.
        verdict: matching::Verdict,
    },
    /// The claim names a volume whose claimRef points to another claim.
    ClaimedByOther {
        /// The named volume.
        volume: Arc<PersistentVolume>,
        /// `namespace/name` its claimRef points to.
        other: ObjectKey,
        /// The claim was bound by the controller, so this can only mean someone removed its
        /// `bind-completed` annotation: the sync fails (and is retried) instead of waiting.
        invalid: bool,
    },
}

/// How a claim is provisioned: what the plan decided, carried out as decided (the provisioning
/// operation is handed the plugin and class the plan chose).
#[derive(Clone)]
pub enum Provisioning {
    /// Dynamic provisioning is switched off in the controller's settings.
    Disabled,
    /// By an in-process plugin.
    Internal {
        /// The plugin (`kubernetes.io/host-path`).
        plugin: Arc<dyn VolumePlugin>,
        /// The claim's class.
        class: Arc<StorageClass>,
        /// The node the claim's `selected-node` annotation names, from the caches.
        node: Option<Arc<Node>>,
        /// Why the plugin cannot provision this claim, if it cannot.
        refusal: Option<Refusal>,
    },
    /// Handed off by annotation to an external provisioner (a CSI driver for migrated plugins).
    External {
        /// Provisioner name.
        provisioner: String,
        /// The claim's class.
        class: Arc<StorageClass>,
    },
    /// Cannot be provisioned: class missing, or a `kubernetes.io/` name with no plugin.
    Failed(String),
}

impl std::fmt::Debug for Provisioning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Provisioning::Disabled => f.write_str("Disabled"),
            Provisioning::Internal { plugin, class, node, refusal } => f
                .debug_struct("Internal")
                .field("plugin", &plugin.name())
                .field("class", &helpers::name(&class.metadata))
                .field("node", &node.as_ref().map(|n| helpers::name(&n.metadata)))
                .field("refusal", refusal)
                .finish(),
            Provisioning::External { provisioner, class } => f
                .debug_struct("External")
                .field("provisioner", provisioner)
                .field("class", &helpers::name(&class.metadata))
                .finish(),
            Provisioning::Failed(why) => f.debug_tuple("Failed").field(why).finish(),
        }
    }
}

/// Why an in-process plugin cannot provision a claim. The provisioning operation meets these in
/// upstream's order: a data source before the claim is annotated with its provisioner, the
/// others after (so the annotation is written either way).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// The claim asks for a data source, which only a CSI driver provisions from.
    DataSource,
    /// The class has mount options the plugin does not support.
    MountOptions,
    /// The selected node is not in the cache.
    NodeNotFound(String),
}

impl Refusal {
    /// Upstream's ProvisioningFailed message for this refusal.
    pub fn message(&self, plugin: &str, class: &StorageClass) -> String {
        match self {
            Refusal::DataSource => messages::data_source_not_csi(plugin),
            Refusal::MountOptions => messages::mount_options_not_supported(
                helpers::name(&class.metadata),
                class.mount_options.as_deref().unwrap_or_default(),
            ),
            Refusal::NodeNotFound(n) => messages::node_not_found(n),
        }
    }

    /// Met before the claim is annotated with its provisioner.
    pub fn before_annotation(&self) -> bool {
        matches!(self, Refusal::DataSource)
    }
}

/// Which claim a volume's sync has to look at, and where.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClaimLookup {
    /// The volume names no claim (no claimRef, or one without a uid): nothing to look up.
    None,
    /// The claim the volume's claimRef names.
    Claim {
        /// `claimRef.namespace`.
        namespace: String,
        /// `claimRef.name`.
        name: String,
        /// `claimRef.uid`: a claim of the same name with another uid is not this claim.
        uid: String,
        /// Whether a claim missing from the cache is asked of the API server, so a claim the
        /// cache has not seen yet is never mistaken for a deleted one. Not for a Released or
        /// Failed volume: its claim is gone already.
        ask_api: bool,
    },
}

/// What the volume sync does once it knows the volume's claim.
#[derive(Clone, Debug, PartialEq)]
pub enum VolumePlan {
    /// No claimRef: the volume is unused. Phase Available.
    Unused,
    /// A claimRef without uid: pre-bound by a user to a claim that has not bound yet; the claim
    /// sync binds it. Phase Available.
    PreBound,
    /// The claim is gone: phase Released (unless Released or Failed already, a Failed volume
    /// staying Failed while its reclaim is retried), then the reclaim policy.
    Release {
        /// Whether the phase changes to Released first.
        mark_released: bool,
    },
    /// The claim has not bound yet and its volumeMode differs from the volume's: the claim sync
    /// will never pick this volume, so a VolumeMismatch event says why, on both.
    VolumeModeMismatch(Arc<PersistentVolumeClaim>),
    /// The claim has not bound yet (half-bound by us, or pre-bound by a user): queue the claim's
    /// sync now, rather than at resync; this binds a freshly provisioned volume.
    QueueClaim(ObjectKey),
    /// The claim is bound to this volume. Phase Bound.
    Bound,
    /// The claim is bound to another volume and this one was provisioned for it with reclaim
    /// policy Delete: not needed, release and delete it.
    DeleteUnneeded {
        /// Whether the phase changes to Released first.
        mark_released: bool,
    },
    /// The claim is bound to another volume: roll the volume's claimRef back (bound by us), or
    /// drop only its uid (pre-bound by a user).
    Unbind,
}

/// What the bound-claim sync does, given the volume its `volumeName` names.
#[derive(Clone, Debug)]
pub enum BoundClaimPlan {
    /// `volumeName` is empty: phase Lost, ClaimLost.
    LostReference,
    /// The volume does not exist: phase Lost, ClaimLost.
    LostVolume,
    /// The volume's claimRef has another claim's uid: phase Lost, ClaimMisbound.
    Misbound(Arc<PersistentVolume>),
    /// The volume has no claimRef (it came unbound, or the cache is behind): bind it again.
    Rebind(Arc<PersistentVolume>),
    /// The volume points back: write whatever of the binding is missing (usually nothing).
    KeepBound(Arc<PersistentVolume>),
}

impl UnboundClaimPlan {
    /// Why a claim with this plan is still Pending, in `explain`'s words: its `next` (`bind`,
    /// `provision`, `wait-external-provisioner`, `wait-first-consumer`) or, where nothing happens
    /// next, what stops it (`no-class`, `volume-not-found`, `volume-mismatch`,
    /// `claimed-by-other`, `provisioning-failed`, `provisioning-disabled`); `default-class` for a
    /// claim about to be given the default class. The `reason` of `pv_controller_pending_claims`.
    pub fn pending_reason(&self) -> &'static str {
        match self {
            UnboundClaimPlan::Bind { .. } => "bind",
            UnboundClaimPlan::AssignDefaultClass(_) => "default-class",
            UnboundClaimPlan::WaitForFirstConsumer { .. } => "wait-first-consumer",
            UnboundClaimPlan::Provision(Provisioning::Internal { refusal: Some(_), .. }) => "provisioning-failed",
            UnboundClaimPlan::Provision(Provisioning::Internal { refusal: None, .. }) => "provision",
            UnboundClaimPlan::Provision(Provisioning::External { .. }) => "wait-external-provisioner",
            UnboundClaimPlan::Provision(Provisioning::Failed(_)) => "provisioning-failed",
            UnboundClaimPlan::Provision(Provisioning::Disabled) => "provisioning-disabled",
            UnboundClaimPlan::NoClass => "no-class",
            UnboundClaimPlan::VolumeNotFound(_) => "volume-not-found",
            UnboundClaimPlan::VolumeMismatch { .. } => "volume-mismatch",
            UnboundClaimPlan::ClaimedByOther { .. } => "claimed-by-other",
        }
    }
}

/// Upstream's event message for [`BoundClaimPlan::LostReference`].
pub const LOST_REFERENCE: &str = messages::LOST_REFERENCE;
/// Upstream's event message for [`BoundClaimPlan::LostVolume`].
pub const LOST_VOLUME: &str = messages::LOST_VOLUME;
/// Upstream's event message for [`BoundClaimPlan::Misbound`].
pub const MISBOUND: &str = messages::MISBOUND;

/// Which claim the volume's sync looks up.
pub fn claim_lookup(volume: &PersistentVolume) -> ClaimLookup {
    let Some(r) = binding::held_by(volume) else { return ClaimLookup::None };
    ClaimLookup::Claim {
        namespace: r.namespace.clone().unwrap_or_default(),
        name: r.name.clone().unwrap_or_default(),
        uid: r.uid.clone().unwrap_or_default(),
        ask_api: !is_released_or_failed(volume),
    }
}

fn is_released_or_failed(volume: &PersistentVolume) -> bool {
    matches!(PvPhase::of(volume), Some(PvPhase::Released | PvPhase::Failed))
}

/// The volume sync's decision. `claim`: what the lookup of [`claim_lookup`] found; a claim with
/// another uid than the claimRef's counts as gone.
pub fn plan_volume(volume: &PersistentVolume, claim: Option<&Arc<PersistentVolumeClaim>>) -> VolumePlan {
    let mark_released = !is_released_or_failed(volume);
    match binding::holder(volume, claim.map(|c| &**c)) {
        Holder::Nobody if helpers::claim_ref(volume).is_none() => VolumePlan::Unused,
        Holder::Nobody => VolumePlan::PreBound,
        Holder::Gone => VolumePlan::Release { mark_released },
        Holder::Binding => {
            let claim = claim.expect("a claim that is binding was found");
            if helpers::volume_mode_mismatch(claim, volume) {
                VolumePlan::VolumeModeMismatch(claim.clone())
            } else {
                VolumePlan::QueueClaim(helpers::claim_key(claim))
            }
        }
        Holder::BoundHere => VolumePlan::Bound,
        Holder::BoundElsewhere
            if helpers::has_annotation(&volume.metadata, ann::PROVISIONED_BY)
                && ReclaimPolicy::of(volume) == Some(ReclaimPolicy::Delete) =>
        {
            VolumePlan::DeleteUnneeded { mark_released }
        }
        Holder::BoundElsewhere => VolumePlan::Unbind,
    }
}

/// Whether a volume may still be reclaimed, decided again on the volume as it is now (read
/// fresh from the API server by the delete and recycle operations, which may have waited) and
/// the claim its claimRef names as the caches have it: by the rule [`plan_volume`] releases by,
/// the claim is gone or bound to another volume.
pub fn still_released(volume: &PersistentVolume, claim: Option<&PersistentVolumeClaim>) -> bool {
    binding::holder(volume, claim).is_released()
}

/// The bound-claim sync's decision. `volume`: the volume the claim's `volumeName` names, if it
/// exists.
pub fn plan_bound_claim(claim: &PersistentVolumeClaim, volume: Option<Arc<PersistentVolume>>) -> BoundClaimPlan {
    if helpers::claim_volume_name(claim).is_empty() {
        return BoundClaimPlan::LostReference;
    }
    let Some(volume) = volume else { return BoundClaimPlan::LostVolume };
    match binding::classify(&volume, claim) {
        Relation::Unclaimed => BoundClaimPlan::Rebind(volume),
        Relation::ThisClaim { pre_bound: false } => BoundClaimPlan::KeepBound(volume),
        // A claimRef without this claim's uid: another claim's, or a pre-binding no claim holds.
        Relation::ThisClaim { pre_bound: true } | Relation::EarlierOfSameName { .. } | Relation::OtherClaim(_) => {
            BoundClaimPlan::Misbound(volume)
        }
    }
}

/// True when the claim's class binds on first consumer. A missing class is not delayed.
pub fn is_delay_binding(view: &impl View, claim: &PersistentVolumeClaim) -> bool {
    let class = helpers::claim_class(claim);
    !class.is_empty() && view.class(class).is_some_and(|c| helpers::is_delay_binding_class(&c))
}

/// What a sync of this unbound claim (no `bind-completed` annotation) does now, decided from the
/// caches alone. Upstream's `syncUnboundClaim`, in its order: a claim that names its volume
/// binds to it or says why not; otherwise the best match; otherwise the default class is
/// assigned (retroactively), the claim waits for a first consumer, is provisioned, or waits.
pub fn plan_unbound_claim(view: &impl View, claim: &PersistentVolumeClaim) -> UnboundClaimPlan {
    let requested = helpers::claim_volume_name(claim);
    if !requested.is_empty() {
        return plan_requested_volume(view, claim, requested);
    }
    // The user does not care which volume.
    let delay = is_delay_binding(view, claim);
    if let Some(volume) = view.best_match(claim, delay) {
        return UnboundClaimPlan::Bind { volume, reserve: true };
    }
    // No match: maybe give it the default class first (retroactive assignment).
    if !helpers::claim_has_class(claim) {
        if let Some(class) = view.default_class() {
            return UnboundClaimPlan::AssignDefaultClass(class);
        }
    }
    if delay && !helpers::has_annotation(&claim.metadata, ann::SELECTED_NODE) {
        UnboundClaimPlan::WaitForFirstConsumer { pods: view.unscheduled_pods_using(claim) }
    } else if !helpers::claim_class(claim).is_empty() {
        UnboundClaimPlan::Provision(provisioning_for(view, claim))
    } else {
        UnboundClaimPlan::NoClass
    }
}

/// The plan for a claim that names its volume in `spec.volumeName`.
fn plan_requested_volume(view: &impl View, claim: &PersistentVolumeClaim, requested: &str) -> UnboundClaimPlan {
    let Some(volume) = view.volume(requested) else {
        return UnboundClaimPlan::VolumeNotFound(requested.to_string());
    };
    let bind = |volume| UnboundClaimPlan::Bind { volume, reserve: false };
    match binding::classify(&volume, claim) {
        // Unclaimed: bind if it fits.
        Relation::Unclaimed => match matching::check_requested_volume(&volume, claim) {
            Some(verdict) => UnboundClaimPlan::VolumeMismatch { volume, verdict },
            None => bind(volume),
        },
        // Claimed by this claim: finish the binding (adds the UID).
        Relation::ThisClaim { .. } => bind(volume),
        // Retained from an earlier claim of this name and asking to be bound again: if it fits.
        Relation::EarlierOfSameName { rebind: true } => {
            let verdict = matching::evaluate(claim, &volume, false);
            if verdict.is_match() {
                bind(volume)
            } else {
                UnboundClaimPlan::VolumeMismatch { volume, verdict }
            }
        }
        Relation::EarlierOfSameName { rebind: false } | Relation::OtherClaim(_) => {
            let other = helpers::claim_ref(&volume).map(helpers::claim_ref_key).unwrap_or_default();
            let invalid = helpers::has_annotation(&claim.metadata, ann::BOUND_BY_CONTROLLER);
            UnboundClaimPlan::ClaimedByOther { other, volume, invalid }
        }
    }
}

/// How a claim with a class is provisioned: by an in-process plugin, handed to an external
/// provisioner (a CSI driver for a migrated in-tree name), or not at all, and why.
pub fn provisioning_for(view: &impl View, claim: &PersistentVolumeClaim) -> Provisioning {
    if !view.dynamic_provisioning() {
        return Provisioning::Disabled;
    }
    let class_name = helpers::claim_class(claim);
    let Some(class) = view.class(class_name) else {
        return Provisioning::Failed(messages::class_not_found(class_name));
    };
    if let Some(driver) = csi::migrated_driver(&class.provisioner) {
        return Provisioning::External { provisioner: driver.to_string(), class };
    }
    match view.provisioning_plugin(&class.provisioner) {
        Ok(plugin) => {
            let node = helpers::annotation(&claim.metadata, ann::SELECTED_NODE).map(|n| (n, view.node(n)));
            let refusal = internal_refusal(claim, &*plugin, &class, &node);
            Provisioning::Internal { plugin, class, node: node.and_then(|(_, n)| n), refusal }
        }
        Err(_) if !class.provisioner.starts_with(ann::IN_TREE_PREFIX) => {
            Provisioning::External { provisioner: class.provisioner.clone(), class }
        }
        Err(e) => Provisioning::Failed(e),
    }
}

/// Why `plugin` cannot provision `claim` with `class`, checked in the order the operation meets
/// them; `node`: the selected node's name and whether the caches have it.
fn internal_refusal(
    claim: &PersistentVolumeClaim,
    plugin: &dyn VolumePlugin,
    class: &StorageClass,
    node: &Option<(&str, Option<Arc<Node>>)>,
) -> Option<Refusal> {
    let spec = claim.spec.as_ref();
    if spec.is_some_and(|s| s.data_source.is_some() || s.data_source_ref.is_some()) {
        return Some(Refusal::DataSource);
    }
    if !plugin.supports_mount_options() && class.mount_options.as_ref().is_some_and(|m| !m.is_empty()) {
        return Some(Refusal::MountOptions);
    }
    match node {
        Some((name, None)) => Some(Refusal::NodeNotFound(name.to_string())),
        _ => None,
    }
}

#[cfg(test)]
#[path = "plan_tests.rs"]
pub(crate) mod tests;
