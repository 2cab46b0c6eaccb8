//! The POST SSE stream one request arrived on (Streamable HTTP in session mode), as the tools
//! see it: a tool may close it mid-call (SEP-1699) and the call then holds its answer until the
//! client resumed. The transport ([`crate::transport::http::resume`]) implements it.

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use tokio_util::sync::CancellationToken;

/// The stream could not be closed.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(crate) struct CloseError(pub(crate) String);

/// A request's resumable POST stream.
pub(crate) trait ResumableStream: Send + Sync {
    /// Closes the stream after a priming event that tells the client to reconnect after
    /// `retry` (default: the session's SSE retry interval).
    fn close(&self, retry: Option<Duration>) -> BoxFuture<'_, Result<(), CloseError>>;

    /// When the stream was closed, waits until the client resumed it (bounded by the
    /// transport, or until `ct` fires), so the answer goes out on the resumed stream.
    fn settle<'a>(&'a self, ct: &'a CancellationToken) -> BoxFuture<'a, ()>;
}

/// The marker the transport puts into a request's extensions.
#[derive(Clone)]
pub(crate) struct StreamLink(pub(crate) Arc<dyn ResumableStream>);
