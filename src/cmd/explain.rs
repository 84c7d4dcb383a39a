//! `pv-controller explain pvc NAMESPACE/NAME`: why a claim is Pending, Bound or Lost.
//!
//! Glue only: parse the claim's name, read the state (a file, the same input `simulate` takes, or
//! a live cluster, read-only), hand it to `pv_explain`, print text or JSON. Exit 0 whenever it
//! could answer, 1 when the claim does not exist or the input/cluster cannot be read.

use super::{load_input, user};
use clap::Args;
use pv_explain::{live, Explanation, Snapshot};
use std::io::IsTerminal;
use std::process::ExitCode;

/// Output format.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// A table and a sentence, for people.
    Text,
    /// A JSON document, for scripts (fields in the README, "Explaining a claim").
    Json,
    /// The JSON document's fields as YAML, printed as kubectl prints YAML.
    Yaml,
}

/// Flags of `explain`.
#[derive(Args, Debug)]
pub struct ExplainArgs {
    /// What to explain (only claims: `pvc`).
    #[arg(value_parser = ["pvc", "pvcs", "persistentvolumeclaim", "persistentvolumeclaims"])]
    pub kind: String,
    /// The claim: `NAMESPACE/NAME`, or `NAME` with `-n NAMESPACE`.
    pub name: String,
    /// Namespace of the claim (default: the context's namespace, or `default`).
    #[arg(short, long)]
    pub namespace: Option<String>,
    /// Read the state from this file (YAML or JSON, as `simulate` takes it; `-` for stdin).
    #[arg(short, long, conflicts_with_all = ["kubeconfig", "context", "cluster", "user"])]
    pub file: Option<String>,
    /// How to reach the cluster.
    #[command(flatten)]
    pub kube: super::KubeconfigArgs,
    /// Output format.
    #[arg(short, long, value_enum, default_value = "text")]
    pub output: Format,
    /// Never colour the text output (it is coloured only on a terminal anyway).
    #[arg(long)]
    pub no_color: bool,
    /// List every volume in the text table (by default: matches and near misses, the rest counted).
    #[arg(long)]
    pub all: bool,
}

/// Splits `NS/NAME` or `NAME` (with `-n`) into namespace and name.
fn claim_name(a: &ExplainArgs, default_ns: &str) -> anyhow::Result<(String, String)> {
    let (ns, name) = match a.name.split_once('/') {
        Some((ns, name)) => {
            if let Some(n) = a.namespace.as_deref().filter(|n| *n != ns) {
                return Err(user(format!("claim {:?} names namespace {ns:?} but --namespace is {n:?}", a.name)));
            }
            (ns.to_string(), name.to_string())
        }
        None => (a.namespace.clone().unwrap_or_else(|| default_ns.to_string()), a.name.clone()),
    };
    if ns.is_empty() || name.is_empty() || name.contains('/') {
        return Err(user(format!("claim {:?}: expected NAMESPACE/NAME or NAME with -n NAMESPACE", a.name)));
    }
    Ok((ns, name))
}

/// Kinds a dump may hold that `explain` reads past the binder (the rest are noted as ignored).
const PAST_BINDER_KINDS: [&str; 5] = ["CSIDriver", "CSINode", "CSIStorageCapacity", "Lease", "Event"];

fn from_file(a: &ExplainArgs, path: &str) -> anyhow::Result<Explanation> {
    let mut loaded = load_input(path)?;
    loaded.ignored.retain(|(kind, _)| !PAST_BINDER_KINDS.contains(&kind.as_str()));
    if let Some(note) = loaded.ignored_note() {
        eprintln!("note: {path}: {note}");
    }
    let mut snapshot = Snapshot::from_input(loaded.objects).map_err(|e| user(format!("{path}: {e}")))?;
    snapshot.add_others(loaded.others).map_err(|e| user(format!("{path}: {e}")))?;
    let (ns, name) = claim_name(a, "default")?;
    pv_explain::explain_snapshot(&snapshot, &ns, &name)
        .ok_or_else(|| user(format!("persistentvolumeclaim {ns}/{name} not found in {path}")))
}

fn from_cluster(a: &ExplainArgs) -> anyhow::Result<Explanation> {
    let opts = a.kube.options();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    rt.block_on(async {
        let default_ns = if a.name.contains('/') || a.namespace.is_some() {
            "default".to_string()
        } else {
            live::default_namespace(&opts).await.map_err(|e| user(e.to_string()))?
        };
        let (ns, name) = claim_name(a, &default_ns)?;
        let got = live::read(&opts, &ns, &name).await.map_err(|e| user(e.to_string()))?;
        for note in &got.notes {
            eprintln!("note: not read, so left out of the answer: {note}");
        }
        if !got.found {
            return Err(user(format!("persistentvolumeclaim {ns}/{name} not found on {}", got.url)));
        }
        pv_explain::explain_snapshot(&got.snapshot, &ns, &name)
            .ok_or_else(|| user(format!("persistentvolumeclaim {ns}/{name} not found on {}", got.url)))
    })
}

/// The width to fit the table in: `COLUMNS` when the shell exports it, else what `stty`
/// reports for the terminal, else the default. Long details wrap either way; nothing is cut.
fn width(terminal: bool) -> usize {
    if let Some(c) = std::env::var("COLUMNS").ok().and_then(|c| c.trim().parse::<usize>().ok()) {
        return c.max(40);
    }
    if terminal {
        // `stty size` reads the terminal on its stdin: "ROWS COLS".
        let tty = std::fs::File::open("/dev/tty").ok();
        if let Some(out) = tty.and_then(|t| std::process::Command::new("stty").arg("size").stdin(t).output().ok()) {
            let text = String::from_utf8_lossy(&out.stdout).to_string();
            if let Some(cols) = text.split_whitespace().nth(1).and_then(|c| c.parse::<usize>().ok()) {
                return cols.max(40);
            }
        }
    }
    pv_explain::render::WIDTH
}

/// Runs `explain`.
pub fn run(a: ExplainArgs) -> anyhow::Result<ExitCode> {
    // kube-client logs failed requests at error level; the error line says it once already.
    super::init_logging("error,kube_client=off", false);
    let e = match a.file.as_deref() {
        Some(path) => from_file(&a, path)?,
        None => from_cluster(&a)?,
    };
    match a.output {
        Format::Json => println!("{}", serde_json::to_string_pretty(&pv_explain::to_json(&e))?),
        Format::Yaml => print!("{}", pv_sim::output::to_yaml(&pv_explain::to_json(&e))),
        Format::Text => {
            let terminal = std::io::stdout().is_terminal();
            let color = !a.no_color && std::env::var_os("NO_COLOR").is_none() && terminal;
            print!("{}", pv_explain::to_text_with(&e, color, width(terminal), a.all));
        }
    }
    Ok(ExitCode::SUCCESS)
}
