//! Counters the controller keeps for `/metrics` (rendered by the runtime with upstream's names).
//!
//! Two kinds of operation timing, as upstream's binder has them:
//! - `storage_operation_duration_seconds` (operation `volume_provision` / `volume_delete`): how
//!   long the in-process plugin call took, by outcome ([`Metrics::observe`]).
//! - `volume_operation_total_seconds` (operation `provision` / `delete`): end to end, from the
//!   first sync that starts the operation to the moment it is done — provision: the claim is
//!   bound to its new volume; delete: the PV is gone from the API. External provisioners and
//!   deleters count too. Upstream keeps the start in an "operation timestamps" cache keyed by
//!   claim (`namespace/name`) or volume name; [`Metrics::operation_started`] and
//!   [`Metrics::operation_finished`] are that cache. A failure counts in
//!   `volume_operation_errors_total` (and its deprecated twin `volume_operation_total_errors`)
//!   and keeps the start, so the duration of an operation that succeeds later includes its
//!   failed attempts. The entry goes when the operation is done or its claim is deleted.
//!
//! Beside upstream's, this project's own (never renaming theirs):
//! - `pv_controller_claim_time_to_bound_seconds{path}`: from a claim's creation to the moment
//!   this controller marks it Bound, by how it got its volume: `static` (a volume that existed),
//!   `provisioned` (an in-tree plugin of this controller made it), `external` (an external
//!   provisioner made it) ([`Metrics::claim_bound`]);
//! - `pv_controller_pending_claims{reason}`: Pending claims by the reason `explain` gives, read
//!   from the controller's own plan at scrape time (`Controller::pending_claims`).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// Upper bounds (seconds) of upstream's storage operation histograms.
pub const OPERATION_BUCKETS: &[f64] = &[0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 15.0, 25.0, 50.0, 120.0, 300.0, 600.0];

/// Upper bounds (seconds) of `pv_controller_claim_time_to_bound_seconds`: from a tenth of a
/// second (a static bind) to a day (a claim that waited for someone to act).
pub const TIME_TO_BOUND_BUCKETS: &[f64] =
    &[0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0, 21600.0, 86400.0];

/// `path` of a claim bound to a volume that existed.
pub const PATH_STATIC: &str = "static";
/// `path` of a claim bound to a volume an in-tree plugin of this controller provisioned.
pub const PATH_PROVISIONED: &str = "provisioned";
/// `path` of a claim bound to a volume an external provisioner provisioned.
pub const PATH_EXTERNAL: &str = "external";

/// `operation_name` of the end-to-end provisioning metric.
pub const PROVISION: &str = "provision";
/// `operation_name` of the end-to-end deletion metric.
pub const DELETE: &str = "delete";
/// `operation_name` of `storage_operation_duration_seconds` for a plugin's provisioning call.
pub const PLUGIN_PROVISION: &str = "volume_provision";
/// `operation_name` of `storage_operation_duration_seconds` for a plugin's delete call.
pub const PLUGIN_DELETE: &str = "volume_delete";
/// Upstream's plugin name when none is known.
pub const NOT_AVAILABLE: &str = "N/A";

/// A histogram over fixed upper bounds ([`OPERATION_BUCKETS`] unless made with [`Histogram::with_bounds`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Histogram {
    /// Upper bounds; empty means [`OPERATION_BUCKETS`].
    pub bounds: Vec<f64>,
    /// Observations per bucket (not cumulative); one more than the bounds, for `+Inf`.
    pub buckets: Vec<u64>,
    /// Observations.
    pub count: u64,
    /// Sum of observed values.
    pub sum: f64,
}

impl Histogram {
    /// An empty histogram with these upper bounds.
    pub fn with_bounds(bounds: &[f64]) -> Self {
        Histogram { bounds: bounds.to_vec(), ..Default::default() }
    }

    /// The upper bounds.
    pub fn bounds(&self) -> &[f64] {
        if self.bounds.is_empty() {
            OPERATION_BUCKETS
        } else {
            &self.bounds
        }
    }

    /// Records one value.
    pub fn observe(&mut self, v: f64) {
        let n = self.bounds().len();
        if self.buckets.is_empty() {
            self.buckets = vec![0; n + 1];
        }
        let i = self.bounds().iter().position(|b| v <= *b).unwrap_or(n);
        self.buckets[i] += 1;
        self.count += 1;
        self.sum += v;
    }
}

/// What is known about one `(plugin, operation)` pair of plugin calls.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct OperationStats {
    /// Durations of successful calls.
    pub succeeded: Histogram,
    /// Durations of failed calls.
    pub failed: Histogram,
}

/// End-to-end statistics of one `(plugin, operation)` pair.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct EndToEnd {
    /// Durations of finished operations (`volume_operation_total_seconds`).
    pub seconds: Histogram,
    /// Failed attempts (`volume_operation_errors_total`).
    pub errors: u64,
}

#[derive(Clone, Debug)]
struct Started {
    plugin: String,
    operation: &'static str,
    at_ms: u64,
}

/// Operation counters and durations (see the module note).
#[derive(Default, Debug)]
pub struct Metrics {
    /// `retroactive_storageclass_total`.
    pub retroactive_storageclass_total: AtomicU64,
    /// `retroactive_storageclass_errors_total`.
    pub retroactive_storageclass_errors_total: AtomicU64,
    /// `(plugin, operation)` → durations of plugin calls, by outcome.
    pub operations: Mutex<HashMap<(String, &'static str), OperationStats>>,
    end_to_end: Mutex<HashMap<(String, &'static str), EndToEnd>>,
    started: Mutex<HashMap<String, Started>>,
    /// `pv_controller_foreign_binder_writes_total{manager}`: writes of binder-owned fields by
    /// another writer.
    foreign_binder_writes: Mutex<HashMap<String, u64>>,
    /// `pv_controller_claim_time_to_bound_seconds{path}`.
    time_to_bound: Mutex<HashMap<&'static str, Histogram>>,
}

fn plugin_label(plugin: &str) -> &str {
    if plugin.is_empty() {
        NOT_AVAILABLE
    } else {
        plugin
    }
}

impl Metrics {
    /// Counts a write of binder-owned fields by `manager`, another binder.
    pub fn foreign_binder_write(&self, manager: &str) {
        *self
            .foreign_binder_writes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(manager.to_string())
            .or_default() += 1;
    }

    /// `manager` → writes of binder-owned fields by it.
    pub fn foreign_binder_writes_snapshot(&self) -> Vec<(String, u64)> {
        let m = self.foreign_binder_writes.lock().unwrap_or_else(|e| e.into_inner());
        let mut v: Vec<(String, u64)> = m.iter().map(|(k, n)| (k.clone(), *n)).collect();
        v.sort();
        v
    }

    /// A claim was marked Bound `seconds` after its creation, by `path` ([`PATH_STATIC`],
    /// [`PATH_PROVISIONED`] or [`PATH_EXTERNAL`]).
    pub fn claim_bound(&self, path: &'static str, seconds: f64) {
        self.time_to_bound
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(path)
            .or_insert_with(|| Histogram::with_bounds(TIME_TO_BOUND_BUCKETS))
            .observe(seconds.max(0.0));
    }

    /// `path` → time from creation to Bound, sorted by path.
    pub fn time_to_bound_snapshot(&self) -> Vec<(&'static str, Histogram)> {
        let m = self.time_to_bound.lock().unwrap_or_else(|e| e.into_inner());
        let mut v: Vec<_> = m.iter().map(|(k, h)| (*k, h.clone())).collect();
        v.sort_by(|a, b| a.0.cmp(b.0));
        v
    }

    /// Records one finished plugin call (`storage_operation_duration_seconds`).
    pub fn observe(&self, plugin: &str, operation: &'static str, seconds: f64, failed: bool) {
        let mut m = self.operations.lock().unwrap_or_else(|e| e.into_inner());
        let e = m.entry((plugin_label(plugin).to_string(), operation)).or_default();
        if failed {
            e.failed.observe(seconds);
        } else {
            e.succeeded.observe(seconds);
        }
    }

    /// A copy of the plugin call statistics, sorted by plugin and operation.
    pub fn operations_snapshot(&self) -> Vec<((String, &'static str), OperationStats)> {
        let m = self.operations.lock().unwrap_or_else(|e| e.into_inner());
        let mut v: Vec<_> = m.iter().map(|(k, s)| (k.clone(), s.clone())).collect();
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v
    }

    /// Notes that operation `operation` on `key` (a claim's `namespace/name` or a volume's name)
    /// started at `now_ms`, unless it already had (upstream's `AddIfNotExist`).
    pub fn operation_started(&self, key: &str, plugin: &str, operation: &'static str, now_ms: u64) {
        let mut s = self.started.lock().unwrap_or_else(|e| e.into_inner());
        s.entry(key.to_string()).or_insert_with(|| Started {
            plugin: plugin_label(plugin).to_string(),
            operation,
            at_ms: now_ms,
        });
    }

    /// The operation on `key`, if one started, failed (`failed`) or is done at `now_ms`
    /// (upstream's `RecordMetric`): a failure counts an error and keeps the start; success
    /// observes the time since the start and forgets it. Nothing happens for an unknown key.
    pub fn operation_finished(&self, key: &str, now_ms: u64, failed: bool) {
        let mut s = self.started.lock().unwrap_or_else(|e| e.into_inner());
        let Some(st) = s.get(key).cloned() else {
            return;
        };
        if !failed {
            s.remove(key);
        }
        drop(s);
        let mut e = self.end_to_end.lock().unwrap_or_else(|e| e.into_inner());
        let entry = e.entry((st.plugin, st.operation)).or_default();
        if failed {
            entry.errors += 1;
        } else {
            entry.seconds.observe(now_ms.saturating_sub(st.at_ms) as f64 / 1000.0);
        }
    }

    /// Forgets an unfinished operation on `key` (its claim was deleted).
    pub fn operation_forgotten(&self, key: &str) {
        self.started.lock().unwrap_or_else(|e| e.into_inner()).remove(key);
    }

    /// Operations started and not yet done.
    pub fn operations_in_progress(&self) -> usize {
        self.started.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// A copy of the end-to-end statistics, sorted by plugin and operation.
    pub fn end_to_end_snapshot(&self) -> Vec<((String, &'static str), EndToEnd)> {
        let m = self.end_to_end.lock().unwrap_or_else(|e| e.into_inner());
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
    fn plugin_calls_fall_into_upstream_buckets_split_by_outcome() {
        let m = Metrics::default();
        m.observe("kubernetes.io/host-path", PLUGIN_PROVISION, 0.05, false);
        m.observe("kubernetes.io/host-path", PLUGIN_PROVISION, 700.0, false);
        m.observe("", PLUGIN_DELETE, 1.0, true);
        let s = m.operations_snapshot();
        assert_eq!(s[0].0, ("N/A".to_string(), PLUGIN_DELETE));
        assert_eq!(s[0].1.failed.count, 1);
        assert_eq!(s[0].1.failed.buckets[3], 1, "1.0 falls in the le=1 bucket");
        let p = &s[1].1.succeeded;
        assert_eq!((p.count, p.buckets[0], p.buckets[13]), (2, 1, 1));
    }

    #[test]
    fn an_operation_is_timed_from_its_first_start_to_done_and_failures_only_count() {
        let m = Metrics::default();
        m.operation_started("ns/c1", "example.com/ext", PROVISION, 1_000);
        m.operation_finished("ns/c1", 2_000, true);
        m.operation_started("ns/c1", "example.com/ext", PROVISION, 5_000); // not the first start
        m.operation_finished("ns/c1", 31_000, false);
        m.operation_finished("ns/c1", 40_000, false); // already recorded: nothing
        let s = m.end_to_end_snapshot();
        assert_eq!(s.len(), 1);
        assert_eq!(s[0].0, ("example.com/ext".to_string(), PROVISION));
        assert_eq!((s[0].1.errors, s[0].1.seconds.count, s[0].1.seconds.sum), (1, 1, 30.0));
        assert_eq!(m.operations_in_progress(), 0);
    }

    #[test]
    fn time_to_bound_is_kept_per_path_over_its_own_buckets() {
        let m = Metrics::default();
        m.claim_bound(PATH_STATIC, 0.2);
        m.claim_bound(PATH_EXTERNAL, 7200.0);
        m.claim_bound(PATH_EXTERNAL, 3.0);
        let s = m.time_to_bound_snapshot();
        assert_eq!(s.iter().map(|(p, _)| *p).collect::<Vec<_>>(), [PATH_EXTERNAL, PATH_STATIC]);
        let ext = &s[0].1;
        assert_eq!((ext.count, ext.sum), (2, 7203.0));
        assert_eq!(ext.bounds(), TIME_TO_BOUND_BUCKETS);
        assert_eq!(ext.buckets[4] + ext.buckets[5], 1, "3 s falls in the le=5 bucket");
        assert_eq!(ext.buckets[14], 1, "2 h falls in the le=21600 bucket");
    }

    #[test]
    fn a_deleted_claim_forgets_its_unfinished_operation() {
        let m = Metrics::default();
        m.operation_started("ns/c1", "", PROVISION, 0);
        m.operation_forgotten("ns/c1");
        m.operation_finished("ns/c1", 10, false);
        assert!(m.end_to_end_snapshot().is_empty());
    }
}
