//! A call of a manifest tool: one Connect unary RPC to its upstream, and the mapping of the
//! outcome (reply, Connect error, failure) to a result. A streaming RPC is reserved by name but
//! answers that streaming is not supported.

use std::sync::Arc;
use std::time::Instant;

use omniforge_bridge::ManifestTool;
use omniforge_bridge::dispatch::{Outcome, Upstream, fill_zero_values};
use rmcp::model::{CallToolResult, ContentBlock, JsonObject};
use serde_json::Value;

use crate::catalog::call::{Call, CallFuture, CallResult, ToolCall, ready, running};
use crate::error::{CallError, ResultError};
use crate::schema::LazySchema;
use crate::telemetry::metrics::Metrics;
use crate::telemetry::spans;
use crate::tools::manifest::health::UpstreamHealth;
use tracing::Instrument as _;

/// What a manifest tool's call needs: the RPC and its upstream.
pub(crate) struct ManifestCall {
    tool: ManifestTool,
    upstream: Arc<Upstream>,
    /// Where the outcome of each call is kept for the console.
    health: Arc<UpstreamHealth>,
    /// The outputSchema, compiled at the first reply that needs it.
    output: Option<LazySchema>,
    metrics: Arc<Metrics>,
}

impl ManifestCall {
    /// A call of `tool` on `upstream`.
    pub(crate) fn new(
        tool: ManifestTool,
        upstream: Arc<Upstream>,
        health: Arc<UpstreamHealth>,
        metrics: Arc<Metrics>,
    ) -> ManifestCall {
        let output = tool
            .output_schema
            .clone()
            .map(|schema| LazySchema::new("the outputSchema", Arc::new(schema)));
        ManifestCall {
            tool,
            upstream,
            health,
            output,
            metrics,
        }
    }

    /// Calls the RPC and maps the outcome to an MCP result. Dropping the future aborts the
    /// upstream request.
    async fn dispatch(&self, arguments: &JsonObject) -> CallResult {
        let started = Instant::now();
        let span = spans::upstream_call(&self.tool.procedure);
        // The upstream joins the trace: W3C `traceparent` of this client span.
        let headers = spans::trace_headers(&span);
        let outcome = self
            .upstream
            .call_with_headers(&self.tool, arguments, &headers)
            .instrument(span.clone())
            .await;
        let counted = match &outcome {
            Outcome::Reply(_) => "ok",
            Outcome::ConnectError { .. } => "connect_error",
            Outcome::Failure(_) => "failure",
        };
        self.metrics
            .upstream_call(&self.tool.service, counted, started.elapsed());
        let detail = match &outcome {
            Outcome::Reply(_) => "",
            Outcome::ConnectError { code, .. } => code.as_str(),
            Outcome::Failure(text) => text.as_str(),
        };
        self.health
            .record(&self.tool.procedure, counted, detail, started.elapsed());
        if counted != "ok" {
            span.record("error.type", counted);
            span.record("otel.status_code", "error");
        }
        match outcome {
            Outcome::Reply(reply) => self.reply(reply),
            Outcome::ConnectError {
                code,
                message,
                details,
            } => {
                let mut text = format!("{code}: {message}");
                if !details.is_empty() {
                    text.push('\n');
                    text.push_str(&Value::Array(details).to_string());
                }
                // No structuredContent: it would have to match the outputSchema.
                Ok(CallToolResult::error(vec![ContentBlock::text(text)]))
            }
            Outcome::Failure(text) => Ok(CallToolResult::error(vec![ContentBlock::text(text)])),
        }
    }

    fn reply(&self, mut reply: Value) -> CallResult {
        if let Some(output) = &self.output {
            fill_zero_values(output.schema(), &mut reply);
            if let Err(problems) = output.check(&reply) {
                return Err(ResultError::UpstreamReply {
                    problems,
                    reply: reply.to_string(),
                }
                .into());
            }
        }
        let text = reply.to_string();
        let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
        if reply.is_object() {
            result.structured_content = Some(reply);
        }
        Ok(result)
    }
}

impl ToolCall for ManifestCall {
    fn call<'a>(&'a self, call: Call<'a>) -> CallFuture<'a> {
        running(async move {
            tokio::select! {
                result = self.dispatch(&call.arguments) => result,
                // Dropping the call aborts the upstream request; rmcp drops the response.
                () = call.cx.ct().cancelled() => {
                    tracing::debug!(tool = %self.tool.name, "call cancelled");
                    Err(CallError::Cancelled)
                }
            }
        })
    }
}

/// A streaming RPC: reserved and callable by name, but never listed.
pub(crate) struct Streaming {
    pub(crate) name: String,
}

impl ToolCall for Streaming {
    fn call<'a>(&'a self, _call: Call<'a>) -> CallFuture<'a> {
        ready(Err(CallError::Streaming {
            name: self.name.clone(),
        }))
    }
}
