//! Trace spans (issue 16), following the OpenTelemetry semantic conventions for MCP: one
//! `SERVER` span per request, named `{mcp.method.name} {target}`, continuing the client's trace
//! from `params._meta.traceparent` (W3C Trace Context, SEP-414); children for environment
//! builds, sandbox runs and Connect upstream calls, whose `traceparent` is forwarded.
//!
//! The spans are `tracing` spans at TRACE level with their own target ([`TARGET`]): the binary
//! routes only that target to its OpenTelemetry layer when `--otlp-endpoint` is set. Without it
//! no layer wants them and they are disabled at their callsite. No attribute carries a token,
//! a principal, arguments or results.

use std::collections::HashMap;

use opentelemetry::propagation::{Extractor, TextMapPropagator};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use rmcp::service::{RequestContext, RoleServer};
use serde_json::{Map, Value};
use tracing::Span;
use tracing::field::Empty;
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// The `tracing` target of every span meant for export.
pub(crate) const TARGET: &str = "omniforge::trace";

/// The span of one MCP request: `method`, its tool or prompt name when it has one, the
/// JSON-RPC id, and `mcp.session.id` when the request came in a Streamable HTTP session; its
/// parent is the trace context in `ctx`'s `_meta` (`traceparent`, `tracestate`) when the client
/// sent a valid one.
pub(crate) fn request(
    method: &'static str,
    target: Option<&str>,
    ctx: &RequestContext<RoleServer>,
) -> Span {
    let id = &ctx.id;
    let meta = &ctx.meta.0.0;
    let span = tracing::trace_span!(
        target: TARGET,
        "mcp.request",
        otel.name = Empty,
        otel.kind = "server",
        mcp.method.name = method,
        jsonrpc.request.id = %id,
        mcp.session.id = Empty,
        gen_ai.operation.name = Empty,
        gen_ai.tool.name = Empty,
        gen_ai.prompt.name = Empty,
        network.transport = Empty,
        error.type = Empty,
        otel.status_code = Empty,
        otel.status_description = Empty,
    );
    // Without an exporter the span is disabled: nothing below is paid for.
    if span.is_disabled() {
        return span;
    }
    match target {
        Some(target) => span.record("otel.name", format!("{method} {target}").as_str()),
        None => span.record("otel.name", method),
    };
    match method {
        "tools/call" => {
            span.record("gen_ai.operation.name", "execute_tool");
            span.record("gen_ai.tool.name", target);
        }
        "prompts/get" => {
            span.record("gen_ai.prompt.name", target);
        }
        _ => {}
    }
    if let Some(session) = session_id(ctx) {
        span.record("mcp.session.id", session);
    }
    let parent = TraceContextPropagator::new().extract(&MetaExtractor(meta));
    // A missing or invalid traceparent extracts to an empty context: the span stays a root.
    let _ = span.set_parent(parent);
    span
}

/// The `Mcp-Session-Id` of a request that came over Streamable HTTP in a session (rmcp hands
/// the handler the HTTP request's parts; the front has checked the session belongs to the
/// caller).
fn session_id(ctx: &RequestContext<RoleServer>) -> Option<&str> {
    ctx.extensions
        .get::<http::request::Parts>()?
        .headers
        .get("mcp-session-id")?
        .to_str()
        .ok()
}

/// Marks `span` failed with `error_type` (a JSON-RPC code, or `tool_error` for `isError`).
pub(crate) fn failed(span: &Span, error_type: &'static str) {
    span.record("error.type", error_type);
    span.record("otel.status_code", "error");
    span.record("otel.status_description", error_type);
}

/// The span of a sandboxed script run, a child of the current one.
pub(crate) fn sandbox_run() -> Span {
    tracing::trace_span!(
        target: TARGET,
        "omniforge.sandbox.run",
        otel.kind = "internal",
        omniforge.sandbox.outcome = Empty,
    )
}

/// The span of an environment build, a child of the current one.
pub(crate) fn environment_build(packages: usize) -> Span {
    tracing::trace_span!(
        target: TARGET,
        "omniforge.environment.build",
        otel.kind = "internal",
        omniforge.environment.packages = packages,
        error.type = Empty,
    )
}

/// The `CLIENT` span of a Connect upstream call of `procedure` (`/pkg.Service/Method`).
pub(crate) fn upstream_call(procedure: &str) -> Span {
    let method = procedure.trim_start_matches('/');
    tracing::trace_span!(
        target: TARGET,
        "rpc.client",
        otel.name = %method,
        otel.kind = "client",
        rpc.system.name = "connectrpc",
        rpc.method = %method,
        error.type = Empty,
        otel.status_code = Empty,
    )
}

/// The W3C trace context headers (`traceparent`, `tracestate`) of `span`, for an upstream
/// request; none when the span is not exported.
pub(crate) fn trace_headers(span: &Span) -> Vec<(String, String)> {
    if span.is_disabled() {
        return Vec::new();
    }
    let mut headers = HashMap::new();
    TraceContextPropagator::new().inject_context(&span.context(), &mut headers);
    headers.into_iter().collect()
}

/// Reads `traceparent` and `tracestate` from a request's `_meta` (string values only).
struct MetaExtractor<'a>(&'a Map<String, Value>);

impl Extractor for MetaExtractor<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(Value::as_str)
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(String::as_str).collect()
    }
}
