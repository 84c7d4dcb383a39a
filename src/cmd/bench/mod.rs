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
//! `--plot FILE` writes an SVG scatter chart of every claim's time to Bound against the time its
//! creation was requested; `--plot-data FILE` saves those points (with `--label NAME`), and
//! `bench plot --out FILE A.json B.json ...` draws several runs on one chart, one colour each.
//!
//! Cleanup deletes claims first, then the PVs the bench created (static PVs have the Retain
//! policy: deleting their claims only releases them). For `--claims`, provisioned volumes whose
//! class retains them are deleted too. The namespace is left in place: deleting it would make an
//! immediate re-run wait for its termination.

use super::user;
use clap::Args;
use futures_util::StreamExt;
use k8s_openapi::api::core::v1::{Event as CoreEvent, Namespace, PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{Api, DeleteParams, PostParams};
use kube::runtime::watcher::{self, watcher, Event};
use kube::runtime::WatchStreamExt;
use kube::Client;
use serde::Serialize;
use serde_json::json;
use std::collections::HashMap;
use std::future::Future;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

mod api;
mod cleanup;
mod objects;
mod plot;
mod report;
mod simulate;
use api::*;
use cleanup::*;
use objects::*;
pub use plot::BenchCommand;
use plot::*;
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

/// What `bench --help` adds after the flags.
const AFTER_HELP: &str = "\
Charts: --plot FILE draws every claim's time to Bound (y) against the time its creation was
requested (x, seconds since the run's start) as an SVG scatter chart. To put several runs on one
chart, save each run's points with --plot-data FILE (named in the legend by --label), then draw
them together, one colour per run:
  pv-controller bench --pairs 1000 --plot-data upstream.json --label upstream --kubeconfig A
  pv-controller bench --pairs 1000 --plot-data ours.json --label ours --kubeconfig B
  pv-controller bench plot --out chart.svg upstream.json ours.json";

/// Flags of `bench`.
#[derive(Args, Debug)]
#[command(args_conflicts_with_subcommands = true, after_help = AFTER_HELP)]
pub struct BenchArgs {
    /// `bench plot`, instead of a run.
    #[command(subcommand)]
    pub command: Option<BenchCommand>,
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
    /// Make the controller's requests itself, with no decision at all, so that the run measures
    /// the API server's ceiling. With --pairs: the five writes a controller makes per pair (the
    /// new PV's status Available, then PV claimRef, PV status Bound, claim volumeName, claim
    /// status). With --claims: what an in-process provisioner and the binder make per claim (the
    /// claim's provisioner annotation, a GET of the PV, its create, the ProvisioningSucceeded
    /// event, PV status Bound, claim volumeName, claim status; no directory is made). No
    /// controller may run meanwhile.
    #[arg(long)]
    pub bind_itself: bool,
    /// Give up waiting for claims to become Bound after this long (e.g. 90s, 15m).
    #[arg(long, default_value = "15m", value_parser = super::run::parse_duration)]
    pub timeout: Duration,
    /// Write an SVG chart of every claim's time to Bound against the time its creation was
    /// requested.
    #[arg(long, value_name = "FILE")]
    pub plot: Option<PathBuf>,
    /// Write every claim's creation time and time to Bound as JSON, for `bench plot`.
    #[arg(long, value_name = "FILE")]
    pub plot_data: Option<PathBuf>,
    /// The run's name in the legend of --plot and in --plot-data (default: "simulated" with
    /// --simulate, "ceiling" with --bind-itself, else "run ID").
    #[arg(long, value_name = "NAME")]
    pub label: Option<String>,
    /// With --plot: time to Bound on a logarithmic scale.
    #[arg(long)]
    pub log_y: bool,
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
        if a.bind_itself && (a.simulate || a.claims_first) {
            return Err("--bind-itself applies against a server, to --claims or to --pairs with PVs first".into());
        }
        if a.label.is_some() && a.plot.is_none() && a.plot_data.is_none() {
            return Err("--label names the run in --plot and --plot-data: give one of them".into());
        }
        if a.label.as_ref().is_some_and(|l| l.trim().is_empty()) {
            return Err("--label: must not be empty".into());
        }
        if a.log_y && a.plot.is_none() {
            return Err("--log-y applies to --plot".into());
        }
        for (flag, path) in [("--plot", &a.plot), ("--plot-data", &a.plot_data)] {
            if let Some(p) = path {
                check_writable(flag, p)?;
            }
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

/// The run's name in the legend when --label is not given.
fn default_label(a: &BenchArgs, r: &Report) -> String {
    if a.simulate {
        "simulated".into()
    } else if a.bind_itself {
        "ceiling".into()
    } else {
        format!("run {}", r.run)
    }
}

/// Writes what --plot and --plot-data ask for.
fn write_plots(a: &BenchArgs, w: &Workload, r: &Report) -> anyhow::Result<()> {
    let label = a.label.clone().unwrap_or_else(|| default_label(a, r));
    let workload = if a.simulate { format!("{} (simulated)", w.describe()) } else { w.describe() };
    let series = Series::from_report(label, workload, r);
    if let Some(path) = &a.plot_data {
        write_file(path, &serde_json::to_string(&series)?).map_err(plot_error)?;
    }
    if let Some(path) = &a.plot {
        let series = [series];
        let svg = render_svg(&series, &default_title(&series), a.log_y).map_err(plot_error)?;
        write_file(path, &svg).map_err(plot_error)?;
    }
    Ok(())
}

/// Runs `bench`.
pub fn run(a: BenchArgs) -> anyhow::Result<ExitCode> {
    if let Some(BenchCommand::Plot(p)) = a.command {
        return run_plot(p);
    }
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
    // Also when not every claim became Bound: the chart shows which did, and when.
    if let Err(e) = write_plots(&a, &workload, &report) {
        return Err(match failure {
            Some(f) => user(format!("{f}; {e:#}")),
            None => e,
        });
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
        assert!(parse(&["--claims", "1", "--class", "c", "--bind-itself"]).is_ok(), "the provisioning ceiling");
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
        let claim = |created: u64, to_bound: u64| ClaimTime {
            created: Duration::from_millis(created),
            to_bound: Duration::from_millis(to_bound),
        };
        fill_latencies(&mut r, vec![claim(2, 30), claim(0, 10), claim(1, 20)]);
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
    fn claims_are_kept_in_creation_order_for_the_chart() {
        let r = sample();
        let created: Vec<u128> = r.claims.iter().map(|c| c.created.as_millis()).collect();
        assert_eq!(created, [0, 1, 2]);
        let v = serde_json::to_value(&r).unwrap();
        assert!(v.get("claims").is_none(), "the report stays small: {v}");
        let s = Series::from_report("ours".into(), "3 static PV/PVC pairs".into(), &r);
        assert_eq!((s.label.as_str(), s.n), ("ours", 3));
        let points: Vec<(f64, f64)> = s.points.iter().map(|p| (p.created_seconds, p.seconds_to_bound)).collect();
        assert_eq!(points, [(0.0, 0.01), (0.001, 0.02), (0.002, 0.03)]);
    }

    #[test]
    fn plot_flags() {
        let dir = tempfile::tempdir().unwrap();
        let svg = dir.path().join("a.svg").display().to_string();
        assert!(parse(&["--pairs", "1", "--plot", &svg, "--label", "ours", "--log-y"]).is_ok());
        assert!(parse(&["--pairs", "1", "--plot-data", &svg, "--label", "ours"]).is_ok());
        let err = |args: &[&str]| parse(args).unwrap_err();
        assert!(err(&["--pairs", "1", "--label", "ours"]).contains("--plot"));
        assert!(err(&["--pairs", "1", "--plot", &svg, "--label", ""]).contains("--label"));
        assert!(err(&["--pairs", "1", "--plot-data", &svg, "--log-y"]).contains("--log-y applies to --plot"));
        assert!(err(&["--pairs", "1", "--plot", "/nonexistent/dir/a.svg"]).contains("no directory"));
        // `bench plot` is a subcommand of its own: a run's flags do not go with it.
        let cli = Cli::try_parse_from(["bench", "plot", "--out", "c.svg", "a.json", "b.json"]).unwrap();
        match cli.a.command {
            Some(BenchCommand::Plot(p)) => {
                assert_eq!(p.files, [PathBuf::from("a.json"), PathBuf::from("b.json")]);
                assert_eq!(p.out, PathBuf::from("c.svg"));
            }
            None => panic!("no subcommand"),
        }
        assert!(Cli::try_parse_from(["bench", "--pairs", "3", "plot", "--out", "c.svg", "a.json"]).is_err());
        assert!(Cli::try_parse_from(["bench", "plot", "--out", "c.svg"]).is_err(), "a file is required");
        assert!(Cli::try_parse_from(["bench", "plot", "a.json"]).is_err(), "--out is required");
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
