//! OpenTelemetry trace export (`--otlp-endpoint`, issue 16): OTLP/HTTP with protobuf bodies
//! through the workspace's reqwest 0.12 (the exporter's own client is reqwest 0.13: one HTTP
//! stack, not two), a batch span processor, and the `tracing` layer that turns the server's
//! spans (target `omniforge::trace` only) into OpenTelemetry spans. Nothing is built, and
//! nothing exported, without the flag; the `OTEL_EXPORTER_OTLP_*` variables alone do nothing.

use std::time::Duration;

use anyhow::{Context, Result};
use bytes::Bytes;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_http::{HttpClient, HttpError, Request, Response};
use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::{SdkTracer, SdkTracerProvider};

/// The exporter's HTTP client: reqwest 0.12 on a one-thread runtime of its own (the SDK's
/// batch processor exports from its own thread with a plain `block_on`).
#[derive(Debug)]
struct Reqwest012 {
    client: reqwest::Client,
    runtime: tokio::runtime::Runtime,
}

#[async_trait::async_trait]
impl HttpClient for Reqwest012 {
    async fn send_bytes(&self, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
        let client = self.client.clone();
        let request = reqwest::Request::try_from(request)?;
        let task = self.runtime.spawn(async move {
            let response = client.execute(request).await?;
            let mut out = Response::builder().status(response.status().as_u16());
            for (name, value) in response.headers() {
                out = out.header(name.as_str(), value.as_bytes());
            }
            let body = response.bytes().await?;
            Ok::<_, HttpError>(out.body(body)?)
        });
        task.await?
    }
}

/// The tracer provider exporting to `endpoint` (a base URL; `/v1/traces` is appended), and
/// its tracer.
///
/// # Errors
/// The exporter's runtime or client cannot be built.
pub(crate) fn start(endpoint: &str) -> Result<(SdkTracerProvider, SdkTracer)> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("otlp-export")
        .enable_all()
        .build()
        .context("starting the OTLP exporter's runtime")?;
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .context("building the OTLP exporter's HTTP client")?;
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(Protocol::HttpBinary)
        .with_endpoint(format!("{}/v1/traces", endpoint.trim_end_matches('/')))
        .with_http_client(Reqwest012 { client, runtime })
        .build()
        .context("building the OTLP exporter")?;
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(
            Resource::builder()
                .with_service_name("omniforge")
                .with_attribute(opentelemetry::KeyValue::new(
                    "service.version",
                    env!("CARGO_PKG_VERSION"),
                ))
                .build(),
        )
        .build();
    let tracer = provider.tracer("omniforge");
    Ok((provider, tracer))
}

/// Exports what is left and stops the exporter (blocks; call it outside the async runtime).
pub(crate) fn stop(provider: &SdkTracerProvider) {
    if let Err(error) = provider.force_flush() {
        tracing::warn!(%error, "flushing the last spans failed");
    }
    if let Err(error) = provider.shutdown() {
        tracing::warn!(%error, "stopping the span exporter failed");
    }
}
