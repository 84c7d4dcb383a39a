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
            Refusal::DataSource => {
                format!(
                    "plugin {plugin:?} is not a CSI plugin. Only CSI plugin can provision a claim with a datasource"
                )
            }
            Refusal::MountOptions => format!(
                "Mount options are not supported by the provisioner but StorageClass {:?} has mount options [{}]",
                helpers::name(&class.metadata),
                class.mount_options.clone().unwrap_or_default().join(" ")
            ),
            Refusal::NodeNotFound(n) => format!("Failed to get target node: node {n:?} not found"),
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
pub const LOST_REFERENCE: &str = "Bound claim has lost reference to PersistentVolume. Data on the volume is lost!";
/// Upstream's event message for [`BoundClaimPlan::LostVolume`].
pub const LOST_VOLUME: &str = "Bound claim has lost its PersistentVolume. Data on the volume is lost!";
/// Upstream's event message for [`BoundClaimPlan::Misbound`].
pub const MISBOUND: &str = "Two claims are bound to the same volume, this one is bound incorrectly";

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
        return Provisioning::Failed(format!("storageclass.storage.k8s.io {class_name:?} not found"));
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
mod tests {
    use super::*;
    use crate::plugin::PluginRegistry;
    use crate::view::Objects;
    use pv_model::k8s::Pod;
    use serde_json::json;

    fn pv(v: serde_json::Value) -> PersistentVolume {
        let mut base = json!({"metadata": {"name": "pv1"}, "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"]}});
        merge(&mut base, v);
        serde_json::from_value(base).unwrap()
    }

    fn pvc(v: serde_json::Value) -> PersistentVolumeClaim {
        let mut base = json!({"metadata": {"name": "c1", "namespace": "ns", "uid": "u1"}, "spec": {"accessModes": ["ReadWriteOnce"]}});
        merge(&mut base, v);
        serde_json::from_value(base).unwrap()
    }

    fn merge(a: &mut serde_json::Value, b: serde_json::Value) {
        match (a, b) {
            (serde_json::Value::Object(a), serde_json::Value::Object(b)) => {
                for (k, v) in b {
                    merge(a.entry(k).or_insert(serde_json::Value::Null), v);
                }
            }
            (a, b) => *a = b,
        }
    }

    fn claimed(phase: &str) -> PersistentVolume {
        pv(json!({"spec": {"claimRef": {"namespace": "ns", "name": "c1", "uid": "u1"}}, "status": {"phase": phase}}))
    }

    #[test]
    fn a_volume_without_claim_ref_is_unused_and_looks_nothing_up() {
        let v = pv(json!({}));
        assert_eq!(claim_lookup(&v), ClaimLookup::None);
        assert_eq!(plan_volume(&v, None), VolumePlan::Unused);
    }

    #[test]
    fn a_claim_ref_without_uid_is_a_user_pre_binding() {
        let v = pv(json!({"spec": {"claimRef": {"namespace": "ns", "name": "c1"}}}));
        assert_eq!(claim_lookup(&v), ClaimLookup::None);
        assert_eq!(plan_volume(&v, Some(&Arc::new(pvc(json!({}))))), VolumePlan::PreBound);
    }

    #[test]
    fn the_lookup_asks_the_api_server_only_while_the_volume_is_not_released() {
        let want =
            |ask_api| ClaimLookup::Claim { namespace: "ns".into(), name: "c1".into(), uid: "u1".into(), ask_api };
        assert_eq!(claim_lookup(&claimed("Bound")), want(true));
        assert_eq!(claim_lookup(&claimed("Pending")), want(true));
        assert_eq!(claim_lookup(&claimed("Released")), want(false));
        assert_eq!(claim_lookup(&claimed("Failed")), want(false));
    }

    #[test]
    fn a_gone_claim_releases_the_volume_once() {
        assert_eq!(plan_volume(&claimed("Bound"), None), VolumePlan::Release { mark_released: true });
        assert_eq!(plan_volume(&claimed("Released"), None), VolumePlan::Release { mark_released: false });
        assert_eq!(plan_volume(&claimed("Failed"), None), VolumePlan::Release { mark_released: false });
    }

    #[test]
    fn a_claim_of_the_same_name_with_another_uid_is_gone() {
        let other = pvc(json!({"metadata": {"uid": "u2"}, "spec": {"volumeName": "pv1"}}));
        assert_eq!(
            plan_volume(&claimed("Bound"), Some(&Arc::new(other.clone()))),
            VolumePlan::Release { mark_released: true }
        );
    }

    #[test]
    fn an_unbound_claim_is_queued_unless_its_volume_mode_differs() {
        let c = pvc(json!({}));
        assert_eq!(
            plan_volume(&claimed("Available"), Some(&Arc::new(c.clone()))),
            VolumePlan::QueueClaim(ObjectKey::new("ns", "c1"))
        );
        let block = pvc(json!({"spec": {"volumeMode": "Block"}}));
        assert_eq!(
            plan_volume(&claimed("Available"), Some(&Arc::new(block.clone()))),
            VolumePlan::VolumeModeMismatch(Arc::new(block))
        );
    }

    #[test]
    fn a_claim_bound_to_the_volume_makes_it_bound() {
        let c = pvc(json!({"spec": {"volumeName": "pv1"}}));
        assert_eq!(plan_volume(&claimed("Available"), Some(&Arc::new(c.clone()))), VolumePlan::Bound);
        assert_eq!(plan_volume(&claimed("Bound"), Some(&Arc::new(c.clone()))), VolumePlan::Bound);
    }

    #[test]
    fn a_claim_bound_elsewhere_deletes_an_unneeded_provisioned_volume_and_unbinds_any_other() {
        let c = pvc(json!({"spec": {"volumeName": "pv2"}}));
        let provisioned = |policy: &str, phase: &str| {
            pv(json!({"metadata": {"annotations": {ann::PROVISIONED_BY: "kubernetes.io/host-path"}},
                      "spec": {"claimRef": {"namespace": "ns", "name": "c1", "uid": "u1"}, "persistentVolumeReclaimPolicy": policy},
                      "status": {"phase": phase}}))
        };
        assert_eq!(
            plan_volume(&provisioned("Delete", "Bound"), Some(&Arc::new(c.clone()))),
            VolumePlan::DeleteUnneeded { mark_released: true }
        );
        assert_eq!(
            plan_volume(&provisioned("Delete", "Released"), Some(&Arc::new(c.clone()))),
            VolumePlan::DeleteUnneeded { mark_released: false }
        );
        assert_eq!(plan_volume(&provisioned("Retain", "Bound"), Some(&Arc::new(c.clone()))), VolumePlan::Unbind);
        assert_eq!(plan_volume(&claimed("Bound"), Some(&Arc::new(c.clone()))), VolumePlan::Unbind);
    }

    #[test]
    fn a_bound_claim_without_volume_name_or_volume_is_lost() {
        assert!(matches!(plan_bound_claim(&pvc(json!({})), None), BoundClaimPlan::LostReference));
        let c = pvc(json!({"spec": {"volumeName": "pv1"}}));
        assert!(matches!(plan_bound_claim(&c, None), BoundClaimPlan::LostVolume));
    }

    #[test]
    fn a_bound_claim_rebinds_an_unclaimed_volume_keeps_its_own_and_is_misbound_to_another_claims() {
        let c = pvc(json!({"spec": {"volumeName": "pv1"}}));
        assert!(matches!(plan_bound_claim(&c, Some(Arc::new(pv(json!({}))))), BoundClaimPlan::Rebind(_)));
        assert!(matches!(plan_bound_claim(&c, Some(Arc::new(claimed("Bound")))), BoundClaimPlan::KeepBound(_)));
        let other = pv(json!({"spec": {"claimRef": {"namespace": "ns", "name": "c1", "uid": "u2"}}}));
        assert!(matches!(plan_bound_claim(&c, Some(Arc::new(other))), BoundClaimPlan::Misbound(_)));
    }

    // --- the unbound claim ----------------------------------------------------------------------

    /// A plugin that only answers to its name (the plan looks plugins up; it never calls them).
    struct Named(&'static str);

    #[async_trait::async_trait]
    impl VolumePlugin for Named {
        fn name(&self) -> &str {
            self.0
        }
        fn can_provision(&self) -> bool {
            true
        }
        fn supports_mount_options(&self) -> bool {
            false
        }
        fn can_support(&self, _: &PersistentVolume) -> bool {
            false
        }
        fn can_delete(&self) -> bool {
            true
        }
        fn can_recycle(&self) -> bool {
            false
        }
        async fn provision(
            &self,
            _: &crate::ProvisionOptions,
        ) -> std::result::Result<PersistentVolume, crate::PluginError> {
            unreachable!("a plan provisions nothing")
        }
        async fn delete(&self, _: &PersistentVolume) -> std::result::Result<(), crate::PluginError> {
            unreachable!("a plan deletes nothing")
        }
        async fn recycle(
            &self,
            _: &PersistentVolume,
            _: &dyn crate::RecyclerEvents,
        ) -> std::result::Result<(), crate::PluginError> {
            unreachable!("a plan recycles nothing")
        }
    }

    /// Objects with host-path's stand-in registered.
    fn objects() -> Objects {
        let mut plugins = PluginRegistry::new();
        plugins.register(Arc::new(Named("kubernetes.io/host-path")));
        Objects::new(plugins)
    }

    fn sc(v: serde_json::Value) -> StorageClass {
        serde_json::from_value(v).unwrap()
    }

    fn free(name: &str, size: &str) -> serde_json::Value {
        json!({"metadata": {"name": name}, "spec": {"capacity": {"storage": size}}, "status": {"phase": "Available"}})
    }

    fn class(name: &str, provisioner: &str) -> serde_json::Value {
        json!({"metadata": {"name": name}, "provisioner": provisioner})
    }

    fn claim(size: &str) -> PersistentVolumeClaim {
        pvc(json!({"spec": {"resources": {"requests": {"storage": size}}}}))
    }

    fn with_class(size: &str, class: &str) -> PersistentVolumeClaim {
        pvc(json!({"spec": {"storageClassName": class, "resources": {"requests": {"storage": size}}}}))
    }

    fn requesting(volume: &str, size: &str) -> PersistentVolumeClaim {
        pvc(json!({"spec": {"volumeName": volume, "resources": {"requests": {"storage": size}}}}))
    }

    fn bound_name(plan: &UnboundClaimPlan) -> Option<&str> {
        match plan {
            UnboundClaimPlan::Bind { volume, .. } => Some(helpers::name(&volume.metadata)),
            _ => None,
        }
    }

    #[test]
    fn a_claim_naming_a_missing_volume_waits_for_it() {
        let plan = plan_unbound_claim(&objects(), &requesting("pv9", "1Gi"));
        assert!(matches!(plan, UnboundClaimPlan::VolumeNotFound(ref n) if n == "pv9"), "{plan:?}");
    }

    #[test]
    fn a_claim_naming_an_unclaimed_volume_binds_to_it_only_if_it_fits() {
        let caches = objects().volume(pv(free("pv1", "1Gi")));
        assert_eq!(bound_name(&plan_unbound_claim(&caches, &requesting("pv1", "1Gi"))), Some("pv1"));
        match plan_unbound_claim(&caches, &requesting("pv1", "5Gi")) {
            UnboundClaimPlan::VolumeMismatch { volume, verdict } => {
                assert_eq!(helpers::name(&volume.metadata), "pv1");
                assert!(!verdict.detail.is_empty());
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_claim_naming_a_volume_that_points_back_finishes_the_binding_and_one_claimed_elsewhere_is_refused() {
        let mine =
            json!({"metadata": {"name": "pv1"}, "spec": {"claimRef": {"namespace": "ns", "name": "c1", "uid": "u1"}}});
        let caches = objects().volume(pv(mine));
        assert_eq!(bound_name(&plan_unbound_claim(&caches, &requesting("pv1", "1Gi"))), Some("pv1"));
        let theirs =
            json!({"metadata": {"name": "pv2"}, "spec": {"claimRef": {"namespace": "ns", "name": "c2", "uid": "u2"}}});
        let caches = objects().volume(pv(theirs));
        match plan_unbound_claim(&caches, &requesting("pv2", "1Gi")) {
            UnboundClaimPlan::ClaimedByOther { volume, other, invalid } => {
                assert_eq!(helpers::name(&volume.metadata), "pv2");
                assert_eq!(other, "ns/c2");
                assert!(!invalid);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_claim_without_a_named_volume_binds_the_smallest_that_fits() {
        let caches =
            objects().volume(pv(free("big", "10Gi"))).volume(pv(free("small", "1Gi"))).volume(pv(free("mid", "5Gi")));
        assert_eq!(bound_name(&plan_unbound_claim(&caches, &claim("2Gi"))), Some("mid"));
    }

    #[test]
    fn no_match_and_no_class_takes_the_default_class_first() {
        let default = json!({"metadata": {"name": "standard", "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}}, "provisioner": "x"});
        let caches = objects().volume(pv(free("small", "1Gi"))).class(sc(default));
        let plan = plan_unbound_claim(&caches, &claim("2Gi"));
        assert!(matches!(plan, UnboundClaimPlan::AssignDefaultClass(ref c) if c == "standard"), "{plan:?}");
        // Without a default class, and for a claim whose class is "", nothing can be done.
        assert!(matches!(plan_unbound_claim(&objects(), &claim("2Gi")), UnboundClaimPlan::NoClass));
        assert!(matches!(plan_unbound_claim(&caches, &with_class("2Gi", "")), UnboundClaimPlan::NoClass));
    }

    #[test]
    fn a_first_consumer_class_waits_for_a_selected_node_then_provisions() {
        let mut wffc = class("late", "kubernetes.io/host-path");
        wffc["volumeBindingMode"] = "WaitForFirstConsumer".into();
        // web-0 uses the claim and waits for a node; web-1 has one, done-0 has finished.
        let pod = |name: &str, node: Option<&str>, phase: &str| {
            serde_json::from_value::<Pod>(json!({
                "metadata": {"name": name, "namespace": "ns"},
                "spec": {"nodeName": node, "containers": [], "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "c1"}}]},
                "status": {"phase": phase},
            }))
            .unwrap()
        };
        let caches = objects()
            .class(sc(wffc))
            .pod(pod("web-0", None, "Pending"))
            .pod(pod("web-1", Some("n1"), "Running"))
            .pod(pod("done-0", None, "Failed"));
        match plan_unbound_claim(&caches, &with_class("1Gi", "late")) {
            UnboundClaimPlan::WaitForFirstConsumer { pods } => assert_eq!(pods, ["web-0"]),
            other => panic!("{other:?}"),
        }
        let mut selected = with_class("1Gi", "late");
        helpers::set_annotation(&mut selected.metadata, ann::SELECTED_NODE, "node-1");
        let plan = plan_unbound_claim(&caches, &selected);
        assert!(matches!(plan, UnboundClaimPlan::Provision(Provisioning::Internal { .. })), "{plan:?}");
    }

    #[test]
    fn a_first_consumer_class_leaves_free_volumes_to_the_scheduler_but_binds_one_pre_bound_to_it() {
        let mut wffc = class("late", "kubernetes.io/no-provisioner");
        wffc["volumeBindingMode"] = "WaitForFirstConsumer".into();
        let mut v = free("local", "1Gi");
        v["spec"]["storageClassName"] = "late".into();
        let caches = objects().class(sc(wffc.clone())).volume(pv(v.clone()));
        let plan = plan_unbound_claim(&caches, &with_class("1Gi", "late"));
        assert!(matches!(plan, UnboundClaimPlan::WaitForFirstConsumer { .. }), "{plan:?}");
        // The scheduler pre-bound it (claimRef to this claim): the controller finishes the binding.
        v["spec"]["claimRef"] = json!({"namespace": "ns", "name": "c1", "uid": "u1"});
        let caches = objects().class(sc(wffc)).volume(pv(v));
        assert_eq!(bound_name(&plan_unbound_claim(&caches, &with_class("1Gi", "late"))), Some("local"));
    }

    fn provisioning(caches: &Objects, class: &str) -> Provisioning {
        match plan_unbound_claim(caches, &with_class("1Gi", class)) {
            UnboundClaimPlan::Provision(p) => p,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn provisioning_by_plugin_external_provisioner_migrated_driver_or_not_at_all() {
        let caches = objects()
            .class(sc(class("hostpath", "kubernetes.io/host-path")))
            .class(sc(class("gce", "kubernetes.io/gce-pd")))
            .class(sc(class("ext", "example.com/nfs")))
            .class(sc(class("unknown", "kubernetes.io/no-such-plugin")));
        match provisioning(&caches, "hostpath") {
            Provisioning::Internal { plugin, class, node, refusal } => {
                assert_eq!(plugin.name(), "kubernetes.io/host-path");
                assert_eq!(helpers::name(&class.metadata), "hostpath");
                assert!(node.is_none() && refusal.is_none());
            }
            other => panic!("{other:?}"),
        }
        let driver = csi::migrated_driver("kubernetes.io/gce-pd").expect("gce-pd is migrated");
        assert!(
            matches!(provisioning(&caches, "gce"), Provisioning::External { ref provisioner, .. } if provisioner == driver)
        );
        assert!(
            matches!(provisioning(&caches, "ext"), Provisioning::External { ref provisioner, .. } if provisioner == "example.com/nfs")
        );
        assert!(
            matches!(provisioning(&caches, "unknown"), Provisioning::Failed(ref e) if e == "no volume plugin matched name: kubernetes.io/no-such-plugin")
        );
        assert!(
            matches!(provisioning(&caches, "gone"), Provisioning::Failed(ref e) if e == "storageclass.storage.k8s.io \"gone\" not found")
        );
        let caches = caches.dynamic_provisioning(false);
        assert!(matches!(provisioning(&caches, "hostpath"), Provisioning::Disabled));
    }

    #[test]
    fn an_in_process_plugin_is_refused_a_data_source_mount_options_it_lacks_and_a_node_not_cached() {
        let mut with_options = class("opts", "kubernetes.io/host-path");
        with_options["mountOptions"] = json!(["ro"]);
        let node: Node = serde_json::from_value(json!({"metadata": {"name": "node-1"}})).unwrap();
        let caches =
            objects().class(sc(class("hostpath", "kubernetes.io/host-path"))).class(sc(with_options)).node(node);
        let refusal = |claim: &PersistentVolumeClaim| match plan_unbound_claim(&caches, claim) {
            UnboundClaimPlan::Provision(Provisioning::Internal { refusal, node, .. }) => {
                (refusal, node.map(|n| helpers::name(&n.metadata).to_string()))
            }
            other => panic!("{other:?}"),
        };
        let cloned = pvc(
            json!({"spec": {"storageClassName": "hostpath", "dataSource": {"kind": "PersistentVolumeClaim", "name": "src"}}}),
        );
        assert_eq!(refusal(&cloned), (Some(Refusal::DataSource), None));
        assert!(Refusal::DataSource.before_annotation() && !Refusal::MountOptions.before_annotation());
        assert_eq!(refusal(&with_class("1Gi", "opts")), (Some(Refusal::MountOptions), None));
        let mut on = with_class("1Gi", "hostpath");
        helpers::set_annotation(&mut on.metadata, ann::SELECTED_NODE, "node-1");
        assert_eq!(refusal(&on), (None, Some("node-1".to_string())));
        helpers::set_annotation(&mut on.metadata, ann::SELECTED_NODE, "node-9");
        assert_eq!(refusal(&on), (Some(Refusal::NodeNotFound("node-9".into())), None));
        assert_eq!(
            Refusal::NodeNotFound("node-9".into()).message("kubernetes.io/host-path", &sc(class("x", "y"))),
            "Failed to get target node: node \"node-9\" not found"
        );
    }
}
