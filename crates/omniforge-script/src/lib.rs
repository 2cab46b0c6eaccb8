//! OmniForge script tools: build a Python environment for a tool, then run one call of it
//! in a sandbox. Knows nothing of MCP or of the database: the server maps tool versions to
//! [`Lock`]s and [`RunSpec`]s, and [`RunOutput`]s to MCP results.
//!
//! # Layout
//!
//! - [`host`]: [`HostEnv`], what the crate uses of the server's environment (`PATH`, `HOME`,
//!   `TMPDIR`, proxies, uv's index variables), handed in by the binary: the crate reads no
//!   environment variable itself.
//! - [`env`](mod@env): the data directory's [`Layout`] (`env_dir(id)`, the run scratch, uv's
//!   cache), the pinned [`Interpreter`] and its syntax check ([`Interpreter::check_syntax`]),
//!   [`UvTool`] (found or installed), [`EnvBuilder`]: `lock` (hash-pinned requirements and an
//!   `env_id`) and `build` (a venv at `<data_dir>/envs/<env_id>/`, shared by identical locks,
//!   built atomically), [`gc`], [`pep723_dependencies`]. Runs at tool-creation time, outside
//!   the sandbox.
//! - [`run`]: [`Runner`] runs one [`RunSpec`] to a [`RunOutput`]: admission (slots and a
//!   bounded queue), a new process group, rlimits, bubblewrap, cgroups, stdin arguments,
//!   capped concurrent capture, timeout and cancellation that kill the whole tree; [`doctor`].
//! - [`warm`]: [`WarmPool`], warm templates in front of a [`Runner`]: a call of a tool
//!   version forks a child of an interpreter that already started in the full sandbox and
//!   imported the version's dependencies; each child gets its own Landlock domain, cgroups
//!   and limits, and its own environment; a call falls back to a cold run whenever the pool
//!   cannot serve it.
//! - [`sandbox`]: [`SandboxLevel`] and the layers each level requires
//!   ([`SandboxLevel::required_layers`]), the layers and their detection; the build sandbox
//!   for source distributions.
//! - `filter` (private): the seccomp programs (`seccompiler`).
//! - `helper` (private): the Landlock helper ([`main_if_helper`], [`HELPER_ARG`]): the
//!   embedding executable restricts itself with Landlock, then execs the interpreter.
//! - [`channel`]: the two-way side channel (JSON-RPC over a socketpair, `OMNIFORGE_FD`):
//!   [`ScriptMessage`]s from the script, answers to its requests.
//! - [`format`](mod@format): [`prototype_text`], the prototype's one-text-block rendering.
//! - `omniforge.py` ([`HELPER_MODULE`]): the stdlib-only helper installed in every
//!   environment (`import omniforge`). Its content builders and client requests (`sample`,
//!   `elicit`, `roots`) produce MCP shapes as plain JSON; this crate only carries them, and the
//!   server checks and maps them.
//! - `sys` (private): the only `unsafe` code, the child's `pre_exec` hook (and two server-side
//!   calls without a safe wrapper). `native/warm_ext.rs`, built by `build.rs` into the
//!   `_omniforge_warm` CPython extension a warm child loads, is its counterpart inside the
//!   sandbox: `no_new_privs` and `landlock_restrict_self`, nothing else.
//!
//! # Invariants
//!
//! - **No MCP, no database.** Nothing here knows rmcp types or SQL; tool versions, call logs
//!   and MCP results belong to the server.
//! - **Nothing is installed at call time.** uv runs only in [`EnvBuilder`]; a call executes
//!   the environment's interpreter directly (`-I`), so a call needs no network and no cache.
//! - **No package code runs outside a sandbox.** Wheels only by default (installing a wheel
//!   runs nothing); with `allow_source_builds`, resolving and installing run in bubblewrap. After
//!   packages are installed the server executes nothing from the environment outside the sandbox.
//! - **A call's processes die with the call**, whether it exits, times out, is cancelled or
//!   its future is dropped, cold or warm.
//! - **A script never runs privileged**: uid 65534 in bubblewrap's user namespace is a
//!   non-root server's uid or a uid leased for the run (or the warm template), never host root.
//! - **A warm template never holds a call's data**: arguments, environment, secrets and
//!   output go to and from the call's child only.
//! - **One `unsafe` module** (`sys`), the child's `pre_exec`; everything else is safe code.
//! - **No environment variables are read here**: the binary passes a [`HostEnv`].
//! - **Modules depend one way**: `warm` → `run`, `sandbox`, `channel`, `sys`; `run` → `env`,
//!   `sandbox`, `channel`, `helper`, `filter`, `sys`; `env` → `sandbox` (the build sandbox, process-group kill), `sys`; `sandbox` →
//!   `filter`, `helper`, `host`; `format` → `run`. Leaves: `channel`, `filter`, `helper`,
//!   `host`, `sys`.
//! - **Defence in depth**: bubblewrap's namespaces, then seccomp and Landlock inside them, each
//!   stopping something the others leave open (see [`sandbox`]).
//!
//! # Dependencies and why
//!
//! `rustix` (raw, allocation-free system calls for `pre_exec`: `setrlimit`, `fcntl`, `write`;
//! and `killpg`, `memfd_create`), `seccompiler` (rust-vmm's pure-Rust seccomp BPF compiler:
//! no libseccomp C library), `landlock` (the Landlock project's own crate), `libc` (system-call
//! and socket-family numbers for the filter), `sha2` (environment ids), `toml` (PEP 723 blocks), `tempfile` (atomic
//! environment builds, per-run scratch files), `tokio`/`tokio-util` (processes, the
//! cancellation token), `serde`/`serde_json`, `thiserror`, `tracing`. Not used:
//! `process-wrap` (tokio's `process_group` plus one `killpg` cover it, and the `pre_exec`
//! hook must also join cgroups), `nix` (rustix was already in the lock file).
//!
//! # Example
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use std::path::Path;
//! use omniforge_script::*;
//!
//! let data_dir = Path::new("/var/lib/omniforge");
//! // Only the binary reads the process environment; the crate gets what it needs.
//! let host = HostEnv::from_vars(std::env::vars_os());
//! let python = Interpreter::resolve(Path::new("python3")).await?;
//! let uv = UvTool::locate_or_install(data_dir, None, &python, &host).await?;
//! let builder = EnvBuilder::new(EnvConfig {
//!     data_dir: data_dir.to_owned(),
//!     uv,
//!     python,
//!     allow_source_builds: false,
//!     command_timeout: std::time::Duration::from_secs(600),
//!     host: host.clone(),
//! });
//! let code = "import humanize, omniforge\nprint(humanize.intcomma(omniforge.args()['n']))\n";
//! builder.config().python.check_syntax(code, SYNTAX_CHECK_TIMEOUT).await?;
//! let lock = builder.lock(&pep723_dependencies(code)?.into_iter().chain(["humanize".to_owned()]).collect::<Vec<_>>()).await?;
//! let env = builder.build(&lock, |event| eprintln!("{event:?}")).await?;
//!
//! let mut config = RunnerConfig::new(SandboxLevel::Standard);
//! config.scratch_dir = Layout::new(data_dir).run_dir();
//! config.host = host;
//! let runner = Runner::new(config)?;
//! let mut spec = RunSpec::new(&env, code);
//! spec.arguments = serde_json::json!({"n": 1234567});
//! let output = runner.run(spec, tokio_util::sync::CancellationToken::new()).await?;
//! let (text, is_error) = prototype_text(&output, None);
//! assert_eq!((text.as_str(), is_error), ("1,234,567", false));
//! # Ok(()) }
//! ```

#![deny(missing_docs)]
#![cfg_attr(not(test), warn(clippy::unwrap_used, clippy::expect_used))]

pub mod channel;
pub mod env;
mod filter;
pub mod format;
mod helper;
pub mod host;
pub mod run;
pub mod sandbox;
mod sys;
pub mod warm;

pub use channel::{LogMessage, Progress, RpcError, ScriptMessage, ScriptRequest, ScriptResult};
pub use env::{
    Env, EnvBuilder, EnvConfig, EnvError, HELPER_MODULE, Interpreter, Layout, Lock, ProgressEvent,
    SYNTAX_CHECK_TIMEOUT, SyntaxError, UV_VERSION, UvTool, gc, pep723_dependencies,
    pep723_tool_table,
};
pub use format::prototype_text;
pub use helper::{HELPER_ARG, main_if_helper};
pub use host::HostEnv;
pub use run::{
    Exit, Load, RunError, RunOutput, RunSpec, Runner, RunnerConfig, SINGLE_THREAD_VARS, doctor,
};
pub use sandbox::{
    Layer, LimitHit, RUN_UID_BASE, RUN_UID_SLOTS, SANDBOX_UID, SandboxLevel, UID_LEASE_DIR,
    protect_server_process,
};
pub use warm::{
    DEFAULT_MAX_TEMPLATES, DEFAULT_WARM_IDLE, Prepared, TemplateReport, TemplateState, WarmConfig,
    WarmError, WarmKey, WarmPool, WarmReport, warm_off_reason,
};
