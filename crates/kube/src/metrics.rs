//! `/metrics` in the Prometheus text format, with upstream kube-controller-manager's metric names
//! and labels, so dashboards and alerts written for the upstream binder keep working.
//!
//! Why a hand-written encoder rather than a registry: every value already lives in the
//! controller (object counts are read from its caches at scrape time, exactly as upstream's
//! custom collector lists its informers; operation and queue counters are kept by pv-core), so
//! there is nothing to register — only a snapshot to print.

use crate::api::RequestCounts;
use pv_core::metrics::Histogram;
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
    /// Shadow mode's judged decisions, when it runs.
    pub shadow: Option<&'a crate::shadow::Shadow>,
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

    /// A histogram with its buckets (`le` last among the labels, as Prometheus' client writes).
    fn histogram(&mut self, name: &str, labels: &[(&str, &str)], h: &Histogram) {
        let mut cumulative = 0;
        let bucket = format!("{name}_bucket");
        for (i, bound) in h.bounds().iter().enumerate() {
            cumulative += h.buckets.get(i).copied().unwrap_or(0);
            let le = format_float(*bound);
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

/// A float as Go's `strconv.FormatFloat(f, 'g', -1, 64)` writes bucket bounds (`1e-08`, `0.1`, `10`).
fn format_float(f: f64) -> String {
    if f != 0.0 && (f.abs() < 1e-4 || f.abs() >= 1e6) {
        let s = format!("{f:e}");
        let (m, e) = s.split_once('e').unwrap_or((&s, "0"));
        let e: i32 = e.parse().unwrap_or(0);
        format!("{m}e{}{:02}", if e < 0 { '-' } else { '+' }, e.abs())
    } else {
        f.to_string()
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
    if let Some(s) = src.shadow {
        out.header(
            "pv_controller_shadow_decisions_total",
            "counter",
            "Decisions of pv-controller in shadow mode compared with the binder in charge, by result (agree, equivalent, differ) and kind.",
        );
        for (result, kind, n) in s.counts() {
            out.sample("pv_controller_shadow_decisions_total", &[("kind", kind), ("result", result)], n as f64);
        }
        out.header(
            "pv_controller_shadow_pending",
            "gauge",
            "Decisions of pv-controller in shadow mode not judged yet.",
        );
        out.sample("pv_controller_shadow_pending", &[], s.pending() as f64);
    }
    out.0
}

fn sorted<K: Ord, V>(m: std::collections::HashMap<K, V>) -> BTreeMap<K, V> {
    m.into_iter().collect()
}

fn collector_counts(out: &mut Out, c: &Controller) {
    let counts = c.caches().collect_counts();
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
    let e2e = m.end_to_end_snapshot();
    out.header(
        "volume_operation_total_seconds",
        "histogram",
        "[BETA] Storage operation end to end duration in seconds",
    );
    for ((plugin, op), s) in &e2e {
        if s.seconds.count > 0 {
            let labels = [("operation_name", *op), ("plugin_name", plugin.as_str())];
            out.histogram("volume_operation_total_seconds", &labels, &s.seconds);
        }
    }
    // Its deprecated twin `volume_operation_total_errors` (since 1.36) is hidden in 1.37, as
    // kube-controller-manager hides deprecated alpha metrics one release on.
    {
        let (name, help) = ("volume_operation_errors_total", "[ALPHA] Total volume operation errors");
        out.header(name, "counter", help);
        for ((plugin, op), s) in &e2e {
            if s.errors > 0 {
                let labels = [("operation_name", *op), ("plugin_name", plugin.as_str())];
                out.sample(name, &labels, s.errors as f64);
            }
        }
    }
    out.header("storage_operation_duration_seconds", "histogram", "[BETA] Storage operation duration");
    for ((plugin, op), s) in &m.operations_snapshot() {
        for (status, h) in [("fail-unknown", &s.failed), ("success", &s.succeeded)] {
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
    // This project's, beside upstream's: a second binder noticed (see pv_kube::foreign).
    let name = "pv_controller_foreign_binder_writes_total";
    out.header(
        name,
        "counter",
        "Writes of fields only a PersistentVolume binder writes, made by another binder, by field manager",
    );
    for (manager, n) in m.foreign_binder_writes_snapshot() {
        out.sample(name, &[("manager", manager.as_str())], n as f64);
    }
    let name = "pv_controller_claim_time_to_bound_seconds";
    out.header(
        name,
        "histogram",
        "Time from a persistent volume claim's creation to Bound, by path: static (an existing volume), \
         provisioned (by an in-tree plugin), external (by an external provisioner)",
    );
    for (path, h) in m.time_to_bound_snapshot() {
        out.histogram(name, &[("path", path)], &h);
    }
    let name = "pv_controller_pending_claims";
    out.header(
        name,
        "gauge",
        "Pending persistent volume claims by the reason `pv-controller explain` gives (its next step, or what stops the claim)",
    );
    for (reason, n) in c.caches().pending_claims() {
        out.sample(name, &[("reason", reason)], n as f64);
    }
}

/// A metric of a queue: name, help text and how to read it from the queue's metrics.
type QueueMetric<T> = (&'static str, &'static str, fn(&pv_core::queue::QueueMetrics) -> T);
/// How to read one histogram from a queue's metrics.
type HistogramOf = fn(&pv_core::queue::QueueMetrics) -> &Histogram;

/// client-go's workqueue metrics (component-base's provider: names, `name` label, buckets).
fn workqueues(out: &mut Out, c: &Controller) {
    let queues = [(c.volume_queue.name(), c.volume_queue.metrics()), (c.claim_queue.name(), c.claim_queue.metrics())];
    let gauges: [QueueMetric<f64>; 3] = [
        ("workqueue_depth", "[BETA] Current depth of workqueue", |m| m.depth as f64),
        (
            "workqueue_longest_running_processor_seconds",
            "[BETA] How many seconds has the longest running processor for workqueue been running.",
            |m| m.longest_running_processor_seconds,
        ),
        (
            "workqueue_unfinished_work_seconds",
            "[BETA] How many seconds of work has done that is in progress and hasn't been observed by work_duration. Large values indicate stuck threads. One can deduce the number of stuck threads by observing the rate at which this increases.",
            |m| m.unfinished_work_seconds,
        ),
    ];
    let counters: [QueueMetric<f64>; 2] = [
        ("workqueue_adds_total", "[BETA] Total number of adds handled by workqueue", |m| m.adds as f64),
        ("workqueue_retries_total", "[BETA] Total number of retries handled by workqueue", |m| m.retries as f64),
    ];
    for (name, help, value) in counters {
        out.header(name, "counter", help);
        for (q, m) in &queues {
            out.sample(name, &[("name", q)], value(m));
        }
    }
    for (name, help, value) in gauges {
        out.header(name, "gauge", help);
        for (q, m) in &queues {
            out.sample(name, &[("name", q)], value(m));
        }
    }
    let histograms: [(&str, &str, HistogramOf); 2] = [
        (
            "workqueue_queue_duration_seconds",
            "[BETA] How long in seconds an item stays in workqueue before being requested.",
            |m| &m.queue_duration,
        ),
        (
            "workqueue_work_duration_seconds",
            "[BETA] How long in seconds processing an item from workqueue takes.",
            |m| &m.work_duration,
        ),
    ];
    for (name, help, value) in histograms {
        out.header(name, "histogram", help);
        for (q, m) in &queues {
            out.histogram(name, &[("name", q)], value(m));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pv_core::ApiError;
    use pv_model::k8s::{Event, PersistentVolume, PersistentVolumeClaim};
    use std::sync::Arc;

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

    /// Every call fails: the metrics need no API.
    struct NoApi;

    #[async_trait::async_trait]
    impl pv_core::ClusterApi for NoApi {
        async fn get_volume(&self, _: &str) -> Result<PersistentVolume, ApiError> {
            Err(ApiError::other("none"))
        }
        async fn create_volume(&self, _: &PersistentVolume) -> Result<PersistentVolume, ApiError> {
            Err(ApiError::other("none"))
        }
        async fn update_volume(&self, _: &PersistentVolume) -> Result<PersistentVolume, ApiError> {
            Err(ApiError::other("none"))
        }
        async fn update_volume_status(&self, _: &PersistentVolume) -> Result<PersistentVolume, ApiError> {
            Err(ApiError::other("none"))
        }
        async fn delete_volume(&self, _: &str) -> Result<(), ApiError> {
            Err(ApiError::other("none"))
        }
        async fn get_claim(&self, _: &str, _: &str) -> Result<PersistentVolumeClaim, ApiError> {
            Err(ApiError::other("none"))
        }
        async fn update_claim(&self, _: &PersistentVolumeClaim) -> Result<PersistentVolumeClaim, ApiError> {
            Err(ApiError::other("none"))
        }
        async fn update_claim_status(&self, _: &PersistentVolumeClaim) -> Result<PersistentVolumeClaim, ApiError> {
            Err(ApiError::other("none"))
        }
        async fn create_event(&self, _: &Event) -> Result<Event, ApiError> {
            Err(ApiError::other("none"))
        }
        async fn update_event(&self, _: &Event) -> Result<Event, ApiError> {
            Err(ApiError::other("none"))
        }
        async fn list_pods(&self, _: &str) -> Result<Vec<k8s_openapi::api::core::v1::Pod>, ApiError> {
            Err(ApiError::other("none"))
        }
    }

    /// Upstream's definitions (kubernetes 1.37: pkg/controller/volume/persistentvolume/metrics,
    /// pkg/volume/util/metrics.go, component-base's workqueue provider): name, type, help with
    /// stability level, label names in the order Prometheus writes them, bucket bounds.
    type Definition = (&'static str, &'static str, &'static str, &'static [&'static str], &'static [f64]);
    const UPSTREAM: &[Definition] = &[
        ("pv_collector_bound_pv_count", "gauge", "[ALPHA] Gauge measuring number of persistent volume currently bound", &["storage_class"], &[]),
        ("pv_collector_unbound_pv_count", "gauge", "[ALPHA] Gauge measuring number of persistent volume currently unbound", &["storage_class"], &[]),
        ("pv_collector_bound_pvc_count", "gauge", "[ALPHA] Gauge measuring number of persistent volume claim currently bound", &["namespace", "storage_class", "volume_attributes_class"], &[]),
        ("pv_collector_unbound_pvc_count", "gauge", "[ALPHA] Gauge measuring number of persistent volume claim currently unbound", &["namespace", "storage_class", "volume_attributes_class"], &[]),
        ("pv_collector_total_pv_count", "gauge", "[ALPHA] Gauge measuring total number of persistent volumes", &["plugin_name", "volume_mode"], &[]),
        ("volume_operation_total_seconds", "histogram", "[BETA] Storage operation end to end duration in seconds", &["operation_name", "plugin_name"], &[0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 15.0, 25.0, 50.0, 120.0, 300.0, 600.0]),
        ("volume_operation_errors_total", "counter", "[ALPHA] Total volume operation errors", &["operation_name", "plugin_name"], &[]),
        ("storage_operation_duration_seconds", "histogram", "[BETA] Storage operation duration", &["migrated", "operation_name", "status", "volume_plugin"], &[0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 15.0, 25.0, 50.0, 120.0, 300.0, 600.0]),
        ("retroactive_storageclass_total", "counter", "[ALPHA] Total number of retroactive StorageClass assignments to persistent volume claim", &[], &[]),
        ("retroactive_storageclass_errors_total", "counter", "[ALPHA] Total number of failed retroactive StorageClass assignments to persistent volume claim", &[], &[]),
        ("workqueue_depth", "gauge", "[BETA] Current depth of workqueue", &["name"], &[]),
        ("workqueue_adds_total", "counter", "[BETA] Total number of adds handled by workqueue", &["name"], &[]),
        ("workqueue_queue_duration_seconds", "histogram", "[BETA] How long in seconds an item stays in workqueue before being requested.", &["name"], &[1e-8, 1e-7, 1e-6, 9.999999999999999e-6, 9.999999999999999e-5, 0.001, 0.01, 0.1, 1.0, 10.0]),
        ("workqueue_work_duration_seconds", "histogram", "[BETA] How long in seconds processing an item from workqueue takes.", &["name"], &[1e-8, 1e-7, 1e-6, 9.999999999999999e-6, 9.999999999999999e-5, 0.001, 0.01, 0.1, 1.0, 10.0]),
        ("workqueue_unfinished_work_seconds", "gauge", "[BETA] How many seconds of work has done that is in progress and hasn't been observed by work_duration. Large values indicate stuck threads. One can deduce the number of stuck threads by observing the rate at which this increases.", &["name"], &[]),
        ("workqueue_longest_running_processor_seconds", "gauge", "[BETA] How many seconds has the longest running processor for workqueue been running.", &["name"], &[]),
        ("workqueue_retries_total", "counter", "[BETA] Total number of retries handled by workqueue", &["name"], &[]),
    ];

    fn volume(name: &str, source: serde_json::Value, class: &str, beta: Option<&str>, phase: &str) -> PersistentVolume {
        let mut spec = serde_json::json!({"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
            "storageClassName": class, "volumeMode": "Filesystem"});
        spec.as_object_mut().unwrap().extend(source.as_object().unwrap().clone());
        let annotations = beta.map(|b| serde_json::json!({"volume.beta.kubernetes.io/storage-class": b}));
        serde_json::from_value(
            serde_json::json!({"metadata": {"name": name, "resourceVersion": "1", "annotations": annotations},
            "spec": spec, "status": {"phase": phase}}),
        )
        .unwrap()
    }

    #[test]
    fn metrics_have_upstreams_names_types_help_labels_buckets_and_label_values() {
        use pv_core::{Config, Controller, ObjectEvent, PluginRegistry, SystemClock};
        let c = Controller::new(Arc::new(NoApi), PluginRegistry::new(), SystemClock::new(), Config::default());
        use serde_json::json;
        let csi = json!({"csi": {"driver": "csi.example.com", "volumeHandle": "h"}});
        c.on_volume(ObjectEvent::Applied(volume("csi", csi, "fast", None, "Available")));
        let local = json!({"local": {"path": "/mnt"}});
        c.on_volume(ObjectEvent::Applied(volume("local", local, "fast", None, "Bound")));
        let nfs = json!({"nfs": {"server": "s", "path": "/p"}});
        c.on_volume(ObjectEvent::Applied(volume("nfs", nfs, "fast", Some("beta"), "Available")));
        let hp = json!({"hostPath": {"path": "/tmp/x"}});
        c.on_volume(ObjectEvent::Applied(volume("hp", hp, "", None, "Available")));
        let claim: PersistentVolumeClaim = serde_json::from_value(json!({"metadata": {"name": "c", "namespace": "ns",
            "resourceVersion": "1", "annotations": {"volume.beta.kubernetes.io/storage-class": "beta"}},
            "spec": {"storageClassName": "fast"}, "status": {"phase": "Pending"}}))
        .unwrap();
        c.on_claim(ObjectEvent::Applied(claim));
        let bound: PersistentVolumeClaim = serde_json::from_value(json!({"metadata": {"name": "b", "namespace": "ns",
            "resourceVersion": "1"}, "spec": {"storageClassName": "fast", "volumeName": "local"},
            "status": {"phase": "Bound"}}))
        .unwrap();
        c.on_claim(ObjectEvent::Applied(bound));
        c.metrics.operation_started("ns/c", "example.com/ext", pv_core::metrics::PROVISION, 0);
        c.metrics.operation_finished("ns/c", 0, true);
        c.metrics.operation_finished("ns/c", 2_000, false);
        c.metrics.observe("kubernetes.io/host-path", pv_core::metrics::PLUGIN_DELETE, 0.2, false);
        c.metrics.retroactive(true);
        c.metrics.foreign_binder_write("kube-controller-manager");
        c.metrics.claim_bound(pv_core::metrics::PATH_STATIC, 1.5);
        let text = render(&MetricsSource { controller: &c, requests: None, leader: None, shadow: None });

        for (name, kind, help, labels, buckets) in UPSTREAM {
            assert!(text.contains(&format!("# HELP {name} {help}\n# TYPE {name} {kind}\n")), "{name}:\n{text}");
            let first = text
                .lines()
                .find(|l| {
                    l.starts_with(&format!("{name}{{"))
                        || l.starts_with(&format!("{name}_bucket{{"))
                        || l.starts_with(&format!("{name} "))
                })
                .unwrap_or_else(|| panic!("no sample of {name}"));
            let names: Vec<&str> = first
                .split(['{', ','])
                .skip(1)
                .filter_map(|p| p.split_once('=').map(|x| x.0))
                .filter(|l| *l != "le")
                .collect();
            assert_eq!(&names, labels, "label names of {name}");
            if !buckets.is_empty() {
                let prefix = format!("{name}_bucket{{{}=", labels[0]);
                let les: Vec<f64> = text
                    .lines()
                    .filter(|l| l.starts_with(&prefix))
                    .take(buckets.len())
                    .map(|l| l.split("le=\"").nth(1).unwrap().split('"').next().unwrap().parse().unwrap())
                    .collect();
                assert_eq!(&les, buckets, "buckets of {name}");
            }
        }
        assert!(!text.contains("volume_operation_total_errors"), "hidden in 1.37 (deprecated in 1.36)");
        for sample in [
            // Classes: a PV's from its spec, a claim's from the beta annotation first.
            "pv_collector_unbound_pv_count{storage_class=\"fast\"} 2\n",
            "pv_collector_unbound_pv_count{storage_class=\"\"} 1\n",
            "pv_collector_bound_pv_count{storage_class=\"fast\"} 1\n",
            "pv_collector_unbound_pvc_count{namespace=\"ns\",storage_class=\"beta\",volume_attributes_class=\"\"} 1\n",
            // Plugins: the binder's own (host-path, NFS), else N/A (CSI and local included).
            "pv_collector_total_pv_count{plugin_name=\"N/A\",volume_mode=\"Filesystem\"} 2\n",
            "pv_collector_total_pv_count{plugin_name=\"kubernetes.io/nfs\",volume_mode=\"Filesystem\"} 1\n",
            "pv_collector_total_pv_count{plugin_name=\"kubernetes.io/host-path\",volume_mode=\"Filesystem\"} 1\n",
            "volume_operation_total_seconds_count{operation_name=\"provision\",plugin_name=\"example.com/ext\"} 1\n",
            "volume_operation_total_seconds_sum{operation_name=\"provision\",plugin_name=\"example.com/ext\"} 2\n",
            "volume_operation_errors_total{operation_name=\"provision\",plugin_name=\"example.com/ext\"} 1\n",
            "storage_operation_duration_seconds_count{migrated=\"false\",operation_name=\"volume_delete\",status=\"success\",volume_plugin=\"kubernetes.io/host-path\"} 1\n",
            "retroactive_storageclass_total 1\n",
            "pv_controller_foreign_binder_writes_total{manager=\"kube-controller-manager\"} 1\n",
            // This project's own, beside upstream's.
            "# TYPE pv_controller_claim_time_to_bound_seconds histogram\n",
            "pv_controller_claim_time_to_bound_seconds_bucket{path=\"static\",le=\"2.5\"} 1\n",
            "pv_controller_claim_time_to_bound_seconds_count{path=\"static\"} 1\n",
            "# TYPE pv_controller_pending_claims gauge\n",
            "pv_controller_pending_claims{reason=\"bind\"} 1\n", // the nfs volume of class beta matches it
            "workqueue_depth{name=\"volumes\"} 4\n",
            "workqueue_depth{name=\"claims\"} 2\n",
        ] {
            assert!(text.contains(sample), "{sample}not in:\n{text}");
        }
    }

    #[test]
    fn bucket_bounds_are_written_as_go_writes_them() {
        let got: Vec<String> = pv_core::queue::DURATION_BUCKETS.iter().map(|f| format_float(*f)).collect();
        // As kube-controller-manager 1.37 writes them.
        let kcm = ["1e-08", "1e-07", "1e-06", "9.999999999999999e-06", "9.999999999999999e-05", "0.001", "0.01"];
        assert_eq!(got[..7], kcm);
        assert_eq!(got[7..], ["0.1", "1", "10"]);
        let mut product = vec![10e-9];
        for _ in 1..10 {
            product.push(product.last().unwrap() * 10.0);
        }
        assert_eq!(product, pv_core::queue::DURATION_BUCKETS, "client-go's ExponentialBuckets(10e-9, 10, 10)");
        assert_eq!(format_float(2.5), "2.5");
    }
}
