//! The server side of a warm template: start it in the captured sandbox, keep spare children,
//! move each spare into its own call cgroups off the latency path, hand a call its pipes and
//! side channel over SCM_RIGHTS, capture its output with caps, reap, kill, clean up.

use std::collections::{HashMap, VecDeque};
use std::io::Write as _;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::{Notify, oneshot};

use crate::capture::RealSandbox;
use crate::cgroups::{Group, Root};
use crate::fdpass;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// How a template is built and run; the knobs exist to measure each piece.
#[derive(Debug, Clone)]
pub struct Options {
    /// What the template imports before any call: `none`, `ast` (what the code imports),
    /// `submodules` (that, plus every public submodule of the imported top-level packages).
    pub preload: &'static str,
    /// Fork spares with clone3(CLONE_INTO_CGROUP) into their v2 call cgroup (the v1 pids
    /// cgroup still needs a move).
    pub clone3: bool,
    /// The call's Landlock domain denies creating named unix sockets.
    pub deny_make_sock: bool,
    /// The spare applies its own Landlock domain (per-call dirs, scopes).
    pub child_landlock: bool,
    /// `gc.freeze()` after the imports.
    pub gc_freeze: bool,
    /// Per-call pids and kill cgroups (the spare is moved in before its call).
    pub cgroups: bool,
    /// Spares kept ready (forked, confined, moved into their cgroups). 0: fork per call.
    pub spares: usize,
    /// Make the replacement spare when a call takes one (`true`) or after the call (`false`).
    pub replenish_on_take: bool,
    pub max_pids: u32,
    /// Tell the template to import what children imported that it had not (lazy imports such
    /// as numpy.ma inside np.percentile), so later children start with it.
    pub learn_preload: bool,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            preload: "submodules",
            clone3: false,
            deny_make_sock: true,
            child_landlock: true,
            gc_freeze: true,
            cgroups: true,
            spares: 1,
            replenish_on_take: false,
            max_pids: 128,
            learn_preload: false,
        }
    }
}

/// Timings of one spare, µs.
#[derive(Debug, Clone, Default)]
pub struct SpareTimes {
    /// From the `spare` request to the spare's `ready` (fork, fd closing, dirs, Landlock).
    pub make_us: u64,
    /// Inside the child: fork to ready.
    pub fork_to_ready_us: u64,
    /// Inside the child: the Landlock ruleset (create, rules, restrict).
    pub landlock_us: u64,
    /// The server's writes to cgroup.procs (v1 pids + v2).
    pub move_us: u64,
}

/// (wait status, template's CLOCK_MONOTONIC ns at reaping, ours at the report).
type ExitReport = (i32, u64, u64);

struct Spare {
    /// Host pid of the spare child.
    pid: i32,
    sock: AsyncFd<OwnedFd>,
    dirs: Vec<String>,
    group: Option<Group>,
    /// (wait status, template's CLOCK_MONOTONIC ns at reaping, ours at the report)
    exit: oneshot::Receiver<ExitReport>,
    times: SpareTimes,
}

/// One call's inputs.
#[derive(Debug, Clone)]
pub struct Call {
    pub arguments: Value,
    pub env: Vec<(String, String)>,
    pub timeout: Duration,
    pub cap: usize,
}

impl Call {
    pub fn new(arguments: Value) -> Call {
        Call {
            arguments,
            env: Vec::new(),
            timeout: Duration::from_secs(30),
            cap: 1 << 20,
        }
    }
}

/// One call's outcome.
#[derive(Debug)]
pub struct Outcome {
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    /// Exit code, 128 + signal for a signal, -1 for a timeout.
    pub code: i32,
    pub total: Duration,
    /// A ready spare was there when the call came.
    pub spare_was_ready: bool,
    pub spare: SpareTimes,
    /// From the child: its `recv` of the call to the first line of tool code, and the code.
    pub recv_to_code_us: Option<u64>,
    pub code_us: Option<u64>,
    /// Host pid of the child that ran the call.
    pub pid: i32,
    /// From the call's start: the call message sent; the child's `done` (or its exit).
    pub sent: Duration,
    pub exited: Duration,
    /// In the child: exit handlers and flushes after the code.
    pub exit_funcs_us: u64,
    /// From our send of the call to the child's return from recvmsg, and from the child's
    /// `done` send to our receipt of it (both wake-ups, CLOCK_MONOTONIC).
    pub send_to_child_us: u64,
    pub done_to_server_us: u64,
    /// Modules the call imported that the template had not.
    pub new_modules: Vec<String>,
}

#[derive(Clone)]
pub struct Template {
    inner: Arc<Inner>,
}

struct Inner {
    ctl: AsyncFd<OwnedFd>,
    bwrap: Mutex<Option<tokio::process::Child>>,
    /// Host pid of the template's Python process.
    pub pid: i32,
    group: Option<Group>,
    root: Arc<Root>,
    replies: Mutex<HashMap<u64, oneshot::Sender<OwnedFd>>>,
    exits: Mutex<HashMap<u64, oneshot::Sender<ExitReport>>>,
    status: Mutex<Option<oneshot::Sender<Value>>>,
    ready: Mutex<VecDeque<Spare>>,
    making: AtomicUsize,
    next: AtomicU64,
    dead: AtomicBool,
    opts: Options,
    path_var: String,
    boot: Value,
    notify: Notify,
    learned: Mutex<std::collections::HashSet<String>>,
}

fn memfd_with(bytes: &[u8]) -> std::io::Result<OwnedFd> {
    // SAFETY: memfd_create with a static NUL-terminated name.
    let fd = unsafe { libc::memfd_create(c"warm-spike-seccomp".as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: fresh descriptor.
    let mut f = unsafe { std::fs::File::from_raw_fd(fd) };
    f.write_all(bytes)?;
    std::io::Seek::seek(&mut f, std::io::SeekFrom::Start(0))?;
    Ok(f.into())
}

fn setsockopt_passcred(fd: RawFd) -> std::io::Result<()> {
    let one: libc::c_int = 1;
    // SAFETY: setsockopt with a valid int option value.
    let r = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_PASSCRED,
            &one as *const _ as *const libc::c_void,
            size_of::<libc::c_int>() as u32,
        )
    };
    if r < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

fn pipe() -> std::io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: valid out-array.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: fresh descriptors.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

static SPAWN_IDLE: AtomicBool = AtomicBool::new(false);

/// Templates started while this is set begin under SCHED_IDLE (for the first-call experiment:
/// a cold call runs while the template boots beside it).
pub fn set_spawn_idle(on: bool) {
    SPAWN_IDLE.store(on, Ordering::Release);
}

/// The env variables that keep numeric libraries single-threaded at fork.
pub const THREAD_VARS: &[&str] = &[
    "OPENBLAS_NUM_THREADS",
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "NUMEXPR_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
    "RAYON_NUM_THREADS",
];

impl Template {
    /// Starts a template for `code` in the sandbox `real` captured for `env_dir`, and waits
    /// until it has imported what the code imports.
    pub async fn start(
        real: &RealSandbox,
        env_dir: &Path,
        code: &str,
        template_py: &Path,
        root: Arc<Root>,
        opts: Options,
        single_thread_vars: bool,
    ) -> Result<Template, BoxError> {
        let (ours, theirs) = fdpass::seqpacket_pair()?;
        setsockopt_passcred(ours.as_raw_fd())?;
        let memfd = memfd_with(&real.seccomp)?;
        let args = real.template_args(template_py, memfd.as_raw_fd());
        let group = if opts.cgroups {
            Some(root.template(64)?)
        } else {
            None
        };
        let procs: Vec<std::fs::File> = match &group {
            Some(g) => g.procs_files()?,
            None => Vec::new(),
        };
        let path_var = format!(
            "{}:/usr/local/bin:/usr/bin:/bin",
            env_dir.join("bin").display()
        );
        let mut cmd = tokio::process::Command::new("/usr/bin/bwrap");
        cmd.args(&args)
            .env_clear()
            .env("PATH", &path_var)
            .env("HOME", "/tmp")
            .env("LANG", "C.UTF-8")
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .env("WARM_CTL_FD", theirs.as_raw_fd().to_string())
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true)
            .process_group(0);
        if single_thread_vars {
            for v in THREAD_VARS {
                cmd.env(v, "1");
            }
        }
        let procs_fds: Vec<RawFd> = procs.iter().map(AsRawFd::as_raw_fd).collect();
        let inherit = [theirs.as_raw_fd(), memfd.as_raw_fd()];
        let idle = SPAWN_IDLE.load(Ordering::Acquire);
        // SAFETY: the hook only makes async-signal-safe system calls (write, setrlimit, fcntl)
        // on descriptors that stay open in the parent until spawn returns.
        unsafe {
            cmd.pre_exec(move || {
                for &fd in &procs_fds {
                    if libc::write(fd, b"0".as_ptr() as *const libc::c_void, 1) < 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                }
                for (res, v) in [
                    (libc::RLIMIT_AS, 2u64 << 30),
                    (libc::RLIMIT_FSIZE, 64 << 20),
                    (libc::RLIMIT_NOFILE, 1024),
                    (libc::RLIMIT_CORE, 0),
                ] {
                    let l = libc::rlimit {
                        rlim_cur: v,
                        rlim_max: v,
                    };
                    if libc::setrlimit(res, &l) < 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                }
                if idle {
                    let param = libc::sched_param { sched_priority: 0 };
                    if libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) < 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                }
                for fd in inherit {
                    if libc::fcntl(fd, libc::F_SETFD, 0) < 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                }
                Ok(())
            });
        }
        let child = cmd.spawn()?;
        drop(theirs);
        drop(memfd);
        drop(procs);
        fdpass::set_nonblocking(&ours)?;
        let ctl = fdpass::async_fd(ours)?;
        let mut ro: Vec<String> = real
            .landlock_ro
            .iter()
            .filter(|p| *p != "/dev")
            .cloned()
            .collect();
        ro.sort();
        let rw: Vec<String> = real
            .landlock_rw
            .iter()
            .filter(|p| *p != "/tmp" && *p != "/dev/shm")
            .cloned()
            .collect();
        let init = json!({"op": "init", "code": code, "landlock_ro": ro, "landlock_rw": rw,
            "preload": opts.preload, "child_landlock": opts.child_landlock, "gc_freeze": opts.gc_freeze,
            "deny_make_sock": opts.deny_make_sock});
        send_ctl(&ctl, &fdpass::json(&init), &[]).await?;
        let ready = tokio::time::timeout(Duration::from_secs(60), fdpass::recv_async(&ctl))
            .await
            .map_err(|_| "the template did not become ready in 60 s")??
            .ok_or("the template exited before it was ready")?;
        let boot: Value = serde_json::from_slice(&ready.data)?;
        let pid = ready
            .pid
            .ok_or("no credentials on the template's ready message")?;
        let inner = Arc::new(Inner {
            ctl,
            bwrap: Mutex::new(Some(child)),
            pid,
            group,
            root,
            replies: Mutex::default(),
            exits: Mutex::default(),
            status: Mutex::default(),
            ready: Mutex::default(),
            making: AtomicUsize::new(0),
            next: AtomicU64::new(0),
            dead: AtomicBool::new(false),
            opts,
            path_var,
            boot,
            notify: Notify::new(),
            learned: Mutex::default(),
        });
        tokio::spawn(read_ctl(Arc::clone(&inner)));
        let t = Template { inner };
        t.replenish();
        Ok(t)
    }

    /// The template's `ready` message (pid, threads, preloaded modules, boot time).
    pub fn boot(&self) -> &Value {
        &self.inner.boot
    }

    pub fn pid(&self) -> i32 {
        self.inner.pid
    }

    pub fn bwrap_pid(&self) -> Option<u32> {
        self.inner
            .bwrap
            .lock()
            .unwrap()
            .as_ref()
            .and_then(|c| c.id())
    }

    /// Waits until `n` spares are ready (for measurements that start from a steady state).
    pub async fn wait_spares(&self, n: usize) {
        for _ in 0..2000 {
            if self.inner.ready.lock().unwrap().len() >= n {
                return;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }

    /// The template's own view: threads and live children.
    pub async fn status(&self) -> Result<Value, BoxError> {
        let (tx, rx) = oneshot::channel();
        *self.inner.status.lock().unwrap() = Some(tx);
        send_ctl(
            &self.inner.ctl,
            &fdpass::json(&json!({"op": "status"})),
            &[],
        )
        .await?;
        Ok(tokio::time::timeout(Duration::from_secs(5), rx).await??)
    }

    /// Keeps `opts.spares` spares ready or in the making.
    fn replenish(&self) {
        let inner = &self.inner;
        loop {
            let have = inner.ready.lock().unwrap().len() + inner.making.load(Ordering::Acquire);
            if have >= inner.opts.spares || inner.dead.load(Ordering::Acquire) {
                return;
            }
            inner.making.fetch_add(1, Ordering::AcqRel);
            let inner = Arc::clone(inner);
            tokio::spawn(async move {
                let spare = make_spare(&inner).await;
                inner.making.fetch_sub(1, Ordering::AcqRel);
                match spare {
                    Ok(s) => {
                        inner.ready.lock().unwrap().push_back(s);
                        inner.notify.notify_one();
                    }
                    Err(e) if !inner.dead.load(Ordering::Acquire) => {
                        eprintln!("warm-spike: making a spare failed: {e}")
                    }
                    Err(_) => {}
                }
            });
        }
    }

    /// Runs one call in a fresh child of the template.
    pub async fn call(&self, call: &Call) -> Result<Outcome, BoxError> {
        let started = Instant::now();
        let inner = &self.inner;
        let taken = inner.ready.lock().unwrap().pop_front();
        let spare_was_ready = taken.is_some();
        let mut spare = match taken {
            Some(s) => s,
            None => make_spare(inner).await?,
        };
        if inner.opts.replenish_on_take {
            self.replenish();
        }
        let (stdin_r, stdin_w) = pipe()?;
        let (out_r, out_w) = pipe()?;
        let (err_r, err_w) = pipe()?;
        let (chan_ours, chan_theirs) = std::os::unix::net::UnixStream::pair()?;
        let cpu = call.timeout.as_secs() + 1;
        let env: serde_json::Map<String, Value> = call
            .env
            .iter()
            .map(|(k, v)| (k.clone(), Value::String(v.clone())))
            .collect();
        let msg = json!({"op": "call", "path": inner.path_var, "env": env, "cpu_s": cpu,
            "as_bytes": 2u64 << 30, "fsize_bytes": 64u64 << 20});
        fdpass::send(
            spare.sock.as_raw_fd(),
            &fdpass::json(&msg),
            &[
                stdin_r.as_raw_fd(),
                out_w.as_raw_fd(),
                err_w.as_raw_fd(),
                chan_theirs.as_raw_fd(),
            ],
        )?;
        let t_sent_ns = monotonic_ns();
        drop((stdin_r, out_w, err_w, chan_theirs));
        let sent = started.elapsed();
        let input = serde_json::to_vec(&call.arguments)?;
        let mut stdin = tokio::net::unix::pipe::Sender::from_owned_fd(stdin_w)?;
        let in_task = tokio::spawn(async move {
            let _ = stdin.write_all(&input).await;
        });
        let cap = call.cap;
        let out_task = tokio::spawn(capture(
            tokio::net::unix::pipe::Receiver::from_owned_fd(out_r)?,
            cap,
        ));
        let err_task = tokio::spawn(capture(
            tokio::net::unix::pipe::Receiver::from_owned_fd(err_r)?,
            cap,
        ));
        chan_ours.set_nonblocking(true)?;
        let chan = tokio::net::UnixStream::from_std(chan_ours)?;
        let chan_task = tokio::spawn(async move {
            let mut chan = chan;
            let mut sink = Vec::new();
            let _ = chan.read_to_end(&mut sink).await;
        });
        // The call ends at the child's `done` (sent after its code and exit handlers, before it
        // lets go of its pipes and tears down its memory), or at its exit when it never says
        // `done` (killed, crashed), or at the timeout.
        enum End {
            Done(Value, u64),
            Exited(Option<ExitReport>),
            Timeout,
        }
        let end = tokio::select! {
            m = fdpass::recv_async(&spare.sock) => match m {
                Ok(Some(r)) => match serde_json::from_slice::<Value>(&r.data) {
                    Ok(v) if v["op"] == "done" => End::Done(v, monotonic_ns()),
                    _ => End::Exited((&mut spare.exit).await.ok()),
                },
                _ => End::Exited((&mut spare.exit).await.ok()),
            },
            s = &mut spare.exit => End::Exited(s.ok()),
            () = tokio::time::sleep(call.timeout) => End::Timeout,
        };
        let exited = started.elapsed();
        // Whatever the call left running dies with it (cgroup.kill does not wait).
        if let Some(g) = &spare.group {
            g.kill();
        }
        let grace = Duration::from_millis(500);
        let (out, err, _) = tokio::join!(
            tokio::time::timeout(grace, out_task),
            tokio::time::timeout(grace, err_task),
            tokio::time::timeout(grace, chan_task),
        );
        in_task.abort();
        let mut recv_to_code_us = None;
        let mut code_us = None;
        let mut exit_funcs_us = 0;
        let mut new_modules = Vec::new();
        let mut wakeups_us = (0, 0);
        let code = match &end {
            End::Done(v, got_ns) => {
                let t_recv = v["t_recv_ns"].as_u64().unwrap_or(0);
                let t_exit = v["t_exit_ns"].as_u64().unwrap_or(0);
                wakeups_us = (
                    t_recv.saturating_sub(t_sent_ns) / 1000,
                    got_ns.saturating_sub(t_exit) / 1000,
                );
                recv_to_code_us = v["recv_to_code_us"].as_u64();
                code_us = v["code_us"].as_u64();
                exit_funcs_us = v["exit_funcs_us"].as_u64().unwrap_or(0);
                new_modules = v["new_modules"]
                    .as_array()
                    .map(|a| {
                        a.iter()
                            .filter_map(|m| m.as_str().map(str::to_owned))
                            .collect()
                    })
                    .unwrap_or_default();
                v["code"].as_i64().unwrap_or(-2) as i32
            }
            End::Exited(Some((s, _, _))) if libc::WIFEXITED(*s) => libc::WEXITSTATUS(*s),
            End::Exited(Some((s, _, _))) if libc::WIFSIGNALED(*s) => 128 + libc::WTERMSIG(*s),
            End::Exited(_) => -2,
            End::Timeout => -1,
        };
        if inner.opts.learn_preload && !new_modules.is_empty() {
            let fresh: Vec<String> = {
                let mut learned = inner.learned.lock().unwrap();
                new_modules
                    .iter()
                    .filter(|m| learned.insert((*m).clone()))
                    .cloned()
                    .collect()
            };
            if !fresh.is_empty() {
                send_ctl(
                    &inner.ctl,
                    &fdpass::json(&json!({"op": "preload", "modules": fresh})),
                    &[],
                )
                .await?;
            }
        }
        let total = started.elapsed();
        let spare_pid = spare.pid;
        let spare_times = spare.times.clone();
        // Off the latency path: remove the call's cgroups and directories, make a new spare.
        let group = spare.group.take();
        let dirs = std::mem::take(&mut spare.dirs);
        let cleanup = Arc::clone(inner);
        let reaped = matches!(end, End::Done(..) | End::Timeout).then_some(spare.exit);
        tokio::spawn(async move {
            if let Some(exit) = reaped {
                let _ = tokio::time::timeout(Duration::from_secs(5), exit).await;
            }
            if let Some(g) = group {
                let _ = tokio::task::spawn_blocking(move || g.remove_blocking()).await;
            }
            let _ = send_ctl(
                &cleanup.ctl,
                &fdpass::json(&json!({"op": "cleanup", "dirs": dirs})),
                &[],
            )
            .await;
        });
        if !inner.opts.replenish_on_take {
            self.replenish();
        }
        Ok(Outcome {
            stdout: out.ok().and_then(Result::ok).unwrap_or_default(),
            stderr: err.ok().and_then(Result::ok).unwrap_or_default(),
            code,
            total,
            spare_was_ready,
            spare: spare_times,
            recv_to_code_us,
            code_us,
            pid: spare_pid,
            new_modules,
            exit_funcs_us,
            send_to_child_us: wakeups_us.0,
            done_to_server_us: wakeups_us.1,
            sent,
            exited,
        })
    }

    /// Stops the template: kills its process group and its cgroups.
    pub async fn stop(&self) {
        self.inner.dead.store(true, Ordering::Release);
        let child = self.inner.bwrap.lock().unwrap().take();
        if let Some(mut c) = child {
            if let Some(pid) = c.id() {
                // SAFETY: killpg on the process group we created for bwrap.
                unsafe { libc::killpg(pid as i32, libc::SIGKILL) };
            }
            let _ = c.wait().await;
        }
        let spares: Vec<Spare> = self.inner.ready.lock().unwrap().drain(..).collect();
        for s in spares {
            if let Some(g) = s.group {
                let _ = tokio::task::spawn_blocking(move || g.remove_blocking()).await;
            }
        }
        if let Some(g) = &self.inner.group {
            g.remove_blocking();
        }
        let _ = &self.inner.root;
    }
}

/// CLOCK_MONOTONIC in ns: the clock `time.monotonic_ns()` reads in the sandbox (bubblewrap
/// makes no time namespace).
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime with a valid out-pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

async fn send_ctl(ctl: &AsyncFd<OwnedFd>, data: &[u8], fds: &[RawFd]) -> std::io::Result<()> {
    loop {
        let mut guard = ctl.writable().await?;
        match guard.try_io(|s| fdpass::send(s.get_ref().as_raw_fd(), data, fds)) {
            Ok(r) => return r,
            Err(_would_block) => continue,
        }
    }
}

async fn read_ctl(inner: Arc<Inner>) {
    loop {
        let msg = match fdpass::recv_async(&inner.ctl).await {
            Ok(Some(m)) => m,
            _ => break,
        };
        let Ok(v) = serde_json::from_slice::<Value>(&msg.data) else {
            continue;
        };
        let id = v["id"].as_u64().unwrap_or(u64::MAX);
        match v["op"].as_str() {
            Some("spare") => {
                if let Some(e) = v["error"].as_str() {
                    eprintln!("warm-spike: the template could not make spare {id}: {e}");
                }
                let tx = inner.replies.lock().unwrap().remove(&id);
                if let (Some(tx), Some(fd)) = (tx, msg.fds.into_iter().next()) {
                    let _ = tx.send(fd);
                }
            }
            Some("exit") => {
                let tx = inner.exits.lock().unwrap().remove(&id);
                if let Some(tx) = tx {
                    let _ = tx.send((
                        v["status"].as_i64().unwrap_or(-1) as i32,
                        v["t_reaped_ns"].as_u64().unwrap_or(0),
                        monotonic_ns(),
                    ));
                }
            }
            Some("status") => {
                if let Some(tx) = inner.status.lock().unwrap().take() {
                    let _ = tx.send(v);
                }
            }
            _ => {}
        }
    }
    inner.dead.store(true, Ordering::Release);
    inner.replies.lock().unwrap().clear();
    inner.exits.lock().unwrap().clear();
}

async fn make_spare(inner: &Arc<Inner>) -> Result<Spare, BoxError> {
    let t0 = Instant::now();
    let id = inner.next.fetch_add(1, Ordering::Relaxed);
    let (tx, rx) = oneshot::channel();
    let (etx, erx) = oneshot::channel();
    inner.replies.lock().unwrap().insert(id, tx);
    inner.exits.lock().unwrap().insert(id, etx);
    // With clone3, the call's cgroups exist before the child does: it starts in the v2 one.
    let mut early_group = None;
    let mut cgroup_fd = None;
    if inner.opts.cgroups && inner.opts.clone3 {
        let tpl = inner.group.as_ref().ok_or("no template cgroup")?;
        let g = inner.root.call(tpl, inner.opts.max_pids)?;
        // clone3 checks the caller's write access to the target's (and the common
        // ancestor's) cgroup.procs: root-owned, 0644, and the sandbox's uid 65534 is host uid
        // 0 without capabilities, so the owner bits allow it; no delegation (chown) needed.
        cgroup_fd = Some(g.v2_dir_fd().ok_or("no v2 cgroup to clone into")?);
        early_group = Some(g);
    }
    let t_req = Instant::now();
    send_ctl(
        &inner.ctl,
        &fdpass::json(&json!({"op": "spare", "id": id})),
        &cgroup_fd
            .as_ref()
            .map(|f| vec![f.as_raw_fd()])
            .unwrap_or_default(),
    )
    .await?;
    drop(cgroup_fd);
    let fd = rx
        .await
        .map_err(|_| "the template went away (or clone3 failed)")?;
    fdpass::set_nonblocking(&fd)?;
    let sock = fdpass::async_fd(fd)?;
    let ready = fdpass::recv_async(&sock)
        .await?
        .ok_or("the spare exited before it was ready")?;
    let v: Value = serde_json::from_slice(&ready.data)?;
    let pid = ready
        .pid
        .ok_or("no credentials on the spare's ready message")?;
    let make_us = t0.elapsed().as_micros() as u64;
    let _ = t_req;
    let mut move_us = 0;
    let group = if let Some(g) = early_group {
        // Only the v1 pids cgroup is left to join.
        let (g, took) = tokio::task::spawn_blocking(move || {
            let took = g.move_in_v1(pid);
            (g, took)
        })
        .await?;
        move_us = took?.as_micros() as u64;
        Some(g)
    } else if inner.opts.cgroups {
        let tpl = inner.group.as_ref().ok_or("no template cgroup")?;
        let g = inner.root.call(tpl, inner.opts.max_pids)?;
        let (g, took) = tokio::task::spawn_blocking(move || {
            let took = g.move_in(pid);
            (g, took)
        })
        .await?;
        move_us = took?.as_micros() as u64;
        Some(g)
    } else {
        None
    };
    Ok(Spare {
        pid,
        sock,
        dirs: v["dirs"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|d| d.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default(),
        group,
        exit: erx,
        times: SpareTimes {
            make_us,
            fork_to_ready_us: v["fork_to_ready_us"].as_u64().unwrap_or(0),
            landlock_us: v["landlock_us"].as_u64().unwrap_or(0),
            move_us,
        },
    })
}

async fn capture(mut pipe: tokio::net::unix::pipe::Receiver, cap: usize) -> Vec<u8> {
    let mut kept = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match pipe.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                let take = cap.saturating_sub(kept.len()).min(n);
                kept.extend_from_slice(&buf[..take]);
            }
        }
    }
    kept
}

/// Resident memory of a process, kB: (VmRSS, Pss, private = Private_Clean + Private_Dirty).
pub fn memory_kb(pid: i32) -> (u64, u64, u64) {
    let field = |text: &str, name: &str| -> u64 {
        text.lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let smaps = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).unwrap_or_default();
    (
        field(&status, "VmRSS:"),
        field(&smaps, "Pss:"),
        field(&smaps, "Private_Clean:") + field(&smaps, "Private_Dirty:"),
    )
}

/// The parent pid of `pid` (host view).
pub fn ppid(pid: i32) -> Option<i32> {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("PPid:"))
        .and_then(|v| v.trim().parse().ok())
}
