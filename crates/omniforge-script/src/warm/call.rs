//! One call on a warm template's spare child, with what a cold run gives a call: the server
//! owns the read ends of stdout and stderr and the side channel, and runs the cold run's own
//! capture pipeline on them (`run::capture`: arguments, caps, side channel, drain, the
//! [`RunOutput`]); the timeout and the cancellation kill the call's whole tree (`cgroup.kill`
//! of its cgroups, and its process group). Only how the call starts (a message to the spare)
//! and how its end is seen (the spare's `done`) are warm.

use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::template::{FromSpare, Spare, Template};
use super::wire;
use crate::run::capture::{Capture, Streams, side_channel};
use crate::run::child::{cpu_limit, runner_vars};
use crate::run::{Exit, RunOutput, RunSpec};

/// How a warm call ended.
pub(crate) enum Called {
    /// It ran; this is its output, as a cold run's would be.
    Ran(RunOutput),
    /// It did not run to an answer because of the pool (the spare or the template failed);
    /// the reason is logged and the call is run cold.
    NotRun(String),
}

enum End {
    Done(i32),
    Exited(i32),
    Timeout,
    Cancelled,
    /// The template died or the spare's socket failed without an exit status.
    Lost(&'static str),
}

/// Runs `spec` on `spare`, a child of `template`.
pub(crate) async fn call(
    template: &Arc<Template>,
    mut spare: Spare,
    spec: &RunSpec,
    cancel: &CancellationToken,
    started: Instant,
) -> Called {
    let (stdin_r, stdin_w) = match pipe() {
        Ok(p) => p,
        Err(e) => return Called::NotRun(format!("a pipe: {e}")),
    };
    let (out_r, out_w) = match pipe() {
        Ok(p) => p,
        Err(e) => return Called::NotRun(format!("a pipe: {e}")),
    };
    let (err_r, err_w) = match pipe() {
        Ok(p) => p,
        Err(e) => return Called::NotRun(format!("a pipe: {e}")),
    };
    let (chan_ours, chan_theirs) = match side_channel() {
        Ok(p) => p,
        Err(e) => return Called::NotRun(format!("the side channel: {e}")),
    };
    // The cold run's environment: the spec's, then the runner's own on top. The child adds
    // HOME and TMPDIR (its own directory) and OMNIFORGE_FD.
    let mut env: Vec<(String, String)> = spec
        .env
        .iter()
        .filter(|(k, _)| !matches!(k.as_str(), "HOME" | "TMPDIR" | "OMNIFORGE_FD"))
        .cloned()
        .collect();
    for (k, v) in runner_vars(&spec.env_dir) {
        env.retain(|(e, _)| *e != k);
        if k != "HOME" {
            env.push((k, v));
        }
    }
    let message = json!({
        "op": "call",
        "env": env,
        "cpu": cpu_limit(spec.timeout).0,
        "as": spec.memory_bytes,
        "fsize": spec.max_file_bytes,
    });
    let fds = [
        stdin_r.as_fd(),
        out_w.as_fd(),
        err_w.as_fd(),
        chan_theirs.as_fd(),
    ];
    if let Err(e) = wire::send(&spare.sock, &message, &fds).await {
        return Called::NotRun(format!("handing the call over: {e}"));
    }
    drop((stdin_r, out_w, err_w, chan_theirs));
    template.in_flight.fetch_add(1, Ordering::AcqRel);
    template.calls.fetch_add(1, Ordering::Relaxed);
    let handed = Instant::now();

    let streams = Streams {
        stdout: receiver(out_r),
        stderr: receiver(err_r),
        stdin: tokio::net::unix::pipe::Sender::from_owned_fd(stdin_w).ok(),
        channel: chan_ours,
    };
    let capture = Capture::start(streams, spec, spec.messages.clone());

    let deadline = tokio::time::Instant::from_std(handed + spec.timeout);
    let mut began = false;
    let mut reaped = false;
    let mut socket_open = true;
    let end = loop {
        tokio::select! {
            m = wire::recv(&spare.sock), if socket_open => match m {
                // Only the child itself ends its call: a process the tool forked shares the
                // socket but not the pid.
                Ok(Some(m)) if m.pid == Some(spare.pid) => match m.parse::<FromSpare>() {
                    Ok(FromSpare::Started) => began = true,
                    Ok(FromSpare::Done { code }) => break End::Done(code),
                    _ => {}
                },
                Ok(Some(_)) => {}
                Ok(None) | Err(_) => socket_open = false,
            },
            status = &mut spare.exit => {
                reaped = true;
                break match status {
                    Ok(status) => End::Exited(status),
                    Err(_) => End::Lost("the template went away"),
                };
            }
            () = template.dead.cancelled() => break End::Lost("the template died"),
            () = tokio::time::sleep_until(deadline) => break End::Timeout,
            () = cancel.cancelled() => break End::Cancelled,
        }
    };
    // Whatever happened, nothing the call started outlives it.
    spare.cgroups.kill();
    crate::sandbox::kill_group(spare.pid as u32);
    template.in_flight.fetch_sub(1, Ordering::AcqRel);
    let exit = match end {
        End::Done(code) => Exit::Code(code),
        End::Exited(status) => exit_of(status),
        End::Timeout => Exit::Timeout,
        End::Cancelled => Exit::Cancelled,
        End::Lost(why) => {
            capture.abandon();
            finish_in_background(template, spare, reaped);
            let why = if began {
                format!("{why} during the call (it is run again cold)")
            } else {
                why.to_owned()
            };
            return Called::NotRun(why);
        }
    };
    // As a cold run: drained, then the limit read, before the cgroups go.
    let captured = capture.drain().await;
    let limit = spare.cgroups.limit_hit();
    finish_in_background(template, spare, reaped);
    let mut output = captured.output(exit, limit, started);
    output.hide_host_paths(spec);
    tracing::debug!(exit = ?output.exit, limit = ?output.limit, duration = ?output.duration, warm = true, "script run finished");
    Called::Ran(output)
}

/// After the answer: wait for the child's exit (unless it was `reaped` already), remove its
/// cgroups and directories, make the next spare.
fn finish_in_background(template: &Arc<Template>, spare: Spare, reaped: bool) {
    let template = Arc::clone(template);
    tokio::spawn(async move {
        let Spare {
            exit, cgroups, tag, ..
        } = spare;
        if !reaped {
            let _ = tokio::time::timeout(Duration::from_secs(5), exit).await;
        }
        cgroups.finish(Duration::from_secs(2));
        template.cleanup(&tag).await;
        template.replenish();
    });
}

/// A call's exit from the child's wait status: a signal shows as 128 + N, as bubblewrap
/// reports a cold call killed by one.
fn exit_of(status: i32) -> Exit {
    if libc::WIFEXITED(status) {
        Exit::Code(libc::WEXITSTATUS(status))
    } else if libc::WIFSIGNALED(status) {
        Exit::Code(128 + libc::WTERMSIG(status))
    } else {
        Exit::Code(-1)
    }
}

fn pipe() -> std::io::Result<(OwnedFd, OwnedFd)> {
    Ok(rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)?)
}

fn receiver(fd: OwnedFd) -> Option<tokio::net::unix::pipe::Receiver> {
    tokio::net::unix::pipe::Receiver::from_owned_fd(fd).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signal_is_reported_as_bubblewrap_reports_it() {
        assert_eq!(exit_of(3 << 8), Exit::Code(3));
        assert_eq!(exit_of(9), Exit::Code(137));
        assert_eq!(exit_of(0), Exit::Code(0));
    }
}
