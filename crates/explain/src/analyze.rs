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
use pv_core::{Provisioning, UnboundClaimPlan, View};
use pv_model::annotations as ann;
use pv_model::helpers::{self, pvc_phase, AccessModes};
use pv_model::k8s::{PersistentVolume, PersistentVolumeClaim};
use pv_model::{matching, selector, VerdictKind};
use std::sync::Arc;

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
    /// One sentence for a person.
    pub message: String,
    /// What the user could change, when that helps.
    pub hint: Option<String>,
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
        message: String::new(),
        hint: None,
    };
    // The controller reads a claim as bound once it carries bind-completed; so does explain.
    if helpers::has_annotation(&claim.metadata, ann::BIND_COMPLETED) {
        explain_bound(view, claim, &mut e);
    } else {
        explain_unbound(view, volumes, claim, &mut e);
    }
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
    let best_prebound =
        volumes.iter().any(|v| Some(helpers::name(&v.metadata)) == best && helpers::is_volume_bound_to_claim(v, claim));
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
            let verdict = matching::evaluate(claim, v, delay);
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
                _ => verdict.detail,
            };
            candidate(v, verdict.kind, detail)
        })
        .collect()
}

fn explain_unbound(view: &impl View, volumes: &[PersistentVolume], claim: &PersistentVolumeClaim, e: &mut Explanation) {
    let mut plan = plan::plan_unbound_claim(view, claim);
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
            UnboundClaimPlan::Bind(v) => Some(helpers::name(&v.metadata).to_string()),
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
                (VerdictKind::ClaimedByOther, format!("claimed by {other}"))
            }
            _ => (VerdictKind::Match, "named by the claim's spec.volumeName".into()),
        };
        e.candidates = vec![candidate(&v, kind, detail)];
        if let UnboundClaimPlan::Bind(v) = &plan {
            e.best_match = Some(helpers::name(&v.metadata).to_string());
        }
    }
    let (next, message) = describe_plan(claim, &plan, e);
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
        UnboundClaimPlan::Bind(v) => {
            let name = helpers::name(&v.metadata);
            let why = if helpers::is_volume_bound_to_claim(v, claim) {
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
        UnboundClaimPlan::ClaimedByOther { volume, other } => (
            Next::None,
            format!(
                "The claim asks for volume {}, which is already bound to claim {other}.",
                helpers::name(&volume.metadata)
            ),
        ),
    }
}

fn describe_provisioning(claim: &PersistentVolumeClaim, p: &Provisioning, e: &mut Explanation) -> (Next, String) {
    let class = helpers::claim_class(claim);
    match p {
        Provisioning::Internal { plugin, .. } => (
            Next::Provision,
            format!(
                "No volume matches; the controller will provision one with the in-tree plugin \
                 {} (StorageClass {class:?}).",
                plugin.name()
            ),
        ),
        Provisioning::External { provisioner, .. } => (
            Next::WaitExternalProvisioner,
            format!(
                "No volume matches; waiting for the external provisioner {provisioner:?} \
                 (StorageClass {class:?}) to create one; if that takes long, check that it is \
                 running."
            ),
        ),
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

/// Who made the binding, from the bound-by-controller annotations on both sides.
fn binding_origin(claim: &PersistentVolumeClaim, v: &PersistentVolume) -> &'static str {
    let claim_by_ctrl = helpers::has_annotation(&claim.metadata, ann::BOUND_BY_CONTROLLER);
    let volume_by_ctrl = helpers::has_annotation(&v.metadata, ann::BOUND_BY_CONTROLLER);
    match (claim_by_ctrl, volume_by_ctrl) {
        (true, true) => "bound by the controller",
        (false, _) => "pre-bound by the user via the claim's spec.volumeName",
        (true, false) => "pre-bound by the user via the volume's spec.claimRef",
    }
}

fn explain_bound(view: &impl View, claim: &PersistentVolumeClaim, e: &mut Explanation) {
    let lost = e.phase == pvc_phase::LOST;
    let vname = helpers::claim_volume_name(claim);
    if vname.is_empty() {
        e.message = "The claim was bound but lost its side of the binding: its spec.volumeName \
                     is empty (the claim lost the pointer). Data on the volume is lost to it."
            .into();
        return;
    }
    let Some(v) = view.volume(vname) else {
        e.message = format!(
            "The claim was bound to volume {vname}, which no longer exists (the volume is \
             missing). Data on the volume is lost."
        );
        return;
    };
    let v: Arc<PersistentVolume> = v;
    match helpers::claim_ref(&v) {
        None => {
            e.candidates = vec![candidate(&v, VerdictKind::Match, "its claimRef is empty".into())];
            e.best_match = Some(vname.to_string());
            e.next = Next::Bind;
            e.message = format!(
                "The claim points to volume {vname}, whose claimRef is empty (the volume lost \
                 the pointer); the controller will bind it to the claim again."
            );
        }
        Some(r) if r.uid.as_deref().unwrap_or("") == helpers::uid(&claim.metadata) => {
            let origin = binding_origin(claim, &v);
            e.candidates = vec![candidate(&v, VerdictKind::Match, origin.into())];
            e.message = if lost {
                format!(
                    "Both pointers agree again (claim → {vname} → claim), but the claim is \
                     marked Lost; the controller does not turn a Lost claim back to Bound."
                )
            } else {
                format!("The claim is bound to volume {vname} ({origin}); nothing to do.")
            };
        }
        Some(r) => {
            let other = helpers::claim_ref_key(r);
            let uid = r.uid.as_deref().unwrap_or("");
            e.candidates = vec![candidate(&v, VerdictKind::ClaimedByOther, format!("claimed by {other}"))];
            let same = other == e.claim;
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
