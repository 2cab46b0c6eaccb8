//! Resumable POST SSE streams (SEP-1699, "SSE polling"): a tool may close its call's stream
//! mid-call and the client resumes it with `Last-Event-ID`.
//!
//! rmcp 3.11 has the pieces: every POST stream starts with a priming event (id and `retry`),
//! each stream keeps a replay cache, a GET with `Last-Event-ID: <index>/<stream>` resumes it
//! (`LocalSessionManager::resume`), and `LocalSessionHandle::close_sse_stream` closes a POST
//! stream after a new priming event. What it does not offer is a way for a handler to know
//! which stream its request arrived on. [`ResumableSessions`] wraps [`LocalSessionManager`] and, in
//! `create_stream`, puts a [`StreamLink`] into the request's extensions (which rmcp hands to
//! the handler as `RequestContext::extensions`); everything else is delegated unchanged.
//!
//! One gap remains in rmcp: the response to a request whose stream is closed is cached, but the
//! stream's cache is dropped as soon as the response is written, so a client that reconnects
//! after that finds nothing. So a call whose stream was closed holds its result until the
//! client has resumed ([`ResumableStream::settle`], bounded by [`RESUME_WAIT`]); [`ResumableSessions::resume`]
//! tells it when.
//!
//! The wrapper is also where the session lifecycle is seen whole: each session, message and
//! stream is recorded in the [`SessionBook`] (what keeps a session alive, see `sessions.rs`),
//! and requests that reuse an id in flight are renamed (`request_ids.rs`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use futures::{Stream, StreamExt};
use rmcp::model::{ClientJsonRpcMessage, GetExtensions, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_server::session::local::{
    LocalSessionHandle, LocalSessionManager, LocalSessionManagerError,
};
use rmcp::transport::streamable_http_server::session::{
    EventStore, RestoreOutcome, ServerSseMessage, SessionId, SessionManager,
};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::context::stream::{CloseError, ResumableStream, StreamLink};
use crate::transport::http::request_ids;
use crate::transport::http::sessions::SessionBook;

/// How long a call whose stream was closed waits for the client to resume before it answers
/// anyway (the answer is then lost for a client that never comes back).
pub(crate) const RESUME_WAIT: Duration = Duration::from_secs(60);

/// Closed streams waiting for a resume, by session id and rmcp's HTTP request id.
type Waiting = Arc<Mutex<HashMap<(SessionId, u64), watch::Sender<bool>>>>;

/// rmcp's [`LocalSessionManager`] plus a [`StreamLink`] in the extensions of each request
/// that arrives on a POST SSE stream.
pub(crate) struct ResumableSessions {
    inner: LocalSessionManager,
    waiting: Waiting,
    book: Arc<SessionBook>,
}

impl ResumableSessions {
    /// Wraps `inner` (whose own idle timer should be off: `book` decides expiry).
    pub(crate) fn new(inner: LocalSessionManager, book: Arc<SessionBook>) -> ResumableSessions {
        ResumableSessions {
            inner,
            waiting: Arc::default(),
            book,
        }
    }
}

/// The POST SSE stream one request arrived on; handed to the handler as a
/// [`StreamLink`] (the tools see the [`ResumableStream`] trait only).
struct PostStream {
    session: SessionId,
    handle: LocalSessionHandle,
    http_request_id: u64,
    default_retry: Duration,
    waiting: Waiting,
    /// Set by [`PostStream::close_now`]: becomes true when the client resumes.
    resumed: Mutex<Option<watch::Receiver<bool>>>,
}

impl ResumableStream for PostStream {
    fn close(&self, retry: Option<Duration>) -> BoxFuture<'_, Result<(), CloseError>> {
        Box::pin(self.close_now(retry))
    }

    fn settle<'a>(&'a self, ct: &'a CancellationToken) -> BoxFuture<'a, ()> {
        Box::pin(self.wait_resumed(ct))
    }
}

impl PostStream {
    /// Closes the stream after a priming event that tells the client to reconnect after
    /// `retry` (default: the session's SSE retry interval). Messages sent meanwhile are kept
    /// for the client's `Last-Event-ID` resume.
    ///
    /// # Errors
    /// The session is gone, or the stream was already completed.
    async fn close_now(&self, retry: Option<Duration>) -> Result<(), CloseError> {
        let (tx, rx) = watch::channel(false);
        let key = (self.session.clone(), self.http_request_id);
        lock(&self.waiting).insert(key.clone(), tx);
        *lock(&self.resumed) = Some(rx);
        let closed = self
            .handle
            .close_sse_stream(
                self.http_request_id,
                Some(retry.unwrap_or(self.default_retry)),
            )
            .await;
        if let Err(e) = closed {
            lock(&self.waiting).remove(&key);
            *lock(&self.resumed) = None;
            return Err(CloseError(e.to_string()));
        }
        tracing::debug!(session = %self.session, stream = self.http_request_id, "POST SSE stream closed by the tool");
        Ok(())
    }

    /// When the stream was closed, waits until the client resumed it (or [`RESUME_WAIT`]
    /// passed, or `ct` fired), so the response goes out on the resumed stream.
    async fn wait_resumed(&self, ct: &CancellationToken) {
        let rx = lock(&self.resumed).take();
        if let Some(mut rx) = rx {
            tokio::select! {
                r = tokio::time::timeout(RESUME_WAIT, rx.wait_for(|resumed| *resumed)) => {
                    if r.is_err() {
                        tracing::debug!(stream = self.http_request_id, "the client did not resume the closed stream in time");
                    }
                }
                () = ct.cancelled() => {}
            }
            lock(&self.waiting).remove(&(self.session.clone(), self.http_request_id));
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The rmcp HTTP request id in a request-wise event id (`<index>/<http request id>`).
fn stream_of(last_event_id: &str) -> Option<u64> {
    last_event_id.split_once('/')?.1.parse().ok()
}

impl SessionManager for ResumableSessions {
    type Error = LocalSessionManagerError;
    type Transport = <LocalSessionManager as SessionManager>::Transport;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        let (id, transport) = self.inner.create_session().await?;
        self.book.create(&id);
        Ok((id, transport))
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, Self::Error> {
        let _busy = self.book.busy(id);
        self.inner.initialize_session(id, message).await
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        self.inner.has_session(id).await
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        lock(&self.waiting).retain(|(session, _), _| session != id);
        self.book.close(id);
        self.inner.close_session(id).await
    }

    /// As `LocalSessionManager::create_stream`, plus the [`StreamLink`] marker.
    async fn create_stream(
        &self,
        id: &SessionId,
        mut message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        let handle = self
            .inner
            .sessions
            .read()
            .await
            .get(id)
            .cloned()
            .ok_or_else(|| LocalSessionManagerError::SessionNotFound(id.clone()))?;
        let busy = self.book.busy(id);
        let flight = request_ids::depart(&self.book, id, &mut message);
        let receiver = handle.establish_request_wise_channel().await?;
        if let (ClientJsonRpcMessage::Request(request), Some(http_request_id)) =
            (&mut message, receiver.http_request_id)
        {
            let stream = PostStream {
                session: id.clone(),
                handle: handle.clone(),
                http_request_id,
                default_retry: self
                    .inner
                    .session_config
                    .sse_retry
                    .unwrap_or(Duration::from_secs(3)),
                waiting: self.waiting.clone(),
                resumed: Mutex::default(),
            };
            request
                .request
                .extensions_mut()
                .insert(StreamLink(Arc::new(stream)));
        }
        handle
            .push_message(message, receiver.http_request_id)
            .await?;
        let mut rx = receiver.inner;
        Ok(futures::stream::poll_fn(move |cx| {
            // The session stays busy, and the request's id in flight, until the stream ends.
            let _held = (&busy, &flight);
            rx.poll_recv(cx).map(|m| m.map(request_ids::restore))
        }))
    }

    async fn accept_message(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<(), Self::Error> {
        self.book.touch(id);
        let also = request_ids::cancellations(&self.book, id, &message);
        self.inner.accept_message(id, message).await?;
        for cancel in also {
            self.inner.accept_message(id, cancel).await?;
        }
        Ok(())
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        let busy = self.book.busy(id);
        let stream = self.inner.create_standalone_stream(id).await?;
        Ok(stream.map(move |m| {
            let _held = &busy;
            m
        }))
    }

    /// As `LocalSessionManager::resume`; then wakes a call waiting for this stream's resume.
    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        let stream = stream_of(&last_event_id);
        let busy = self.book.busy(id);
        let resumed = self.inner.resume(id, last_event_id).await?.map(move |m| {
            let _held = &busy;
            request_ids::restore(m)
        });
        if let Some(stream) = stream
            && let Some(tx) = lock(&self.waiting).get(&(id.clone(), stream))
        {
            tx.send_replace(true);
        }
        Ok(resumed)
    }

    async fn restore_session(
        &self,
        id: SessionId,
    ) -> Result<RestoreOutcome<Self::Transport>, Self::Error> {
        self.inner.restore_session(id).await
    }

    fn event_store(&self) -> Option<Arc<dyn EventStore>> {
        self.inner.event_store()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_wise_event_ids_name_their_stream() {
        assert_eq!(stream_of("1/7"), Some(7));
        assert_eq!(stream_of("0"), None);
        assert_eq!(stream_of("x/y"), None);
    }
}
