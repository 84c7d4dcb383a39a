//! The namespace sweep: a terminating namespace's contents deleted, then its `kubernetes`
//! finalizer lifted (the rules it follows are in [`crate::namespaces`]).

use super::content::Standing;
use super::{Part, Store};
use crate::error::StoreError;
use crate::namespaces::{is_terminating, FINALIZER};
use crate::Result;
use serde_json::{json, Value};
use std::sync::Arc;

impl Store {
    /// Moves a terminating namespace on, as kube-controller-manager's namespace controller
    /// does: deletes what is in it (objects with finalizers are marked and wait for their
    /// owners) and, once nothing is left, removes its `kubernetes` finalizer, which deletes it
    /// when no other finalizer holds it. Does nothing for a namespace that is not terminating.
    /// Returns true when the namespace is gone or no longer holds the finalizer.
    ///
    /// Cheap when there is nothing to do: whether anything is left, and whether anything was
    /// added since the last scan, come from the store's tally, not from a scan. The
    /// [`NamespaceFinisher`](crate::NamespaceFinisher) calls this whenever a write may have
    /// moved the namespace on.
    pub fn sweep_namespace(&self, ns: &str) -> Result<bool> {
        let namespace = match self.get("namespaces", "", ns) {
            Ok(n) => n.value(),
            Err(StoreError::NotFound { .. }) => return Ok(true),
            Err(e) => return Err(e),
        };
        if !is_terminating(&namespace) {
            return Ok(false);
        }
        loop {
            match self.standing(ns) {
                Standing::Empty => break,
                Standing::Held => return Ok(false),
                Standing::Unscanned { at } => {
                    self.delete_contents(ns)?;
                    self.mark_scanned(ns, at);
                }
            }
        }
        let mut fin = namespace;
        let list: Vec<Value> = fin
            .pointer("/spec/finalizers")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter(|f| *f != FINALIZER).cloned().collect())
            .unwrap_or_default();
        if fin.pointer("/spec/finalizers").is_none() && list.is_empty() {
            return Ok(true);
        }
        fin["spec"]["finalizers"] = Value::Array(list);
        fin["metadata"]["resourceVersion"] = json!("");
        match self.update_inner("namespaces", fin, Part::Finalize, false).and_then(|w| w.wait(self)) {
            Ok(_) | Err(StoreError::NotFound { .. }) => Ok(true),
            Err(e) => Err(e),
        }
    }

    /// Writes a namespace's `spec.finalizers` (the `finalize` subresource).
    pub fn finalize_namespace(&self, obj: Value, dry_run: bool) -> Result<Arc<Value>> {
        self.update_inner("namespaces", obj, Part::Finalize, dry_run)?.wait(self)
    }
}
