//! Running one environment command (uv, pip, `python -m venv`) to its end, with a timeout.

use std::process::{ExitStatus, Stdio};
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};
use tokio::process::Command;

use super::error::{EnvError, io_err};

/// How much of a command's stderr an [`EnvError::Uv`] keeps (the end of it), in bytes.
const MAX_STDERR_BYTES: usize = 4000;

/// Runs `cmd` (in its own process group, killed with it on timeout), feeding each stderr line
/// to `on_line`; returns stdout on success.
pub(crate) async fn run_captured(
    mut cmd: Command,
    step: &'static str,
    timeout: Duration,
    on_line: &(dyn Fn(&str) + Send + Sync),
) -> Result<String, EnvError> {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .process_group(0);
    let started = Instant::now();
    let mut child = cmd.spawn().map_err(io_err(format!("starting {step}")))?;
    let pgid = child.id();
    let (Some(mut stdout), Some(stderr)) = (child.stdout.take(), child.stderr.take()) else {
        return Err(io_err(format!("reading {step} output"))(
            std::io::Error::other("the output pipes were not opened"),
        ));
    };
    let work = async {
        let mut out = Vec::new();
        let mut err_tail = String::new();
        let read_out = stdout.read_to_end(&mut out);
        let read_err = async {
            let mut lines = BufReader::new(stderr).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                on_line(&line);
                err_tail.push_str(&line);
                err_tail.push('\n');
                if err_tail.len() > 4 * MAX_STDERR_BYTES {
                    let mut cut = err_tail.len() - MAX_STDERR_BYTES;
                    while !err_tail.is_char_boundary(cut) {
                        cut += 1;
                    }
                    err_tail.drain(..cut);
                }
            }
        };
        let (r, ()) = tokio::join!(read_out, read_err);
        let status = child.wait().await;
        (r, status, out, err_tail)
    };
    let (read, status, out, err_tail) = match tokio::time::timeout(timeout, work).await {
        Ok(v) => v,
        Err(_) => {
            if let Some(pgid) = pgid {
                crate::sandbox::kill_group(pgid);
            }
            return Err(EnvError::Timeout { step, timeout });
        }
    };
    read.map_err(io_err(format!("reading {step} output")))?;
    let status: ExitStatus = status.map_err(io_err(format!("waiting for {step}")))?;
    tracing::debug!(step, elapsed = ?started.elapsed(), %status, "environment command finished");
    if !status.success() {
        let mut stderr = tail(&err_tail);
        if let Some(hint) = tls_hint(&err_tail) {
            stderr.push('\n');
            stderr.push_str(hint);
        }
        return Err(EnvError::Uv {
            step,
            status: status.to_string(),
            stderr,
        });
    }
    String::from_utf8(out).map_err(|_| EnvError::Uv {
        step,
        status: status.to_string(),
        stderr: "output is not UTF-8".into(),
    })
}

/// What to set when uv could not verify a package index's certificate (a TLS-intercepting
/// proxy, a private index): uv's own hint names a flag nobody can pass through OmniForge.
fn tls_hint(stderr: &str) -> Option<&'static str> {
    let untrusted = [
        "invalid peer certificate",
        "UnknownIssuer",
        "certificate verify failed",
    ]
    .iter()
    .any(|s| stderr.contains(s));
    untrusted.then_some(
        "hint: the package index's TLS certificate is not trusted. OmniForge already makes uv \
         use the system trust store (UV_SYSTEM_CERTS=1); if your proxy or index uses its own CA, \
         set SSL_CERT_FILE to a PEM file with that CA in the server's environment (for \
         `omniforge stdio`, in the `env` block of the client's configuration), and \
         HTTPS_PROXY if the index is reached through a proxy.",
    )
}

/// The last [`MAX_STDERR_BYTES`] of `text`, trimmed, with `…` in front when cut.
fn tail(text: &str) -> String {
    let t = text.trim();
    if t.len() <= MAX_STDERR_BYTES {
        return t.to_owned();
    }
    let mut start = t.len() - MAX_STDERR_BYTES;
    while !t.is_char_boundary(start) {
        start += 1;
    }
    format!("…{}", &t[start..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_untrusted_certificate_says_what_to_set() {
        let uv = "error: Request failed after 3 retries\n  Caused by: invalid peer certificate: UnknownIssuer\nhint: use --system-certs";
        let hint = tls_hint(uv).expect("a hint");
        assert!(
            hint.contains("SSL_CERT_FILE") && hint.contains("`env` block"),
            "{hint}"
        );
        assert!(tls_hint("error: No solution found").is_none());
    }
}
