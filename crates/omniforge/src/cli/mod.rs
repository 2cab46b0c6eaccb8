//! The commands, one file per family: [`serve`] (`serve`, `stdio`, `bridge`), [`tool`],
//! [`resource`], [`prompt`], [`pack`], [`secret`], [`maintenance`] (`doctor`, `gc`, `backup`).
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

mod maintenance;
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

use crate::flags::{Settings, Task};

/// Runs what `settings` ask for.
///
/// # Errors
/// Whatever the command fails with, with context for people.
pub(crate) async fn run(settings: Settings) -> Result<()> {
    let Settings { common, task } = settings;
    std::fs::create_dir_all(&common.data_dir)
        .with_context(|| format!("creating data directory {}", common.data_dir.display()))?;
    match task {
        Task::Serve(http) => serve::http(&common, http).await,
        Task::Stdio => serve::stdio(&common, parts::Tools::All).await,
        Task::Bridge => serve::stdio(&common, parts::Tools::ManifestOnly).await,
        Task::Doctor { json } => maintenance::doctor(&common, json),
        Task::Gc => maintenance::gc(&common).await,
        Task::Backup(file) => maintenance::backup(&common, &file).await,
        Task::Secret(command) => secret::run(command, &common).await,
        Task::Tool(command) => tool::run(command, &common).await,
        Task::Resource(command) => resource::run(command, &common).await,
        Task::Prompt(command) => prompt::run(command, &common).await,
        Task::Pack(command) => pack::run(command, &common).await,
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
