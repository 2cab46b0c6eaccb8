//! Child processes for the `clients` and `robustness` groups, with *complete* output capture.
//!
//! `util` keeps only the tail of a server's stderr; these tests must scan all of it (for
//! `panicked`) and show a driver's whole stderr on failure, so they use these small fixtures.
//! Every child is killed by its own pid when its fixture is dropped (`kill_on_drop` as the
//! backstop), and every pipe is drained for the whole life of the process.

use std::ffi::OsStr;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use regex::Regex;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::oneshot;

use crate::util::BIN;

/// Everything one pipe of a child produced so far.
#[derive(Clone, Default)]
pub(crate) struct Captured(Arc<Mutex<Vec<u8>>>);

impl Captured {
    /// The whole capture, lossily decoded.
    pub(crate) fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
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

    fn push(&self, bytes: &[u8]) {
        self.0.lock().unwrap().extend_from_slice(bytes);
    }
}

/// Copies everything `pipe` yields into `sink` until EOF.
pub(crate) fn drain(mut pipe: impl AsyncRead + Unpin + Send + 'static, sink: Captured) {
    tokio::spawn(async move {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            match pipe.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => sink.push(&buf[..n]),
            }
        }
    });
}

/// Kills `child` by its pid and reaps it for up to 2 s.
pub(crate) fn kill_and_reap(child: &mut Child) {
    let _ = child.start_kill();
    let deadline = Instant::now() + Duration::from_secs(2);
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// `omniforge serve --listen 127.0.0.1:0 ARGS...` with its stderr fully captured.
pub(crate) struct Serve {
    child: Child,
    /// `http://127.0.0.1:PORT/mcp`, as the server logged it.
    pub(crate) url: String,
    /// `http://127.0.0.1:PORT`.
    pub(crate) base: String,
    stderr: Captured,
    stdout: Captured,
}

impl Serve {
    /// Starts the server and waits up to 20 s for the stderr line with `listening` and
    /// `url=...`. `args` follow `serve --listen 127.0.0.1:0` (give `--data-dir` there).
    pub(crate) async fn start<S: AsRef<OsStr>>(args: &[S]) -> Serve {
        let mut child = Command::new(BIN)
            .args(["serve", "--listen", "127.0.0.1:0"])
            .args(args)
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {BIN}: {e}"));
        let stdout = Captured::default();
        drain(child.stdout.take().unwrap(), stdout.clone());

        let stderr = Captured::default();
        let (found_tx, found_rx) = oneshot::channel::<String>();
        let sink = stderr.clone();
        let mut lines = BufReader::new(child.stderr.take().unwrap());
        tokio::spawn(async move {
            let url_re = Regex::new(r#"url="?(http://[^\s"]+)"#).unwrap();
            let ansi = Regex::new(r"\x1b\[[0-9;]*m").unwrap();
            let mut found_tx = Some(found_tx);
            let mut line = Vec::new();
            loop {
                line.clear();
                match lines.read_until(b'\n', &mut line).await {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {}
                }
                sink.push(&line);
                if found_tx.is_some() {
                    let text = String::from_utf8_lossy(&line);
                    let text = ansi.replace_all(&text, "");
                    if text.contains("listening")
                        && let Some(c) = url_re.captures(&text)
                    {
                        let _ = found_tx.take().unwrap().send(c[1].to_owned());
                    }
                }
            }
        });
        let url = match tokio::time::timeout(Duration::from_secs(20), found_rx).await {
            Ok(Ok(url)) => url,
            Ok(Err(_)) => {
                let status = child.wait().await;
                panic!(
                    "omniforge serve exited before it logged `listening url=...` ({status:?}); \
                     stderr:\n{}",
                    stderr.tail(6000)
                )
            }
            Err(_) => panic!(
                "omniforge serve did not log `listening url=...` within 20 s; stderr:\n{}",
                stderr.tail(6000)
            ),
        };
        let base = match url.match_indices('/').nth(2) {
            Some((i, _)) => url[..i].to_owned(),
            None => url.clone(),
        };
        Serve {
            child,
            url,
            base,
            stderr,
            stdout,
        }
    }

    /// All of the server's stderr so far.
    pub(crate) fn stderr(&self) -> String {
        self.stderr.text()
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

/// The `http://127.0.0.1:PORT/...` URL that `omniforge serve --listen 127.0.0.1:0` logs once it
/// listens, read from its captured stderr; kills the server and panics (with the stderr tail)
/// when it exits or says nothing within 20 s.
pub(crate) async fn listening_url(child: &mut Child, stderr: &Captured) -> String {
    let url_re = Regex::new(r#"listening.*url="?(http://127\.0\.0\.1:[0-9]+[^\s"]*)"#).unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(c) = url_re.captures(&stderr.text()) {
            return c[1].to_owned();
        }
        let exited = matches!(child.try_wait(), Ok(Some(_)));
        if exited || Instant::now() >= deadline {
            kill_and_reap(child);
            panic!(
                "omniforge serve did not log `listening url=http://127.0.0.1:...` within 20 s \
                 (exited: {exited}); stderr:\n{}",
                stderr.tail(6000)
            )
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
