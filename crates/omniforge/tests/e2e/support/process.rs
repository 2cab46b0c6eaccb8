//! Child processes: *complete* output capture, killing by pid, the drivers' command lines, and
//! finding processes in `/proc`.
//!
//! Every child is killed by its own pid when its fixture is dropped (`kill_on_drop` as the
//! backstop), and every pipe is drained for the whole life of the process.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, BufReader};
use tokio::process::{Child, ChildStdout, Command};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::paths::{BIN, node22, ts_modules};

/// Everything one pipe of a child produced so far.
#[derive(Clone, Default)]
pub(crate) struct Captured(Arc<Mutex<Vec<u8>>>);

impl Captured {
    /// The whole capture, lossily decoded.
    pub(crate) fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }

    /// The whole capture, as bytes.
    pub(crate) fn bytes(&self) -> Vec<u8> {
        self.0.lock().unwrap().clone()
    }

    /// At most the last `max` bytes of [`Captured::text`], for failure messages.
    pub(crate) fn tail(&self, max: usize) -> String {
        let text = self.text();
        if text.len() <= max {
            return text;
        }
        let mut start = text.len() - max;
        while !text.is_char_boundary(start) {
            start += 1;
        }
        format!("[... {start} bytes cut ...]{}", &text[start..])
    }

    pub(crate) fn push(&self, bytes: &[u8]) {
        self.0.lock().unwrap().extend_from_slice(bytes);
    }
}

/// Copies everything `pipe` yields into `sink` until EOF; the handle ends at EOF, so awaiting
/// it means the capture is complete.
pub(crate) fn drain(
    mut pipe: impl AsyncRead + Unpin + Send + 'static,
    sink: Captured,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            match pipe.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => sink.push(&buf[..n]),
            }
        }
    })
}

/// Kills `child` by its pid (SIGKILL) and reaps it, waiting up to 2 s for it to die. Usable
/// from `Drop`: the wait is a `poll` on the child's pidfd, which becomes readable when it
/// exits.
pub(crate) fn kill_and_reap(child: &mut Child) {
    let Some(pid) = child.id() else {
        return; // already reaped
    };
    let _ = child.start_kill();
    let exited = rustix::process::Pid::from_raw(pid as i32).and_then(|pid| {
        rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty()).ok()
    });
    if let Some(pidfd) = exited {
        let mut fds = [rustix::event::PollFd::new(
            &pidfd,
            rustix::event::PollFlags::IN,
        )];
        let timeout = rustix::event::Timespec {
            tv_sec: 2,
            tv_nsec: 0,
        };
        let _ = rustix::event::poll(&mut fds, Some(&timeout));
    }
    let _ = child.try_wait();
}

/// The lines of `stderr` that report a panic, if any.
pub(crate) fn panic_lines(stderr: &str) -> Vec<&str> {
    stderr.lines().filter(|l| l.contains("panicked")).collect()
}

/// Removes proxy settings so loopback HTTP goes straight to the server.
pub(crate) fn no_proxy(cmd: &mut Command) -> &mut Command {
    cmd.env("NO_PROXY", "127.0.0.1,localhost")
        .env("no_proxy", "127.0.0.1,localhost")
        .env_remove("HTTP_PROXY")
        .env_remove("http_proxy")
        .env_remove("HTTPS_PROXY")
        .env_remove("https_proxy")
        .env_remove("ALL_PROXY")
        .env_remove("all_proxy")
}

/// `python SCRIPT`, unbuffered and writing no bytecode.
pub(crate) fn python_driver(python: &Path, script: &Path) -> Command {
    let mut cmd = Command::new(python);
    cmd.arg(script)
        .env("PYTHONUNBUFFERED", "1")
        .env("PYTHONDONTWRITEBYTECODE", "1");
    cmd
}

/// `node22 SCRIPT`, with the script copied into `dir/ts` next to a link to [`ts_modules`]
/// (ESM resolves `@modelcontextprotocol/sdk` next to the script).
pub(crate) fn node_driver(dir: &Path, script: &Path) -> Command {
    let home = dir.join("ts");
    std::fs::create_dir(&home).unwrap();
    let copy = home.join(script.file_name().unwrap());
    std::fs::copy(script, &copy).unwrap();
    std::os::unix::fs::symlink(ts_modules(), home.join("node_modules")).unwrap();
    let mut cmd = Command::new(node22());
    cmd.arg(copy);
    cmd
}

/// Spawns `cmd` with all three pipes; the child is killed when dropped.
pub(crate) fn spawn_piped(cmd: &mut Command) -> std::io::Result<Child> {
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
}

/// Forwards each line of `stdout` through a channel until EOF.
pub(crate) fn line_channel(stdout: ChildStdout) -> mpsc::UnboundedReceiver<String> {
    let (tx, lines) = mpsc::unbounded_channel();
    let mut out = BufReader::new(stdout).lines();
    tokio::spawn(async move {
        while let Ok(Some(line)) = out.next_line().await {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    lines
}

/// Stdio servers started by a driver on `data` that are still alive after it quit: killed
/// by pid. Returns how many there were.
pub(crate) fn kill_leftover_servers(data: &Path) -> usize {
    let needle = data.display().to_string();
    let mut killed = 0;
    for pid in processes_matching(|cmdline, _| {
        cmdline.contains(BIN) && cmdline.split(' ').any(|arg| arg == needle)
    }) {
        let _ = std::process::Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status();
        killed += 1;
    }
    killed
}

/// Kills (by pid) the stdio servers on its data dir that are still alive when it is dropped,
/// e.g. after a failed assertion killed their driver. Declare it before the drivers.
pub(crate) struct StdioGuard(pub(crate) PathBuf);

impl Drop for StdioGuard {
    fn drop(&mut self) {
        kill_leftover_servers(&self.0);
    }
}

/// Pids of live, non-zombie processes whose (NUL-joined-by-space) cmdline or environ match.
pub(crate) fn processes_matching(pred: impl Fn(&str, &str) -> bool) -> Vec<i32> {
    let mut pids = Vec::new();
    let me = std::process::id() as i32;
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<i32>().ok())
        else {
            continue;
        };
        if pid == me {
            continue;
        }
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let environ = std::fs::read(entry.path().join("environ")).unwrap_or_default();
        let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        // Field 3 of /proc/PID/stat (after the parenthesized name) is the state.
        if stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'))
        {
            continue;
        }
        let join = |b: &[u8]| String::from_utf8_lossy(b).replace('\0', " ");
        if pred(&join(&cmdline), &join(&environ)) {
            pids.push(pid);
        }
    }
    pids
}

/// Processes carrying `marker` in their argv or environment.
pub(crate) fn marked(marker: &str) -> Vec<i32> {
    processes_matching(|cmdline, environ| cmdline.contains(marker) || environ.contains(marker))
}

/// Kills (by pid) the processes still carrying its marker ([`marked`]) when it is dropped, so
/// a test that waits for a script's processes to end leaves none behind when the wait fails.
pub(crate) struct MarkedGuard(pub(crate) String);

impl Drop for MarkedGuard {
    fn drop(&mut self) {
        for pid in marked(&self.0) {
            let _ = std::process::Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
        }
    }
}
