//! The prototype's result text, for callers that render a run as one text block.

use crate::run::{Exit, RunOutput};
use crate::sandbox::LimitHit;

/// Renders a run the way the Python prototype did, as `(text, is_error)`:
///
/// - stdout byte for byte except the one final line ending `print` adds (`\n`), or
///   `(no output)` when nothing is left: trailing spaces, tabs, blank lines and no-break
///   spaces stay (the prototype trimmed all trailing whitespace);
/// - then, each on a new line: `pre_run_error` when given (e.g. a failed install),
///   `[stdout truncated: N bytes]` / `[stderr truncated: N bytes]` when a cap was hit (new:
///   the prototype had no caps), `[stderr] …` when stderr is not blank, `[exit N]` for a
///   non-zero exit (`[exit -N]` for death by signal N, as Python's `returncode` showed it),
///   `[timeout]`, `[cancelled]`; then (new) `[memory limit: a process was killed]` or
///   `[process limit: a fork was refused]` when the run hit a limit of its cgroups
///   ([`RunOutput::limit`]).
///
/// `is_error` is true for a non-zero exit, a signal, a timeout, a cancellation, or a
/// pre-run error.
pub fn prototype_text(output: &RunOutput, pre_run_error: Option<&str>) -> (String, bool) {
    let stdout = output.stdout.strip_suffix(b"\n").unwrap_or(&output.stdout);
    let mut text = if stdout.is_empty() {
        "(no output)".to_owned()
    } else {
        String::from_utf8_lossy(stdout).into_owned()
    };
    let mut line = |s: &str| {
        text.push('\n');
        text.push_str(s);
    };
    if let Some(e) = pre_run_error {
        line(e);
    }
    if output.stdout_truncated_bytes > 0 {
        line(&format!(
            "[stdout truncated: {} bytes]",
            output.stdout_truncated_bytes
        ));
    }
    let stderr = String::from_utf8_lossy(&output.stderr);
    if !stderr.trim().is_empty() {
        line(&format!("[stderr] {}", stderr.trim_end()));
    }
    if output.stderr_truncated_bytes > 0 {
        line(&format!(
            "[stderr truncated: {} bytes]",
            output.stderr_truncated_bytes
        ));
    }
    match output.exit {
        Exit::Code(0) => {}
        Exit::Code(n) => line(&format!("[exit {n}]")),
        Exit::Signal(s) => line(&format!("[exit -{s}]")),
        Exit::Timeout => line("[timeout]"),
        Exit::Cancelled => line("[cancelled]"),
    }
    match output.limit {
        Some(LimitHit::Memory) => line("[memory limit: a process was killed]"),
        Some(LimitHit::Processes) => line("[process limit: a fork was refused]"),
        None => {}
    }
    (text, !output.exit.is_success() || pre_run_error.is_some())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn out(stdout: &str, stderr: &str, exit: Exit) -> RunOutput {
        RunOutput {
            stdout: stdout.into(),
            stderr: stderr.into(),
            stdout_truncated_bytes: 0,
            stderr_truncated_bytes: 0,
            exit,
            duration: Duration::ZERO,
            result: None,
            limit: None,
        }
    }

    #[test]
    fn check_texts() {
        let cases: &[(RunOutput, Option<&str>, &str, bool)] = &[
            (out("hello\n", "", Exit::Code(0)), None, "hello", false),
            // Only print's final newline goes; the rest stays byte for byte.
            (
                out("a  \u{a0}\n", "", Exit::Code(0)),
                None,
                "a  \u{a0}",
                false,
            ),
            (out("a\n\n", "", Exit::Code(0)), None, "a\n", false),
            (out("a\t", "", Exit::Code(0)), None, "a\t", false),
            (out("a\r\n", "", Exit::Code(0)), None, "a\r", false),
            (out("  \n", "", Exit::Code(0)), None, "  ", false),
            (out("\n", "", Exit::Code(0)), None, "(no output)", false),
            (out("", "", Exit::Code(0)), None, "(no output)", false),
            (
                out("", "boom\n", Exit::Code(2)),
                None,
                "(no output)\n[stderr] boom\n[exit 2]",
                true,
            ),
            (
                out("part", "", Exit::Timeout),
                None,
                "part\n[timeout]",
                true,
            ),
            (
                out("", "", Exit::Signal(9)),
                None,
                "(no output)\n[exit -9]",
                true,
            ),
            (
                out("", "", Exit::Cancelled),
                None,
                "(no output)\n[cancelled]",
                true,
            ),
            (
                out("", "", Exit::Code(0)),
                Some("install failed: x"),
                "(no output)\ninstall failed: x",
                true,
            ),
        ];
        let mut oom = out("", "", Exit::Code(137));
        oom.limit = Some(LimitHit::Memory);
        let mut forks = out("done\n", "", Exit::Timeout);
        forks.limit = Some(LimitHit::Processes);
        for (o, text) in [
            (
                oom,
                "(no output)\n[exit 137]\n[memory limit: a process was killed]",
            ),
            (
                forks,
                "done\n[timeout]\n[process limit: a fork was refused]",
            ),
        ] {
            assert_eq!(prototype_text(&o, None), (text.to_owned(), true));
        }
        for (o, pre, text, is_error) in cases {
            assert_eq!(prototype_text(o, *pre), ((*text).to_owned(), *is_error));
        }
    }
}
