//! Tracing to stderr, set up once: stdout may be the stdio transport.

use std::io::IsTerminal;

use anyhow::{Context, Result};
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing::{Level, Metadata};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::Layer as _;
use tracing_subscriber::filter::{Targets, filter_fn};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

use crate::flags::{Common, LogFormat};

/// Installs the global subscriber: the `--log-level` filter, text or JSON lines, colours only
/// on a terminal.
///
/// # Errors
/// An invalid filter.
pub(crate) fn init(common: &Common) -> Result<Option<SdkTracerProvider>> {
    let filter = EnvFilter::try_new(&common.log_level)
        .with_context(|| format!("invalid --log-level {:?}", common.log_level))?;
    let layer = tracing_subscriber::fmt::layer()
        .with_writer(|| LossyStderr)
        .with_ansi(std::io::stderr().is_terminal());
    // `--otlp-endpoint`: the server's trace spans (their own target, whatever the log level)
    // also go to the exporter. Without it no layer wants them, so they cost next to nothing.
    let (provider, otel) = match &common.otlp_endpoint {
        Some(endpoint) => {
            let (provider, tracer) = crate::telemetry::start(endpoint)?;
            let layer = tracing_opentelemetry::layer()
                .with_tracer(tracer)
                .with_filter(Targets::new().with_target(TRACE_TARGET, Level::TRACE));
            (Some(provider), Some(layer))
        }
        None => (None, None),
    };
    let registry = tracing_subscriber::registry()
        .with(filter_fn(|meta| !carries_messages(meta)))
        .with(otel);
    match common.log_format {
        LogFormat::Text => registry.with(layer.with_filter(filter)).init(),
        LogFormat::Json => registry.with(layer.json().with_filter(filter)).init(),
    }
    Ok(provider)
}

/// The target of the server's trace spans (`omniforge_server`'s `telemetry::spans`).
const TRACE_TARGET: &str = "omniforge::trace";

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
