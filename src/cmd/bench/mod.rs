//! `pv-controller bench`: a load generator that measures how fast claims become Bound.
//!
//! Why it exists: upstream's controller took minutes to bind 10,000 static pairs
//! (kubernetes/kubernetes#133352) and plateaus near 30 claims/s (#140721). Claims about doing
//! better must be checkable by any operator, on their own cluster or on `up`, with one command.
//! So this command does what a user would do — create volumes and claims through the API — and
//! measures what a user would see: per claim, the time from the create request to the moment a
//! watch shows `status.phase: Bound`.
//!
//! Two modes share one workload and one report:
//! - against an API server (`--kubeconfig`/`--context`, the same client setup as `run`): objects
//!   are created with bounded concurrency (`--concurrency`, default 32) and an optional rate
//!   (`--rate`, objects/s over PVs and claims together), each carrying a unique run label so that
//!   the watch, the cleanup and concurrent runs never touch anything else; claims are created
//!   once every PV is Available (else a claim may take a larger volume and leave the last claim
//!   of that size with none, as upstream would too); a claim's time to
//!   Bound counts from just before the later of its pair's two create requests is sent (the
//!   claim's, unless `--claims-first` creates the PVs last), so latency includes that request;
//! - `--simulate`: the same workload loaded into the in-process simulated API server
//!   (`pv_sim::Simulation`, virtual clock, no I/O), to measure the controller alone; it also
//!   reports the peak RSS of the process. Every claim exists when the run starts, so a claim's
//!   time-to-Bound there is the wall time since the start at which a watch on the store saw it
//!   Bound.
//!
//! Cleanup deletes claims first, then the PVs the bench created (static PVs have the Retain
//! policy: deleting their claims only releases them). For `--claims`, provisioned volumes whose
//! class retains them are deleted too. The namespace is left in place: deleting it would make an
//! immediate re-run wait for its termination.

use super::user;
use clap::Args;
use futures_util::StreamExt;
use k8s_openapi::api::core::v1::{
    Event as CoreEvent, Namespace, ObjectReference, PersistentVolume, PersistentVolumeClaim,
};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{Api, DeleteParams, PostParams};
use kube::runtime::watcher::{self, watcher, Event};
use kube::runtime::WatchStreamExt;
use kube::Client;
use serde::Serialize;
use serde_json::json;
use std::collections::HashMap;
use std::future::Future;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

mod api;
mod cleanup;
mod objects;
mod report;
mod simulate;
use api::*;
use cleanup::*;
use objects::*;
use report::*;
use simulate::*;

/// Label put on every object a run creates; its value is the run id.
pub const RUN_LABEL: &str = "bench.pv-controller.io/run";

/// Timeout of the preflight check and of the initial watch list.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(15);

/// Output format.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// A table for people.
    Text,
    /// One JSON object.
    Json,
}

/// Flags of `bench`.
#[derive(Args, Debug)]
pub struct BenchArgs {
    /// How to reach the cluster.
    #[command(flatten)]
    pub kube: super::KubeconfigArgs,
    /// N static pairs: PVs with distinct NFS paths and class "", and claims of matching size.
    #[arg(long, value_name = "N")]
    pub pairs: Option<usize>,
    /// N claims of the provisioning class given by --class.
    #[arg(long, value_name = "N")]
    pub claims: Option<usize>,
    /// StorageClass of the --claims workload (with --simulate: default `bench`, host-path).
    #[arg(long, value_name = "NAME")]
    pub class: Option<String>,
    /// Objects created per second, PVs and claims together (0: as fast as possible).
    #[arg(long, default_value_t = 0.0)]
    pub rate: f64,
    /// Create requests in flight at once.
    #[arg(long, default_value_t = 32)]
    pub concurrency: usize,
    /// Namespace of the claims (created if missing, never deleted).
    #[arg(long, default_value = "pv-bench")]
    pub namespace: String,
    /// Output format.
    #[arg(short, long, value_enum, default_value = "text")]
    pub output: Format,
    /// With --pairs: create the claims first, then the PVs (time to Bound then counts from the
    /// PV's create request: a volume that appears after its claim).
    #[arg(long)]
    pub claims_first: bool,
    /// Leave the created objects in place.
    #[arg(long)]
    pub keep: bool,
    /// Run the workload in-process on the simulated API server instead of against a server.
    #[arg(long)]
    pub simulate: bool,
    /// With --pairs: bind each pair itself with the five writes a controller makes per pair (the
    /// new PV's status Available, then PV claimRef, PV status Bound, claim volumeName, claim
    /// status) and no decision at all, so that the run measures the API server's ceiling for
    /// binding. No controller may run meanwhile.
    #[arg(long)]
    pub bind_itself: bool,
    /// Give up waiting for claims to become Bound after this long (e.g. 90s, 15m).
    #[arg(long, default_value = "15m", value_parser = super::run::parse_duration)]
    pub timeout: Duration,
}

/// What to create.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Workload {
    /// N static PV/PVC pairs.
    Pairs(usize),
    /// N claims of a provisioning class.
    Claims {
        /// Number of claims.
        n: usize,
        /// Their StorageClass.
        class: String,
    },
}

impl Workload {
    /// Checks the flags and picks the workload; the error is the message for the user.
    pub fn from_args(a: &BenchArgs) -> Result<Self, String> {
        if !(a.rate.is_finite() && a.rate >= 0.0) {
            return Err(format!("--rate {}: must be a number of objects per second, 0 or more", a.rate));
        }
        if a.concurrency == 0 {
            return Err("--concurrency: must be at least 1".into());
        }
        if !is_dns_label(&a.namespace) {
            return Err(format!(
                "--namespace {:?}: not a valid namespace name (lowercase letters, digits and '-', at most 63)",
                a.namespace
            ));
        }
        if a.claims_first && (a.simulate || a.pairs.is_none()) {
            return Err("--claims-first applies to --pairs against a server only".into());
        }
        if a.bind_itself && (a.simulate || a.pairs.is_none() || a.claims_first) {
            return Err("--bind-itself applies to --pairs against a server, PVs first".into());
        }
        if a.simulate && a.kube.given() {
            return Err("--simulate runs in-process: --kubeconfig, --context, --cluster and --user do not apply".into());
        }
        let w = match (a.pairs, a.claims) {
            (Some(_), Some(_)) => return Err("give either --pairs N or --claims N, not both".into()),
            (None, None) => return Err("give --pairs N (static pairs) or --claims N --class NAME".into()),
            (Some(n), None) => {
                if a.class.is_some() {
                    return Err("--class applies to --claims only (static pairs use class \"\")".into());
                }
                Workload::Pairs(n)
            }
            (None, Some(n)) => match (&a.class, a.simulate) {
                (Some(c), _) if c.is_empty() => {
                    return Err("--class: must name a provisioning StorageClass; use --pairs for class \"\"".into())
                }
                (Some(c), _) => Workload::Claims { n, class: c.clone() },
                (None, true) => Workload::Claims { n, class: "bench".into() },
                (None, false) => return Err("--claims needs --class NAME (a StorageClass that provisions)".into()),
            },
        };
        if w.claims() == 0 {
            return Err("the number of objects must be at least 1".into());
        }
        Ok(w)
    }

    /// Number of claims.
    pub fn claims(&self) -> usize {
        match self {
            Workload::Pairs(n) | Workload::Claims { n, .. } => *n,
        }
    }

    /// Objects the simulated workload loads: a PV and a claim per pair; a class and its claims.
    fn objects(&self) -> usize {
        match self {
            Workload::Pairs(n) => 2 * n,
            Workload::Claims { n, .. } => n + 1,
        }
    }

    fn describe(&self) -> String {
        match self {
            Workload::Pairs(n) => format!("{n} static PV/PVC pairs"),
            Workload::Claims { n, class } => format!("{n} claims of class {class}"),
        }
    }

    fn kind(&self) -> &'static str {
        match self {
            Workload::Pairs(_) => "pairs",
            Workload::Claims { .. } => "claims",
        }
    }
}

fn is_dns_label(s: &str) -> bool {
    let ok = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    !s.is_empty()
        && s.len() <= 63
        && s.chars().all(|c| ok(c) || c == '-')
        && s.chars().next().is_some_and(ok)
        && s.chars().last().is_some_and(ok)
}

/// Runs `bench`.
pub fn run(a: BenchArgs) -> anyhow::Result<ExitCode> {
    super::init_logging("error,kube_client=off", false);
    let workload = Workload::from_args(&a).map_err(user)?;
    let (report, failure) = if a.simulate {
        simulate(&workload)?
    } else {
        let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
        rt.block_on(against_server(&a, &workload))?
    };
    match a.output {
        Format::Text => print!("{}", format_text(&report)),
        Format::Json => println!("{}", serde_json::to_string_pretty(&report)?),
    }
    match failure {
        Some(f) => Err(user(f)),
        None => Ok(ExitCode::SUCCESS),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        a: BenchArgs,
    }

    fn parse(args: &[&str]) -> Result<Workload, String> {
        let cli =
            Cli::try_parse_from(std::iter::once("bench").chain(args.iter().copied())).map_err(|e| e.to_string())?;
        Workload::from_args(&cli.a)
    }

    #[test]
    fn workloads_from_flags() {
        assert_eq!(parse(&["--pairs", "10"]), Ok(Workload::Pairs(10)));
        assert_eq!(parse(&["--claims", "5", "--class", "fast"]), Ok(Workload::Claims { n: 5, class: "fast".into() }));
        assert_eq!(parse(&["--simulate", "--claims", "5"]), Ok(Workload::Claims { n: 5, class: "bench".into() }));
        assert_eq!(parse(&["--simulate", "--pairs", "200", "-o", "json", "--rate", "50"]), Ok(Workload::Pairs(200)));
    }

    #[test]
    fn bad_flags_say_which() {
        let err = |args: &[&str]| parse(args).unwrap_err();
        assert!(err(&[]).contains("--pairs N"));
        assert!(err(&["--pairs", "1", "--claims", "1"]).contains("not both"));
        assert!(err(&["--claims", "3"]).contains("--class"));
        assert!(err(&["--pairs", "3", "--class", "x"]).contains("--claims only"));
        assert!(err(&["--pairs", "0"]).contains("at least 1"));
        assert!(err(&["--pairs", "1", "--rate=-1"]).contains("--rate"));
        assert!(err(&["--pairs", "1", "--concurrency", "0"]).contains("--concurrency"));
        assert!(err(&["--pairs", "1", "--namespace", "Bad_NS"]).contains("--namespace"));
        assert!(err(&["--simulate", "--pairs", "1", "--kubeconfig", "k"]).contains("in-process"));
        assert!(err(&["--pairs", "x"]).contains("invalid value"));
        assert!(err(&["--claims", "1", "--class", "c", "--claims-first"]).contains("--pairs"));
        assert!(err(&["--claims", "1", "--class", "c", "--bind-itself"]).contains("--bind-itself"));
        assert!(err(&["--simulate", "--pairs", "1", "--bind-itself"]).contains("--bind-itself"));
        assert!(err(&["--pairs", "1", "--claims-first", "--bind-itself"]).contains("PVs first"));
        assert!(parse(&["--pairs", "1", "--bind-itself"]).is_ok());
    }

    #[test]
    fn percentiles_are_nearest_rank() {
        let d: Vec<Duration> = (1..=100).map(Duration::from_millis).collect();
        assert_eq!(percentile(&d, 50.0), Some(Duration::from_millis(50)));
        assert_eq!(percentile(&d, 99.0), Some(Duration::from_millis(99)));
        assert_eq!(percentile(&d, 100.0), Some(Duration::from_millis(100)));
        assert_eq!(percentile(&d[..1], 99.0), Some(Duration::from_millis(1)));
        assert_eq!(percentile(&[], 50.0), None);
    }

    fn sample() -> Report {
        let mut r = Report {
            mode: "api".into(),
            workload: "pairs".into(),
            description: "3 static PV/PVC pairs".into(),
            n: 3,
            run: "b1".into(),
            wall_seconds: 1.5,
            create_seconds: Some(0.25),
            binds_per_second: 2.0,
            ..Default::default()
        };
        fill_latencies(&mut r, vec![Duration::from_millis(30), Duration::from_millis(10), Duration::from_millis(20)]);
        r
    }

    #[test]
    fn text_table_has_every_figure() {
        let t = format_text(&sample());
        for want in ["bound               3 / 3", "wall time           1.500 s", "p50   20 ms", "p99   30 ms"] {
            assert!(t.contains(want), "{want:?} missing in\n{t}");
        }
        assert!(t.contains("binds/s             2.0"), "{t}");
        assert!(t.starts_with("bench (api): 3 static PV/PVC pairs, run bench.pv-controller.io/run=b1\n"), "{t}");
        assert!(!t.contains("peak RSS"));
    }

    #[test]
    fn json_uses_camel_case_fields() {
        let v = serde_json::to_value(sample()).unwrap();
        assert_eq!(v["n"], 3);
        assert_eq!(v["bound"], 3);
        assert_eq!(v["p50Ms"], 20.0);
        assert_eq!(v["maxMs"], 30.0);
        assert_eq!(v["bindsPerSecond"], 2.0);
        assert!(v["peakRssBytes"].is_null());
    }

    #[test]
    fn human_units() {
        assert_eq!(human_ms(Some(1.234)), "1.23 ms");
        assert_eq!(human_ms(Some(453_000.0)), "453.0 s");
        assert_eq!(human_ms(Some(2_500.0)), "2.50 s");
        assert_eq!(human_bytes(1536.0), "1.50 KiB");
        assert_eq!(human_bytes(3.0 * 1024.0 * 1024.0), "3.0 MiB");
    }

    #[test]
    fn objects_are_valid_and_labelled() {
        let pv = pv_object("b1", 12).unwrap();
        assert_eq!(pv.metadata.name.as_deref(), Some("b1-pv-000012"));
        assert_eq!(pv.metadata.labels.unwrap()[RUN_LABEL], "b1");
        let spec = pv.spec.unwrap();
        assert_eq!(spec.persistent_volume_reclaim_policy.as_deref(), Some("Retain"));
        assert_eq!(spec.nfs.unwrap().path, "/pv-bench/b1/12");
        let c = pvc_object("b1", 12, &Workload::Pairs(20)).unwrap();
        let cs = c.spec.unwrap();
        assert_eq!(cs.storage_class_name.as_deref(), Some(""));
        assert_eq!(cs.resources.unwrap().requests.unwrap()["storage"].0, "3Gi");
        let c = pvc_object("b1", 0, &Workload::Claims { n: 1, class: "fast".into() }).unwrap();
        assert_eq!(c.spec.unwrap().storage_class_name.as_deref(), Some("fast"));
        assert!(is_dns_label(&run_id()));
    }

    #[test]
    fn proc_status_is_read_in_bytes() {
        if cfg!(target_os = "linux") {
            let hwm = proc_status_bytes("VmHWM").unwrap();
            assert!(hwm > 0 && hwm.is_multiple_of(1024));
        }
    }
}
