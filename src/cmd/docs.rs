//! `pv-controller completion SHELL` and `pv-controller man [SUBCOMMAND]`: generated from the
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
    /// A subcommand's page (`run`, `up`, ...) instead of the program's.
    pub subcommand: Option<String>,
}

/// Prints the completion script for `a.shell`.
pub fn completion(a: CompletionArgs, mut cmd: clap::Command) -> anyhow::Result<ExitCode> {
    let name = cmd.get_name().to_string();
    let mut out = Vec::new();
    clap_complete::generate(a.shell, &mut cmd, name, &mut out);
    std::io::stdout().write_all(&out)?;
    Ok(ExitCode::SUCCESS)
}

/// Prints the manual page of the program, or of one subcommand (`pv-controller-run(1)`).
pub fn man(a: ManArgs, cmd: clap::Command) -> anyhow::Result<ExitCode> {
    let page = match a.subcommand.as_deref() {
        None => cmd,
        Some(name) => {
            let sub = cmd.find_subcommand(name).cloned().ok_or_else(|| {
                let names: Vec<&str> = cmd.get_subcommands().map(|s| s.get_name()).collect();
                user(format!("man: no subcommand {name:?} (one of: {})", names.join(", ")))
            })?;
            let full = format!("{}-{}", cmd.get_name(), sub.get_name());
            sub.name(full).version(cmd.get_version().unwrap_or_default().to_string())
        }
    };
    let mut out = Vec::new();
    clap_mangen::Man::new(page).render(&mut out)?;
    std::io::stdout().write_all(&out)?;
    Ok(ExitCode::SUCCESS)
}
