//! What only a PersistentVolume binder writes, and who wrote it.
//!
//! Two binders on one cluster fight: each takes claims the other is binding, and their events
//! carry the same source. A binder notices the other by the fields only a binder writes — the
//! bind annotations, a volume's `claimRef.uid`, the provisioner annotation of a claim — changing
//! in a write that was not its own, and names the writer from the object's `managedFields`.
//! A user pre-binding (a claim's `volumeName`, a volume's `claimRef` without a uid) or a
//! provisioner creating a volume touches none of these on update.

use crate::annotations::{BETA_STORAGE_PROVISIONER, BIND_COMPLETED, BOUND_BY_CONTROLLER, STORAGE_PROVISIONER};
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ManagedFieldsEntry, ObjectMeta, Time};

/// The field manager this project's writes carry.
pub const FIELD_MANAGER: &str = "pv-controller";

/// Writers that write binder-owned fields by design: kube-scheduler's volume binding pre-binds a
/// static volume to a WaitForFirstConsumer claim (`claimRef` with its uid,
/// `pv.kubernetes.io/bound-by-controller`), which the binder then completes.
pub const BINDING_PARTNERS: &[&str] = &["kube-scheduler"];

/// Whether a write of binder-owned fields by `manager` means a second binder.
pub fn is_foreign_binder(manager: &str) -> bool {
    !BINDING_PARTNERS.contains(&manager)
}

/// The binder-owned fields of an object, as (field, value) pairs; unset fields are absent.
pub type BinderFields = Vec<(&'static str, String)>;

fn annotations(meta: &ObjectMeta, keys: &[&'static str], out: &mut BinderFields) {
    if let Some(a) = &meta.annotations {
        for k in keys {
            if let Some(v) = a.get(*k) {
                out.push((k, v.clone()));
            }
        }
    }
}

/// A volume's binder-owned fields: `pv.kubernetes.io/bound-by-controller`, `spec.claimRef.uid`.
pub fn volume_binder_fields(pv: &PersistentVolume) -> BinderFields {
    let mut out = Vec::new();
    annotations(&pv.metadata, &[BOUND_BY_CONTROLLER], &mut out);
    if let Some(uid) = pv.spec.as_ref().and_then(|s| s.claim_ref.as_ref()).and_then(|r| r.uid.clone()) {
        out.push(("claimRef", uid));
    }
    out
}

/// A claim's binder-owned fields: the bind annotations and the provisioner annotations.
pub fn claim_binder_fields(pvc: &PersistentVolumeClaim) -> BinderFields {
    let mut out = Vec::new();
    annotations(
        &pvc.metadata,
        &[BIND_COMPLETED, BOUND_BY_CONTROLLER, STORAGE_PROVISIONER, BETA_STORAGE_PROVISIONER],
        &mut out,
    );
    out
}

/// The binder-owned fields that differ between two versions (set, changed or removed).
pub fn changed(old: &BinderFields, new: &BinderFields) -> Vec<&'static str> {
    let mut out: Vec<&'static str> = Vec::new();
    for (k, v) in new {
        if !old.iter().any(|(ok, ov)| ok == k && ov == v) && !out.contains(k) {
            out.push(k);
        }
    }
    for (k, _) in old {
        if !new.iter().any(|(nk, _)| nk == k) && !out.contains(k) {
            out.push(k);
        }
    }
    out
}

/// Every field name [`changed`] reports, in the order of [`Write::owns`]' bits.
const BINDER_FIELDS: [&str; 5] =
    [BOUND_BY_CONTROLLER, "claimRef", BIND_COMPLETED, STORAGE_PROVISIONER, BETA_STORAGE_PROVISIONER];

/// The bit of [`Write::owns`] for a binder-owned field (`claimRef`, an annotation key), if it is one.
pub fn binder_field_bit(field: &str) -> Option<u8> {
    BINDER_FIELDS.iter().position(|f| *f == field).map(|i| 1 << i)
}

/// The bit of [`Write::owns`] a key of a `fieldsV1` tree stands for: `f:<field>` for a
/// binder-owned field, else none (0). Both walks of a tree, decoded or streamed, use this.
pub fn fields_v1_key_bit(key: &str) -> u8 {
    key.strip_prefix("f:").and_then(binder_field_bit).unwrap_or(0)
}

/// What naming a writer needs of one `managedFields` entry: its manager, whether it is an
/// `Update`, its time, and which binder-owned fields its `fieldsV1` holds (`f:<field>` keys, a
/// bit each, [`binder_field_bit`]). A watch can decode this straight from the JSON, without the
/// tree of every field an object's writers own.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Write {
    /// The field manager.
    pub manager: Option<String>,
    /// Whether the operation was `Update` (not `Apply`).
    pub update: bool,
    /// When it last wrote.
    pub time: Option<Time>,
    /// The binder-owned fields it owns, as bits.
    pub owns: u8,
}

impl Write {
    /// The summary of one entry of an object's `managedFields`.
    pub fn of(entry: &ManagedFieldsEntry) -> Self {
        Write {
            manager: entry.manager.clone(),
            update: entry.operation.as_deref() == Some("Update"),
            time: entry.time.clone(),
            owns: entry.fields_v1.as_ref().map_or(0, |f| owned_fields(&f.0)),
        }
    }
}

/// The bits of the binder-owned fields named by `f:<field>` keys anywhere in a `fieldsV1` tree.
fn owned_fields(tree: &serde_json::Value) -> u8 {
    match tree {
        serde_json::Value::Object(m) => m.iter().fold(0, |bits, (k, v)| bits | fields_v1_key_bit(k) | owned_fields(v)),
        serde_json::Value::Array(a) => a.iter().fold(0, |bits, v| bits | owned_fields(v)),
        _ => 0,
    }
}

/// The summaries of an object's `managedFields` entries.
pub fn writers(meta: &ObjectMeta) -> Vec<Write> {
    meta.managed_fields.iter().flatten().map(Write::of).collect()
}

/// The manager of the latest `Update` among `writers` that owns one of `fields` (the
/// annotation key or `claimRef`), else of the latest `Update` at all.
pub fn last_writer(writers: &[Write], fields: &[&str]) -> Option<String> {
    let wanted = fields.iter().filter_map(|f| binder_field_bit(f)).fold(0, |bits, b| bits | b);
    let updates = writers.iter().filter(|w| w.update);
    let latest = |it: &mut dyn Iterator<Item = &Write>| {
        it.max_by_key(|w| w.time.as_ref().map(|t| t.0)).and_then(|w| w.manager.clone())
    };
    latest(&mut updates.clone().filter(|w| w.owns & wanted != 0)).or_else(|| latest(&mut updates.clone()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn claim(annotations: serde_json::Value, managed: serde_json::Value) -> PersistentVolumeClaim {
        serde_json::from_value(json!({
            "metadata": {"name": "c", "namespace": "ns", "annotations": annotations, "managedFields": managed},
            "spec": {}
        }))
        .unwrap()
    }

    #[test]
    fn a_bind_by_another_manager_is_seen_and_its_manager_named() {
        let old = claim(json!({}), json!([]));
        let new = claim(
            json!({BIND_COMPLETED: "yes", BOUND_BY_CONTROLLER: "yes"}),
            json!([
                {"manager": "kubectl-create", "operation": "Update", "time": "2026-01-01T00:00:00Z",
                 "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:resources": {}}}},
                {"manager": "kube-controller-manager", "operation": "Update", "time": "2026-01-01T00:00:05Z",
                 "fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": {"f:annotations": {"f:pv.kubernetes.io/bind-completed": {}}}}},
                {"manager": "kubectl-label", "operation": "Update", "time": "2026-01-01T00:00:09Z",
                 "fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": {"f:labels": {"f:x": {}}}}}
            ]),
        );
        let fields = changed(&claim_binder_fields(&old), &claim_binder_fields(&new));
        assert_eq!(fields, [BIND_COMPLETED, BOUND_BY_CONTROLLER]);
        assert_eq!(last_writer(&writers(&new.metadata), &fields).as_deref(), Some("kube-controller-manager"));
    }

    #[test]
    fn user_edits_and_unchanged_binder_fields_are_not_binder_writes() {
        let bound = claim(json!({BIND_COMPLETED: "yes"}), json!([]));
        let mut relabelled = bound.clone();
        relabelled.metadata.labels = Some([("a".to_string(), "b".to_string())].into());
        assert!(changed(&claim_binder_fields(&bound), &claim_binder_fields(&relabelled)).is_empty());
        let unbound = claim(json!({}), json!([]));
        assert_eq!(changed(&claim_binder_fields(&bound), &claim_binder_fields(&unbound)), [BIND_COMPLETED]);
        let pv: PersistentVolume = serde_json::from_value(json!({"metadata": {"name": "v"},
            "spec": {"claimRef": {"namespace": "ns", "name": "c"}}}))
        .unwrap();
        assert!(volume_binder_fields(&pv).is_empty(), "a pre-bind without a uid is a user's");
    }

    #[test]
    fn the_schedulers_pre_binding_is_not_a_second_binder() {
        assert!(!is_foreign_binder("kube-scheduler"));
        assert!(is_foreign_binder("kube-controller-manager"));
        assert!(is_foreign_binder(FIELD_MANAGER));
    }

    #[test]
    fn without_an_owner_of_the_fields_the_latest_update_is_named() {
        let c = claim(
            json!({}),
            json!([{"manager": "a", "operation": "Update", "time": "2026-01-01T00:00:01Z"},
                   {"manager": "b", "operation": "Update", "time": "2026-01-01T00:00:02Z"},
                   {"manager": "c", "operation": "Apply", "time": "2026-01-01T00:00:03Z"}]),
        );
        assert_eq!(last_writer(&writers(&c.metadata), &["claimRef"]).as_deref(), Some("b"));
    }
}
