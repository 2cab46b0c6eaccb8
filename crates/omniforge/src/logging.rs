//! Tracing to stderr, set up once: stdout may be the stdio transport.

use std::io::IsTerminal;

use anyhow::{Context, Result};
use tracing_subscriber::EnvFilter;

use crate::flags::{Common, LogFormat};

/// Installs the global subscriber: the `--log-level` filter, text or JSON lines, colours only
/// on a terminal.
///
/// # Errors
/// An invalid filter.
pub(crate) fn init(common: &Common) -> Result<()> {
    let filter = EnvFilter::try_new(&common.log_level)
        .with_context(|| format!("invalid --log-level {:?}", common.log_level))?;
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(|| LossyStderr)
        .with_ansi(std::io::stderr().is_terminal());
    match common.log_format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
    Ok(())
}

/// stderr for logs, where a failed write (a closed pipe, a full disk) is dropped: losing a log
/// line must never take a request, or the signal handler, down with it.
struct LossyStderr;

impl std::io::Write for LossyStderr {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        Ok(std::io::stderr().write(buf).unwrap_or(buf.len()))
    }

    fn flush(&mut self) -> std::io::Result<()> {
        let _ = std::io::stderr().flush();
        Ok(())
    }
}
