//! Command line, environment and config file, in two steps (as ripgrep's `lowargs`/`hiargs`):
//!
//! 1. [`parse`]: clap reads the raw flags, each with its `OMNIFORGE_*` environment variable
//!    ([`lowargs`], option groups in [`options`]);
//! 2. [`Settings::resolve`]: the config file ([`file`]) and then the defaults fill every gap
//!    ([`hiargs`]).
//!
//! Precedence: flags > environment > config file > defaults.

mod file;
mod hiargs;
mod lowargs;
mod oauth;
mod options;

use std::ffi::OsString;

use clap::parser::ValueSource;
use clap::{CommandFactory, FromArgMatches};

pub(crate) use hiargs::{Common, Http, Migrate, Settings, Task};
pub(crate) use lowargs::{
    AuditArgs, LowArgs, PackCommand, PromptCommand, ResourceCommand, SecretCommand, ToolCommand,
};
pub(crate) use options::{LogFormat, SandboxArg, SchemaProfileArg};

/// Parses the process's command line; prints help, the version or a usage error and exits
/// when that is what it holds.
pub(crate) fn parse() -> LowArgs {
    parse_from(std::env::args_os()).unwrap_or_else(|e| e.exit())
}

/// Parses `args` (the first is the program name).
///
/// # Errors
/// A usage error, or a request for help or the version (clap's "errors" that print and exit).
pub(crate) fn parse_from<I, T>(args: I) -> Result<LowArgs, clap::Error>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let args: Vec<OsString> = args.into_iter().map(Into::into).collect();
    let mut matches = lowargs::Cli::command().try_get_matches_from(&args)?;
    // An option that the top level and the subcommand both take reads its environment variable
    // at both levels, and the subcommand's value wins the merge. So when it was given on the
    // command line before the subcommand, the subcommand must not also take it from the
    // environment, or `OMNIFORGE_SANDBOX=off omniforge --sandbox strict serve` would run `off`.
    let before: Vec<String> = matches
        .ids()
        .filter(|id| matches.value_source(id.as_str()) == Some(ValueSource::CommandLine))
        .map(|id| id.as_str().to_owned())
        .collect();
    if !before.is_empty() {
        matches = without_env(lowargs::Cli::command(), &before).try_get_matches_from(&args)?;
    }
    Ok(lowargs::Cli::from_arg_matches(&matches)?.into_low_args())
}

/// `command` with the environment variables of the options `ids` dropped in every subcommand
/// (at any depth); the top level keeps them.
fn without_env(command: clap::Command, ids: &[String]) -> clap::Command {
    command.mut_subcommands(|sub| {
        let sub = sub.mut_args(|arg| {
            if ids.iter().any(|id| id == arg.get_id().as_str()) {
                arg.env(None)
            } else {
                arg
            }
        });
        without_env(sub, ids)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_line_is_consistent() {
        lowargs::Cli::command().debug_assert();
    }
}
