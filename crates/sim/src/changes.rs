//! What the controller would do to a cluster state, for a person: `simulate -o changes`.
//!
//! The full List `simulate` prints by default is what scripts want; on a `kubectl get
//! pv,pvc,sc -A -o yaml` dump of a real cluster a person would have to diff it against the input by
//! hand to see what the controller would change. [`Changes::between`] does that diff on the
//! objects before and after the run and groups it the way the controller acts: claims bound to
//! volumes, volumes provisioned, phases changed, objects deleted, events by reason, one line each.
//! [`Changes::with_steps`] adds how it got there: each sync that acted, in the order the
//! simulation ran them, with its steps ([`pv_core::steps::SyncReport`]).

use crate::driver::SyncRecord;
use serde_json::Value;
use std::collections::BTreeMap;

/// (kind, namespace, name).
type Key = (String, String, String);

fn s<'a>(v: &'a Value, path: &str) -> &'a str {
    v.pointer(path).and_then(Value::as_str).unwrap_or("")
}

fn key(v: &Value) -> Key {
    (s(v, "/kind").to_string(), s(v, "/metadata/namespace").to_string(), s(v, "/metadata/name").to_string())
}

fn label((kind, ns, name): &Key) -> String {
    if ns.is_empty() {
        format!("{kind} {name}")
    } else {
        format!("{kind} {ns}/{name}")
    }
}

/// The changes, grouped; each entry is one line for a person.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Changes {
    /// `ns/claim → volume` for each claim that became Bound.
    pub bound: Vec<String>,
    /// `volume (size, class) for ns/claim` for each volume the run created.
    pub provisioned: Vec<String>,
    /// Other objects the run created.
    pub created: Vec<String>,
    /// `Kind name: Old → New` for each phase that changed (but to Bound, which `bound` shows).
    pub phases: Vec<String>,
    /// Objects the run deleted.
    pub deleted: Vec<String>,
    /// `Type Reason ×count, first on Kind ns/name: message` per event reason.
    pub events: Vec<String>,
    /// `+time object: step; step; …` for each sync that acted (wrote, recorded an event, reserved
    /// a volume, started an operation), in the order they ran: [`Changes::with_steps`].
    pub steps: Vec<String>,
}

/// The virtual time since the run began: `+15s`, `+1.25s`.
fn elapsed(ms: u64) -> String {
    match ms % 1000 {
        0 => format!("+{}s", ms / 1000),
        frac => format!("+{}.{}s", ms / 1000, format!("{frac:03}").trim_end_matches('0')),
    }
}

impl Changes {
    /// The changes from the objects `before` (the input as loaded) to `after` (the output List's
    /// items, Events included).
    pub fn between(before: &[Value], after: &[Value]) -> Changes {
        let old: BTreeMap<Key, &Value> =
            before.iter().filter(|v| s(v, "/kind") != "Event").map(|v| (key(v), v)).collect();
        let mut c = Changes::default();
        let mut seen = std::collections::BTreeSet::new();
        let mut events: BTreeMap<(String, String), (u64, String)> = BTreeMap::new();
        for v in after {
            let k = key(v);
            if k.0 == "Event" {
                let e = events.entry((s(v, "/type").to_string(), s(v, "/reason").to_string())).or_default();
                e.0 += v.get("count").and_then(Value::as_u64).unwrap_or(1);
                if e.1.is_empty() {
                    let on = (
                        s(v, "/involvedObject/kind").to_string(),
                        s(v, "/involvedObject/namespace").to_string(),
                        s(v, "/involvedObject/name").to_string(),
                    );
                    e.1 = format!("first on {}: {}", label(&on), s(v, "/message"));
                }
                continue;
            }
            seen.insert(k.clone());
            let phase = s(v, "/status/phase");
            match old.get(&k) {
                None if k.0 == "PersistentVolume" => {
                    let claim = format!("{}/{}", s(v, "/spec/claimRef/namespace"), s(v, "/spec/claimRef/name"));
                    let class = s(v, "/spec/storageClassName");
                    c.provisioned.push(format!(
                        "{} ({}, class {}) for {claim}",
                        k.2,
                        s(v, "/spec/capacity/storage"),
                        if class.is_empty() { "\"\"" } else { class }
                    ));
                }
                None => c.created.push(label(&k)),
                Some(o) => {
                    let was = s(o, "/status/phase");
                    if was == phase {
                        continue;
                    }
                    if phase == "Bound" && k.0 == "PersistentVolumeClaim" {
                        c.bound.push(format!("{}/{} → {}", k.1, k.2, s(v, "/spec/volumeName")));
                    } else if phase != "Bound" {
                        c.phases.push(format!(
                            "{}: {} → {phase}",
                            label(&k),
                            if was.is_empty() { "(none)" } else { was }
                        ));
                    }
                }
            }
        }
        // A claim created and bound in the run (none today) would be in `created`.
        c.deleted = old.keys().filter(|k| !seen.contains(*k)).map(label).collect();
        c.events = events.into_iter().map(|((t, r), (n, first))| format!("{t} {r} ×{n}, {first}")).collect();
        c
    }

    /// These changes with the syncs of the run that acted (`synced`, as
    /// [`crate::Simulation::take_synced`] gives them): one line each, its virtual time, the
    /// object synced and its steps in order. Syncs that only looked, queued or settled, and the
    /// writes that changed nothing, are left out.
    pub fn with_steps(mut self, synced: &[SyncRecord]) -> Changes {
        let acted: Vec<&SyncRecord> = synced.iter().filter(|r| r.report.acted()).collect();
        let times: Vec<String> = acted.iter().map(|r| elapsed(r.elapsed_ms)).collect();
        let width = times.iter().map(String::len).max().unwrap_or(0);
        self.steps = acted.iter().zip(times).map(|(r, t)| format!("{t:<width$} {}", r.report)).collect();
        self
    }

    /// True when the run changed nothing, emitted no event and no sync acted.
    pub fn is_empty(&self) -> bool {
        *self == Changes::default()
    }

    /// The text form: a count line, then one heading and one line per change in each group that
    /// has any; then the steps, when there are any.
    pub fn to_text(&self) -> String {
        let mut out = self.groups_text();
        if !self.steps.is_empty() {
            out.push_str("\nSteps:\n");
            for line in &self.steps {
                out.push_str(&format!("  {line}\n"));
            }
        }
        out
    }

    /// The count line and the groups (not the steps).
    fn groups_text(&self) -> String {
        let groups: [(&str, &Vec<String>); 6] = [
            ("Bound", &self.bound),
            ("Provisioned", &self.provisioned),
            ("Created", &self.created),
            ("Phase changes", &self.phases),
            ("Deleted", &self.deleted),
            ("Events", &self.events),
        ];
        if groups.iter().all(|(_, v)| v.is_empty()) {
            return "No changes: the controller would leave this state as it is.\n".into();
        }
        let counts: Vec<String> = groups
            .iter()
            .filter(|(_, v)| !v.is_empty())
            .map(|(g, v)| format!("{} {}", v.len(), g.to_lowercase()))
            .collect();
        let mut out = format!("{}\n", counts.join(", "));
        for (g, v) in groups {
            if v.is_empty() {
                continue;
            }
            out.push_str(&format!("\n{g} ({}):\n", v.len()));
            for line in v {
                out.push_str(&format!("  {line}\n"));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_bind_a_provisioning_a_release_and_a_deletion_are_grouped() {
        let before = vec![
            json!({"kind": "PersistentVolumeClaim", "metadata": {"namespace": "demo", "name": "small"}, "status": {"phase": "Pending"}}),
            json!({"kind": "PersistentVolume", "metadata": {"name": "pv-5g"}, "status": {"phase": "Available"}}),
            json!({"kind": "PersistentVolume", "metadata": {"name": "pv-old"}, "status": {"phase": "Bound"}}),
            json!({"kind": "PersistentVolume", "metadata": {"name": "pv-gone"}, "status": {"phase": "Released"}}),
        ];
        let after = vec![
            json!({"kind": "PersistentVolumeClaim", "metadata": {"namespace": "demo", "name": "small"}, "spec": {"volumeName": "pv-5g"}, "status": {"phase": "Bound"}}),
            json!({"kind": "PersistentVolume", "metadata": {"name": "pv-5g"}, "status": {"phase": "Bound"}}),
            json!({"kind": "PersistentVolume", "metadata": {"name": "pv-old"}, "status": {"phase": "Released"}}),
            json!({"kind": "PersistentVolume", "metadata": {"name": "pvc-1"},
                   "spec": {"capacity": {"storage": "1Gi"}, "storageClassName": "standard", "claimRef": {"namespace": "demo", "name": "logs"}},
                   "status": {"phase": "Bound"}}),
            json!({"kind": "Event", "type": "Normal", "reason": "ProvisioningSucceeded", "count": 1, "message": "done",
                   "involvedObject": {"kind": "PersistentVolumeClaim", "namespace": "demo", "name": "logs"}}),
            json!({"kind": "Event", "type": "Normal", "reason": "ProvisioningSucceeded", "count": 2, "message": "done again",
                   "involvedObject": {"kind": "PersistentVolumeClaim", "namespace": "demo", "name": "x"}}),
        ];
        let c = Changes::between(&before, &after);
        assert_eq!(c.bound, ["demo/small → pv-5g"]);
        assert_eq!(c.provisioned, ["pvc-1 (1Gi, class standard) for demo/logs"]);
        assert_eq!(c.phases, ["PersistentVolume pv-old: Bound → Released"]);
        assert_eq!(c.deleted, ["PersistentVolume pv-gone"]);
        assert_eq!(c.events, ["Normal ProvisioningSucceeded ×3, first on PersistentVolumeClaim demo/logs: done"]);
        let text = c.to_text();
        assert!(text.starts_with("1 bound, 1 provisioned, 1 phase changes, 1 deleted, 1 events\n"), "{text}");
        assert!(text.contains("\nBound (1):\n  demo/small → pv-5g\n"), "{text}");
    }

    #[test]
    fn the_syncs_that_acted_follow_in_order_with_their_virtual_time() {
        use pv_core::steps::{Outcome, Reclaim, Step, SyncReport, Synced, Taken, VolumeStep};
        let sync = |ms: u64, how: Reclaim| SyncRecord {
            elapsed_ms: ms,
            at: crate::driver::default_start(),
            report: SyncReport {
                object: Synced::Volume("pv1".into()),
                volume: "pv1".into(),
                steps: vec![Taken { step: Step::Volume(VolumeStep::Reclaim(how)), outcome: Outcome::Done }],
            },
        };
        // A Retain does nothing: that sync is left out.
        let synced = [sync(0, Reclaim::Delete), sync(15_000, Reclaim::Retain), sync(31_250, Reclaim::Delete)];
        let c = Changes::default().with_steps(&synced);
        assert_eq!(c.steps, ["+0s     volume pv1: reclaim: Delete", "+31.25s volume pv1: reclaim: Delete"]);
        // Objects unchanged (a volume an external deleter owns): said, and the steps after.
        assert_eq!(
            c.to_text(),
            "No changes: the controller would leave this state as it is.\n\nSteps:\n  \
             +0s     volume pv1: reclaim: Delete\n  +31.25s volume pv1: reclaim: Delete\n"
        );
        assert!(!c.is_empty());
    }

    #[test]
    fn an_unchanged_state_says_so() {
        let v = vec![json!({"kind": "PersistentVolume", "metadata": {"name": "a"}, "status": {"phase": "Available"}})];
        let c = Changes::between(&v, &v);
        assert!(c.is_empty());
        assert!(c.to_text().starts_with("No changes"));
    }
}
