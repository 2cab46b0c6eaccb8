//! The spike's own cgroups, laid out as omniforge-script's runner does on this hybrid host:
//! the v1 `pids` hierarchy for `pids.max` and the v2 mount (here `/sys/fs/cgroup/unified`,
//! which carries only hugetlb) for `cgroup.kill`.
//!
//! ```text
//! v2: <unified>/<own>/warm-spike-PID/tpl-K/            the template (bwrap and Python)
//!     <unified>/<own>/warm-spike-PID/tpl-K/call-N/     one per spare/call: inside the template's
//!                                                      cgroup namespace (clone3 CLONE_INTO_CGROUP)
//! v1: /sys/fs/cgroup/pids/<own>/warm-spike-PID/tpl-K/  pids.max for the template
//!     /sys/fs/cgroup/pids/<own>/warm-spike-PID/call-N/ pids.max per call (a sibling, not a child:
//!                                                      v1 limits are hierarchical)
//! ```

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

#[derive(Debug)]
pub struct Root {
    v2: Option<PathBuf>,
    v1_pids: Option<PathBuf>,
    counter: AtomicU64,
}

fn own(line_matches: impl Fn(&str) -> bool) -> Option<String> {
    std::fs::read_to_string("/proc/self/cgroup")
        .ok()?
        .lines()
        .find_map(|l| {
            let mut f = l.splitn(3, ':');
            let (_, ctrl, path) = (f.next()?, f.next()?, f.next()?);
            line_matches(ctrl).then(|| path.trim_start_matches('/').to_owned())
        })
}

impl Root {
    pub fn create() -> Root {
        let name = format!("warm-spike-{}", std::process::id());
        let v2 = ["/sys/fs/cgroup", "/sys/fs/cgroup/unified"]
            .into_iter()
            .map(PathBuf::from)
            .find(|m| m.join("cgroup.controllers").is_file() && m.join("cgroup.procs").is_file())
            .and_then(|m| Some(m.join(own(|c| c.is_empty())?).join(&name)))
            .filter(|d| std::fs::create_dir(d).is_ok() && d.join("cgroup.kill").is_file());
        let v1_pids = own(|c| c.split(',').any(|c| c == "pids"))
            .map(|o| Path::new("/sys/fs/cgroup/pids").join(o).join(&name))
            .filter(|d| std::fs::create_dir(d).is_ok());
        Root {
            v2,
            v1_pids,
            counter: AtomicU64::new(0),
        }
    }

    pub fn describe(&self) -> String {
        format!("v2 kill: {:?}; v1 pids: {:?}", self.v2, self.v1_pids)
    }

    /// A group for one template: `tpl-K` in both hierarchies.
    pub fn template(&self, max_pids: u32) -> std::io::Result<Group> {
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        let name = format!("tpl-{n}");
        Group::create(
            self.v2.as_ref().map(|d| d.join(&name)),
            self.v1_pids.as_ref().map(|d| d.join(&name)),
            max_pids,
        )
    }

    /// A group for one call of the template whose group is `tpl`.
    pub fn call(&self, tpl: &Group, max_pids: u32) -> std::io::Result<Group> {
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        let name = format!("call-{n}");
        Group::create(
            tpl.v2.as_ref().map(|d| d.join(&name)),
            self.v1_pids.as_ref().map(|d| d.join(&name)),
            max_pids,
        )
    }
}

impl Drop for Root {
    /// Removes every cgroup the run made, deepest first, killing what is left in them (a run
    /// that ends with an error leaves templates' and calls' cgroups behind otherwise).
    fn drop(&mut self) {
        for d in [&self.v2, &self.v1_pids].into_iter().flatten() {
            remove_tree(d, Instant::now() + Duration::from_secs(2));
        }
    }
}

fn remove_tree(dir: &Path, deadline: Instant) {
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                remove_tree(&e.path(), deadline);
            }
        }
    }
    loop {
        for pid in members(dir) {
            // SAFETY: kill(2) on a pid read from our own cgroup; at worst ESRCH.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        if std::fs::remove_dir(dir).is_ok() || !dir.exists() || Instant::now() > deadline {
            return;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// One cgroup in each hierarchy.
#[derive(Debug)]
pub struct Group {
    pub v2: Option<PathBuf>,
    pub v1: Option<PathBuf>,
}

impl Group {
    fn create(v2: Option<PathBuf>, v1: Option<PathBuf>, max_pids: u32) -> std::io::Result<Group> {
        if let Some(d) = &v2 {
            std::fs::create_dir(d)?;
        }
        if let Some(d) = &v1 {
            std::fs::create_dir(d)?;
            std::fs::write(d.join("pids.max"), max_pids.to_string())?;
        }
        Ok(Group { v2, v1 })
    }

    /// Open `cgroup.procs` files, for a `pre_exec` that writes "0".
    pub fn procs_files(&self) -> std::io::Result<Vec<std::fs::File>> {
        [&self.v1, &self.v2]
            .into_iter()
            .flatten()
            .map(|d| {
                std::fs::OpenOptions::new()
                    .write(true)
                    .open(d.join("cgroup.procs"))
            })
            .collect()
    }

    /// Moves process `pid` (host pid) into both cgroups; returns how long the writes took.
    pub fn move_in(&self, pid: i32) -> std::io::Result<Duration> {
        let t = Instant::now();
        for d in [&self.v1, &self.v2].into_iter().flatten() {
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .open(d.join("cgroup.procs"))?;
            f.write_all(pid.to_string().as_bytes())?;
        }
        Ok(t.elapsed())
    }

    /// Moves process `pid` into the v1 pids cgroup only.
    pub fn move_in_v1(&self, pid: i32) -> std::io::Result<Duration> {
        let t = Instant::now();
        if let Some(d) = &self.v1 {
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .open(d.join("cgroup.procs"))?;
            f.write_all(pid.to_string().as_bytes())?;
        }
        Ok(t.elapsed())
    }

    /// A directory descriptor of the v2 cgroup (for clone3 CLONE_INTO_CGROUP).
    pub fn v2_dir_fd(&self) -> Option<std::os::fd::OwnedFd> {
        use std::os::unix::fs::OpenOptionsExt as _;
        let d = self.v2.as_ref()?;
        std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECTORY | libc::O_CLOEXEC)
            .open(d)
            .ok()
            .map(Into::into)
    }

    /// Kills everything in the group: `cgroup.kill` (v2), SIGKILL to each member (v1).
    pub fn kill(&self) {
        if let Some(d) = &self.v2 {
            let _ = std::fs::write(d.join("cgroup.kill"), "1");
        }
        if let Some(d) = &self.v1 {
            for pid in members(d) {
                // SAFETY: kill(2) on a pid read from the cgroup; at worst ESRCH.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
        }
    }

    /// Kills what is left and removes both cgroups, retrying while they are busy (the killed
    /// processes take a moment to be released), for up to 2 s.
    pub fn remove_blocking(&self) {
        let deadline = Instant::now() + Duration::from_secs(2);
        loop {
            self.kill();
            let left: Vec<_> = [&self.v1, &self.v2]
                .into_iter()
                .flatten()
                .filter(|d| d.exists() && std::fs::remove_dir(d).is_err())
                .collect();
            if left.is_empty() || Instant::now() > deadline {
                return;
            }
            std::thread::sleep(Duration::from_millis(5));
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
