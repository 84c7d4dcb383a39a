//! `pv-controller simulate`: load a cluster state, run the controller to quiescence on virtual
//! time, print the converged objects and the events.

use super::{load_objects, user};
use clap::Args;
use pv_sim::{output::OutputList, Simulation, SimulationError, SimulationOptions};
use pv_store::FaultSpec;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

/// Output format.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// JSON.
    Json,
    /// YAML.
    Yaml,
    /// What the controller would do to the input, for a person: claims bound, volumes
    /// provisioned, phase changes, deletions, events by reason; one line each. Then the steps:
    /// each sync that acted, in order, with its virtual time and its steps.
    Changes,
}

/// Flags of `simulate`.
#[derive(Args, Debug)]
pub struct SimulateArgs {
    /// Input file (YAML or JSON; `-` for standard input).
    #[arg(short, long)]
    pub file: String,
    /// Output format.
    #[arg(short, long, value_enum, default_value = "json")]
    pub output: Format,
    /// Root directory for host-path volumes (default: a temporary directory removed at exit).
    #[arg(long)]
    pub hostpath_root: Option<PathBuf>,
    /// Resync rounds allowed before giving up.
    #[arg(long, default_value_t = 100)]
    pub max_rounds: usize,
    /// Fail a fraction of write requests: `conflict=P,error=P,timeout=P,lost-response=P`.
    #[arg(long)]
    pub inject_faults: Option<String>,
    /// Seed for fault injection.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Event messages that say more than upstream's: why each volume was rejected (FailedBinding)
    /// and what ends a WaitForFirstConsumer wait. `--detailed-events=false` gives upstream's
    /// texts exactly, as `run` has them.
    #[arg(long, num_args = 0..=1, default_missing_value = "true", default_value = "true",
          action = clap::ArgAction::Set)]
    pub detailed_events: bool,
}

/// Runs `simulate`.
pub fn run(a: SimulateArgs) -> anyhow::Result<ExitCode> {
    super::init_logging("error", false);
    let faults = match &a.inject_faults {
        None => None,
        Some(spec) => Some((FaultSpec::parse(spec).map_err(|e| user(format!("--inject-faults: {e}")))?, a.seed)),
    };
    let objects = load_objects(&a.file)?;
    let (root, _tmp) = match a.hostpath_root {
        Some(r) => {
            std::fs::create_dir_all(&r).map_err(|e| user(format!("--hostpath-root {}: {e}", r.display())))?;
            (r, None)
        }
        None => {
            let t = tempfile::tempdir()?;
            (t.path().to_path_buf(), Some(t))
        }
    };
    // `-o changes` lists the syncs that acted, with their steps, after the changes.
    let record_steps = a.output == Format::Changes;
    let mut options = SimulationOptions { max_rounds: a.max_rounds, faults, record_steps, ..Default::default() };
    options.config.detailed_events = a.detailed_events;
    let mut sim = Simulation::new(objects, pv_plugins::registry(Some(root)), options).map_err(|e| match e {
        SimulationError::Load { .. } => user(format!("{}: {e}", a.file)),
        other => anyhow::Error::new(other),
    })?;
    let before: Vec<serde_json::Value> = match a.output {
        Format::Changes => OutputList::from_store(sim.store()).items().collect(),
        _ => Vec::new(),
    };
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    rt.block_on(sim.run()).map_err(|e| user(e.to_string()))?;
    // Written as it is serialized: the stored objects are not copied into one value or one string.
    let list = OutputList::from_store(sim.store());
    let mut out = std::io::BufWriter::with_capacity(1 << 16, std::io::stdout().lock());
    match a.output {
        Format::Json => serde_json::to_writer_pretty(&mut out, &list)?,
        Format::Yaml => pv_sim::output::write_yaml(&mut out, &list)?,
        Format::Changes => {
            let after: Vec<serde_json::Value> = list.items().collect();
            let changes = pv_sim::Changes::between(&before, &after).with_steps(&sim.take_synced());
            write!(out, "{}", changes.to_text())?;
        }
    }
    if a.output != Format::Changes {
        writeln!(out)?;
    }
    out.flush()?;
    // The process ends here: skip tearing down hundreds of thousands of cached objects.
    std::mem::forget(sim);
    Ok(ExitCode::SUCCESS)
}
