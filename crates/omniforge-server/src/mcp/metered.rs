//! The request counter, latency histogram and trace span around each handler method
//! ([`Metrics::request`](crate::telemetry::metrics::Metrics::request),
//! [`spans::request`]); `tools/call` counts itself in `tools.rs`, with its tool.

use std::time::Instant;

use rmcp::model::ErrorData;
use rmcp::service::{RequestContext, RoleServer};
use tracing::Instrument as _;

use crate::mcp::state::Shared;
use crate::telemetry::metrics::error_type;
use crate::telemetry::spans;

/// Runs `answer` (the handling of one `method` request, about `target` when it names a tool
/// or prompt) in its trace span, and counts it.
pub(crate) async fn metered<T>(
    shared: &Shared,
    method: &'static str,
    target: Option<&str>,
    ctx: &RequestContext<RoleServer>,
    answer: impl Future<Output = Result<T, ErrorData>>,
) -> Result<T, ErrorData> {
    let span = spans::request(method, target, ctx);
    let started = Instant::now();
    let result = answer.instrument(span.clone()).await;
    if let Err(error) = &result {
        spans::failed(&span, error_type(error.code.0));
    }
    counted(shared, method, &result, started);
    result
}

/// Counts one answered `method` request that started at `started`.
pub(crate) fn counted<T>(
    shared: &Shared,
    method: &'static str,
    result: &Result<T, ErrorData>,
    started: Instant,
) {
    let error = result.as_ref().err().map(|e| error_type(e.code.0));
    shared.metrics.request(method, error, started.elapsed());
}
