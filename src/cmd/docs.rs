//! `pv-controller completion SHELL` and `pv-controller man [SUBCOMMAND...]`: generated from the
//! same clap definitions that parse the command line, so they cannot drift from it.

use super::user;
use clap::Args;
use std::io::Write;
use std::process::ExitCode;

/// Arguments of `completion`.
#[derive(Args, Debug)]
pub struct CompletionArgs {
    /// The shell to complete for.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

/// Arguments of `man`.
#[derive(Args, Debug)]
pub struct ManArgs {
    /// A subcommand's page (`run`, `up`, ...; `bench plot` for a subcommand's own) instead of
    /// the program's.
    pub subcommand: Vec<String>,
}

/// Prints the completion script for `a.shell`.
pub fn completion(a: CompletionArgs, mut cmd: clap::Command) -> anyhow::Result<ExitCode> {
    let name = cmd.get_name().to_string();
    let mut out = Vec::new();
    clap_complete::generate(a.shell, &mut cmd, name, &mut out);
    std::io::stdout().write_all(&out)?;
    Ok(ExitCode::SUCCESS)
}

/// Prints the manual page of the program, or of one subcommand (`pv-controller-run(1)`,
/// `pv-controller-bench-plot(1)`).
pub fn man(a: ManArgs, cmd: clap::Command) -> anyhow::Result<ExitCode> {
    let version = cmd.get_version().unwrap_or_default().to_string();
    let mut page = cmd;
    for name in &a.subcommand {
        let sub = page.find_subcommand(name).cloned().ok_or_else(|| {
            let names: Vec<&str> = page.get_subcommands().map(|s| s.get_name()).filter(|n| *n != "help").collect();
            user(format!("man: no subcommand {name:?} (one of: {})", names.join(", ")))
        })?;
        let full = format!("{}-{}", page.get_name(), sub.get_name());
        page = sub.name(full).version(version.clone());
    }
    let mut out = Vec::new();
    clap_mangen::Man::new(page).render(&mut out)?;
    std::io::stdout().write_all(&out)?;
    Ok(ExitCode::SUCCESS)
}
