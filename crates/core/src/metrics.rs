//! Counters the controller keeps for `/metrics` (rendered by the runtime with upstream's names).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// Operation counters and durations, labelled like upstream's `volume_operation_total_*` and
/// `storage_operation_duration_seconds` (by plugin name and operation).
#[derive(Default, Debug)]
pub struct Metrics {
    /// `retroactive_storageclass_total`.
    pub retroactive_storageclass_total: AtomicU64,
    /// `retroactive_storageclass_errors_total`.
    pub retroactive_storageclass_errors_total: AtomicU64,
    /// `(plugin, operation)` → (count, sum of seconds, errors).
    pub operations: Mutex<HashMap<(String, &'static str), (u64, f64, u64)>>,
}

impl Metrics {
    /// Records one finished operation.
    pub fn observe(&self, plugin: &str, operation: &'static str, seconds: f64, failed: bool) {
        let mut m = self.operations.lock().unwrap();
        let e = m.entry((plugin.to_string(), operation)).or_default();
        e.0 += 1;
        e.1 += seconds;
        if failed {
            e.2 += 1;
        }
    }

    /// Records a retroactive default-class assignment.
    pub fn retroactive(&self, ok: bool) {
        if ok {
            self.retroactive_storageclass_total
                .fetch_add(1, Ordering::Relaxed);
        } else {
            self.retroactive_storageclass_errors_total
                .fetch_add(1, Ordering::Relaxed);
        }
    }
}
