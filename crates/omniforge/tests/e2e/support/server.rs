//! THE server builder: [`Serve`] (`omniforge serve`, ready when its `--ready-file` appears),
//! and the stdio and HTTP server handles built on it ([`StdioServer`], [`HttpServer`]), plus the
//! command line (`omniforge ARGS...` on a data directory).
//!
//! A server is ready when the file it was given with `--ready-file` exists: the binary writes
//! the endpoint's URL there, atomically, once it accepts connections (see the README's options
//! table). [`Serve`] waits for that file with inotify (no log text is parsed, nothing sleeps),
//! or for the process to exit, whichever comes first.
//!
//! Every server gets its own temporary data directory (or the one the test gives) and is
//! killed by its pid when its fixture is dropped. Its stderr (and, for HTTP, its stdout) is
//! drained for the whole life of the process, so a chatty server can never block on a full
//! pipe, and the captured text is printed when a test fails.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use notify::Watcher as _;
use serde_json::{Value, json};
use tempfile::TempDir;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::mpsc;

use super::eventually::eventually;
use super::paths::{BIN, require, uv};
use super::process::{Captured, drain, kill_and_reap, panic_lines, spawn_piped};

/// How to start `omniforge serve`: [`Serve::command`], then options, then [`ServeCommand::start`].
pub(crate) struct ServeCommand {
    cmd: Command,
    listen: String,
    args: Vec<std::ffi::OsString>,
    /// The data directory [`ServeCommand::fresh_data_dir`] made, kept as long as the server.
    data: Option<TempDir>,
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

    /// `--data-dir` a fresh temporary directory that lives as long as the [`Serve`].
    pub(crate) fn fresh_data_dir(mut self) -> ServeCommand {
        let dir = tempfile::tempdir().unwrap();
        self.args.push("--data-dir".into());
        self.args.push(dir.path().join("data").into_os_string());
        std::fs::create_dir(dir.path().join("data")).unwrap();
        self.data = Some(dir);
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
            data,
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
            _data: data,
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
    _data: Option<TempDir>,
}

impl Serve {
    /// Starts `omniforge serve --listen 127.0.0.1:0 ARGS...` and waits until it is ready. Give
    /// `--data-dir` in `args`.
    pub(crate) async fn start<S: AsRef<OsStr>>(args: &[S]) -> Serve {
        Serve::command().args(args).start().await
    }

    /// Starts `omniforge serve --listen 127.0.0.1:0 --data-dir DATA --uv .deps/bin/uv ARGS...`
    /// on the test's own data directory and waits until it is ready.
    pub(crate) async fn on_data(data: &Path, args: &[&str]) -> Serve {
        require(&[uv()]);
        Serve::command()
            .args(&["--data-dir".as_ref(), data.as_os_str()])
            .args(&["--uv".as_ref(), uv().as_os_str()])
            .args(args)
            .start()
            .await
    }

    /// Panics, with the end of stderr, when the server reported a panic.
    pub(crate) fn assert_no_panic(&self) {
        let text = self.stderr.text();
        let panics = panic_lines(&text);
        assert!(
            panics.is_empty(),
            "omniforge (pid {}) panicked: {panics:?}\n{}",
            self.pid,
            self.stderr.tail(6000)
        );
    }

    /// The URL of `--metrics-listen`, from its `serving metrics` log line. That line is
    /// written before the server is ready, but its stderr is read by another task: waited for.
    pub(crate) async fn metrics_url(&self) -> String {
        eventually(
            Duration::from_secs(10),
            "the `serving metrics` log line",
            async || {
                let log = self.stderr.text();
                log.lines()
                    .filter(|l| l.contains("serving metrics"))
                    .find_map(|l| l.split("url=").nth(1))
                    .and_then(|rest| rest.split_whitespace().next())
                    .map(str::to_owned)
                    .ok_or_else(|| format!("not in the log so far:\n{}", self.stderr.tail(4000)))
            },
        )
        .await
    }

    /// A server to configure before [`ServeCommand::start`].
    pub(crate) fn command() -> ServeCommand {
        ServeCommand {
            cmd: Command::new(BIN),
            listen: "127.0.0.1:0".to_owned(),
            args: Vec::new(),
            data: None,
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

    /// Sends SIGTERM (the graceful shutdown); see [`Serve::wait_exit`].
    pub(crate) fn sigterm(&self) {
        sigterm(self.pid);
    }
}

/// `kill -TERM PID`; panics unless it was delivered.
fn sigterm(pid: u32) {
    let status = std::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .expect("run kill");
    assert!(status.success(), "kill -TERM {pid} failed: {status}");
}

/// Runs `omniforge ARGS...` as given (no `--data-dir` added; stdin closed) to completion,
/// killing it after `timeout`: `None` if it was still running then. For commands that must
/// end on their own, such as a `serve` that refuses to start.
pub(crate) async fn omniforge_run(
    args: &[&str],
    timeout: Duration,
) -> Option<std::process::Output> {
    let child = Command::new(BIN)
        .args(args)
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .output();
    tokio::time::timeout(timeout, child)
        .await
        .ok()
        .map(|r| r.unwrap())
}

impl Drop for Serve {
    fn drop(&mut self) {
        kill_and_reap(&mut self.child);
    }
}

/// How long a server may take to be ready (its `--ready-file` to appear).
pub(crate) const START_TIMEOUT: Duration = Duration::from_secs(20);

/// `omniforge --data-dir DIR --uv UV`, without colours; add the subcommand. Fails when uv is
/// missing.
pub(crate) fn omniforge_in(dir: &Path) -> Command {
    let uv = uv();
    assert!(
        uv.exists(),
        "{} is missing: run `scripts/bootstrap`",
        uv.display()
    );
    let mut cmd = Command::new(BIN);
    cmd.arg("--data-dir")
        .arg(dir)
        .arg("--uv")
        .arg(uv)
        .env("NO_COLOR", "1");
    cmd
}

/// Runs `omniforge --data-dir DIR --uv UV ARGS...` (with `stdin` as its input, else none);
/// returns (success, stdout, stderr).
pub(crate) async fn omniforge_cli(
    dir: &Path,
    args: &[&str],
    stdin: Option<&str>,
) -> (bool, String, String) {
    let mut child = spawn_piped(omniforge_in(dir).args(args)).unwrap();
    let mut input = child.stdin.take().unwrap();
    if let Some(text) = stdin {
        input.write_all(text.as_bytes()).await.unwrap();
    }
    drop(input);
    let out = tokio::time::timeout(Duration::from_secs(180), child.wait_with_output())
        .await
        .expect("the command did not finish within 180 s")
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Why a read from the server's stdout gave no line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReadError {
    /// Nothing arrived within the timeout.
    Timeout,
    /// stdout was closed (the process exited or closed it).
    Closed,
}

/// `omniforge stdio --data-dir DIR`: MCP over newline-delimited JSON-RPC on stdin/stdout.
pub(crate) struct StdioServer {
    child: Child,
    /// Taken (dropped) by [`StdioServer::close`] to send EOF.
    stdin: Option<ChildStdin>,
    /// Complete stdout lines, each with its terminator (the last one may lack it).
    lines: mpsc::UnboundedReceiver<Vec<u8>>,
    /// Every byte the server wrote to stdout, from process start.
    stdout: Captured,
    stderr: Captured,
    _dir: TempDir,
}

impl StdioServer {
    /// Starts `omniforge stdio --data-dir <fresh temp dir> ARGS...`.
    pub(crate) fn start(args: &[&str]) -> StdioServer {
        let dir = tempfile::tempdir().unwrap();
        let mut child = Command::new(BIN)
            .arg("stdio")
            .arg("--data-dir")
            .arg(dir.path())
            .args(args)
            .env("NO_COLOR", "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {BIN}: {e}"));
        let stdin = child.stdin.take();
        let mut out = child.stdout.take().unwrap();
        let stderr = Captured::default();
        drain(child.stderr.take().unwrap(), stderr.clone());

        let stdout = Captured::default();
        let (tx, lines) = mpsc::unbounded_channel();
        let sink = stdout.clone();
        tokio::spawn(async move {
            let mut pending = Vec::new();
            let mut buf = [0u8; 8192];
            loop {
                let n = match out.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => n,
                };
                sink.push(&buf[..n]);
                pending.extend_from_slice(&buf[..n]);
                while let Some(end) = pending.iter().position(|&b| b == b'\n') {
                    let line: Vec<u8> = pending.drain(..=end).collect();
                    let _ = tx.send(line);
                }
            }
            if !pending.is_empty() {
                let _ = tx.send(pending);
            }
        });
        StdioServer {
            child,
            stdin,
            lines,
            stdout,
            stderr,
            _dir: dir,
        }
    }

    /// Writes `line` followed by a single `\n`.
    pub(crate) async fn send_line(&mut self, line: &str) -> Result<(), String> {
        let mut bytes = line.as_bytes().to_vec();
        bytes.push(b'\n');
        self.send_raw(&bytes).await
    }

    /// Writes `bytes` exactly as given.
    pub(crate) async fn send_raw(&mut self, bytes: &[u8]) -> Result<(), String> {
        let stdin = self.stdin.as_mut().ok_or("stdin already closed")?;
        stdin
            .write_all(bytes)
            .await
            .map_err(|e| format!("write to server stdin: {e}"))?;
        stdin
            .flush()
            .await
            .map_err(|e| format!("flush server stdin: {e}"))
    }

    /// The next stdout line, terminator included.
    pub(crate) async fn read_raw_line(&mut self, timeout: Duration) -> Result<Vec<u8>, ReadError> {
        match tokio::time::timeout(timeout, self.lines.recv()).await {
            Err(_) => Err(ReadError::Timeout),
            Ok(None) => Err(ReadError::Closed),
            Ok(Some(line)) => Ok(line),
        }
    }

    /// The next stdout line parsed as JSON. A line that is not JSON is an error carrying the
    /// line; a read that times out or hits EOF is an error saying so.
    pub(crate) async fn read_message(&mut self, timeout: Duration) -> Result<Value, String> {
        let line = self.read_raw_line(timeout).await.map_err(|e| match e {
            ReadError::Timeout => format!("no stdout line within {timeout:?}"),
            ReadError::Closed => "stdout closed".to_owned(),
        })?;
        serde_json::from_slice(&line).map_err(|e| {
            format!(
                "stdout line is not JSON ({e}): {:?}",
                String::from_utf8_lossy(&line)
            )
        })
    }

    /// Ok if stdout stays silent for `ms`; otherwise the line that arrived.
    pub(crate) async fn expect_silence(&mut self, ms: u64) -> Result<(), Vec<u8>> {
        match self.read_raw_line(Duration::from_millis(ms)).await {
            Ok(line) => Err(line),
            Err(_) => Ok(()),
        }
    }

    /// Whether the process is still running.
    pub(crate) fn is_alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Waits up to `timeout` for the process to exit (awaited, not polled); stdin stays open.
    pub(crate) async fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        tokio::time::timeout(timeout, self.child.wait())
            .await
            .ok()
            .and_then(Result::ok)
    }

    /// Sends SIGTERM (stdin stays open).
    pub(crate) fn sigterm(&self) {
        sigterm(
            self.child
                .id()
                .expect("the stdio server was already reaped"),
        );
    }

    /// Closes stdin (the stdio way to ask a server to stop) and waits up to `timeout` for
    /// the process to exit and stdout to reach EOF. `None` if it did not exit in time.
    pub(crate) async fn close(&mut self, timeout: Duration) -> Option<ExitStatus> {
        self.stdin = None;
        let status = tokio::time::timeout(timeout, self.child.wait())
            .await
            .ok()?
            .ok()?;
        // Let the reader task see EOF, so `stdout_bytes` holds everything written.
        let _ = tokio::time::timeout(Duration::from_secs(2), async {
            while self.lines.recv().await.is_some() {}
        })
        .await;
        Some(status)
    }

    /// Every byte written to stdout so far, from process start.
    pub(crate) fn stdout_bytes(&self) -> Vec<u8> {
        self.stdout.bytes()
    }

    /// The end of what the server wrote to stderr.
    pub(crate) fn stderr_text(&self) -> String {
        self.stderr.tail(6000)
    }

    /// Everything the server wrote to stderr so far.
    pub(crate) fn stderr_all(&self) -> String {
        self.stderr.text()
    }
}

impl Drop for StdioServer {
    fn drop(&mut self) {
        kill_and_reap(&mut self.child);
    }
}

/// How an HTTP server authenticates clients.
#[derive(Debug, Clone)]
pub(crate) enum Auth {
    /// `--insecure-no-auth`.
    None,
    /// `--token-file FILE` with one line `e2e TOKEN tools:call` (NAME TOKEN SCOPES).
    Bearer(String),
    /// `--token-file FILE` with these lines (`NAME TOKEN SCOPES` each).
    TokenFile(String),
}

/// `omniforge serve --listen 127.0.0.1:0 --data-dir DIR`: Streamable HTTP, started through
/// [`Serve`] (ready when its `--ready-file` appears).
pub(crate) struct HttpServer {
    server: Serve,
    _dir: TempDir,
}

impl HttpServer {
    /// Starts `omniforge serve --listen 127.0.0.1:0 --data-dir <fresh temp dir>` plus the
    /// flags for `auth` and `args`, and waits (up to [`START_TIMEOUT`]) until it is ready.
    pub(crate) async fn start(args: &[&str], auth: &Auth) -> HttpServer {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        std::fs::create_dir(&data).unwrap();
        let mut command = Serve::command().args(&["--data-dir".as_ref(), data.as_os_str()]);
        match auth {
            Auth::None => command = command.args(&["--insecure-no-auth"]),
            Auth::Bearer(token) => {
                let file = dir.path().join("token");
                write_private(&file, &format!("e2e {token} tools:call\n"));
                command = command.args(&["--token-file".as_ref(), file.as_os_str()]);
            }
            Auth::TokenFile(lines) => {
                let file = dir.path().join("token");
                write_private(&file, lines);
                command = command.args(&["--token-file".as_ref(), file.as_os_str()]);
            }
        }
        let server = command.args(args).start().await;
        HttpServer { server, _dir: dir }
    }

    /// The MCP endpoint, e.g. `http://127.0.0.1:PORT/mcp`.
    pub(crate) fn url(&self) -> &str {
        &self.server.url
    }

    /// Scheme, host and port, e.g. `http://127.0.0.1:PORT`.
    pub(crate) fn base(&self) -> &str {
        &self.server.base
    }

    /// The server's `--data-dir` (for the command line on the same store).
    pub(crate) fn data_dir(&self) -> std::path::PathBuf {
        self._dir.path().join("data")
    }

    /// Everything the server wrote to stderr so far.
    pub(crate) fn stderr_all(&self) -> String {
        self.server.stderr()
    }

    /// The end of what the server wrote to stderr (and stdout, which should be empty).
    pub(crate) fn output_text(&self) -> String {
        self.server.output_tail()
    }
}

/// Writes a secret file readable only by its owner.
fn write_private(path: &Path, content: &str) {
    std::fs::write(path, content).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
}

/// [`omniforge_cli`] that must succeed; returns stdout.
pub(crate) async fn cli_ok(dir: &Path, args: &[&str]) -> String {
    let (ok, out, err) = omniforge_cli(dir, args, None).await;
    assert!(ok, "omniforge {args:?} failed:\n{out}\n{err}");
    out
}

/// The argv of `omniforge stdio` on `data` (for a driver to start).
pub(crate) fn stdio_argv(data: &Path, extra: &[&str]) -> String {
    let mut argv = vec![
        BIN.to_owned(),
        "stdio".into(),
        "--data-dir".into(),
        data.display().to_string(),
        "--uv".into(),
        uv().display().to_string(),
    ];
    argv.extend(extra.iter().map(|s| (*s).to_owned()));
    json!(argv).to_string()
}
