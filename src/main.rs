//! `pv-controller`: the binary is wiring only. Each subcommand lives in `cmd/`; errors are mapped
//! to exit codes in one place: 0 success, 1 user error (bad input, flag, unreachable server),
//! 2 internal failure. No panic reaches the user as a panic.

mod cmd;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use clap::{CommandFactory, Parser, Subcommand};
use std::process::ExitCode;

/// Kubernetes' PersistentVolume controller: binds claims to volumes, provisions and reclaims.
#[derive(Parser, Debug)]
#[command(name = "pv-controller", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

// Parsed once per process: the size of the largest variant costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand, Debug)]
enum Command {
    /// Start the embedded Kubernetes-compatible API server (durable) with the controller attached.
    Up(cmd::up::UpArgs),
    /// Reconcile a cluster state offline, on virtual time, and print the converged state.
    Simulate(cmd::simulate::SimulateArgs),
    /// Run the controller against a Kubernetes API server (replaces KCM's persistentvolume-binder).
    Run(cmd::run::RunArgs),
    /// Say why a claim is Pending, Bound or Lost, from a file or a live cluster (read-only).
    Explain(cmd::explain::ExplainArgs),
    /// Write a kubeconfig for `run` on stdout: the current context's cluster and a new token of
    /// a ServiceAccount (e.g. `--service-account kube-system/pv-controller > pv-controller.kubeconfig`).
    Kubeconfig(cmd::kubeconfig::KubeconfigCmdArgs),
    /// What a running `run --shadow` found: `shadow report http://HOST:PORT` reads its
    /// `/shadow` and summarises the decisions compared with the binder in charge.
    Shadow(cmd::shadow::ShadowArgs),
    /// Measure how fast claims become Bound: against an API server, or in-process (--simulate).
    Bench(cmd::bench::BenchArgs),
    /// Print a shell completion script, e.g. `source <(pv-controller completion bash)`.
    Completion(cmd::docs::CompletionArgs),
    /// Print the manual page (roff), e.g. `pv-controller man | man -l -`; `man run` for a subcommand.
    Man(cmd::docs::ManArgs),
}

/// A server that runs for days runs without transparent huge pages. mimalloc asks for them
/// (`madvise`) on its arenas, and a 2 MiB page is resident whole as soon as one object in it
/// is: with the many threads of `up` (each write waits for its group commit on one) that held
/// 348 MB for 1,000 pairs, against 144 MB without, at the same speed. The simulation, which
/// lives for seconds on one thread, keeps them: they make it about 10 % faster.
fn long_running() {
    #[cfg(target_os = "linux")]
    if let Err(e) = rustix::thread::disable_transparent_huge_pages(true) {
        eprintln!("warning: could not turn off transparent huge pages for this process: {e}");
    }
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let code = if e.use_stderr() { 1 } else { 0 };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    if matches!(cli.command, Command::Up(_) | Command::Run(_)) {
        long_running();
    }
    #[cfg(feature = "failpoints")]
    pv_store::setup_failpoints();
    let result = std::panic::catch_unwind(|| match cli.command {
        Command::Up(a) => cmd::up::run(a),
        Command::Simulate(a) => cmd::simulate::run(a),
        Command::Run(a) => cmd::run::run(a),
        Command::Explain(a) => cmd::explain::run(a),
        Command::Bench(a) => cmd::bench::run(a),
        Command::Kubeconfig(a) => cmd::kubeconfig::run(a),
        Command::Shadow(a) => cmd::shadow::run(a),
        Command::Completion(a) => cmd::docs::completion(a, Cli::command()),
        Command::Man(a) => cmd::docs::man(a, Cli::command()),
    });
    match result {
        Ok(Ok(code)) => code,
        Ok(Err(e)) => cmd::report(&e),
        Err(_) => {
            eprintln!("error: internal failure (a bug in pv-controller); please report it");
            ExitCode::from(2)
        }
    }
}
