//! Tracing to stderr, set up once: stdout may be the stdio transport.

use std::io::IsTerminal;

use anyhow::{Context, Result};
use tracing::{Level, Metadata};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::filter::filter_fn;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

use crate::flags::{Common, LogFormat};

/// Installs the global subscriber: the `--log-level` filter, text or JSON lines, colours only
/// on a terminal.
///
/// # Errors
/// An invalid filter.
pub(crate) fn init(common: &Common) -> Result<()> {
    let filter = EnvFilter::try_new(&common.log_level)
        .with_context(|| format!("invalid --log-level {:?}", common.log_level))?;
    let layer = tracing_subscriber::fmt::layer()
        .with_writer(|| LossyStderr)
        .with_ansi(std::io::stderr().is_terminal());
    let registry = tracing_subscriber::registry()
        .with(filter)
        .with(filter_fn(|meta| !carries_messages(meta)));
    match common.log_format {
        LogFormat::Text => registry.with(layer).init(),
        LogFormat::Json => registry.with(layer.json()).init(),
    }
    Ok(())
}

/// rmcp's debug and trace lines print whole JSON-RPC messages ("received request" with the
/// arguments of `omniforge_set_secret`, tool results before redaction): they never reach the
/// log, whatever `--log-level` says (issue 11, finding 6). Its info, warn and error lines carry
/// ids and error texts only, and stay.
fn carries_messages(meta: &Metadata<'_>) -> bool {
    meta.target().starts_with("rmcp") && *meta.level() > Level::INFO
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
