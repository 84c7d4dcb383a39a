//! One module per subcommand, plus the error-to-exit-code mapping they share.

pub mod bench;
pub mod controllers;
pub mod docs;
pub mod explain;
pub mod feature_gates;
pub mod kubeconfig;
pub mod run;
pub mod shadow;
pub mod simulate;
pub mod up;

use clap::Args;
use pv_kube::connect::{self, ClientOptions};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// How to reach a cluster, as kubectl's flags say it: `run`, `bench` and `explain` take these.
#[derive(Args, Debug, Clone, Default)]
pub struct KubeconfigArgs {
    /// Kubeconfig file (default: KUBECONFIG, then ~/.kube/config, then in-cluster).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// Kubeconfig context to use (default: the current context).
    #[arg(long)]
    pub context: Option<String>,
    /// Kubeconfig cluster to use (default: the context's).
    #[arg(long)]
    pub cluster: Option<String>,
    /// Kubeconfig user to use (default: the context's).
    #[arg(long)]
    pub user: Option<String>,
}

impl KubeconfigArgs {
    /// The client options these flags give.
    pub fn options(&self) -> ClientOptions {
        ClientOptions {
            kubeconfig: self.kubeconfig.clone(),
            context: self.context.clone(),
            cluster: self.cluster.clone(),
            user: self.user.clone(),
        }
    }

    /// True when any of them was given.
    pub fn given(&self) -> bool {
        self.kubeconfig.is_some() || self.context.is_some() || self.cluster.is_some() || self.user.is_some()
    }

    /// Loads the configuration, builds a client and checks within `timeout` that the server
    /// answers: the client, the server's URL and its `host:port`. Every failure is a user error.
    pub async fn connect(&self, timeout: Duration) -> anyhow::Result<(kube::Client, String, String)> {
        let options = self.options();
        let config = connect::load_config(&options).await.map_err(|e| user(e.to_string()))?;
        let url = config.cluster_url.to_string();
        let host = config.cluster_url.authority().map(|h| h.to_string()).unwrap_or_default();
        let client = connect::client(config, &options).map_err(|e| user(e.to_string()))?;
        connect::preflight(&client, &url, timeout).await.map_err(|e| user(e.to_string()))?;
        Ok((client, url, host))
    }
}

/// An error the user can fix (bad input, bad flag, unreachable server): exit code 1.
#[derive(Debug)]
pub struct UserError(pub String);

impl std::fmt::Display for UserError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UserError {}

/// Shorthand for a user error.
pub fn user(msg: impl Into<String>) -> anyhow::Error {
    anyhow::Error::new(UserError(msg.into()))
}

/// Prints an error as one `error: ...` line and picks the exit code.
pub fn report(e: &anyhow::Error) -> ExitCode {
    if e.downcast_ref::<UserError>().is_some() {
        eprintln!("error: {e:#}");
        ExitCode::from(1)
    } else {
        eprintln!("error: internal failure: {e:#}");
        ExitCode::from(2)
    }
}

/// Reads a file, or standard input for `-`.
pub fn read_input(path: &str) -> anyhow::Result<String> {
    use std::io::Read;
    if path == "-" {
        let mut s = String::new();
        std::io::stdin().read_to_string(&mut s).map_err(|e| user(format!("reading standard input: {e}")))?;
        Ok(s)
    } else {
        std::fs::read_to_string(path).map_err(|e| user(format!("{path}: {e}")))
    }
}

/// Reads the objects `simulate` and `explain -f` take from `path` (`-` for stdin), saying on
/// stderr which objects were skipped because their kind does not affect the controller.
pub fn load_objects(path: &str) -> anyhow::Result<Vec<pv_sim::InputObject>> {
    let loaded = load_input(path)?;
    if let Some(note) = loaded.ignored_note() {
        eprintln!("note: {path}: {note}");
    }
    Ok(loaded.objects)
}

/// Reads `path` (`-` for stdin) as [`load_objects`] does, keeping the objects of other kinds.
pub fn load_input(path: &str) -> anyhow::Result<pv_sim::Loaded> {
    let text = read_input(path)?;
    pv_sim::load(&text).map_err(|e| user(format!("{path}: {e}")))
}

/// The log filter of `run` and `up` for `-v` repeated `v` times (`RUST_LOG` wins): by default
/// what the controller changes (info), with `-v` why (debug). Each phase change, bind,
/// finalizer and recorded event ([`pv_core::PROGRESS`]) is shown by default only where `progress`
/// is asked for (`up`); `run` shows them from `-v` on, as kube-controller-manager shows them from
/// `--v=2` (`--v=3` for finalizers and events).
pub fn log_filter(v: u8, progress: bool) -> &'static str {
    match v {
        // kube-client logs each failed connection as an error; the preflight check and the
        // watches already report those in their own words.
        0 if progress => "warn,kube_client=off,pv_kube=info,pv_core=info,pv_controller=info",
        0 => "warn,kube_client=off,pv_kube=info,pv_core=info,pv_controller=info,pv_core::progress=warn",
        1 => "warn,kube_client=off,pv_kube=debug,pv_core=debug,pv_controller=debug",
        2 => "info,pv_kube=debug,pv_core=debug,pv_controller=debug",
        3 => "debug",
        _ => "trace",
    }
}

/// Parses klog-style verbosity: `--v=2` / `-v=2` / `-v 2` give the number; `-vv` reaches here as
/// `v` (the letters after the first), so a run of `v`s counts one level each.
pub fn parse_verbosity(s: &str) -> Result<u8, String> {
    if !s.is_empty() && s.bytes().all(|b| b == b'v') {
        return u8::try_from(s.len() + 1).map_err(|_| "too many v's".to_string());
    }
    s.parse::<u8>().map_err(|_| format!("invalid verbosity {s:?}: a number from 0 to 255 (klog's --v), or -v, -vv"))
}

/// Sets up logging to stderr (`RUST_LOG` wins; default warnings only).
pub fn init_logging(default: &str, json: bool) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    use std::io::IsTerminal;
    let b = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal());
    let _ = if json { b.json().try_init() } else { b.try_init() };
}
