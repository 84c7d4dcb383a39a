//! Turning the controller's own decision into an [`Explanation`].
//!
//! Nothing here decides anything the controller does not: the next step of an unbound claim is
//! [`plan::plan_unbound_claim`] over a [`View`] of the objects (the same function, over the
//! controller's caches, gives the value the claim sync executes), the best match is
//! the volume that plan binds, and each volume's verdict is [`matching::evaluate`] (the rules the
//! index applies). This module only orders the verdicts the way upstream walks the volumes and
//! says in words what the plan means. Bound and Lost claims are described from the two pointers
//! (`pvc.spec.volumeName` and `pv.spec.claimRef`), the way the bound-claim sync reads them.

use pv_core::plan;
use pv_core::plan::{BoundClaimPlan, VolumePlan};
use pv_core::{Provisioning, UnboundClaimPlan, View};
use pv_model::annotations as ann;
use pv_model::binding::{self, Relation};
use pv_model::helpers::{self, pvc_phase, AccessModes};
use pv_model::k8s::{PersistentVolume, PersistentVolumeClaim};
use pv_model::phase::{PvPhase, ReclaimPolicy};
use pv_model::{matching, selector, VerdictKind};

/// What the controller does next for the claim (the `next` field of the JSON output).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    /// It binds the claim to `bestMatch`.
    Bind,
    /// It provisions a volume with an in-process plugin.
    Provision,
    /// An external provisioner was (or will be) asked to create a volume.
    WaitExternalProvisioner,
    /// The class binds on first consumer: the scheduler decides.
    WaitFirstConsumer,
    /// Nothing: the claim stays as it is until someone changes something.
    None,
}

impl Next {
    /// The name `--output json` uses.
    pub fn as_str(&self) -> &'static str {
        match self {
            Next::Bind => "bind",
            Next::Provision => "provision",
            Next::WaitExternalProvisioner => "wait-external-provisioner",
            Next::WaitFirstConsumer => "wait-first-consumer",
            Next::None => "none",
        }
    }
}

/// One volume and the first rule it fails for the claim.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Candidate {
    /// Volume name.
    pub volume: String,
    /// The first failed rule, or `Match`.
    pub verdict: VerdictKind,
    /// Why, for a person.
    pub detail: String,
    /// `spec.capacity.storage` as written.
    pub capacity: String,
    /// Access modes, short form (`RWO,ROX`).
    pub modes: String,
    /// Storage class ("" for none).
    pub class: String,
    /// `status.phase`.
    pub phase: String,
    /// The volume is held by an earlier claim of this claim's namespace and name (another uid).
    pub earlier_claim: bool,
}

/// What the claim asks for, for the header of the text output.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    /// Requested size as written (`10Gi`).
    pub size: String,
    /// Requested access modes, short form.
    pub modes: String,
    /// The class: `None` when the claim names none at all, `Some("")` for "no class".
    pub class: Option<String>,
    /// The selector, described (`app=db`), if any.
    pub selector: Option<String>,
    /// `Filesystem` or `Block`.
    pub volume_mode: String,
    /// `volumeAttributesClassName`, if any.
    pub attributes_class: Option<String>,
}

/// The answer to "why is this claim Pending/Bound/Lost".
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Explanation {
    /// `namespace/name`.
    pub claim: String,
    /// The claim's `status.phase` (`Pending` when unset).
    pub phase: String,
    /// `spec.volumeName`, if set.
    pub volume_name: Option<String>,
    /// What the claim asks for.
    pub request: Request,
    /// Volumes the controller would consider, best match first, then in upstream's order.
    pub candidates: Vec<Candidate>,
    /// The volume the controller binds the claim to next, if any.
    pub best_match: Option<String>,
    /// What happens next.
    pub next: Next,
    /// Why the claim is where it is, as a stable code: for a Pending claim the
    /// `pv_controller_pending_claims` reason (the controller's plan), else `bound` or `lost`.
    pub reason: &'static str,
    /// One sentence for a person.
    pub message: String,
    /// What the user could change, when that helps.
    pub hint: Option<String>,
    /// What the controller's next sync of the claim would write and record, in order, each in a
    /// few words (`pv_core::steps::dry_run`): empty when it would change nothing.
    pub steps: Vec<String>,
    /// The external provisioner the claim waits for and the claim's class, when it waits for one.
    pub external: Option<(String, String)>,
    /// What was found past the binder about that provisioner (see [`crate::provisioner`]).
    pub provisioner: Option<crate::provisioner::Report>,
    /// Volumes left out of `candidates`, by verdict (see [`Explanation::keep_nearest`]); empty
    /// for a single claim's answer, which lists every volume.
    pub omitted: Vec<(VerdictKind, usize)>,
}

impl Explanation {
    /// Keeps the candidates the text table shows (matches and nearest misses) and counts the
    /// rest in `omitted`: what a list of many claims holds of each.
    pub fn keep_nearest(&mut self) {
        let keep: Vec<String> =
            crate::render::shown(&self.candidates, false).iter().map(|c| c.volume.clone()).collect();
        let (kept, dropped): (Vec<Candidate>, Vec<Candidate>) =
            std::mem::take(&mut self.candidates).into_iter().partition(|c| keep.contains(&c.volume));
        self.candidates = kept;
        self.omitted = crate::render::summary(&dropped);
    }
}

/// Explains `claim` as the controller sees it through `view`; `volumes` are every volume, in any
/// order (each gets its verdict).
pub fn explain(view: &impl View, volumes: &[PersistentVolume], claim: &PersistentVolumeClaim) -> Explanation {
    let mut e = Explanation {
        claim: helpers::claim_key(claim).into(),
        phase: Some(helpers::claim_phase(claim)).filter(|p| !p.is_empty()).unwrap_or(pvc_phase::PENDING).to_string(),
        volume_name: Some(helpers::claim_volume_name(claim).to_string()).filter(|v| !v.is_empty()),
        request: request(claim),
        candidates: Vec::new(),
        best_match: None,
        next: Next::None,
        reason: "bound",
        message: String::new(),
        hint: None,
        steps: Vec::new(),
        external: None,
        provisioner: None,
        omitted: Vec::new(),
    };
    // The controller reads a claim as bound once it carries bind-completed; so does explain.
    if pv_model::binding::claim_is_bound(claim) {
        explain_bound(view, volumes, claim, &mut e);
        if e.phase == pvc_phase::LOST {
            e.reason = "lost";
        }
    } else {
        explain_unbound(view, volumes, claim, &mut e);
    }
    // Upstream's event texts: `explain` does not know whether the controller details them.
    let steps = pv_core::steps::claim_steps(view, &std::sync::Arc::new(claim.clone()), false);
    e.steps = pv_core::steps::dry_run(claim, &steps);
    e
}

fn request(claim: &PersistentVolumeClaim) -> Request {
    let spec = claim.spec.as_ref();
    Request {
        size: spec
            .and_then(|s| s.resources.as_ref())
            .and_then(|r| r.requests.as_ref())
            .and_then(|r| r.get("storage"))
            .map_or_else(|| "0".to_string(), |q| q.0.clone()),
        modes: or_none(helpers::claim_access_modes(claim)),
        class: helpers::claim_has_class(claim).then(|| helpers::claim_class(claim).to_string()),
        selector: spec.and_then(|s| s.selector.as_ref()).map(selector::describe).filter(|s| !s.is_empty()),
        volume_mode: helpers::claim_volume_mode(claim).to_string(),
        attributes_class: Some(helpers::claim_vac(claim).to_string()).filter(|v| !v.is_empty()),
    }
}

fn candidate(v: &PersistentVolume, verdict: VerdictKind, detail: String) -> Candidate {
    Candidate {
        volume: helpers::name(&v.metadata).to_string(),
        verdict,
        detail,
        capacity: v
            .spec
            .as_ref()
            .and_then(|s| s.capacity.as_ref())
            .and_then(|c| c.get("storage"))
            .map_or_else(|| "-".to_string(), |q| q.0.clone()),
        modes: or_none(helpers::volume_access_modes(v)),
        class: helpers::volume_class(v).to_string(),
        phase: helpers::volume_phase(v).to_string(),
        earlier_claim: false,
    }
}

fn or_none(m: AccessModes) -> String {
    if m.is_empty() {
        "-".into()
    } else {
        m.short()
    }
}

/// Every volume with its verdict, best match first, then in the order upstream's index walks
/// them: access-mode sets with the fewest modes first, then capacity ascending, then name.
fn rank_all(
    claim: &PersistentVolumeClaim,
    volumes: &[PersistentVolume],
    delay: bool,
    best: Option<&str>,
) -> Vec<Candidate> {
    let best_prebound = volumes.iter().any(|v| {
        Some(helpers::name(&v.metadata)) == best && matches!(binding::classify(v, claim), Relation::ThisClaim { .. })
    });
    let mut sorted: Vec<&PersistentVolume> = volumes.iter().collect();
    sorted.sort_by_cached_key(|v| {
        let m = helpers::volume_access_modes(v);
        (
            helpers::name(&v.metadata) != best.unwrap_or("\0"),
            m.len(),
            m.0,
            helpers::volume_capacity(v),
            helpers::name(&v.metadata).to_string(),
        )
    });
    sorted
        .into_iter()
        .map(|v| {
            let verdict = delayed_verdict(claim, v, delay);
            let name = helpers::name(&v.metadata);
            let detail = match (verdict.kind, best) {
                (VerdictKind::Match, _) if verdict.prebound => verdict.detail,
                (VerdictKind::Match, Some(b)) if b == name => "best match".to_string(),
                (VerdictKind::Match, Some(b)) if best_prebound => {
                    format!("matches, but {b} is pre-bound to this claim")
                }
                (VerdictKind::Match, Some(b)) => format!("matches, but {b} fits better"),
                (VerdictKind::Match, None) => "matches".to_string(),
                // Only transient: the volume's own sync makes an unclaimed volume Available.
                (VerdictKind::Phase, _) if helpers::claim_ref(v).is_none() => {
                    format!("phase {}, not yet Available", helpers::or_dash(helpers::volume_phase(v)))
                }
                (VerdictKind::ClaimedByOther, _) => earlier_incarnation(v, claim).unwrap_or(verdict.detail),
                _ => verdict.detail,
            };
            let mut c = candidate(v, verdict.kind, detail);
            c.earlier_claim = verdict.kind == VerdictKind::ClaimedByOther && earlier_incarnation(v, claim).is_some();
            c
        })
        .collect()
}

/// A volume's verdict for the claim. Under WaitForFirstConsumer the controller binds no free
/// volume (the scheduler does, for the node it picks), so a volume that passes every other rule
/// is `delayBinding`, and one that fails a rule (another class, too small) says which, as the
/// scheduler's own search would reject it.
fn delayed_verdict(claim: &PersistentVolumeClaim, v: &PersistentVolume, delay: bool) -> matching::Verdict {
    let verdict = matching::evaluate(claim, v, false);
    if !delay || verdict.kind != VerdictKind::Match || verdict.prebound {
        return verdict;
    }
    let pinned =
        pv_model::topology::describe_volume_affinity(v).map(|a| format!(" (node affinity {a})")).unwrap_or_default();
    matching::Verdict {
        kind: VerdictKind::DelayBinding,
        prebound: false,
        detail: format!(
            "fits; the class binds on first consumer: the scheduler binds it when it places a pod on a node it \
             allows{pinned}"
        ),
    }
}

fn explain_unbound(view: &impl View, volumes: &[PersistentVolume], claim: &PersistentVolumeClaim, e: &mut Explanation) {
    let mut plan = plan::plan_unbound_claim(view, claim);
    e.reason = plan.pending_reason();
    let mut prefix = String::new();
    let mut effective = claim.clone();
    if let UnboundClaimPlan::AssignDefaultClass(class) = &plan {
        // The controller gives the claim the default class, and the next sync decides with it.
        prefix = format!(
            "No volume without a class matches, so the controller first gives the claim the \
             default StorageClass {class:?}; then "
        );
        effective.spec.get_or_insert_with(Default::default).storage_class_name = Some(class.clone());
        plan = plan::plan_unbound_claim(view, &effective);
    }
    let claim = &effective;
    let requested = helpers::claim_volume_name(claim);
    if requested.is_empty() {
        let best = match &plan {
            UnboundClaimPlan::Bind { volume, .. } => Some(helpers::name(&volume.metadata).to_string()),
            _ => None,
        };
        let delay = plan::is_delay_binding(view, claim);
        e.candidates = rank_all(claim, volumes, delay, best.as_deref());
        e.best_match = best;
    } else if let Some(v) = view.volume(requested) {
        // A claim that names its volume is only ever matched against that one volume.
        let (kind, detail) = match &plan {
            UnboundClaimPlan::VolumeMismatch { verdict, .. } => (verdict.kind, verdict.detail.clone()),
            UnboundClaimPlan::ClaimedByOther { other, .. } => {
                (VerdictKind::ClaimedByOther, earlier_incarnation(&v, claim).unwrap_or(format!("claimed by {other}")))
            }
            _ => (VerdictKind::Match, "named by the claim's spec.volumeName".into()),
        };
        e.candidates = vec![candidate(&v, kind, detail)];
        e.candidates[0].earlier_claim = kind == VerdictKind::ClaimedByOther && earlier_incarnation(&v, claim).is_some();
        if let UnboundClaimPlan::Bind { volume, .. } = &plan {
            e.best_match = Some(helpers::name(&volume.metadata).to_string());
        }
    }
    let (next, message) = describe_plan(claim, &plan, e);
    if let Some(h) = pinned_elsewhere_hint(view, volumes, claim) {
        e.hint = Some(h);
    }
    if let Some(h) = free_earlier_hint(volumes, claim) {
        e.hint = Some(match e.hint.take() {
            Some(old) => format!("{h}; or {old}"),
            None => h,
        });
    }
    e.next = next;
    e.message = if prefix.is_empty() {
        message
    } else {
        // "…; then the controller will …": the plan's sentence continues the prefix.
        let mut chars = message.chars();
        let first = chars.next().map(|c| c.to_lowercase().to_string());
        format!("{prefix}{}{}", first.unwrap_or_default(), chars.as_str())
    };
}

/// What the plan means: `next`, one sentence, and (in `e.hint`) what the user could change.
fn describe_plan(claim: &PersistentVolumeClaim, plan: &UnboundClaimPlan, e: &mut Explanation) -> (Next, String) {
    let class = helpers::claim_class(claim);
    let matching = e.candidates.iter().filter(|c| c.verdict == VerdictKind::Match).count();
    match plan {
        UnboundClaimPlan::Bind { volume: v, .. } => {
            let name = helpers::name(&v.metadata);
            let why = if matches!(binding::classify(v, claim), Relation::ThisClaim { .. }) {
                "which is pre-bound to it".to_string()
            } else if !helpers::claim_volume_name(claim).is_empty() {
                "which the claim names in spec.volumeName".to_string()
            } else if matching > 1 {
                format!("the best of {matching} matching volumes")
            } else {
                "the only matching volume".to_string()
            };
            (Next::Bind, format!("The controller will bind the claim to {name}, {why}."))
        }
        UnboundClaimPlan::AssignDefaultClass(c) => {
            (Next::None, format!("The controller will give the claim the default StorageClass {c:?}."))
        }
        UnboundClaimPlan::WaitForFirstConsumer { pods } => {
            let who = match pods.len() {
                0 => "nothing happens until a pod uses the claim; the scheduler then picks a \
                      volume or asks for one to be provisioned"
                    .to_string(),
                1 => format!("waiting for pod {} to be scheduled", pods[0]),
                _ => format!("waiting for pods {} to be scheduled", pods.join(",")),
            };
            let ns = claim.metadata.namespace.as_deref().unwrap_or("default");
            let name = helpers::name(&claim.metadata);
            e.hint = Some(format!(
                "where no scheduler runs (pv-controller up), do what it would: `kubectl annotate pvc -n {ns} \
                 {name} {}=NODE` to have a volume provisioned for NODE, or set the claim's spec.volumeName to \
                 a matching volume",
                ann::SELECTED_NODE
            ));
            (Next::WaitFirstConsumer, format!("StorageClass {class:?} binds on first consumer: {who}."))
        }
        UnboundClaimPlan::Provision(p) => describe_provisioning(claim, p, e),
        UnboundClaimPlan::NoClass => {
            e.hint = Some(format!("{}, or set a StorageClass", create_hint(claim)));
            (
                Next::None,
                "No volume matches and the claim has no StorageClass, so nothing will be \
                 provisioned (Normal FailedBinding)."
                    .to_string(),
            )
        }
        UnboundClaimPlan::VolumeNotFound(v) => {
            e.hint = Some(format!("create volume {v}, or remove spec.volumeName from the claim"));
            (
                Next::None,
                format!(
                    "The claim asks for volume {v} (spec.volumeName), which does not exist; it \
                     stays Pending until {v} is created."
                ),
            )
        }
        UnboundClaimPlan::VolumeMismatch { volume, verdict } => (
            Next::None,
            format!(
                "The claim asks for volume {}, which does not fit it: {} (Warning \
                 VolumeMismatch).",
                helpers::name(&volume.metadata),
                verdict.detail
            ),
        ),
        UnboundClaimPlan::ClaimedByOther { volume, other, .. } => (
            Next::None,
            if earlier_incarnation(volume, claim).is_some() {
                // free_earlier_hint says how to free it.
                format!(
                    "The claim asks for volume {}, which is still held by an earlier claim {other} (another \
                     uid), not by this one.",
                    helpers::name(&volume.metadata)
                )
            } else {
                let ns = claim.metadata.namespace.as_deref().unwrap_or("default");
                e.hint = Some(format!(
                    "a claim's spec.volumeName cannot be changed once set: delete and re-create claim {ns}/{} \
                     naming a free volume (or none), or free {} by deleting claim {other}",
                    helpers::name(&claim.metadata),
                    helpers::name(&volume.metadata)
                ));
                format!(
                    "The claim asks for volume {}, which is already bound to claim {other}; it stays Pending \
                     while {other} holds it.",
                    helpers::name(&volume.metadata)
                )
            },
        ),
    }
}

fn describe_provisioning(claim: &PersistentVolumeClaim, p: &Provisioning, e: &mut Explanation) -> (Next, String) {
    let class = helpers::claim_class(claim);
    match p {
        Provisioning::Internal { plugin, class: sc, refusal: Some(refusal), .. } => {
            e.hint = Some(format!("{}, or fix StorageClass {class:?}", create_hint(claim)));
            (
                Next::None,
                format!(
                    "No volume matches, and the in-tree plugin {} refuses to provision this claim: {} \
                     (Warning ProvisioningFailed).",
                    plugin.name(),
                    refusal.message(plugin.name(), sc)
                ),
            )
        }
        Provisioning::Internal { plugin, .. } => (
            Next::Provision,
            format!(
                "No volume matches; the controller will provision one with the in-tree plugin \
                 {} (StorageClass {class:?}).",
                plugin.name()
            ),
        ),
        Provisioning::External { provisioner, .. } => {
            e.external = Some((provisioner.clone(), class.to_string()));
            (
                Next::WaitExternalProvisioner,
                format!(
                    "No volume matches; waiting for the external provisioner {provisioner:?} \
                     (StorageClass {class:?}) to create one."
                ),
            )
        }
        Provisioning::Failed(why) => {
            e.hint = Some(format!("{}, or fix StorageClass {class:?}", create_hint(claim)));
            (
                Next::None,
                format!(
                    "No volume matches and provisioning cannot start: {why} (Warning \
                     ProvisioningFailed)."
                ),
            )
        }
        Provisioning::Disabled => {
            e.hint = Some(create_hint(claim));
            (Next::None, "No volume matches and dynamic provisioning is disabled in the controller.".to_string())
        }
    }
}

/// A volume whose claimRef names this claim's namespace and name with another uid is held by an
/// earlier claim of that name (deleted, then re-created as this one), not by another user: says
/// so, with the volume's phase, reclaim policy and message, and what frees it.
fn earlier_incarnation(v: &PersistentVolume, claim: &PersistentVolumeClaim) -> Option<String> {
    if !matches!(binding::classify(v, claim), Relation::EarlierOfSameName { .. }) {
        return None;
    }
    let uid = helpers::claim_ref(v).and_then(|r| r.uid.as_deref()).unwrap_or("");
    let phase = helpers::or_dash(helpers::volume_phase(v));
    let policy = helpers::reclaim_policy(v);
    let message = v.status.as_ref().and_then(|s| s.message.as_deref()).filter(|m| !m.is_empty());
    let message = message.map(|m| format!(" ({m})")).unwrap_or_default();
    // What the volume's own sync does now that its claim is gone: the controller's plan.
    let released = matches!(plan::plan_volume(v, None), VolumePlan::Release { mark_released: true });
    let frees = match (ReclaimPolicy::of(v), PvPhase::of(v)) {
        _ if released => "the controller releases it at its next sync, then reclaims it by its policy".to_string(),
        (Some(ReclaimPolicy::Retain), _) => format!(
            "clearing its spec.claimRef makes it Available again, data kept; annotated {}={}, it is bound to this claim again",
            ann::REBIND,
            ann::REBIND_SAME_NAME
        ),
        (Some(ReclaimPolicy::Delete), Some(PvPhase::Failed)) => {
            "deleting it failed: fix that, or delete the volume".to_string()
        }
        (Some(ReclaimPolicy::Recycle), Some(PvPhase::Failed)) => {
            "recycling it failed: fix that, or clear its spec.claimRef".to_string()
        }
        (Some(ReclaimPolicy::Delete), _) => "the controller deletes it".to_string(),
        (Some(ReclaimPolicy::Recycle), _) => "the controller recycles it, then it is Available".to_string(),
        (None, _) => "clearing its spec.claimRef makes it Available again".to_string(),
    };
    Some(format!(
        "held by an earlier claim of this name (uid {uid}), not this one; {phase}, reclaim policy {policy}{message}; \
         {frees}"
    ))
}

/// For Retain volumes held by an earlier claim of this name: the command that frees them.
fn free_earlier_hint(volumes: &[PersistentVolume], claim: &PersistentVolumeClaim) -> Option<String> {
    let held: Vec<&str> = volumes
        .iter()
        .filter(|v| helpers::reclaim_policy(v) == "Retain" && helpers::volume_phase(v) != "Bound")
        .filter(|v| binding::classify(v, claim) == (Relation::EarlierOfSameName { rebind: false }))
        .map(|v| helpers::name(&v.metadata))
        .collect();
    let first = held.first()?;
    let which = if held.len() == 1 { format!("volume {first} is") } else { format!("volumes {} are", held.join(", ")) };
    Some(format!(
        "{which} held by an earlier claim of this name; `kubectl patch pv {first} --type json -p \
         '[{{\"op\":\"remove\",\"path\":\"/spec/claimRef\"}}]'` frees it (the data stays), and the controller \
         then binds it if it matches; `kubectl annotate pv {first} {}={}` gives it back to this claim alone",
        ann::REBIND,
        ann::REBIND_SAME_NAME
    ))
}

/// "create a PV of at least 10Gi with class standard and ReadWriteOnce".
fn create_hint(claim: &PersistentVolumeClaim) -> String {
    let r = request(claim);
    let modes: Vec<String> = claim.spec.as_ref().and_then(|s| s.access_modes.clone()).unwrap_or_default();
    let class = helpers::claim_class(claim);
    let class = if class.is_empty() { "no class".to_string() } else { format!("class {class}") };
    let mut s = format!(
        "create a PV of at least {} with {class} and {}",
        r.size,
        if modes.is_empty() { "any access mode".to_string() } else { modes.join(",") }
    );
    if r.volume_mode != "Filesystem" {
        s.push_str(&format!(", volumeMode {}", r.volume_mode));
    }
    if let Some(sel) = &r.selector {
        s.push_str(&format!(", labels matching {sel}"));
    }
    if let Some(vac) = &r.attributes_class {
        s.push_str(&format!(", volumeAttributesClassName {vac}"));
    }
    s
}

/// How the binding came about, from what both objects carry: the bound-by-controller
/// annotations (set on the side the controller filled in) and the provisioned-by annotation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Origin {
    /// The user named the volume in the claim's `spec.volumeName`.
    ClaimNamedVolume,
    /// The user pre-bound the volume to the claim (`spec.claimRef`).
    VolumePreBound,
    /// The volume was provisioned for the claim (by whom, the annotation says).
    Provisioned,
    /// The controller chose it among the free volumes.
    Chosen,
}

fn binding_origin(claim: &PersistentVolumeClaim, v: &PersistentVolume) -> Origin {
    let claim_by_ctrl = helpers::has_annotation(&claim.metadata, ann::BOUND_BY_CONTROLLER);
    let volume_by_ctrl = helpers::has_annotation(&v.metadata, ann::BOUND_BY_CONTROLLER);
    // The in-tree provisioning marks the volume bound-by-controller too; provisioned-by says more.
    if !claim_by_ctrl {
        Origin::ClaimNamedVolume
    } else if helpers::has_annotation(&v.metadata, ann::PROVISIONED_BY) {
        Origin::Provisioned
    } else if volume_by_ctrl {
        Origin::Chosen
    } else {
        Origin::VolumePreBound
    }
}

fn explain_bound(view: &impl View, volumes: &[PersistentVolume], claim: &PersistentVolumeClaim, e: &mut Explanation) {
    let lost = e.phase == pvc_phase::LOST;
    let vname = helpers::claim_volume_name(claim);
    // The bound-claim sync's own decision (the controller's plan, not a copy of it).
    match plan::plan_bound_claim(claim, view.volume(vname)) {
        BoundClaimPlan::LostReference => {
            e.reason = "lost";
            e.message = "The claim was bound but lost its side of the binding: its spec.volumeName \
                         is empty (the claim lost the pointer). Data on the volume is lost to it."
                .into();
        }
        BoundClaimPlan::LostVolume => {
            e.reason = "lost";
            e.hint = Some(format!(
                "restore the volume {vname} (with spec.claimRef to this claim), or re-create the claim; the \
                 controller marks it Lost at its next sync"
            ));
            e.message = format!(
                "The claim was bound to volume {vname}, which no longer exists (the volume is \
                 missing). Data on the volume is lost."
            );
        }
        BoundClaimPlan::Rebind(v) => {
            e.candidates = vec![candidate(&v, VerdictKind::Match, "its claimRef is empty".into())];
            e.best_match = Some(vname.to_string());
            e.next = Next::Bind;
            e.message = format!(
                "The claim points to volume {vname}, whose claimRef is empty (the volume lost \
                 the pointer); the controller will bind it to the claim again."
            );
        }
        BoundClaimPlan::KeepBound(v) if lost => {
            e.candidates = vec![candidate(&v, VerdictKind::Match, "points back to the claim".into())];
            e.message = format!(
                "Both pointers agree again (claim → {vname} → claim), but the claim is \
                 marked Lost; the controller does not turn a Lost claim back to Bound."
            );
        }
        BoundClaimPlan::KeepBound(v) => explain_kept(view, volumes, claim, &v, e),
        BoundClaimPlan::Misbound(v) => {
            let r = helpers::claim_ref(&v).expect("a misbound claim's volume has a claimRef");
            let other = helpers::claim_ref_key(r);
            let uid = r.uid.as_deref().unwrap_or("");
            e.candidates = vec![candidate(&v, VerdictKind::ClaimedByOther, format!("claimed by {other}"))];
            e.reason = "lost";
            let same = other == e.claim;
            e.hint = Some(format!(
                "the volume belongs to {other}: create a new claim for this workload, or, if {other} is gone and \
                 the data is this claim's, set {vname}'s spec.claimRef to this claim (namespace, name and uid)"
            ));
            e.message = format!(
                "The claim points to volume {vname}, but the volume's claimRef points elsewhere \
                 ({}); the claim is bound incorrectly (ClaimMisbound).",
                if same {
                    format!("same name, other uid {uid}: an earlier claim of that name")
                } else {
                    format!("claim {other}")
                }
            );
        }
    }
}

/// Why a bound claim has the volume it has: pre-bound by the user, provisioned for it, or chosen
/// by the controller; for the last, the plan run again as at binding time (the volume free, the
/// claim unbound, every other volume as it stands now), with each other volume's verdict.
fn explain_kept(
    view: &impl View,
    volumes: &[PersistentVolume],
    claim: &PersistentVolumeClaim,
    v: &PersistentVolume,
    e: &mut Explanation,
) {
    let vname = helpers::name(&v.metadata).to_string();
    let origin = binding_origin(claim, v);
    if v.metadata.deletion_timestamp.is_some() {
        let key = helpers::claim_key(claim);
        e.candidates = vec![candidate(v, VerdictKind::BeingDeleted, "deleted while bound".into())];
        e.message = format!(
            "The claim is bound to volume {vname}, which is being deleted: the finalizer {} keeps it while \
             the claim is bound, so pods using the claim keep running; once claim {key} is deleted, the \
             PersistentVolume object goes.",
            pv_model::finalizers::PV_PROTECTION,
        );
        e.hint = Some(format!(
            "nothing is lost yet: if the deletion was a mistake, the volume cannot be un-deleted, so copy the data \
             while the claim holds it, or delete claim {key} (and its pods) to let the deletion finish"
        ));
        return;
    }
    let why = match origin {
        Origin::ClaimNamedVolume => "pre-bound by the user via the claim's spec.volumeName".to_string(),
        Origin::VolumePreBound => "pre-bound by the user via the volume's spec.claimRef".to_string(),
        Origin::Provisioned => format!(
            "provisioned for it by {}",
            helpers::annotation(&v.metadata, ann::PROVISIONED_BY).unwrap_or("a provisioner")
        ),
        Origin::Chosen => "bound by the controller".to_string(),
    };
    if origin != Origin::Chosen {
        e.candidates = vec![candidate(v, VerdictKind::Match, why.clone())];
        e.message = format!("The claim is bound to volume {vname}, {why}; nothing to do.");
        return;
    }
    // As at binding time: this volume free, the claim unbound.
    let mut unbound = claim.clone();
    if let Some(spec) = unbound.spec.as_mut() {
        spec.volume_name = None;
    }
    if let Some(a) = unbound.metadata.annotations.as_mut() {
        a.remove(ann::BIND_COMPLETED);
        a.remove(ann::BOUND_BY_CONTROLLER);
    }
    let mut free = v.clone();
    if let Some(spec) = free.spec.as_mut() {
        spec.claim_ref = None;
    }
    free.status.get_or_insert_with(Default::default).phase = Some("Available".into());
    let then: Vec<PersistentVolume> =
        volumes.iter().map(|x| if helpers::name(&x.metadata) == vname { free.clone() } else { x.clone() }).collect();
    // Under WaitForFirstConsumer the scheduler chose among the volumes that fit; the rules are the
    // same, so they are shown as for an Immediate class.
    let delay = plan::is_delay_binding(view, &unbound);
    // The first match in upstream's walk is the one the index picks.
    let now_best =
        rank_all(&unbound, &then, false, None).into_iter().find(|c| c.verdict == VerdictKind::Match).map(|c| c.volume);
    e.candidates = rank_all(&unbound, &then, false, Some(&vname));
    let matching = e.candidates.iter().filter(|c| c.verdict == VerdictKind::Match).count();
    if let Some(first) = e.candidates.first_mut().filter(|c| c.volume == vname) {
        first.detail = format!("bound to the claim: {}", first.detail);
        first.phase = helpers::volume_phase(v).to_string();
    }
    let chosen = match (now_best.as_deref(), matching) {
        (Some(b), 1) if b == vname => "the only volume that matches it".to_string(),
        (Some(b), n) if b == vname => format!("the best of the {n} volumes that match it"),
        (Some(b), _) => format!(
            "{b} would be chosen now: it fits better, so it was not free (or did not exist) when the claim \
             was bound"
        ),
        (None, _) => format!(
            "by today's rules {vname} no longer matches the claim ({}); the binding stays",
            e.candidates.first().map(|c| c.detail.as_str()).unwrap_or("")
        ),
    };
    let others = match e.candidates.len().saturating_sub(1) {
        0 => String::new(),
        1 => " The other volume is shown as it stands now.".to_string(),
        n => format!(" The other {n} volumes are shown as they stand now."),
    };
    let by = if delay { "the scheduler (the class binds on first consumer)" } else { "the controller" };
    e.message = format!("The claim is bound to volume {vname}, chosen by {by}: {chosen}.{others}");
}

/// Marks the volumes that only become Available at their first sync (see
/// [`crate::explain_snapshot`]): in their detail, and in the message when the claim's next step
/// depends on one of them.
pub fn note_becoming_available(e: &mut Explanation, volumes: &[String]) {
    let mut relevant = Vec::new();
    for c in &mut e.candidates {
        if volumes.contains(&c.volume) {
            c.detail = format!("{}; no phase yet, the controller makes it Available first", c.detail);
            if c.verdict == VerdictKind::Match {
                relevant.push(c.volume.clone());
            }
        }
    }
    if relevant.is_empty() || e.next != Next::Bind {
        return;
    }
    let (verb, list) = match relevant.len() {
        1 => ("has", relevant[0].clone()),
        _ => ("have", relevant.join(", ")),
    };
    e.message = format!("{} ({list} {verb} no phase yet: the volume's first sync makes it Available.)", e.message);
}

/// Adds what was found past the binder: its verdict continues the message, and a verdict that
/// names a problem says what to do about it.
pub fn note_provisioner(e: &mut Explanation, report: crate::provisioner::Report) {
    use crate::provisioner::Verdict;
    e.message = format!("{} {}", e.message, report.message);
    let name = &report.name;
    let hint = match report.verdict {
        Verdict::NotInstalled => Some(format!(
            "install the driver {name:?} (its CSIDriver and csi-provisioner beside its controller), or give \
             the claim a StorageClass whose provisioner runs"
        )),
        Verdict::Down => Some(format!(
            "find out why the provisioner stopped (its pods and their logs{}); the claim is provisioned once \
             it runs again",
            report.lease_holder.as_deref().map(|h| format!("; the last leader was {h}")).unwrap_or_default()
        )),
        Verdict::Failing => Some(
            "fix what the error says (the class's parameters, the storage backend); the provisioner keeps \
             retrying on its own"
                .into(),
        ),
        Verdict::NotOnNode => Some(format!(
            "run the driver's node plugin on {} (it registers the driver in the node's CSINode), or let \
             the claim be scheduled elsewhere",
            report.node.as_ref().map_or("the node", |n| n.name.as_str())
        )),
        Verdict::NoCapacity => Some("ask for less, or free room in the storage backend".into()),
        Verdict::NoAnswer => Some(format!(
            "check that csi-provisioner for {name:?} runs (`kubectl get pods -A | grep provisioner`) and \
             read its logs"
        )),
        Verdict::Provisioning | Verdict::Running | Verdict::Unknown => None,
    };
    if hint.is_some() {
        e.hint = hint;
    }
    e.provisioner = Some(report);
}

/// What the pods that wait to consume a WaitForFirstConsumer claim show: the scheduler's latest
/// FailedScheduling message for each (the claim waits on that pod), and a hint that depends on
/// whether a scheduler runs (on a cluster with one, setting `selected-node` by hand is wrong).
/// For a bound claim (`waiting` false), only the pods that still cannot be scheduled are noted.
pub fn note_consumers(
    snapshot: &crate::Snapshot,
    claim: &PersistentVolumeClaim,
    e: &mut Explanation,
    now: k8s_openapi::jiff::Timestamp,
    waiting: bool,
) {
    let ns = claim.metadata.namespace.as_deref().unwrap_or("default");
    let name = helpers::name(&claim.metadata);
    let pods: Vec<&pv_model::k8s::Pod> = snapshot
        .pods
        .iter()
        .filter(|p| p.metadata.namespace.as_deref().unwrap_or("default") == ns)
        .filter(|p| !helpers::is_pod_terminated(p) && helpers::pod_claim_names(p).iter().any(|c| c == name))
        .collect();
    let mut stuck = None;
    for p in pods.iter().filter(|p| !helpers::pod_is_scheduled(p)) {
        let pod = helpers::name(&p.metadata);
        if let Some(m) = crate::pod::scheduler_message(snapshot, p) {
            e.message = format!(
                "{} The scheduler cannot place pod {pod}: {m} (`pv-controller explain pod {ns}/{pod}` says why).",
                e.message
            );
            stuck.get_or_insert(pod);
        }
    }
    if !waiting {
        if let Some(pod) = stuck {
            e.hint = Some(format!(
                "the claim is fine; what keeps pod {pod} off every node is in `pv-controller explain pod {ns}/{pod}`"
            ));
        }
        return;
    }
    if crate::pod::scheduler_runs(snapshot, now) {
        e.hint = Some(match pods.first() {
            Some(p) => format!(
                "the scheduler binds or provisions the claim when it places pod {0}; `pv-controller explain pod \
                 {ns}/{0}` says what stops it",
                helpers::name(&p.metadata)
            ),
            None => "create a pod that uses the claim: the scheduler then picks a volume or has one provisioned \
                     for the pod's node"
                .into(),
        });
    }
}

/// A provisioning attempt for a WaitForFirstConsumer claim that failed: csi-provisioner removes
/// `selected-node` after a failure so that the scheduler may pick another node, and the claim then
/// looks as if nothing had happened. Says what failed, and keeps the provisioner's report.
pub fn note_failed_attempt(e: &mut Explanation, report: crate::provisioner::Report) {
    let failure = report.last_event.as_ref().map(|ev| ev.message.clone()).unwrap_or_default();
    e.message = format!(
        "{} The last attempt to provision it failed: {failure} (the provisioner removed selected-node; the \
         scheduler tries again when it places the pod).",
        e.message
    );
    e.hint = Some(
        "fix what the error says (the class's parameters, the storage backend, the node's topology); the next \
         scheduling attempt asks for a volume again"
            .into(),
    );
    e.provisioner = Some(report);
}

/// For a claim the scheduler has picked a node for (`selected-node`): the volumes that fit it by
/// every rule but are pinned by their node affinity to other nodes, which is why nothing binds
/// there; the stale node is what to change, not a new volume.
fn pinned_elsewhere_hint(
    view: &impl View,
    volumes: &[PersistentVolume],
    claim: &PersistentVolumeClaim,
) -> Option<String> {
    let selected = helpers::annotation(&claim.metadata, ann::SELECTED_NODE).filter(|n| !n.is_empty())?;
    let node = view.node(selected);
    let pinned: Vec<&str> = volumes
        .iter()
        .filter(|v| matching::evaluate(claim, v, false).kind == VerdictKind::Match)
        .filter(|v| node.as_ref().is_none_or(|n| !pv_model::topology::volume_allows(v, n)))
        .map(|v| helpers::name(&v.metadata))
        .collect();
    if pinned.is_empty() {
        return None;
    }
    let ns = claim.metadata.namespace.as_deref().unwrap_or("default");
    let where_ = if node.is_some() {
        format!("the selected node {selected}")
    } else {
        format!("the selected node {selected}, which does not exist")
    };
    Some(format!(
        "{} fit{} the claim but {} pinned to other nodes than {where_}: remove the annotation so that the \
         scheduler picks a node where a volume is (`kubectl annotate pvc -n {ns} {} {}-`)",
        pinned.join(", "),
        if pinned.len() == 1 { "s" } else { "" },
        if pinned.len() == 1 { "is" } else { "are" },
        helpers::name(&claim.metadata),
        ann::SELECTED_NODE
    ))
}
