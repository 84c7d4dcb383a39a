//! `/metrics` in the Prometheus text format, with upstream kube-controller-manager's metric names
//! and labels, so dashboards and alerts written for the upstream binder keep working.
//!
//! Why a hand-written encoder rather than a registry: every value already lives in the
//! controller (object counts are read from its caches at scrape time, exactly as upstream's
//! custom collector lists its informers; operation and queue counters are kept by pv-core), so
//! there is nothing to register — only a snapshot to print.

use crate::api::RequestCounts;
use pv_core::metrics::{Histogram, OPERATION_BUCKETS};
use pv_core::Controller;
use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::atomic::Ordering;

/// Content type of the Prometheus text exposition format.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// What `/metrics` reads from.
pub struct MetricsSource<'a> {
    /// The controller.
    pub controller: &'a Controller,
    /// Requests made through [`crate::KubeApi`], by method and code.
    pub requests: Option<&'a RequestCounts>,
    /// `Some(is_leader)` when leader election is on.
    pub leader: Option<bool>,
}

/// A text-format writer.
struct Out(String);

impl Out {
    fn header(&mut self, name: &str, kind: &str, help: &str) {
        let _ = writeln!(self.0, "# HELP {name} {help}");
        let _ = writeln!(self.0, "# TYPE {name} {kind}");
    }

    fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: f64) {
        self.0.push_str(name);
        if !labels.is_empty() {
            self.0.push('{');
            for (i, (k, v)) in labels.iter().enumerate() {
                if i > 0 {
                    self.0.push(',');
                }
                let _ = write!(self.0, "{k}=\"{}\"", escape(v));
            }
            self.0.push('}');
        }
        let _ = writeln!(self.0, " {value}");
    }

    /// A histogram with upstream's operation buckets.
    fn histogram(&mut self, name: &str, labels: &[(&str, &str)], h: &Histogram) {
        let mut cumulative = 0;
        let bucket = format!("{name}_bucket");
        for (i, bound) in OPERATION_BUCKETS.iter().enumerate() {
            cumulative += h.buckets.get(i).copied().unwrap_or(0);
            let le = bound.to_string();
            let mut l = labels.to_vec();
            l.push(("le", &le));
            self.sample(&bucket, &l, cumulative as f64);
        }
        let mut l = labels.to_vec();
        l.push(("le", "+Inf"));
        self.sample(&bucket, &l, h.count as f64);
        self.sample(&format!("{name}_sum"), labels, h.sum);
        self.sample(&format!("{name}_count"), labels, h.count as f64);
    }
}

fn escape(v: &str) -> String {
    v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

/// Renders every metric.
pub fn render(src: &MetricsSource<'_>) -> String {
    let mut out = Out(String::new());
    collector_counts(&mut out, src.controller);
    operations(&mut out, src.controller);
    workqueues(&mut out, src.controller);
    if let Some(r) = src.requests {
        let snapshot = r.snapshot();
        out.header(
            "rest_client_requests_total",
            "counter",
            "Number of HTTP requests, partitioned by status code, method, and host.",
        );
        for ((method, code), n) in snapshot.counts {
            let labels = [("code", code.as_str()), ("host", snapshot.host.as_str()), ("method", method)];
            out.sample("rest_client_requests_total", &labels, n as f64);
        }
    }
    if let Some(leader) = src.leader {
        out.header(
            "leader_election_master_status",
            "gauge",
            "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates master. 'name' is the string used to identify the lease. Please make sure to group by name.",
        );
        let v = if leader { 1.0 } else { 0.0 };
        out.sample("leader_election_master_status", &[("name", "pv-controller")], v);
    }
    out.0
}

fn sorted<K: Ord, V>(m: std::collections::HashMap<K, V>) -> BTreeMap<K, V> {
    m.into_iter().collect()
}

fn collector_counts(out: &mut Out, c: &Controller) {
    let counts = c.collect_counts();
    out.header(
        "pv_collector_bound_pv_count",
        "gauge",
        "[ALPHA] Gauge measuring number of persistent volume currently bound",
    );
    for (class, n) in sorted(counts.bound_pv) {
        out.sample("pv_collector_bound_pv_count", &[("storage_class", &class)], n as f64);
    }
    out.header(
        "pv_collector_unbound_pv_count",
        "gauge",
        "[ALPHA] Gauge measuring number of persistent volume currently unbound",
    );
    for (class, n) in sorted(counts.unbound_pv) {
        out.sample("pv_collector_unbound_pv_count", &[("storage_class", &class)], n as f64);
    }
    for (name, help, m) in [
        (
            "pv_collector_bound_pvc_count",
            "[ALPHA] Gauge measuring number of persistent volume claim currently bound",
            counts.bound_pvc,
        ),
        (
            "pv_collector_unbound_pvc_count",
            "[ALPHA] Gauge measuring number of persistent volume claim currently unbound",
            counts.unbound_pvc,
        ),
    ] {
        out.header(name, "gauge", help);
        for ((ns, class, vac), n) in sorted(m) {
            let labels = [
                ("namespace", ns.as_str()),
                ("storage_class", class.as_str()),
                ("volume_attributes_class", vac.as_str()),
            ];
            out.sample(name, &labels, n as f64);
        }
    }
    out.header("pv_collector_total_pv_count", "gauge", "[ALPHA] Gauge measuring total number of persistent volumes");
    for ((plugin, mode), n) in sorted(counts.total_pv) {
        let labels = [("plugin_name", plugin.as_str()), ("volume_mode", mode.as_str())];
        out.sample("pv_collector_total_pv_count", &labels, n as f64);
    }
}

fn operations(out: &mut Out, c: &Controller) {
    let m = &c.metrics;
    let ops = m.operations_snapshot();
    out.header(
        "volume_operation_total_seconds",
        "histogram",
        "[ALPHA] Storage operation end to end duration in seconds",
    );
    for ((plugin, op), s) in &ops {
        let labels = [("operation_name", *op), ("plugin_name", plugin.as_str())];
        out.histogram("volume_operation_total_seconds", &labels, &s.succeeded);
    }
    out.header("volume_operation_total_errors", "counter", "[ALPHA] Total volume operation errors");
    for ((plugin, op), s) in &ops {
        let labels = [("operation_name", *op), ("plugin_name", plugin.as_str())];
        out.sample("volume_operation_total_errors", &labels, s.failed.count as f64);
    }
    out.header("storage_operation_duration_seconds", "histogram", "[ALPHA] Storage operation duration");
    for ((plugin, op), s) in &ops {
        for (status, h) in [("success", &s.succeeded), ("fail-unknown", &s.failed)] {
            if h.count == 0 {
                continue;
            }
            let labels = [
                ("migrated", "false"),
                ("operation_name", *op),
                ("status", status),
                ("volume_plugin", plugin.as_str()),
            ];
            out.histogram("storage_operation_duration_seconds", &labels, h);
        }
    }
    out.header(
        "retroactive_storageclass_total",
        "counter",
        "[ALPHA] Total number of retroactive StorageClass assignments to persistent volume claim",
    );
    let total = m.retroactive_storageclass_total.load(Ordering::Relaxed);
    out.sample("retroactive_storageclass_total", &[], total as f64);
    out.header(
        "retroactive_storageclass_errors_total",
        "counter",
        "[ALPHA] Total number of failed retroactive StorageClass assignments to persistent volume claim",
    );
    let errors = m.retroactive_storageclass_errors_total.load(Ordering::Relaxed);
    out.sample("retroactive_storageclass_errors_total", &[], errors as f64);
}

fn workqueues(out: &mut Out, c: &Controller) {
    let queues = [&c.volume_queue, &c.claim_queue];
    out.header("workqueue_depth", "gauge", "[STABLE] Current depth of workqueue");
    for q in queues {
        out.sample("workqueue_depth", &[("name", q.name())], q.len() as f64);
    }
    out.header("workqueue_adds_total", "counter", "[STABLE] Total number of adds handled by workqueue");
    for q in queues {
        let n = q.stats.adds.load(Ordering::Relaxed);
        out.sample("workqueue_adds_total", &[("name", q.name())], n as f64);
    }
    out.header("workqueue_retries_total", "counter", "[STABLE] Total number of retries handled by workqueue");
    for q in queues {
        let n = q.stats.retries.load(Ordering::Relaxed);
        out.sample("workqueue_retries_total", &[("name", q.name())], n as f64);
    }
    out.header(
        "workqueue_queue_duration_seconds",
        "histogram",
        "[STABLE] How long in seconds an item stays in workqueue before being requested.",
    );
    for q in queues {
        // pv-core keeps the sum and count only, so the histogram has just the +Inf bucket.
        let gets = q.stats.gets.load(Ordering::Relaxed) as f64;
        let sum = q.stats.wait_ms_sum.load(Ordering::Relaxed) as f64 / 1000.0;
        let name = q.name();
        out.sample("workqueue_queue_duration_seconds_bucket", &[("name", name), ("le", "+Inf")], gets);
        out.sample("workqueue_queue_duration_seconds_sum", &[("name", name)], sum);
        out.sample("workqueue_queue_duration_seconds_count", &[("name", name)], gets);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_are_escaped() {
        let mut o = Out(String::new());
        o.sample("m", &[("a", "x\"y\\z\n")], 1.0);
        assert_eq!(o.0, "m{a=\"x\\\"y\\\\z\\n\"} 1\n");
    }

    #[test]
    fn histograms_are_cumulative_and_end_with_inf() {
        let mut h = Histogram::default();
        h.observe(0.2);
        h.observe(3.0);
        let mut o = Out(String::new());
        o.histogram("h", &[("k", "v")], &h);
        assert!(o.0.contains("h_bucket{k=\"v\",le=\"0.1\"} 0\n"), "{}", o.0);
        assert!(o.0.contains("h_bucket{k=\"v\",le=\"0.25\"} 1\n"));
        assert!(o.0.contains("h_bucket{k=\"v\",le=\"5\"} 2\n"));
        assert!(o.0.contains("h_bucket{k=\"v\",le=\"+Inf\"} 2\n"));
        assert!(o.0.contains("h_count{k=\"v\"} 2\n"));
    }
}
