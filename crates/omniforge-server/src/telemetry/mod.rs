//! Telemetry (issue 16): the server's Prometheus metrics ([`metrics`]), trace spans
//! ([`spans`]) and the call log's queue and batch writer ([`call_log`]). A leaf room like
//! `auth`: it names no other room, so every layer (the handler, tool calls, the script host,
//! the HTTP front) records through it.

pub(crate) mod call_log;
pub(crate) mod metrics;
pub(crate) mod spans;
