//! `pv-controller explain pvc NAMESPACE/NAME`: why a claim is Pending, Bound or Lost;
//! `explain pod NAMESPACE/NAME`: what on the storage side keeps a pod from being scheduled or
//! started; `explain pvc -A` (or `-n NAMESPACE` with no name): every claim not Bound.
//!
//! Glue only: parse the name, read the state (a file, the same input `simulate` takes, or a live
//! cluster, read-only), hand it to `pv_explain`, print text or JSON. Exit 0 whenever it could
//! answer, 1 when the object does not exist or the input/cluster cannot be read.

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
    /// What to explain: `pvc` (a claim; with no name and `-A` or `-n`, every claim not Bound) or
    /// `pod` (what on the storage side keeps a pod from being scheduled or started).
    #[arg(value_parser = ["pvc", "pvcs", "persistentvolumeclaim", "persistentvolumeclaims", "pod", "pods", "po"])]
    pub kind: String,
    /// The claim or pod: `NAMESPACE/NAME`, or `NAME` with `-n NAMESPACE`.
    pub name: Option<String>,
    /// Namespace (default: the context's namespace, or `default`).
    #[arg(short, long)]
    pub namespace: Option<String>,
    /// With `pvc` and no name: every claim not Bound (and every Lost one) in all namespaces.
    #[arg(short = 'A', long, conflicts_with = "name")]
    pub all_namespaces: bool,
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

/// What is asked about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum What {
    Claim,
    Pod,
    Claims,
}

fn what(a: &ExplainArgs) -> anyhow::Result<What> {
    let pod = ["pod", "pods", "po"].contains(&a.kind.as_str());
    match (pod, &a.name) {
        (true, Some(_)) => Ok(What::Pod),
        (true, None) => Err(user("explain pod: name the pod (NAMESPACE/NAME, or NAME with -n NAMESPACE)")),
        (false, Some(_)) => Ok(What::Claim),
        (false, None) if a.all_namespaces || a.namespace.is_some() => Ok(What::Claims),
        (false, None) => Err(user(
            "explain pvc: name the claim (NAMESPACE/NAME, or NAME with -n NAMESPACE), or list every claim not \
             Bound with -A (all namespaces) or -n NAMESPACE",
        )),
    }
}

/// The kind's name in messages.
fn kind_word(w: What) -> &'static str {
    if w == What::Pod {
        "pod"
    } else {
        "persistentvolumeclaim"
    }
}

/// Splits `NS/NAME` or `NAME` (with `-n`) into namespace and name.
fn object_name(a: &ExplainArgs, default_ns: &str) -> anyhow::Result<(String, String)> {
    let given = a.name.clone().unwrap_or_default();
    let word = if ["pod", "pods", "po"].contains(&a.kind.as_str()) { "pod" } else { "claim" };
    let (ns, name) = match given.split_once('/') {
        Some((ns, name)) => {
            if let Some(n) = a.namespace.as_deref().filter(|n| *n != ns) {
                return Err(user(format!("{word} {given:?} names namespace {ns:?} but --namespace is {n:?}")));
            }
            (ns.to_string(), name.to_string())
        }
        None => (a.namespace.clone().unwrap_or_else(|| default_ns.to_string()), given.clone()),
    };
    if ns.is_empty() || name.is_empty() || name.contains('/') {
        return Err(user(format!("{word} {given:?}: expected NAMESPACE/NAME or NAME with -n NAMESPACE")));
    }
    Ok((ns, name))
}

/// Kinds a dump may hold that `explain` reads past the binder (the rest are noted as ignored).
const PAST_BINDER_KINDS: [&str; 6] =
    ["CSIDriver", "CSINode", "CSIStorageCapacity", "Lease", "Event", "VolumeAttachment"];

/// What `explain` answers with, of any of its three questions.
enum Answer {
    Claim(Box<Explanation>),
    Pod(Box<pv_explain::PodExplanation>),
    Claims(pv_explain::ClaimList),
}

fn snapshot_of(path: &str) -> anyhow::Result<Snapshot> {
    let mut loaded = load_input(path)?;
    loaded.ignored.retain(|(kind, _)| !PAST_BINDER_KINDS.contains(&kind.as_str()));
    if let Some(note) = loaded.ignored_note() {
        eprintln!("note: {path}: {note}");
    }
    let mut snapshot = Snapshot::from_input(loaded.objects).map_err(|e| user(format!("{path}: {e}")))?;
    snapshot.add_others(loaded.others).map_err(|e| user(format!("{path}: {e}")))?;
    Ok(snapshot)
}

/// The answer over a snapshot; `where_` names its source in a not-found error.
fn answer(a: &ExplainArgs, w: What, snapshot: &Snapshot, ns: &str, name: &str, where_: &str) -> anyhow::Result<Answer> {
    let now = k8s_openapi::jiff::Timestamp::now();
    let missing = || user(format!("{} {ns}/{name} not found {where_}", kind_word(w)));
    Ok(match w {
        What::Claim => Answer::Claim(Box::new(pv_explain::explain_snapshot(snapshot, ns, name).ok_or_else(missing)?)),
        What::Pod => Answer::Pod(Box::new(pv_explain::explain_pod(snapshot, ns, name, now).ok_or_else(missing)?)),
        What::Claims => {
            let scope = if a.all_namespaces { None } else { Some(ns) };
            Answer::Claims(pv_explain::explain_claims(snapshot, scope, now))
        }
    })
}

fn from_file(a: &ExplainArgs, w: What, path: &str) -> anyhow::Result<Answer> {
    let snapshot = snapshot_of(path)?;
    let (ns, name) = match w {
        What::Claims => (a.namespace.clone().unwrap_or_else(|| "default".into()), String::new()),
        _ => object_name(a, "default")?,
    };
    answer(a, w, &snapshot, &ns, &name, &format!("in {path}"))
}

fn from_cluster(a: &ExplainArgs, w: What) -> anyhow::Result<Answer> {
    let opts = a.kube.options();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    rt.block_on(async {
        let named_ns = a.name.as_deref().is_some_and(|n| n.contains('/')) || a.namespace.is_some();
        let default_ns = if named_ns || a.all_namespaces {
            "default".to_string()
        } else {
            live::default_namespace(&opts).await.map_err(|e| user(e.to_string()))?
        };
        let (ns, name) = match w {
            What::Claims => (a.namespace.clone().unwrap_or(default_ns), String::new()),
            _ => object_name(a, &default_ns)?,
        };
        let got = match w {
            What::Claim => live::read(&opts, &ns, &name).await,
            What::Pod => live::read_scope(&opts, &live::Scope::Pod(ns.clone(), name.clone())).await,
            What::Claims => {
                let scope = if a.all_namespaces { None } else { Some(ns.clone()) };
                live::read_scope(&opts, &live::Scope::Claims(scope)).await
            }
        }
        .map_err(|e| user(e.to_string()))?;
        for note in &got.notes {
            eprintln!("note: not read, so left out of the answer: {note}");
        }
        if !got.found {
            return Err(user(format!("{} {ns}/{name} not found on {}", kind_word(w), got.url)));
        }
        answer(a, w, &got.snapshot, &ns, &name, &format!("on {}", got.url))
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
    let w = what(&a)?;
    let answer = match a.file.as_deref() {
        Some(path) => from_file(&a, w, path)?,
        None => from_cluster(&a, w)?,
    };
    // JSON keeps the documented key order (the structs' own); YAML sorts keys, as kubectl does.
    let json = match &answer {
        Answer::Claim(e) => serde_json::to_string_pretty(&pv_explain::to_json(e))?,
        Answer::Pod(x) => serde_json::to_string_pretty(&pv_explain::render::pod_to_json(x))?,
        Answer::Claims(l) => serde_json::to_string_pretty(&pv_explain::render::list_to_json(l))?,
    };
    let text = match a.output {
        Format::Json => format!("{json}\n"),
        Format::Yaml => pv_sim::output::to_yaml(&serde_json::from_str::<serde_json::Value>(&json)?),
        Format::Text => {
            let terminal = std::io::stdout().is_terminal();
            let color = !a.no_color && std::env::var_os("NO_COLOR").is_none() && terminal;
            let width = width(terminal);
            match &answer {
                Answer::Claim(e) => pv_explain::to_text_with(e, color, width, a.all),
                Answer::Pod(x) => pv_explain::render::pod_to_text(x, color, width),
                Answer::Claims(l) => pv_explain::render::list_to_text(l, color, width),
            }
        }
    };
    // A reader that stops early (`| head`) is not an error.
    let mut out = std::io::stdout().lock();
    match std::io::Write::write_all(&mut out, text.as_bytes()).and_then(|()| std::io::Write::flush(&mut out)) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => return Err(e.into()),
        _ => {}
    }
    Ok(ExitCode::SUCCESS)
}
