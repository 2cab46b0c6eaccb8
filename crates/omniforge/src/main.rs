//! The `omniforge` binary: it only wires things up. [`flags`] turns the command line, the
//! environment and the config file into settings, [`logging`] sets up tracing to stderr, and
//! [`cli`] runs the command on the library crates; see ARCHITECTURE.md.

mod cli;
mod flags;
mod logging;
mod telemetry;

use std::io::Write as _;

use anyhow::{Context, Result};

use crate::flags::{LowArgs, Settings};

fn main() {
    // The sandbox's Landlock helper is this executable: it must start before anything else.
    omniforge_script::main_if_helper();
    let args = flags::parse();
    // Before any credential is read (`--upstream-auth-file`) or a script runs: see
    // `forbid_memory_access`.
    let protected = args.serves_mcp().then(forbid_memory_access);
    let code = match run(args, protected) {
        Ok(()) => 0,
        Err(error) => {
            // stderr only: stdout may be the stdio transport. A closed stderr is not a reason to panic.
            let _ = writeln!(std::io::stderr(), "omniforge: error: {}", describe(&error));
            1
        }
    };
    // Exit explicitly: a blocking stdin read must not keep the process alive.
    std::process::exit(code);
}

fn run(args: LowArgs, protected: Option<std::io::Result<()>>) -> Result<()> {
    let settings = Settings::resolve(args)?;
    let tracer = logging::init(&settings.common)?;
    if let Some(Err(error)) = protected {
        tracing::warn!(%error, "cannot mark the process non-dumpable; processes of the same user can read its memory and environment");
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let result = runtime.block_on(cli::run(settings));
    // Do not wait for the blocking thread that reads stdin: it only ends when stdin closes,
    // and a SIGTERM must not wait for that.
    runtime.shutdown_background();
    if let Some(provider) = &tracer {
        telemetry::stop(provider);
    }
    result
}

/// Marks the server non-dumpable (`prctl(PR_SET_DUMPABLE, 0)`): a process of the same uid (a
/// script that runs without the sandbox's uid switch, or anything else the user runs) can then
/// no longer read this process's `/proc/PID/environ` (upstream credentials in
/// `OMNIFORGE_UPSTREAM_AUTH`), `mem`, or attach to it with ptrace, and no core dump holds its
/// secrets. Only the commands that serve MCP do this: they hold credentials and run scripts.
/// Children are unaffected (exec resets the flag).
fn forbid_memory_access() -> std::io::Result<()> {
    omniforge_script::protect_server_process()
}

/// The error and its causes on one line, leaving out a cause whose text the message already
/// carries (library errors often print their source too).
fn describe(error: &anyhow::Error) -> String {
    let mut text = error.to_string();
    for cause in error.chain().skip(1) {
        let cause = cause.to_string();
        if !text.contains(&cause) {
            text.push_str(": ");
            text.push_str(&cause);
        }
    }
    text
}
