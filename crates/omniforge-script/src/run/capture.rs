//! The capture pipeline of one script call, cold or warm: the arguments go to stdin, stdout
//! and stderr are read concurrently (each keeping its first `max_capture_bytes` and counting
//! the rest), the side channel is served; once the call's tree is dead, everything is drained
//! for at most [`DRAIN_GRACE`] and joined into a [`RunOutput`]. A cold run
//! ([`Runner::run`](crate::Runner::run)) and a warm call (`warm::call`) differ only in how the
//! process starts and ends; what a call answers is built here, once, so the two answer alike
//! by construction.

use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::UnixStream;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::{CancellationToken, DropGuard};

use super::spec::{Exit, RunOutput, RunSpec};
use crate::channel::{self, ChannelLimits, ScriptMessage, ScriptResult};
use crate::sandbox::LimitHit;

/// Longest side-channel message line, in bytes.
pub(crate) const MAX_MESSAGE_BYTES: usize = 16 << 20;
/// How long to wait for output pipes and the side channel to close once the tree is dead.
pub(crate) const DRAIN_GRACE: Duration = Duration::from_millis(500);

/// A call's side channel: the server's end (served by [`Capture`]) and the script's (handed to
/// the child, then dropped by the server).
///
/// # Errors
/// The socket pair cannot be created or registered with the runtime.
pub(crate) fn side_channel() -> std::io::Result<(UnixStream, std::os::unix::net::UnixStream)> {
    let (ours, theirs) = std::os::unix::net::UnixStream::pair()?;
    ours.set_nonblocking(true)?;
    Ok((UnixStream::from_std(ours)?, theirs))
}

/// What a call's own process gives the capture: its stdout and stderr read ends, its stdin
/// write end, the server's end of its side channel.
pub(crate) struct Streams<O, E, I> {
    pub(crate) stdout: Option<O>,
    pub(crate) stderr: Option<E>,
    pub(crate) stdin: Option<I>,
    pub(crate) channel: UnixStream,
}

/// A call's capture, running beside the script from [`Capture::start`] until
/// [`Capture::drain`] (or [`Capture::abandon`]).
pub(crate) struct Capture {
    /// Ends the readers and the side channel early: fired by the drain timer, or at once when
    /// the capture is abandoned.
    stop: CancellationToken,
    /// A capture dropped before its drain (an error on the caller's path) stops its tasks
    /// too, rather than leaving them to the pipes' EOF.
    _stop_when_dropped: DropGuard,
    stdout: JoinHandle<(Vec<u8>, u64)>,
    stderr: JoinHandle<(Vec<u8>, u64)>,
    stdin: JoinHandle<()>,
    channel: JoinHandle<Option<ScriptResult>>,
}

/// What a drained capture read; [`Captured::output`] adds how the call ended.
pub(crate) struct Captured {
    stdout: (Vec<u8>, u64),
    stderr: (Vec<u8>, u64),
    result: Option<ScriptResult>,
}

impl Capture {
    /// Starts writing `spec`'s arguments (as JSON) to stdin, reading stdout and stderr (with
    /// `spec.max_capture_bytes` each) and serving the side channel with `messages`, each as
    /// its own task.
    pub(crate) fn start(
        streams: Streams<
            impl AsyncRead + Unpin + Send + 'static,
            impl AsyncRead + Unpin + Send + 'static,
            impl AsyncWrite + Unpin + Send + 'static,
        >,
        spec: &RunSpec,
        messages: Option<mpsc::Sender<ScriptMessage>>,
    ) -> Capture {
        let stop = CancellationToken::new();
        let cap = spec.max_capture_bytes;
        let input = serde_json::to_vec(&spec.arguments).unwrap_or_else(|_| b"{}".to_vec());
        let stdin = streams.stdin;
        Capture {
            stdout: tokio::spawn(read_capped(streams.stdout, cap, stop.clone())),
            stderr: tokio::spawn(read_capped(streams.stderr, cap, stop.clone())),
            stdin: tokio::spawn(async move {
                if let Some(mut stdin) = stdin {
                    // A script that never reads its stdin makes this fail with EPIPE: fine.
                    let _ = stdin.write_all(&input).await;
                } // dropped: stdin closed
            }),
            channel: tokio::spawn(channel::serve(
                streams.channel,
                messages,
                ChannelLimits {
                    max_message_bytes: MAX_MESSAGE_BYTES,
                },
                stop.clone(),
            )),
            _stop_when_dropped: stop.clone().drop_guard(),
            stop,
        }
    }

    /// Call once the call's whole tree is dead: the pipes and the socket then reach EOF at
    /// once, but a process that escaped every kill layer may still hold them, so this waits
    /// at most [`DRAIN_GRACE`] and keeps what was read.
    pub(crate) async fn drain(self) -> Captured {
        let timer = tokio::spawn({
            let stop = self.stop.clone();
            async move {
                tokio::time::sleep(DRAIN_GRACE).await;
                tracing::warn!(
                    "script output still open after the tree was killed; keeping what was read"
                );
                stop.cancel();
            }
        });
        let (stdout, stderr, result) = tokio::join!(self.stdout, self.stderr, self.channel);
        timer.abort();
        self.stdin.abort();
        Captured {
            stdout: stdout.unwrap_or_default(),
            stderr: stderr.unwrap_or_default(),
            result: result.ok().flatten(),
        }
    }

    /// Gives the call up without an answer (a warm call whose template went away: it runs
    /// again cold): the readers and the side channel stop now.
    pub(crate) fn abandon(self) {
        self.stdin.abort();
        // Dropping `self` stops the readers and the side channel.
    }
}

impl Captured {
    /// The call's output: what was captured, how it ended (`exit`, the cgroup `limit` it hit),
    /// and its wall time since `started`.
    pub(crate) fn output(self, exit: Exit, limit: Option<LimitHit>, started: Instant) -> RunOutput {
        let Captured {
            stdout: (stdout, stdout_truncated_bytes),
            stderr: (stderr, stderr_truncated_bytes),
            result,
        } = self;
        RunOutput {
            stdout,
            stderr,
            stdout_truncated_bytes,
            stderr_truncated_bytes,
            exit,
            duration: started.elapsed(),
            result,
            limit,
        }
    }
}

/// Reads `pipe` to its end (or until `stop`), keeping the first `cap` bytes and counting the
/// rest.
async fn read_capped(
    pipe: Option<impl AsyncRead + Unpin>,
    cap: usize,
    stop: CancellationToken,
) -> (Vec<u8>, u64) {
    let mut kept = Vec::new();
    let mut dropped = 0u64;
    let Some(mut pipe) = pipe else {
        return (kept, dropped);
    };
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = tokio::select! {
            r = pipe.read(&mut buf) => match r {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            },
            () = stop.cancelled() => break,
        };
        let take = cap.saturating_sub(kept.len()).min(n);
        kept.extend_from_slice(&buf[..take]);
        dropped += (n - take) as u64;
    }
    (kept, dropped)
}

#[cfg(test)]
mod tests {
    use std::io::Write as _;

    use serde_json::json;

    use super::*;
    use crate::Env;

    fn spec(cap: usize) -> RunSpec {
        let env = Env {
            path: "/env".into(),
            env_id: String::new(),
        };
        let mut spec = RunSpec::new(&env, "");
        spec.arguments = json!({"a": 1});
        spec.max_capture_bytes = cap;
        spec
    }

    #[tokio::test]
    async fn a_call_is_fed_capped_and_joined_into_its_output() {
        let (mut out_w, out_r) = tokio::io::duplex(1024);
        let (mut err_w, err_r) = tokio::io::duplex(1024);
        let (in_w, mut in_r) = tokio::io::duplex(1024);
        let (ours, mut theirs) = side_channel().unwrap();
        let streams = Streams {
            stdout: Some(out_r),
            stderr: Some(err_r),
            stdin: Some(in_w),
            channel: ours,
        };
        let capture = Capture::start(streams, &spec(4), None);
        let mut input = Vec::new();
        in_r.read_to_end(&mut input).await.unwrap();
        assert_eq!(input, br#"{"a":1}"#);
        out_w.write_all(b"0123456789").await.unwrap();
        err_w.write_all(b"ab").await.unwrap();
        let result =
            json!({"jsonrpc": "2.0", "method": "result", "params": {"structured": {"x": 2}}});
        writeln!(theirs, "{result}").unwrap();
        // The tree is dead: every writer is closed.
        drop((out_w, err_w, theirs));
        let started = Instant::now();
        let output = capture
            .drain()
            .await
            .output(Exit::Code(3), Some(LimitHit::Memory), started);
        assert_eq!(output.stdout, b"0123");
        assert_eq!(output.stdout_truncated_bytes, 6);
        assert_eq!(output.stderr, b"ab");
        assert_eq!(output.stderr_truncated_bytes, 0);
        assert_eq!(output.exit, Exit::Code(3));
        assert_eq!(output.limit, Some(LimitHit::Memory));
        let result = output.result.expect("the script's result");
        assert_eq!(result.structured, Some(json!({"x": 2})));
    }

    #[tokio::test]
    async fn a_pipe_an_escapee_holds_open_is_given_up_after_the_grace() {
        // A 4-byte pipe: the second write returns only once the reader took the first.
        let (mut out_w, out_r) = tokio::io::duplex(4);
        let (ours, _theirs) = side_channel().unwrap();
        let streams = Streams {
            stdout: Some(out_r),
            stderr: None::<tokio::io::DuplexStream>,
            stdin: None::<tokio::io::DuplexStream>,
            channel: ours,
        };
        let capture = Capture::start(streams, &spec(4), None);
        out_w.write_all(b"kept").await.unwrap();
        out_w.write_all(b"more").await.unwrap();
        // `out_w` and the script's end of the side channel stay open, as a process that
        // escaped the kill would keep them: the drain still ends, with what was read.
        let output = capture
            .drain()
            .await
            .output(Exit::Timeout, None, Instant::now());
        assert_eq!(output.stdout, b"kept");
        assert_eq!(output.result, None);
        drop(out_w);
    }
}
