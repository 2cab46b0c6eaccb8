//! The commands, one file per family: [`serve`] (`serve`, `stdio`, `bridge`), [`tool`],
//! [`resource`], [`prompt`], [`pack`], [`secret`] (and `secret rotate-key`), [`maintenance`] (`doctor`, `gc`, `backup`), [`migrate`],
//! [`health`] (the container's HEALTHCHECK).
//!
//! [`parts`] builds the server library's parts from the settings (the one place that knows
//! how), [`render`] turns results into text for people, [`progress`] shows long work on stderr,
//! and [`ready`] writes `serve --ready-file`.
//!
//! One-shot commands print their results to stdout, one line for each change they make; errors
//! go back to `main`, which prints them on stderr.

/// Prints a line for a one-shot command. A closed stdout (`omniforge tool list | head -1`) ends
/// the output quietly instead of panicking.
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout().lock(), $($arg)*);
    }};
}

mod audit;
mod health;
mod maintenance;
mod migrate;
mod pack;
mod parts;
mod progress;
mod prompt;
mod ready;
mod render;
mod resource;
mod secret;
mod serve;
mod tool;

use std::path::Path;

use anyhow::{Context, Result, bail};

use omniforge_server::{Caller, PrincipalId};
use omniforge_store::Actor;

use crate::flags::{Settings, Task};

/// Who runs a one-shot command: `cli:USER`, the OS user (`$USER`, else `$LOGNAME`, else the
/// `/etc/passwd` name of the real uid, else `uid-N`), recorded as author, in the call log and
/// in the audit log.
pub(crate) fn principal() -> PrincipalId {
    let usable = |u: &str| !u.is_empty() && !u.chars().any(|c| c.is_control() || c == ':');
    let user = ["USER", "LOGNAME"]
        .iter()
        .filter_map(|v| std::env::var(v).ok())
        .find(|u| usable(u))
        .or_else(|| user_of_uid().filter(|u| usable(u)));
    PrincipalId::cli(user.as_deref().unwrap_or("unknown"))
}

/// The name of this process's real uid, from `/proc/self/status` and `/etc/passwd`; `uid-N`
/// when the uid has no name.
fn user_of_uid() -> Option<String> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let uid = status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))?
        .split_whitespace()
        .next()?
        .to_owned();
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
    let name = passwd.lines().find_map(|l| {
        let mut fields = l.split(':');
        let name = fields.next()?;
        (fields.nth(1)? == uid).then(|| name.to_owned())
    });
    Some(name.unwrap_or_else(|| format!("uid-{uid}")))
}

/// The command-line user as the store records who did a write.
pub(crate) fn actor() -> Actor {
    Actor::new(principal().as_str())
}

/// The command-line user as the server library's one-shot actions take it.
pub(crate) fn caller() -> Caller {
    Caller::local(principal())
}

/// Runs what `settings` ask for.
///
/// # Errors
/// Whatever the command fails with, with context for people.
pub(crate) async fn run(settings: Settings) -> Result<()> {
    let Settings { common, task } = settings;
    if let Task::Health(url, timeout) = &task {
        // Touches nothing on disk: the HEALTHCHECK runs it every few seconds.
        return health::check(url, *timeout).await;
    }
    std::fs::create_dir_all(&common.data_dir)
        .with_context(|| format!("creating data directory {}", common.data_dir.display()))?;
    match task {
        Task::Serve(http) => serve::http(&common, http).await,
        Task::Stdio => serve::stdio(&common, parts::Tools::All).await,
        Task::Bridge => serve::stdio(&common, parts::Tools::ManifestOnly).await,
        Task::Doctor { json } => maintenance::doctor(&common, json),
        Task::Health(url, timeout) => health::check(&url, timeout).await,
        Task::Gc => maintenance::gc(&common).await,
        Task::Backup(file) => maintenance::backup(&common, &file).await,
        Task::Migrate(migrate) => migrate::run(&common, &migrate).await,
        Task::Secret(command) => secret::run(command, &common).await,
        Task::Tool(command) => tool::run(command, &common).await,
        Task::Resource(command) => resource::run(command, &common).await,
        Task::Prompt(command) => prompt::run(command, &common).await,
        Task::Pack(command) => pack::run(command, &common).await,
        Task::Audit(args) => audit::run(args, &common).await,
    }
}

/// Reads a JSON object from `file` (the arguments of a built-in).
fn read_json_object(file: &Path) -> Result<serde_json::Map<String, serde_json::Value>> {
    let text =
        std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
    let parsed = serde_json::from_str(&text).with_context(|| {
        format!(
            "parsing {} as JSON (a JSON object of the built-in's arguments, as in examples/tools/)",
            file.display()
        )
    })?;
    match parsed {
        serde_json::Value::Object(map) => Ok(map),
        _ => bail!("{}: expected a JSON object", file.display()),
    }
}
