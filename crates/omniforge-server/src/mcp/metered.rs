//! The request counter and latency histogram around each handler method
//! ([`Metrics::request`](crate::telemetry::metrics::Metrics::request)); `tools/call` counts
//! itself in `tools.rs`, with its tool.

use std::time::Instant;

use rmcp::model::ErrorData;

use crate::mcp::state::Shared;
use crate::telemetry::metrics::error_type;

/// Runs `answer` (the handling of one `method` request) and counts it.
pub(crate) async fn metered<T>(
    shared: &Shared,
    method: &'static str,
    answer: impl Future<Output = Result<T, ErrorData>>,
) -> Result<T, ErrorData> {
    let started = Instant::now();
    let result = answer.await;
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
