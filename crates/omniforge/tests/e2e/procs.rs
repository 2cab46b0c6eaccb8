//! Child processes with *complete* output capture, and [`Serve`]: the one way the tests start
//! `omniforge serve`.
//!
//! A server is ready when the file it was given with `--ready-file` exists: the binary writes
//! the endpoint's URL there, atomically, once it accepts connections (see the README's options
//! table). [`Serve`] waits for that file with inotify (no log text is parsed, nothing sleeps),
//! or for the process to exit, whichever comes first.
//!
//! Every child is killed by its own pid when its fixture is dropped (`kill_on_drop` as the
//! backstop), and every pipe is drained for the whole life of the process.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use notify::Watcher as _;
use tempfile::TempDir;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::{Child, Command};
use tokio::task::JoinHandle;

use crate::util::{BIN, START_TIMEOUT};

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

/// How to start `omniforge serve`: [`Serve::command`], then options, then [`ServeCommand::start`].
pub(crate) struct ServeCommand {
    cmd: Command,
    listen: String,
    args: Vec<std::ffi::OsString>,
}

impl ServeCommand {
    /// Listen on `addr` instead of `127.0.0.1:0` (e.g. `0.0.0.0:0`).
    pub(crate) fn listen(mut self, addr: &str) -> ServeCommand {
        addr.clone_into(&mut self.listen);
        self
    }

    /// Adds arguments after `serve` (options of `serve`, or global ones like `--data-dir`).
    pub(crate) fn args<S: AsRef<OsStr>>(mut self, args: &[S]) -> ServeCommand {
        self.args
            .extend(args.iter().map(|a| a.as_ref().to_os_string()));
        self
    }

    /// The process command, for environment settings.
    pub(crate) fn cmd(&mut self) -> &mut Command {
        &mut self.cmd
    }

    /// Starts the server and waits (up to [`START_TIMEOUT`]) until it accepts connections.
    /// Panics, with the server's stderr, when it exits first or takes longer.
    pub(crate) async fn start(self) -> Serve {
        let ServeCommand {
            mut cmd,
            listen,
            args,
        } = self;
        let ready_dir = tempfile::tempdir().unwrap();
        let ready = ready_dir.path().join("ready");
        // Watch before the child starts, so the file cannot appear unseen.
        let (tx, mut events) = tokio::sync::mpsc::unbounded_channel();
        let mut watcher = notify::recommended_watcher(move |_event| {
            let _ = tx.send(());
        })
        .expect("an inotify watcher");
        watcher
            .watch(ready_dir.path(), notify::RecursiveMode::NonRecursive)
            .expect("watching the ready file's directory");
        let mut child = cmd
            .args(["serve", "--listen", &listen, "--ready-file"])
            .arg(&ready)
            .args(&args)
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {BIN}: {e}"));
        let pid = child.id().expect("a running child has a pid");
        let stdout = Captured::default();
        drain(child.stdout.take().unwrap(), stdout.clone());
        let stderr = Captured::default();
        let stderr_done = drain(child.stderr.take().unwrap(), stderr.clone());
        let deadline = tokio::time::Instant::now() + START_TIMEOUT;
        let url = loop {
            if let Some(url) = read_ready(&ready) {
                break url;
            }
            tokio::select! {
                _ = events.recv() => {}
                status = child.wait() => {
                    let _ = tokio::time::timeout(Duration::from_secs(2), stderr_done).await;
                    panic!(
                        "omniforge serve {args:?} exited before it was ready ({status:?}); \
                         stderr:\n{}",
                        stderr.tail(6000)
                    )
                }
                () = tokio::time::sleep_until(deadline) => {
                    kill_and_reap(&mut child);
                    panic!(
                        "omniforge serve {args:?} was not ready within {START_TIMEOUT:?}; \
                         stderr:\n{}",
                        stderr.tail(6000)
                    )
                }
            }
        };
        drop(watcher);
        // A wildcard bind is reached through loopback.
        let url =
            url.replacen("://0.0.0.0:", "://127.0.0.1:", 1)
                .replacen("://[::]:", "://[::1]:", 1);
        let base = match url.match_indices('/').nth(2) {
            Some((i, _)) => url[..i].to_owned(),
            None => url.clone(),
        };
        Serve {
            child,
            pid,
            url,
            base,
            stderr,
            stdout,
            ready,
            _ready_dir: ready_dir,
        }
    }
}

/// The URL in a complete ready file (one line ending in `\n`), if it exists yet.
fn read_ready(path: &Path) -> Option<String> {
    let text = std::fs::read_to_string(path).ok()?;
    let url = text.strip_suffix('\n')?;
    assert!(
        url.starts_with("http://") && !url.contains('\n'),
        "the ready file must hold one URL and a newline, got {text:?}"
    );
    Some(url.to_owned())
}

/// `omniforge serve --listen 127.0.0.1:0 --ready-file FILE ARGS...`, ready, with its stdout and
/// stderr fully captured.
pub(crate) struct Serve {
    child: Child,
    pid: u32,
    /// `http://127.0.0.1:PORT/mcp`, as the server's ready file gave it.
    pub(crate) url: String,
    /// `http://127.0.0.1:PORT`.
    pub(crate) base: String,
    stderr: Captured,
    stdout: Captured,
    ready: PathBuf,
    _ready_dir: TempDir,
}

impl Serve {
    /// Starts `omniforge serve --listen 127.0.0.1:0 ARGS...` and waits until it is ready. Give
    /// `--data-dir` in `args`.
    pub(crate) async fn start<S: AsRef<OsStr>>(args: &[S]) -> Serve {
        Serve::command().args(args).start().await
    }

    /// A server to configure before [`ServeCommand::start`].
    pub(crate) fn command() -> ServeCommand {
        ServeCommand {
            cmd: Command::new(BIN),
            listen: "127.0.0.1:0".to_owned(),
            args: Vec::new(),
        }
    }

    /// The process id.
    pub(crate) fn pid(&self) -> u32 {
        self.pid
    }

    /// The ready file the server was given (it removes it at exit).
    pub(crate) fn ready_file(&self) -> &Path {
        &self.ready
    }

    /// All of the server's stderr so far.
    pub(crate) fn stderr(&self) -> String {
        self.stderr.text()
    }

    /// The server's stderr capture.
    pub(crate) fn stderr_captured(&self) -> &Captured {
        &self.stderr
    }

    /// The end of stderr (and stdout, which should stay empty), for failure messages.
    pub(crate) fn output_tail(&self) -> String {
        let out = self.stdout.tail(2000);
        let err = self.stderr.tail(8000);
        if out.is_empty() {
            err
        } else {
            format!("{err}\n--- stdout ---\n{out}")
        }
    }

    /// Whether the process is still running.
    pub(crate) fn is_alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Waits up to `timeout` for the process to exit.
    pub(crate) async fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        tokio::time::timeout(timeout, self.child.wait())
            .await
            .ok()
            .and_then(Result::ok)
    }

    /// SIGKILL, and reap.
    pub(crate) fn kill(&mut self) {
        kill_and_reap(&mut self.child);
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        kill_and_reap(&mut self.child);
    }
}

/// The lines of `stderr` that report a panic, if any.
pub(crate) fn panic_lines(stderr: &str) -> Vec<&str> {
    stderr.lines().filter(|l| l.contains("panicked")).collect()
}
