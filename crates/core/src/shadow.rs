//! Shadow mode's bookkeeping: what the controller would have written, field by field, and how it
//! compares with what the controller in charge (kube-controller-manager's binder) wrote.
//!
//! `run --shadow` runs the controller over a read-only API: every write becomes an *intent*, the
//! fields it changes from the version it was based on (a volume's `claimRef`, a claim's
//! `volumeName`, phases, the bind and provisioning annotations, finalizers, a deletion, an
//! event's type and reason). Nothing is written, so the controller's caches keep following the
//! cluster and every later decision is made from the state the incumbent also sees.
//!
//! An intent is judged once it is [`ShadowLog::due`]: the settle window after it was first made.
//! The caller reads the field's value in the cluster then (`theirs`) and [`ShadowLog::judge`]s:
//! `agree` when the incumbent wrote the same value, `equivalent` when it wrote another value
//! that is as good by a rule this module names (two volumes equally fit for one claim, two claims
//! equally entitled to one volume, or a volume the incumbent took that the shadow had not seen
//! when it decided and that is as good as its own choice: a decision made from another state),
//! `differ` otherwise (with both values). Intents not judged yet are `pending`.

use pv_model::helpers;
use pv_model::k8s::{PersistentVolume, PersistentVolumeClaim};
use std::collections::{BTreeMap, VecDeque};

/// The fields of a volume the binder writes, by name, as text ("" when unset).
pub fn volume_fields(v: &PersistentVolume) -> BTreeMap<&'static str, String> {
    let mut f = BTreeMap::new();
    let spec = v.spec.as_ref();
    let claim_ref = spec.and_then(|s| s.claim_ref.as_ref()).map_or(String::new(), |r| {
        format!("{}/{}", r.namespace.as_deref().unwrap_or_default(), r.name.as_deref().unwrap_or_default())
    });
    f.insert("spec.claimRef", claim_ref);
    f.insert("status.phase", v.status.as_ref().and_then(|s| s.phase.clone()).unwrap_or_default());
    for (name, key) in [
        ("annotations.bound-by-controller", pv_model::annotations::BOUND_BY_CONTROLLER),
        ("annotations.provisioned-by", pv_model::annotations::PROVISIONED_BY),
    ] {
        f.insert(name, helpers::annotation(&v.metadata, key).unwrap_or_default().to_string());
    }
    let mut fin: Vec<&str> = v.metadata.finalizers.iter().flatten().map(String::as_str).collect();
    fin.sort_unstable();
    f.insert("metadata.finalizers", fin.join(","));
    f
}

/// The fields of a claim the binder writes, by name, as text ("" when unset).
pub fn claim_fields(c: &PersistentVolumeClaim) -> BTreeMap<&'static str, String> {
    use pv_model::annotations as ann;
    let mut f = BTreeMap::new();
    let spec = c.spec.as_ref();
    f.insert("spec.volumeName", spec.and_then(|s| s.volume_name.clone()).unwrap_or_default());
    f.insert("spec.storageClassName", spec.and_then(|s| s.storage_class_name.clone()).unwrap_or_default());
    let status = c.status.as_ref();
    f.insert("status.phase", status.and_then(|s| s.phase.clone()).unwrap_or_default());
    f.insert(
        "status.capacity",
        status
            .and_then(|s| s.capacity.as_ref())
            .and_then(|c| c.get("storage"))
            .map(|q| q.0.clone())
            .unwrap_or_default(),
    );
    for (name, key) in [
        ("annotations.bind-completed", ann::BIND_COMPLETED),
        ("annotations.bound-by-controller", ann::BOUND_BY_CONTROLLER),
        ("annotations.storage-provisioner", ann::STORAGE_PROVISIONER),
        ("annotations.selected-node", ann::SELECTED_NODE),
    ] {
        f.insert(name, helpers::annotation(&c.metadata, key).unwrap_or_default().to_string());
    }
    f
}

/// The fields whose value `new` changes from `old`: (field, before, after).
pub fn changes(
    old: &BTreeMap<&'static str, String>,
    new: &BTreeMap<&'static str, String>,
) -> Vec<(&'static str, String, String)> {
    new.iter()
        .filter(|(k, v)| old.get(*k) != Some(*v))
        .map(|(k, v)| (*k, old.get(k).cloned().unwrap_or_default(), v.clone()))
        .collect()
}

/// How one decision compared.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Verdict {
    /// The incumbent wrote the same.
    Agree,
    /// The incumbent wrote something else, as good by a named rule.
    Equivalent,
    /// The incumbent wrote something else, or nothing.
    Differ,
}

impl Verdict {
    /// The `result` label.
    pub fn as_str(&self) -> &'static str {
        match self {
            Verdict::Agree => "agree",
            Verdict::Equivalent => "equivalent",
            Verdict::Differ => "differ",
        }
    }
}

/// Which object a decision is about.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Target {
    /// `PersistentVolume` or `PersistentVolumeClaim`.
    pub kind: &'static str,
    /// Name (`namespace/name` for a claim).
    pub object: String,
    /// The field (`spec.claimRef`, `status.phase`, `deleted`, `event Warning/FailedBinding`, ...).
    pub field: String,
}

/// One judged decision.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decision {
    /// What it is about.
    pub target: Target,
    /// The value before (as the controller saw the object when it decided).
    pub before: String,
    /// What the controller would have written.
    pub ours: String,
    /// What the cluster holds once the settle window has passed.
    pub theirs: String,
    /// The verdict.
    pub verdict: Verdict,
    /// For `equivalent`, the rule that makes both choices as good.
    pub rule: Option<String>,
}

/// An intent not judged yet.
#[derive(Clone, Debug)]
struct Intent {
    before: String,
    ours: String,
    first_ms: u64,
}

/// An intent ready to be judged.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Due {
    /// What it is about.
    pub target: Target,
    /// What the controller would write.
    pub ours: String,
    /// The value it changes.
    pub before: String,
    /// How long ago it was first made.
    pub age_ms: u64,
}

impl Due {
    /// True when the cluster's value `theirs` is still the one the decision changes and the
    /// intent is younger than `max_ms`: the binder in charge has not decided yet (it saw the
    /// objects in another order, or syncs on a longer period), so this is not a difference yet.
    pub fn undecided(&self, theirs: &str, max_ms: u64) -> bool {
        theirs != self.ours && theirs == self.before && self.age_ms < max_ms
    }
}

/// How many differences [`ShadowLog`] keeps for `/shadow`.
pub const KEPT_DIFFERENCES: usize = 100;

/// Intents, their judgements and the counts.
#[derive(Debug, Default)]
pub struct ShadowLog {
    pending: BTreeMap<Target, Intent>,
    /// The last value judged per target: an intent repeated unchanged (a resync) is not judged
    /// again.
    judged: BTreeMap<Target, String>,
    counts: BTreeMap<(Verdict, &'static str), u64>,
    differences: VecDeque<Decision>,
}

impl ShadowLog {
    /// Records that the controller would write `ours` to `target`, whose value was `before`.
    /// A later intent for the same target replaces the value, not the time it was first made.
    pub fn intend(&mut self, target: Target, before: String, ours: String, now_ms: u64) {
        if self.judged.get(&target) == Some(&ours) && !self.pending.contains_key(&target) {
            return;
        }
        match self.pending.get_mut(&target) {
            Some(i) => i.ours = ours,
            None => {
                self.pending.insert(target, Intent { before, ours, first_ms: now_ms });
            }
        }
    }

    /// Intents whose settle window has passed: each with the value the controller would write,
    /// the value before, and its age.
    pub fn due(&self, now_ms: u64, settle_ms: u64) -> Vec<Due> {
        self.pending
            .iter()
            .filter(|(_, i)| now_ms.saturating_sub(i.first_ms) >= settle_ms)
            .map(|(t, i)| Due {
                target: t.clone(),
                ours: i.ours.clone(),
                before: i.before.clone(),
                age_ms: now_ms.saturating_sub(i.first_ms),
            })
            .collect()
    }

    /// Judges the intent for `target` against `theirs`, the cluster's value now; `equivalent`
    /// names the rule when the caller found the two values equally good.
    pub fn judge(&mut self, target: &Target, theirs: String, equivalent: Option<String>) -> Option<Decision> {
        let intent = self.pending.remove(target)?;
        let verdict = if theirs == intent.ours {
            Verdict::Agree
        } else if equivalent.is_some() {
            Verdict::Equivalent
        } else {
            Verdict::Differ
        };
        *self.counts.entry((verdict, target.kind)).or_default() += 1;
        self.judged.insert(target.clone(), intent.ours.clone());
        let d = Decision {
            target: target.clone(),
            before: intent.before,
            ours: intent.ours,
            theirs,
            verdict,
            rule: if verdict == Verdict::Equivalent { equivalent } else { None },
        };
        if verdict != Verdict::Agree {
            if self.differences.len() == KEPT_DIFFERENCES {
                self.differences.pop_front();
            }
            self.differences.push_back(d.clone());
        }
        Some(d)
    }

    /// Forgets what was judged of objects that are gone (`exists(kind, object)` false): one of
    /// the same name made later is new, its decisions judged afresh, and a long-running shadow
    /// keeps nothing of objects deleted long ago. Returns how many judgements were forgotten.
    pub fn retain_objects(&mut self, exists: impl Fn(&str, &str) -> bool) -> usize {
        let before = self.judged.len();
        self.judged.retain(|t, _| exists(t.kind, &t.object));
        before - self.judged.len()
    }

    /// Decisions judged, by verdict and kind.
    pub fn counts(&self) -> &BTreeMap<(Verdict, &'static str), u64> {
        &self.counts
    }

    /// Intents not judged yet.
    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    /// Intents not judged yet, by kind.
    pub fn pending_by_kind(&self) -> BTreeMap<&'static str, u64> {
        let mut m = BTreeMap::new();
        for t in self.pending.keys() {
            *m.entry(t.kind).or_default() += 1;
        }
        m
    }

    /// The last differences (`differ` and `equivalent`), oldest first.
    pub fn differences(&self) -> impl Iterator<Item = &Decision> {
        self.differences.iter()
    }
}

/// True when two volumes are equally good for a claim by the binder's rule: the smallest
/// volume that fits wins, and among volumes of one size neither controller's pick is better
/// (upstream takes the first its index yields). Both must fit the claim.
pub fn equally_good(claim: &PersistentVolumeClaim, a: &PersistentVolume, b: &PersistentVolume) -> bool {
    use pv_model::{matching, VerdictKind};
    // The claim may already be bound to one of them: judge both as free volumes.
    let fits = |v: &PersistentVolume| matching::evaluate(claim, &as_free(v), false).kind == VerdictKind::Match;
    let size = |v: &PersistentVolume| helpers::volume_capacity(v);
    fits(a) && fits(b) && size(a) == size(b)
}

/// The rule [`equally_good`] applies, as a `/shadow` entry names it.
pub const EQUALLY_GOOD_RULE: &str =
    "both volumes fit the claim and have the same capacity: the binder takes the smallest volume that fits, and \
     between volumes of one size neither choice is better";

/// True when the volume the binder in charge took (`theirs`), one the shadow had not seen yet
/// when it decided, is by the binder's rule at least as good for the claim as the shadow's own
/// choice (`ours`): it fits the claim and is no larger. The two decisions were made from two
/// states, and from the later one, which held both volumes, the shadow's rule would not have
/// preferred its own choice either. The caller tells that the shadow had not seen `theirs`.
pub fn as_good_seen_later(claim: &PersistentVolumeClaim, ours: &PersistentVolume, theirs: &PersistentVolume) -> bool {
    use pv_model::{matching, VerdictKind};
    let fits = matching::evaluate(claim, &as_free(theirs), false).kind == VerdictKind::Match;
    fits && helpers::volume_capacity(theirs) <= helpers::volume_capacity(ours)
}

/// The rule [`as_good_seen_later`] applies, as a `/shadow` entry names it.
pub const SEEN_LATER_RULE: &str =
    "the binder in charge decided from a later state, with a volume the shadow had not seen when it decided: that \
     volume fits the claim and is no larger than the shadow's choice, so from that state the binder's rule (the \
     smallest volume that fits) does not prefer the shadow's choice";

/// True when two claims are equally entitled to one volume by the binder's rule: a volume goes
/// to the first claim synced that it fits, and no rule ranks one claim above another. Both must
/// fit the volume, judged as free, and neither may ask for a volume by name (a claim the binder
/// bound names its volume only by the binder's choice).
pub fn equally_entitled(volume: &PersistentVolume, a: &PersistentVolumeClaim, b: &PersistentVolumeClaim) -> bool {
    use pv_model::{matching, VerdictKind};
    let free = as_free(volume);
    let fits = |c: &PersistentVolumeClaim| {
        let by_binder = helpers::annotation(&c.metadata, pv_model::annotations::BOUND_BY_CONTROLLER).is_some();
        let mut unbound = c.clone();
        if let Some(s) = unbound.spec.as_mut() {
            if s.volume_name.as_deref().is_some_and(|v| !v.is_empty()) && !by_binder {
                return false;
            }
            s.volume_name = None;
        }
        unbound.status = None;
        matching::evaluate(&unbound, &free, false).kind == VerdictKind::Match
    };
    fits(a) && fits(b)
}

/// The volume as if no claim held it: no `claimRef`, no status (a new volume's first sync makes
/// it Available).
fn as_free(volume: &PersistentVolume) -> PersistentVolume {
    let mut free = volume.clone();
    if let Some(s) = free.spec.as_mut() {
        s.claim_ref = None;
    }
    free.status = None;
    free
}

/// The rule [`equally_entitled`] applies, as a `/shadow` entry names it.
pub const EQUALLY_ENTITLED_RULE: &str =
    "both claims fit the volume and neither asks for it by name: the binder gives a volume to the first claim it \
     syncs, and no rule ranks one claim above the other";

#[cfg(test)]
mod tests {
    use super::*;

    fn t(field: &str) -> Target {
        Target { kind: "PersistentVolumeClaim", object: "ns/c".into(), field: field.into() }
    }

    #[test]
    fn an_intent_is_judged_once_its_window_has_passed() {
        let mut log = ShadowLog::default();
        log.intend(t("spec.volumeName"), String::new(), "pv-1".into(), 1_000);
        assert!(log.due(5_000, 10_000).is_empty());
        // A repeat keeps the first time, takes the new value.
        log.intend(t("spec.volumeName"), String::new(), "pv-2".into(), 9_000);
        let due = log.due(11_000, 10_000);
        assert_eq!((due.len(), due[0].ours.as_str(), due[0].age_ms), (1, "pv-2", 10_000));
        // The cluster still holds the value before: undecided until the longest wait.
        assert!(due[0].undecided("", 30_000));
        assert!(!due[0].undecided("", 10_000));
        assert!(!due[0].undecided("pv-3", 30_000));
        let d = log.judge(&t("spec.volumeName"), "pv-2".into(), None).unwrap();
        assert_eq!(d.verdict, Verdict::Agree);
        assert_eq!(log.pending(), 0);
        // The same value intended again (a resync) is not a new decision.
        log.intend(t("spec.volumeName"), String::new(), "pv-2".into(), 20_000);
        assert_eq!(log.pending(), 0);
        assert_eq!(log.counts()[&(Verdict::Agree, "PersistentVolumeClaim")], 1);
    }

    #[test]
    fn an_object_gone_is_forgotten_and_one_of_its_name_judged_afresh() {
        let mut log = ShadowLog::default();
        log.intend(t("spec.volumeName"), String::new(), "pv-1".into(), 0);
        log.judge(&t("spec.volumeName"), "pv-1".into(), None).unwrap();
        // Still there: its judgement stays, a resync's repeat is no decision.
        assert_eq!(log.retain_objects(|_, _| true), 0);
        log.intend(t("spec.volumeName"), String::new(), "pv-1".into(), 1_000);
        assert_eq!(log.pending(), 0);
        // Deleted, then made again under its name: the same decision is judged again.
        assert_eq!(log.retain_objects(|kind, object| !(kind == "PersistentVolumeClaim" && object == "ns/c")), 1);
        log.intend(t("spec.volumeName"), String::new(), "pv-1".into(), 2_000);
        assert_eq!(log.pending(), 1);
    }

    #[test]
    fn differences_keep_both_values_and_equivalents_their_rule() {
        let mut log = ShadowLog::default();
        log.intend(t("spec.volumeName"), String::new(), "pv-1".into(), 0);
        log.intend(t("status.phase"), "Pending".into(), "Bound".into(), 0);
        let d = log.judge(&t("spec.volumeName"), "pv-2".into(), Some("same size".into())).unwrap();
        assert_eq!((d.verdict, d.rule.as_deref()), (Verdict::Equivalent, Some("same size")));
        let d = log.judge(&t("status.phase"), "Pending".into(), None).unwrap();
        assert_eq!(
            (d.verdict, d.before.as_str(), d.ours.as_str(), d.theirs.as_str()),
            (Verdict::Differ, "Pending", "Bound", "Pending")
        );
        assert_eq!(log.differences().count(), 2);
    }

    #[test]
    fn changes_are_the_fields_a_write_sets() {
        let mut old = BTreeMap::new();
        old.insert("spec.volumeName", String::new());
        old.insert("status.phase", "Pending".to_string());
        let mut new = old.clone();
        new.insert("spec.volumeName", "pv-1".to_string());
        assert_eq!(changes(&old, &new), vec![("spec.volumeName", String::new(), "pv-1".to_string())]);
    }

    fn claim(name: &str, request: &str) -> PersistentVolumeClaim {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": request}}}
        }))
        .unwrap()
    }

    fn volume(capacity: &str) -> PersistentVolume {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "pv-1"},
            "spec": {"accessModes": ["ReadWriteOnce"], "capacity": {"storage": capacity}, "hostPath": {"path": "/tmp/pv-1"}},
            "status": {"phase": "Available"}
        }))
        .unwrap()
    }

    #[test]
    fn a_volume_seen_later_is_as_good_when_it_fits_and_is_no_larger() {
        let c = claim("c", "1Gi");
        let mut small = volume("1Gi");
        small.metadata.name = Some("pv-small".into());
        let big = volume("5Gi");
        // The incumbent, deciding later, took the smaller volume the shadow had not seen.
        assert!(as_good_seen_later(&c, &big, &small));
        assert!(!equally_good(&c, &big, &small));
        // A larger one, or one the claim does not fit, is no better than the shadow's choice.
        assert!(!as_good_seen_later(&c, &small, &big));
        let mut block = volume("1Gi");
        block.spec.as_mut().unwrap().volume_mode = Some("Block".into());
        assert!(!as_good_seen_later(&c, &big, &block));
    }

    #[test]
    fn two_claims_that_fit_one_volume_are_equally_entitled_to_it() {
        let v = volume("1Gi");
        let (c1, mut c2) = (claim("c1", "1Gi"), claim("c2", "500Mi"));
        assert!(equally_entitled(&v, &c1, &c2));
        // The incumbent bound c2: its volumeName is the binder's choice, not a request.
        c2.spec.as_mut().unwrap().volume_name = Some("pv-1".into());
        c2.metadata.annotations =
            Some([(pv_model::annotations::BOUND_BY_CONTROLLER.to_string(), "yes".to_string())].into());
        let mut bound = v.clone();
        bound.spec.as_mut().unwrap().claim_ref = Some(pv_model::k8s::ObjectReference {
            name: Some("c2".into()),
            namespace: Some("default".into()),
            ..Default::default()
        });
        bound.status.as_mut().unwrap().phase = Some("Bound".into());
        assert!(equally_entitled(&bound, &c1, &c2));
        // A claim the volume does not fit, or one that names a volume itself, is not as entitled.
        assert!(!equally_entitled(&v, &c1, &claim("c3", "2Gi")));
        c2.metadata.annotations = None;
        assert!(!equally_entitled(&bound, &c1, &c2));
    }
}
