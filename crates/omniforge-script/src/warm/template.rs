//! One warm template: started with a cold call's sandbox, talked to over its control socket,
//! keeping spare children ready (forked, confined, moved into their call's cgroups) and
//! stopped with everything it started.
//!
//! This file holds the running template (its state, `stop`, what it reports); its parts:
//! - `boot.rs`: `Template::start`, from its files to its boot report and shared rules;
//! - `spares.rs`: making spares (fork, directories, confinement, cgroup moves);
//! - `control.rs`: the control socket's reader and the process watcher.

mod boot;
mod control;
mod spares;

use std::collections::{HashMap, VecDeque};
use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use serde::Deserialize;
use serde_json::json;
use tokio::io::unix::AsyncFd;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use super::confine::SharedRules;
use super::wire::{self, Received};
use crate::run::RunSpec;
use crate::sandbox::{RunCgroups, TemplateCgroups, UidLease};

/// Messages of a spare child.
#[derive(Debug, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub(crate) enum FromSpare {
    /// Its private directories (handles attached).
    Dirs { tag: String },
    /// Confined and waiting for a call.
    Ready,
    /// Received its call; tool code runs from here on.
    Started,
    /// The tool's code and the interpreter's shutdown work are done.
    Done { code: i32 },
}

/// What a template's start ended in.
pub(crate) enum Started {
    /// Ready for calls.
    Ready(Arc<Template>),
    /// The code must run cold (the reason says why); the template was stopped.
    Cold(String),
}

/// The parts of a call's spec a template is made for (never its arguments or environment).
#[derive(Debug, Clone)]
pub(crate) struct TemplateSpec {
    pub(crate) python: PathBuf,
    pub(crate) env_dir: PathBuf,
    pub(crate) code: String,
    pub(crate) network: bool,
    pub(crate) memory_bytes: u64,
    pub(crate) max_processes: u32,
    pub(crate) max_file_bytes: u64,
}

impl TemplateSpec {
    pub(crate) fn of(spec: &RunSpec) -> TemplateSpec {
        TemplateSpec {
            python: spec.python.clone(),
            env_dir: spec.env_dir.clone(),
            code: spec.code.clone(),
            network: spec.network,
            memory_bytes: spec.memory_bytes,
            max_processes: spec.max_processes,
            max_file_bytes: spec.max_file_bytes,
        }
    }

    /// The spec the template starts with: a call's, without arguments or environment.
    fn run_spec(&self) -> RunSpec {
        let mut spec = RunSpec::new(
            &crate::Env {
                path: self.env_dir.clone(),
                env_id: String::new(),
            },
            self.code.clone(),
        );
        spec.python = self.python.clone();
        spec.network = self.network;
        spec.memory_bytes = self.memory_bytes;
        spec.max_processes = self.max_processes;
        spec.max_file_bytes = self.max_file_bytes;
        spec
    }
}

/// A spare child: forked, confined, in its call's cgroups, waiting for a call.
#[derive(Debug)]
pub(crate) struct Spare {
    /// Its pid on the host (from the kernel's credentials).
    pub(crate) pid: i32,
    /// Its end of the spare's socket pair.
    pub(crate) sock: AsyncFd<OwnedFd>,
    /// The name of its directories (`/tmp/c-<tag>`, `/dev/shm/c-<tag>`).
    pub(crate) tag: String,
    /// Its call's cgroups.
    pub(crate) cgroups: RunCgroups,
    /// Its wait status, when the template reaps it.
    pub(crate) exit: oneshot::Receiver<i32>,
}

/// A running template.
#[derive(Debug)]
pub(crate) struct Template {
    pub(crate) spec: TemplateSpec,
    ctl: AsyncFd<OwnedFd>,
    /// bubblewrap, until the template is stopped.
    process: Mutex<Option<tokio::process::Child>>,
    bwrap_pid: u32,
    /// The template interpreter's pid on the host.
    pid: i32,
    cgroups: Mutex<Option<(TemplateCgroups, RunCgroups)>>,
    rules: SharedRules,
    /// The template's host uid, held until its processes are dead.
    lease: Mutex<Option<UidLease>>,
    /// Its files (the code, the driver, the extension module).
    _dir: tempfile::TempDir,
    spares: Mutex<VecDeque<Spare>>,
    making: AtomicUsize,
    target_spares: usize,
    call_cgroups: bool,
    call_landlock: bool,
    replies: Mutex<HashMap<u64, oneshot::Sender<Received>>>,
    exits: Mutex<HashMap<u64, oneshot::Sender<i32>>>,
    next_id: AtomicU64,
    /// Fires when the template died or was stopped.
    pub(crate) dead: CancellationToken,
    stopped: AtomicBool,
    pub(crate) boot_time: Duration,
    pub(crate) in_flight: AtomicUsize,
    pub(crate) calls: AtomicU64,
    last_used: Mutex<Instant>,
}

impl Template {
    /// Tells the template to remove a finished call's directories.
    pub(crate) async fn cleanup(&self, tag: &str) {
        let _ = wire::send(&self.ctl, &json!({"op": "cleanup", "tag": tag}), &[]).await;
    }

    /// Stops the template: kills it and everything it started, removes its cgroups, gives
    /// back its uid once its processes are gone. Idempotent.
    pub(crate) fn stop(&self) {
        if self.stopped.swap(true, Ordering::AcqRel) {
            return;
        }
        self.dead.cancel();
        crate::sandbox::kill_group(self.bwrap_pid);
        let cgroups = lock(&self.cgroups).take();
        if let Some((t, _)) = &cgroups {
            t.kill();
        }
        lock(&self.spares).clear();
        let process = lock(&self.process).take();
        let lease = lock(&self.lease).take();
        let finish = async move {
            if let Some(mut p) = process {
                let _ = p.start_kill();
                let _ = p.wait().await;
            }
            if let Some((t, main)) = cgroups {
                drop(main);
                t.finish(Duration::from_secs(5));
            }
            drop(lease);
        };
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => {
                rt.spawn(finish);
            }
            // No runtime: the processes are killed; the rest is dropped.
            Err(_) => drop(finish),
        }
    }

    /// The template interpreter's pid on the host.
    pub(crate) fn pid(&self) -> Option<u32> {
        u32::try_from(self.pid).ok().filter(|p| *p > 0)
    }

    /// Whether the template was stopped (rather than having died).
    pub(crate) fn was_stopped(&self) -> bool {
        self.stopped.load(Ordering::Acquire)
    }

    /// When it was last used for a call.
    pub(crate) fn last_used(&self) -> Instant {
        *self
            .last_used
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Ready spares now.
    pub(crate) fn ready_spares(&self) -> usize {
        lock(&self.spares).len()
    }

    /// Resident and proportional memory (bytes) of the template's own processes
    /// (bubblewrap, its init, the interpreter) and of its ready spares.
    pub(crate) fn memory(&self) -> (Memory, Memory) {
        let mut own = Memory::default();
        for pid in main_pids(self.bwrap_pid, self.pid) {
            own += Memory::of(pid);
        }
        let mut spares = Memory::default();
        for s in lock(&self.spares).iter() {
            spares += Memory::of(s.pid);
        }
        (own, spares)
    }
}

impl Drop for Template {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Resident (RSS) and proportional (PSS, shared pages divided among their users) memory.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Memory {
    pub(crate) rss: u64,
    pub(crate) pss: u64,
}

impl Memory {
    fn of(pid: i32) -> Memory {
        let text = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).unwrap_or_default();
        let field = |name: &str| -> u64 {
            text.lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| v.split_whitespace().next())
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0)
                * 1024
        };
        Memory {
            rss: field("Rss:"),
            pss: field("Pss:"),
        }
    }
}

impl std::ops::AddAssign for Memory {
    fn add_assign(&mut self, other: Memory) {
        self.rss += other.rss;
        self.pss += other.pss;
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// bubblewrap, its children (its init in the sandbox) and the template interpreter.
fn main_pids(bwrap: u32, template: i32) -> Vec<i32> {
    let bwrap = bwrap as i32;
    let mut pids = vec![bwrap];
    let children =
        std::fs::read_to_string(format!("/proc/{bwrap}/task/{bwrap}/children")).unwrap_or_default();
    pids.extend(
        children
            .split_whitespace()
            .filter_map(|p| p.parse::<i32>().ok()),
    );
    if template > 0 && !pids.contains(&template) {
        pids.push(template);
    }
    pids
}
