//! Killing a run's whole tree: its process group, and the per-run cgroups (`pids.max`,
//! `cgroup.kill`) that also catch what left the group; the per-run memory cgroup that caps
//! the whole tree's memory; and which of those limits a run hit ([`LimitHit`]).

use std::io::Write as _;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Sends SIGKILL to process group `pgid`; a group that is already gone is not an error.
pub(crate) fn kill_group(pgid: u32) {
    let Some(pid) = i32::try_from(pgid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
    else {
        return;
    };
    if let Err(e) = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL)
        && e != rustix::io::Errno::SRCH
    {
        tracing::warn!(pgid, error = %e, "killpg failed");
    }
}

/// Sends SIGKILL to every process whose real uid is `uid` (a run's own leased uid: whatever
/// still runs as it after the run is what escaped the process group). Returns how many.
pub(crate) fn kill_uid(uid: u32) -> usize {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return 0;
    };
    let mut killed = 0;
    for entry in dir.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<i32>().ok())
            .and_then(rustix::process::Pid::from_raw)
        else {
            continue;
        };
        let status = std::fs::read_to_string(entry.path().join("status")).unwrap_or_default();
        let real = status
            .lines()
            .find_map(|l| l.strip_prefix("Uid:"))
            .and_then(|ids| ids.split_whitespace().next()?.parse::<u32>().ok());
        if real == Some(uid)
            && rustix::process::kill_process(pid, rustix::process::Signal::KILL).is_ok()
        {
            killed += 1;
        }
    }
    killed
}

/// The cgroup parents this runner creates its per-run cgroups in.
#[derive(Debug, Default)]
pub(crate) struct Cgroups {
    pub(crate) pids: Option<Arc<CgroupParent>>,
    pub(crate) kill: Option<Arc<CgroupParent>>,
    /// The `memory` hierarchy (v2 with `memory` delegated, or v1): one limit for the tree.
    pub(crate) memory: Option<Arc<CgroupParent>>,
    counter: AtomicU64,
}

/// A limit of the run's cgroups that the run hit, read from the cgroup's own event counters
/// before the cgroups are removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LimitHit {
    /// The memory cgroup's OOM killer killed a process of the run (`oom_kill` in v2
    /// `memory.events`, v1 `memory.oom_control`): the tree's memory passed
    /// [`RunSpec::memory_bytes`](crate::RunSpec::memory_bytes).
    Memory,
    /// A fork or thread start was refused at `pids.max` (`max` in `pids.events`): the run
    /// reached [`RunSpec::max_processes`](crate::RunSpec::max_processes).
    Processes,
}

/// The limits given to one run's cgroups.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CgroupLimits {
    /// `pids.max`.
    pub(crate) processes: u32,
    /// The memory limit of the whole tree; `None` leaves the memory cgroup out.
    pub(crate) memory_bytes: Option<u64>,
}

impl CgroupLimits {
    /// The limits of a run or call: `processes` at once, `memory_bytes` for the tree.
    pub(crate) fn run(processes: u32, memory_bytes: u64) -> CgroupLimits {
        CgroupLimits {
            processes,
            memory_bytes: Some(memory_bytes),
        }
    }
}

/// A directory `omniforge-<server pid>-<runner number>` this process created in one cgroup hierarchy.
#[derive(Debug)]
pub(crate) struct CgroupParent {
    pub(crate) dir: PathBuf,
    /// cgroup v2 (`cgroup.kill`, `pids.max` when delegated) rather than v1.
    v2: bool,
}

impl Drop for CgroupParent {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.dir);
    }
}

impl Cgroups {
    /// Finds writable cgroup hierarchies (v2 with `cgroup.kill`, v1 or v2 `pids`) and creates
    /// this runner's parent directory in each.
    pub(crate) fn detect() -> Cgroups {
        let own = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
        // Unique per runner: several runners in one process must not remove each other's.
        static RUNNERS: AtomicU64 = AtomicU64::new(0);
        let name = format!(
            "omniforge-{}-{}",
            std::process::id(),
            RUNNERS.fetch_add(1, Ordering::Relaxed)
        );
        let mut cg = Cgroups::default();
        // cgroup v2: the unified hierarchy, mounted at /sys/fs/cgroup or (hybrid) below it.
        let v2_mount = ["/sys/fs/cgroup", "/sys/fs/cgroup/unified"]
            .into_iter()
            .map(PathBuf::from)
            .find(|m| m.join("cgroup.controllers").is_file() && m.join("cgroup.procs").is_file());
        let v2_own = own.lines().find_map(|l| l.strip_prefix("0::"));
        if let (Some(mount), Some(own)) = (v2_mount, v2_own) {
            let base = mount.join(own.trim_start_matches('/'));
            remove_stale(&base);
            let dir = base.join(&name);
            if std::fs::create_dir(&dir).is_ok() || dir.is_dir() {
                let parent = Arc::new(CgroupParent { dir, v2: true });
                let controllers = std::fs::read_to_string(parent.dir.join("cgroup.controllers"))
                    .unwrap_or_default();
                let delegate = |controller: &str| {
                    controllers.split_whitespace().any(|c| c == controller)
                        && std::fs::write(
                            parent.dir.join("cgroup.subtree_control"),
                            format!("+{controller}"),
                        )
                        .is_ok()
                };
                let pids = delegate("pids");
                let memory = delegate("memory");
                if parent.dir.join("cgroup.kill").is_file() {
                    if pids {
                        cg.pids = Some(Arc::clone(&parent));
                    }
                    if memory {
                        cg.memory = Some(Arc::clone(&parent));
                    }
                    cg.kill = Some(parent);
                }
            }
        }
        // cgroup v1 `pids` and `memory` hierarchies, for what v2 cannot limit.
        let v1 = |controller: &str, probe: &str| -> Option<Arc<CgroupParent>> {
            let own = own.lines().find_map(|l| {
                let mut f = l.splitn(3, ':');
                let (_, ctrl, path) = (f.next()?, f.next()?, f.next()?);
                ctrl.split(',').any(|c| c == controller).then_some(path)
            })?;
            let base = Path::new("/sys/fs/cgroup")
                .join(controller)
                .join(own.trim_start_matches('/'));
            remove_stale(&base);
            let dir = base.join(&name);
            ((std::fs::create_dir(&dir).is_ok() || dir.is_dir()) && dir.join(probe).is_file())
                .then(|| Arc::new(CgroupParent { dir, v2: false }))
        };
        if cg.pids.is_none() {
            cg.pids = v1("pids", "pids.max");
        }
        if cg.memory.is_none() {
            cg.memory = v1("memory", "memory.limit_in_bytes");
        }
        cg
    }

    /// Creates this run's cgroups, with `limits` where each hierarchy limits.
    pub(crate) fn create_run(&self, limits: CgroupLimits) -> RunCgroups {
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        let parents = [&self.pids, &self.kill, &self.memory];
        create_in(parents, &format!("run-{n}"), limits)
    }

    /// Kills whatever still runs below this runner's parents and removes every cgroup under
    /// them (`run-N`, `tpl-N/call-M`), deepest first, retrying for up to `grace` while killed
    /// processes are released: at shutdown, where the background removals of the last runs
    /// and templates would otherwise be dropped with the runtime and leave their cgroups
    /// behind. Returns how many cgroups are left.
    pub(crate) fn clear(&self, grace: Duration) -> usize {
        let mut parents: Vec<&Arc<CgroupParent>> = Vec::new();
        for p in [&self.pids, &self.kill, &self.memory].into_iter().flatten() {
            if !parents.iter().any(|q| Arc::ptr_eq(q, p)) {
                parents.push(p);
            }
        }
        let deadline = Instant::now() + grace;
        loop {
            let mut left = 0;
            for parent in &parents {
                kill_tree(&parent.dir, parent.v2);
                if let Ok(children) = std::fs::read_dir(&parent.dir) {
                    for c in children.flatten().filter(|c| c.path().is_dir()) {
                        remove_tree(&c.path());
                        left += usize::from(c.path().exists());
                    }
                }
            }
            if left == 0 || Instant::now() >= deadline {
                if left > 0 {
                    tracing::warn!(left, "cgroups of the last runs did not empty at shutdown");
                }
                return left;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Creates the cgroups of a warm template: `tpl-N` in each hierarchy, with the template's
    /// processes in `tpl-N/main` (limited to `max_processes`, no memory limit: the template's
    /// pages are shared by its calls) and each call in a `call-M` beside it (see
    /// [`TemplateCgroups`]). `None` without a `cgroup.kill` hierarchy.
    pub(crate) fn create_template(
        &self,
        max_processes: u32,
    ) -> Option<(TemplateCgroups, RunCgroups)> {
        self.kill.as_ref()?;
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        // One `tpl-N` per distinct hierarchy (one v2 cgroup may do all three).
        let mut made: Vec<(Arc<CgroupParent>, Arc<CgroupParent>)> = Vec::new();
        let mut make = |parent: &Option<Arc<CgroupParent>>| -> Option<Option<Arc<CgroupParent>>> {
            let Some(parent) = parent else {
                return Some(None);
            };
            if let Some((_, tpl)) = made.iter().find(|(p, _)| Arc::ptr_eq(p, parent)) {
                return Some(Some(Arc::clone(tpl)));
            }
            let dir = parent.dir.join(format!("tpl-{n}"));
            if let Err(e) = std::fs::create_dir(&dir) {
                tracing::warn!(dir = %dir.display(), error = %e, "cannot create a template cgroup");
                return None;
            }
            let tpl = Arc::new(CgroupParent { dir, v2: parent.v2 });
            // v2 hands a controller down only where the parent enables it (no process lives
            // here); the parent enabled the ones it has.
            if tpl.v2 {
                let controllers =
                    std::fs::read_to_string(tpl.dir.join("cgroup.controllers")).unwrap_or_default();
                for c in controllers
                    .split_whitespace()
                    .filter(|c| ["pids", "memory"].contains(c))
                {
                    if let Err(e) =
                        std::fs::write(tpl.dir.join("cgroup.subtree_control"), format!("+{c}"))
                    {
                        tracing::warn!(dir = %tpl.dir.display(), error = %e, "cannot delegate {c} to a template cgroup");
                        return None;
                    }
                }
            }
            made.push((Arc::clone(parent), Arc::clone(&tpl)));
            Some(Some(tpl))
        };
        let pids = make(&self.pids)?;
        let kill = make(&self.kill)?;
        let memory = make(&self.memory)?;
        let template = TemplateCgroups {
            pids,
            kill,
            memory,
            counter: AtomicU64::new(0),
        };
        let main = create_in(
            [&template.pids, &template.kill, &None],
            "main",
            CgroupLimits {
                processes: max_processes,
                memory_bytes: None,
            },
        );
        Some((template, main))
    }
}

/// The cgroups of one warm template, in each hierarchy the runner uses:
///
/// ```text
/// <runner's cgroup>/tpl-N/         cgroup.kill retires the whole template (v2)
///                   tpl-N/main/    bubblewrap, its init and the template (pids.max)
///                   tpl-N/call-M/  one call's child, moved in while it waits as a spare
/// ```
///
/// No process lives in `tpl-N` itself, so a v2 hierarchy can hand `pids` down to the calls.
#[derive(Debug)]
pub(crate) struct TemplateCgroups {
    pids: Option<Arc<CgroupParent>>,
    kill: Option<Arc<CgroupParent>>,
    memory: Option<Arc<CgroupParent>>,
    counter: AtomicU64,
}

impl TemplateCgroups {
    /// Cgroups for one call of the template, with the call's `limits`.
    pub(crate) fn create_call(&self, limits: CgroupLimits) -> RunCgroups {
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        let parents = [&self.pids, &self.kill, &self.memory];
        create_in(parents, &format!("call-{n}"), limits)
    }

    /// Kills every process of the template and its calls (`cgroup.kill` on `tpl-N`).
    pub(crate) fn kill(&self) {
        if let Some(k) = &self.kill {
            write_kill(&k.dir);
        }
    }

    /// Kills everything and removes the cgroups, retrying in the background while the killed
    /// processes are released (as [`RunCgroups::finish`]).
    pub(crate) fn finish(self, grace: Duration) {
        self.kill();
        let mut dirs: Vec<PathBuf> = [&self.pids, &self.kill, &self.memory]
            .into_iter()
            .flatten()
            .map(|p| p.dir.clone())
            .collect();
        dirs.dedup();
        let remove = move || {
            let mut left = false;
            for dir in &dirs {
                write_kill(dir);
                if let Ok(entries) = std::fs::read_dir(dir) {
                    for e in entries.flatten().filter(|e| e.path().is_dir()) {
                        left |= std::fs::remove_dir(e.path()).is_err();
                    }
                }
                left |= std::fs::remove_dir(dir).is_err() && dir.exists();
            }
            left
        };
        if !remove() {
            return;
        }
        let removal = async move {
            let deadline = Instant::now() + grace;
            while Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(10)).await;
                if !remove() {
                    return;
                }
            }
            tracing::warn!("a template cgroup did not empty in time; left behind");
        };
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(removal);
        }
    }
}

/// `cgroup.kill` of a v2 cgroup and all below it.
fn write_kill(dir: &Path) {
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .write(true)
        .open(dir.join("cgroup.kill"))
    {
        let _ = f.write_all(b"1");
    }
}

/// Creates `name` below the pids, kill and memory parents (once per distinct parent: one v2
/// cgroup may do all three), with `limits` where each limits.
fn create_in(
    parents: [&Option<Arc<CgroupParent>>; 3],
    name: &str,
    limits: CgroupLimits,
) -> RunCgroups {
    let [pids, kill, memory] = parents;
    // (parent, limits processes, limits memory)
    let mut targets: Vec<(&Arc<CgroupParent>, bool, bool)> = Vec::new();
    for (parent, is_pids, is_memory) in [
        (pids, true, false),
        (kill, false, false),
        (memory, false, true),
    ] {
        let Some(parent) = parent else { continue };
        if is_memory && limits.memory_bytes.is_none() {
            continue;
        }
        match targets.iter_mut().find(|t| Arc::ptr_eq(t.0, parent)) {
            Some(t) => {
                t.1 |= is_pids;
                t.2 |= is_memory;
            }
            None => targets.push((parent, is_pids, is_memory)),
        }
    }
    let mut dirs = Vec::new();
    for (parent, is_pids, is_memory) in targets {
        let dir = parent.dir.join(name);
        let created = std::fs::create_dir(&dir)
            .and_then(|()| {
                if is_pids {
                    std::fs::write(dir.join("pids.max"), limits.processes.to_string())?;
                }
                match limits.memory_bytes {
                    Some(bytes) if is_memory => limit_memory(&dir, parent.v2, bytes),
                    _ => Ok(()),
                }
            })
            .and_then(|()| {
                std::fs::OpenOptions::new()
                    .write(true)
                    .open(dir.join("cgroup.procs"))
            });
        match created {
            Ok(procs) => dirs.push(RunCgroup {
                dir,
                v2: parent.v2,
                pids: is_pids,
                memory: is_memory,
                procs: Some(procs),
                _parent: Arc::clone(parent),
            }),
            Err(e) => {
                tracing::warn!(dir = %dir.display(), error = %e, "cannot create a run cgroup");
                let _ = std::fs::remove_dir(&dir);
            }
        }
    }
    RunCgroups { dirs }
}

/// Caps the memory of cgroup `dir` at `bytes`, swap included (a tree that may swap is not
/// capped): v2 `memory.max` and `memory.swap.max` 0, v1 `memory.limit_in_bytes` and (where
/// the kernel accounts swap) `memory.memsw.limit_in_bytes`.
fn limit_memory(dir: &Path, v2: bool, bytes: u64) -> std::io::Result<()> {
    let (limit, swap, swap_value) = if v2 {
        ("memory.max", "memory.swap.max", "0".to_owned())
    } else {
        (
            "memory.limit_in_bytes",
            "memory.memsw.limit_in_bytes",
            bytes.to_string(),
        )
    };
    std::fs::write(dir.join(limit), bytes.to_string())?;
    if dir.join(swap).is_file() {
        std::fs::write(dir.join(swap), swap_value)?;
    }
    Ok(())
}

/// The value of `key` in a cgroup's flat-keyed events file (`max 3`, `oom_kill 1`).
fn event_count(file: &Path, key: &str) -> u64 {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(' ')?;
            (k == key).then(|| v.trim().parse().ok()).flatten()
        })
        .unwrap_or(0)
}

/// Removes `omniforge-<pid>-<n>` cgroups left by server processes that no longer exist.
fn remove_stale(base: &Path) {
    let Ok(entries) = std::fs::read_dir(base) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix("omniforge-")?.split('-').next())
        else {
            continue;
        };
        if Path::new("/proc").join(pid).exists() {
            continue;
        }
        remove_tree(&e.path());
    }
}

/// Kills every process in cgroup `dir` and below it: `cgroup.kill` on v2 (it covers the
/// subtree), each member of each cgroup on v1.
fn kill_tree(dir: &Path, v2: bool) {
    if v2 {
        write_kill(dir);
        return;
    }
    for pid in members(dir) {
        if let Some(pid) = rustix::process::Pid::from_raw(pid) {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
        }
    }
    if let Ok(children) = std::fs::read_dir(dir) {
        for c in children.flatten().filter(|c| c.path().is_dir()) {
            kill_tree(&c.path(), false);
        }
    }
}

/// Whether cgroup `dir` is gone after trying to remove it: removed now, or already removed
/// (by its template's removal, say: that is not a cgroup left behind).
fn removed(dir: &Path) -> bool {
    match std::fs::remove_dir(dir) {
        Ok(()) => true,
        Err(e) => e.kind() == std::io::ErrorKind::NotFound,
    }
}

/// Removes an empty cgroup and every cgroup below it, deepest first (a warm template's
/// `tpl-N/call-M` lie two levels down).
fn remove_tree(dir: &Path) {
    if let Ok(children) = std::fs::read_dir(dir) {
        for c in children.flatten().filter(|c| c.path().is_dir()) {
            remove_tree(&c.path());
        }
    }
    let _ = std::fs::remove_dir(dir);
}

/// One run's cgroups.
#[derive(Debug)]
pub(crate) struct RunCgroups {
    dirs: Vec<RunCgroup>,
}

#[derive(Debug)]
struct RunCgroup {
    dir: PathBuf,
    v2: bool,
    /// Limits processes (`pids.max`).
    pids: bool,
    /// Limits memory.
    memory: bool,
    /// Open `cgroup.procs`, written by the child before exec; closed after spawn.
    procs: Option<std::fs::File>,
    /// Keeps the parent directory until this run's cgroup is gone (the parent is removed
    /// when its runner and all its runs have been dropped).
    _parent: Arc<CgroupParent>,
}

impl RunCgroups {
    /// No cgroups (a measurement without per-call cgroups).
    pub(crate) fn none() -> RunCgroups {
        RunCgroups { dirs: Vec::new() }
    }

    /// Raw descriptors of the open `cgroup.procs` files, for the child's `pre_exec`.
    pub(crate) fn procs_fds(&self) -> Vec<std::os::fd::RawFd> {
        self.dirs
            .iter()
            .filter_map(|d| d.procs.as_ref().map(AsRawFd::as_raw_fd))
            .collect()
    }

    /// Moves process `pid` (as the server sees it) into each of the run's cgroups.
    ///
    /// # Errors
    /// A `cgroup.procs` write failed (the process is gone, or the move is not allowed).
    pub(crate) fn move_in(&self, pid: i32) -> std::io::Result<()> {
        for d in &self.dirs {
            std::fs::write(d.dir.join("cgroup.procs"), pid.to_string())?;
        }
        Ok(())
    }

    /// The limit the run hit, if any (memory first: an OOM kill ends what it hits, a refused
    /// fork may not). Read before [`RunCgroups::finish`], which removes the counters.
    pub(crate) fn limit_hit(&self) -> Option<LimitHit> {
        let count = |pick: fn(&RunCgroup) -> bool,
                     file: fn(bool) -> (&'static str, &'static str)| {
            self.dirs.iter().filter(|d| pick(d)).any(|d| {
                let (name, key) = file(d.v2);
                event_count(&d.dir.join(name), key) > 0
            })
        };
        let oom = count(
            |d| d.memory,
            |v2| {
                if v2 {
                    ("memory.events", "oom_kill")
                } else {
                    ("memory.oom_control", "oom_kill")
                }
            },
        );
        if oom {
            return Some(LimitHit::Memory);
        }
        count(|d| d.pids, |_| ("pids.events", "max")).then_some(LimitHit::Processes)
    }

    /// Closes the `cgroup.procs` files once the child is spawned.
    pub(crate) fn spawned(&mut self) {
        for d in &mut self.dirs {
            d.procs = None;
        }
    }

    /// Kills every process in the run's cgroups (`cgroup.kill`, or SIGKILL to each member on
    /// v1). Synchronous and quick; safe to call repeatedly.
    pub(crate) fn kill(&self) {
        for d in &self.dirs {
            if d.v2 {
                write_kill(&d.dir);
            } else {
                for pid in members(&d.dir) {
                    if let Some(pid) = rustix::process::Pid::from_raw(pid) {
                        let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
                    }
                }
            }
        }
    }

    /// Kills what is left and removes the cgroups. A cgroup whose killed processes have not
    /// all been released yet (often the case right after the leader is reaped: its removal
    /// fails with `EBUSY` for a few milliseconds) is removed by a background task that
    /// retries for up to `grace`, so the call does not wait for it.
    pub(crate) fn finish(mut self, grace: Duration) {
        self.kill();
        self.dirs.retain(|d| !removed(&d.dir));
        if self.dirs.is_empty() {
            return;
        }
        let mut left = RunCgroups {
            dirs: std::mem::take(&mut self.dirs),
        };
        let removal = async move {
            let deadline = Instant::now() + grace;
            while !left.dirs.is_empty() && Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(5)).await;
                left.kill();
                left.dirs.retain(|d| !removed(&d.dir));
            }
            for d in &left.dirs {
                tracing::warn!(dir = %d.dir.display(), "run cgroup did not empty in time; left behind");
            }
            left.dirs.clear();
        };
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => {
                rt.spawn(removal);
            }
            // No runtime (not the case in `Runner::run`): dropping the future drops `left`,
            // whose `Drop` starts the cleanup thread.
            Err(_) => drop(removal),
        }
    }
}

impl Drop for RunCgroups {
    fn drop(&mut self) {
        if self.dirs.is_empty() {
            return;
        }
        // Dropped mid-run (the caller abandoned the future): kill now; the processes take a
        // moment to exit, so a short-lived thread removes the cgroups once they are empty.
        self.kill();
        let mut dirs = std::mem::take(&mut self.dirs);
        dirs.retain(|d| !removed(&d.dir));
        if dirs.is_empty() {
            return;
        }
        let spawned = std::thread::Builder::new().name("omniforge-cgroup-cleanup".into()).spawn(move || {
            let mut left = RunCgroups { dirs };
            let deadline = Instant::now() + Duration::from_secs(5);
            while !left.dirs.is_empty() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(10));
                left.kill();
                left.dirs.retain(|d| !removed(&d.dir));
            }
            for d in &left.dirs {
                tracing::warn!(dir = %d.dir.display(), "run cgroup did not empty in time; left behind");
            }
            left.dirs.clear();
        });
        if let Err(e) = spawned {
            tracing::warn!(error = %e, "cannot start the cgroup cleanup thread");
        }
    }
}

fn members(dir: &Path) -> Vec<i32> {
    std::fs::read_to_string(dir.join("cgroup.procs"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 30: cgroups whose removal never ran (the background task dropped with the runtime
    /// at SIGTERM) are removed by [`Cgroups::clear`], a template's `tpl-N/call-M` included.
    #[test]
    fn clear_removes_what_the_last_runs_left() {
        let cg = Cgroups::detect();
        let parents: Vec<PathBuf> = [&cg.pids, &cg.kill, &cg.memory]
            .into_iter()
            .flatten()
            .map(|p| p.dir.clone())
            .collect();
        if parents.is_empty() {
            eprintln!("no writable cgroup hierarchy here: nothing to test");
            return;
        }
        let children = || -> Vec<PathBuf> {
            parents
                .iter()
                .filter_map(|p| std::fs::read_dir(p).ok())
                .flat_map(|d| d.flatten().map(|e| e.path()).filter(|p| p.is_dir()))
                .collect()
        };
        // Left behind as after SIGTERM: never finished, never dropped.
        std::mem::forget(cg.create_run(CgroupLimits::run(10, 1 << 28)));
        if let Some((template, call)) = cg.create_template(10) {
            std::mem::forget(call);
            std::mem::forget(template.create_call(CgroupLimits::run(10, 1 << 28)));
            std::mem::forget(template);
        }
        assert!(!children().is_empty(), "the runs made no cgroups");
        assert_eq!(cg.clear(Duration::from_secs(2)), 0);
        assert_eq!(children(), Vec::<PathBuf>::new(), "left behind");
    }
}
