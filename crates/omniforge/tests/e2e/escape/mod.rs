//! Escape suite: script tools that try to break out of the sandbox, one attack per function,
//! each run twice (issue 11): `ATTACK::with_namespaces` and `ATTACK::without_namespaces`.
//!
//! Each test starts the real `omniforge serve` (127.0.0.1, port 0, `--uv .deps/bin/uv`, a data
//! directory under `CARGO_TARGET_TMPDIR`, i.e. outside `/tmp` like a production
//! `/var/lib/omniforge`; a marker secret `OMNIFORGE_E2E_SECRET` in its environment and no other
//! inherited `OMNIFORGE_*` variable) in one of two [`Mode`]s:
//! - with namespaces: `--sandbox strict`, the default layers but no start without bubblewrap,
//!   so an attack never runs unsandboxed;
//! - without namespaces: `--sandbox standard --sandbox-disable-layer namespaces`, what a
//!   machine without bubblewrap gives scripts (the flag is hidden and test-only: `sandbox.rs`
//!   finds `/usr/bin/bwrap` itself, so hiding it from `PATH` would not do). `standard` refuses
//!   to start when scripts would run privileged, so these attacks too never run as root.
//!
//! speaks MCP over Streamable HTTP through [`HttpClient`] (each call with its own time budget,
//! [`HttpClient::exchange`]), creates a tool whose code attempts the attack with
//! `omniforge_create_tool`, calls it, and checks four things:
//!
//! 1. the attack is contained, judged from the host side wherever possible (the file on the
//!    host is unchanged, the listener accepted nothing, the secret is not in the output, no
//!    process carrying the test's marker is left) and within a time bound;
//! 2. the answer is a CallToolResult (normal or `isError`), never a JSON-RPC error;
//! 3. the server is healthy afterwards: a trivial script tool answers, `GET /healthz` is 200,
//!    the process is alive and logged no panic;
//! 4. the layer that stopped the attack is named from what the script itself observed
//!    (`ENOENT` vs `EACCES` vs `EROFS` vs `ENETUNREACH`, `MemoryError`, `BlockingIOError` on
//!    fork, `[timeout]` ...). Every script prints one JSON line per probe.
//!
//! Each test prints an `ESCAPE-SUMMARY | attack | contained | layer | time` row (shown with
//! `--no-capture`); a failure message names the attack, what the script saw and what leaked.
//!
//! Also here: WIRE-24 (an inputSchema without `properties` is listed with `properties: {}`)
//! and WIRE-33 (heartbeat progress for a silent long call with a progressToken, none without;
//! the run length comes from `OMNIFORGE_E2E_LONG_RUN_S`, default 18 s: the heartbeat comes
//! after 15 s of silence).
//!
//! Needs `.deps/bin/uv` (`scripts/bootstrap`) and bubblewrap; PyPI for one test (`six`).
//!
//! The attacks are grouped by theme: [`reads`], [`writes`], [`network`], [`bombs`],
//! [`outlive`], [`depth`] (seccomp and Landlock), [`privilege`]; [`scene`] is what each runs
//! in, [`verdict`] judges it, [`procs`] looks at the host's processes; [`wire_cases`] holds
//! WIRE-24 and WIRE-33.

mod bombs;
mod depth;
mod network;
mod outlive;
mod privilege;
mod procs;
mod reads;
mod scene;
mod verdict;
mod wire_cases;
mod writes;

use std::collections::BTreeSet;
use std::io::Read as _;
use std::net::{TcpListener, UdpSocket};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use regex::Regex;
use serde_json::{Value, json};
use tempfile::TempDir;

use crate::support::{self, Exchange, HttpClient, Serve, panic_lines, try_eventually, unique, uv};

use bombs::{
    escape_fork_bomb, escape_infinite_loop, escape_memory_bomb, escape_output_flood, timeout_layer,
};
use depth::{
    escape_kernel_surface_stopped_by_seccomp, escape_landlock_closes_what_namespaces_leave_open,
    healthz_layers,
};
use network::escape_tcp_connection_while_network_off;
use outlive::{escape_closed_stdin_sleeps, escape_double_fork_daemon, escape_setsid_grandchild};
use privilege::escape_a_script_never_runs_privileged;
use procs::{Watch, leftovers, marked};
use reads::{escape_read_database, escape_read_other_tools_env, escape_read_server_environment};
use scene::{Call, Scene, absorb, call_tool, call_tool_with, create, session};
use verdict::{Obs, Verdict, find, layer_of, observations, short, summary_row};
use writes::{escape_fill_disk_outside_tmp, escape_write_outside_tmp};

/// The run's private `/tmp` and largest file (`RunSpec::max_file_bytes` default): 64 MiB.
const TMP_CAP: u64 = 64 << 20;

/// A fresh directory outside `/tmp` (the sandbox has its own `/tmp`, so a data directory
/// under the host's `/tmp` would make "write outside /tmp" meaningless).
fn fresh_home() -> TempDir {
    let base = Path::new(env!("CARGO_TARGET_TMPDIR"));
    std::fs::create_dir_all(base).unwrap();
    tempfile::Builder::new()
        .prefix("escape-")
        .tempdir_in(base)
        .unwrap()
}

/// Which sandbox the server under attack has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Every layer, bubblewrap's namespaces included (`--sandbox strict`).
    Namespaces,
    /// Without the namespace layer, as on a machine without bubblewrap.
    NoNamespaces,
    /// Every layer, and the attack tool's calls run on its warm template (`--warm-pool 8`;
    /// the two modes above run cold, `--warm-pool 0`). `/healthz` must show the template
    /// that ran the call, or the pool's reason for running the code cold.
    Warm,
}

impl Mode {
    fn args(self) -> &'static [&'static str] {
        match self {
            Mode::Namespaces => &["--sandbox", "strict", "--warm-pool", "0"],
            Mode::NoNamespaces => &[
                "--sandbox",
                "standard",
                "--sandbox-disable-layer",
                "namespaces",
                "--warm-pool",
                "0",
            ],
            Mode::Warm => &["--sandbox", "strict", "--warm-pool", "8"],
        }
    }

    fn label(self) -> &'static str {
        match self {
            Mode::Namespaces => "with namespaces",
            Mode::NoNamespaces => "without namespaces",
            Mode::Warm => "warm",
        }
    }

    /// The layer that makes a path not exist for the script.
    fn hides(self) -> &'static str {
        match self {
            Mode::Namespaces | Mode::Warm => "namespaces (mount or PID ns: not in the sandbox)",
            Mode::NoNamespaces => {
                "unprivileged-uid (the run's mount ns: hidden by a tmpfs, or hidepid /proc)"
            }
        }
    }
}

/// Runs each attack three times: cold with and without the namespace layer
/// (`NAME::with_namespaces`, `NAME::without_namespaces`) and on the warm path (`NAME::warm`)
/// (CI runs all three: they are ordinary tests).
macro_rules! thrice {
    ($($attack:ident),* $(,)?) => {
        $(
            mod $attack {
                #[tokio::test]
                async fn with_namespaces() {
                    crate::support::needs_deps!();
                    super::$attack(super::Mode::Namespaces).await
                }

                #[tokio::test]
                async fn without_namespaces() {
                    crate::support::needs_deps!();
                    super::$attack(super::Mode::NoNamespaces).await
                }

                #[tokio::test]
                async fn warm() {
                    crate::support::needs_deps!();
                    super::$attack(super::Mode::Warm).await
                }
            }
        )*
    };
}

/// What an attack server runs on: its data directory (outside `/tmp`, see [`fresh_home`]),
/// the marker secret in its environment, and when the attack's clock started.
struct Home {
    data: PathBuf,
    secret: String,
    started: Instant,
    _dir: TempDir,
}

impl Home {
    fn db(&self) -> PathBuf {
        self.data.join("omniforge.db")
    }

    /// The environment directory whose `requirements.txt` contains `needle` (`""`: the
    /// environment without dependencies).
    fn env_with(&self, needle: &str) -> PathBuf {
        let envs = self.data.join("envs");
        let mut seen = Vec::new();
        for entry in std::fs::read_dir(&envs)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", envs.display()))
            .flatten()
        {
            if !entry.path().join("bin/python").exists() {
                continue;
            }
            let req =
                std::fs::read_to_string(entry.path().join("requirements.txt")).unwrap_or_default();
            if (needle.is_empty() && req.trim().is_empty())
                || (!needle.is_empty() && req.contains(needle))
            {
                return entry.path();
            }
            seen.push(entry.file_name());
        }
        panic!(
            "no environment in {} matches {needle:?} (envs: {seen:?})",
            envs.display()
        )
    }
}

/// `OMNIFORGE_E2E_SECRET=<secret> omniforge serve --listen 127.0.0.1:0 --data-dir DATA --uv UV`
/// with `mode`'s sandbox flags and `args`, and no inherited `OMNIFORGE_*` variable.
async fn attack_server(mode: Mode, args: &[&str]) -> (Serve, Home) {
    let started = Instant::now();
    assert!(
        uv().exists(),
        "{} is missing: the escape tests need uv from .deps/. Run `scripts/bootstrap` (from \
         the repository root), then rerun.",
        uv().display()
    );
    let dir = fresh_home();
    let data = dir.path().join("data");
    std::fs::create_dir(&data).unwrap();
    let secret = unique("escape-secret-");
    let mut command = Serve::command()
        .args(&["--data-dir".as_ref(), data.as_os_str()])
        .args(&["--uv".as_ref(), uv().as_os_str()])
        .args(mode.args())
        .args(args);
    // Hermetic and safe: no inherited OMNIFORGE_* setting (e.g. OMNIFORGE_SANDBOX=off in a
    // developer's shell) may weaken the server; `strict` (the same layers as the default
    // `standard` when bubblewrap works) refuses to start rather than run these attacks
    // unsandboxed on the host, and `standard` refuses to run scripts privileged.
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("OMNIFORGE_") {
            command.cmd().env_remove(key);
        }
    }
    command.cmd().env("OMNIFORGE_E2E_SECRET", &secret);
    let server = command.start().await;
    let home = Home {
        data,
        secret,
        started,
        _dir: dir,
    };
    (server, home)
}

/// The resident set of process `pid`, in KiB (0 once it is gone).
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

thrice!(
    escape_read_database,
    escape_read_other_tools_env,
    escape_read_server_environment,
    escape_write_outside_tmp,
    escape_fill_disk_outside_tmp,
    escape_tcp_connection_while_network_off,
    escape_fork_bomb,
    escape_memory_bomb,
    escape_infinite_loop,
    escape_output_flood,
    escape_setsid_grandchild,
    escape_double_fork_daemon,
    escape_closed_stdin_sleeps,
    escape_kernel_surface_stopped_by_seccomp,
    escape_landlock_closes_what_namespaces_leave_open,
    escape_a_script_never_runs_privileged,
);
