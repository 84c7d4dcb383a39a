//! Counters the controller keeps for `/metrics` (rendered by the runtime with upstream's names).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// Upper bounds (seconds) of upstream's storage operation histograms.
pub const OPERATION_BUCKETS: &[f64] = &[0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 15.0, 25.0, 50.0, 120.0, 300.0, 600.0];

/// A histogram over [`OPERATION_BUCKETS`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Histogram {
    /// Observations per bucket (not cumulative); one more than the bounds, for `+Inf`.
    pub buckets: Vec<u64>,
    /// Observations.
    pub count: u64,
    /// Sum of observed values.
    pub sum: f64,
}

impl Histogram {
    /// Records one value.
    pub fn observe(&mut self, v: f64) {
        if self.buckets.is_empty() {
            self.buckets = vec![0; OPERATION_BUCKETS.len() + 1];
        }
        let i = OPERATION_BUCKETS.iter().position(|b| v <= *b).unwrap_or(OPERATION_BUCKETS.len());
        self.buckets[i] += 1;
        self.count += 1;
        self.sum += v;
    }
}

/// What is known about one `(plugin, operation)` pair.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct OperationStats {
    /// Durations of successful operations (`volume_operation_total_seconds`).
    pub succeeded: Histogram,
    /// Durations of failed operations.
    pub failed: Histogram,
}

/// Operation counters and durations, labelled like upstream's `volume_operation_total_*` and
/// `storage_operation_duration_seconds` (by plugin name and operation).
#[derive(Default, Debug)]
pub struct Metrics {
    /// `retroactive_storageclass_total`.
    pub retroactive_storageclass_total: AtomicU64,
    /// `retroactive_storageclass_errors_total`.
    pub retroactive_storageclass_errors_total: AtomicU64,
    /// `(plugin, operation)` → durations of successes and failures.
    pub operations: Mutex<HashMap<(String, &'static str), OperationStats>>,
}

impl Metrics {
    /// Records one finished operation.
    pub fn observe(&self, plugin: &str, operation: &'static str, seconds: f64, failed: bool) {
        let plugin = if plugin.is_empty() { "N/A" } else { plugin };
        let mut m = self.operations.lock().unwrap_or_else(|e| e.into_inner());
        let e = m.entry((plugin.to_string(), operation)).or_default();
        if failed {
            e.failed.observe(seconds);
        } else {
            e.succeeded.observe(seconds);
        }
    }

    /// A copy of the operation statistics, sorted by plugin and operation.
    pub fn operations_snapshot(&self) -> Vec<((String, &'static str), OperationStats)> {
        let m = self.operations.lock().unwrap_or_else(|e| e.into_inner());
        let mut v: Vec<_> = m.iter().map(|(k, s)| (k.clone(), s.clone())).collect();
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v
    }

    /// Records a retroactive default-class assignment. As upstream, a failure counts in both
    /// the total and the errors.
    pub fn retroactive(&self, ok: bool) {
        self.retroactive_storageclass_total.fetch_add(1, Ordering::Relaxed);
        if !ok {
            self.retroactive_storageclass_errors_total.fetch_add(1, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operations_fall_into_upstream_buckets_split_by_outcome() {
        let m = Metrics::default();
        m.observe("kubernetes.io/host-path", "volume_provision", 0.05, false);
        m.observe("kubernetes.io/host-path", "volume_provision", 700.0, false);
        m.observe("", "volume_delete", 1.0, true);
        let s = m.operations_snapshot();
        assert_eq!(s[0].0, ("N/A".to_string(), "volume_delete"));
        assert_eq!(s[0].1.failed.count, 1);
        assert_eq!(s[0].1.failed.buckets[3], 1, "1.0 falls in the le=1 bucket");
        let p = &s[1].1.succeeded;
        assert_eq!((p.count, p.buckets[0], p.buckets[13]), (2, 1, 1));
    }
}
