//! Accepting HTTP/1.1 connections with limits (issue 11, finding 11): slow clients are dropped
//! and connections are capped, where `axum::serve` keeps any connection open forever.
//!
//! - **Header read timeout**: a connection must deliver a request's whole head within
//!   `header_read_timeout` from when it opens, or from the first byte of a later request (a
//!   slow-loris client that sends a byte a second is dropped).
//! - **Keep-alive idle timeout**: a connection with no request in flight (its last response
//!   written) and no byte received for `keep_alive_timeout` is closed. A request in flight
//!   (a long call, an SSE stream) never counts as idle.
//! - **Connection cap**: past `max_connections` open connections, new ones wait in the
//!   listen backlog until one closes; the connections already open go on.
//!
//! Each connection is served by hyper's HTTP/1 connection (with upgrades) around the axum
//! app; [`Watch`] sees its bytes (an I/O wrapper) and its requests (a service wrapper), and
//! the connection's task closes it when a limit passes.

use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::{Body, HttpBody};
use http::Request;
use hyper::body::{Frame, Incoming, SizeHint};
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

/// The connection limits (see the module doc).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    pub(crate) header_read_timeout: Duration,
    pub(crate) keep_alive_timeout: Duration,
    pub(crate) max_connections: usize,
}

/// What one connection is doing, shared by its I/O wrapper, its service and its task.
#[derive(Debug)]
struct State {
    /// Requests whose response is not yet fully written.
    in_flight: usize,
    /// When the head being read began (the connection opened, or the first byte of a
    /// request arrived with none in flight); `None` while a request is in flight or idle.
    head_since: Option<Instant>,
    /// The last byte received or the last response finished.
    last_active: Instant,
}

#[derive(Clone)]
struct Watch(Arc<Mutex<State>>);

impl Watch {
    fn new() -> Watch {
        let now = Instant::now();
        Watch(Arc::new(Mutex::new(State {
            in_flight: 0,
            head_since: Some(now),
            last_active: now,
        })))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn received(&self) {
        let mut st = self.lock();
        st.last_active = Instant::now();
        if st.in_flight == 0 && st.head_since.is_none() {
            st.head_since = Some(st.last_active);
        }
    }

    fn request_started(&self) -> Finished {
        let mut st = self.lock();
        st.in_flight += 1;
        st.head_since = None;
        Finished(self.clone())
    }

    /// Why the connection should close now, if it should.
    fn expired(&self, limits: &Limits) -> Option<&'static str> {
        let st = self.lock();
        if st
            .head_since
            .is_some_and(|t| t.elapsed() >= limits.header_read_timeout)
        {
            return Some("request head not received within the header read timeout");
        }
        if st.in_flight == 0
            && st.head_since.is_none()
            && st.last_active.elapsed() >= limits.keep_alive_timeout
        {
            return Some("keep-alive connection idle");
        }
        None
    }
}

/// Ends a request's time in flight when its response body is dropped (written or abandoned).
struct Finished(Watch);

impl Drop for Finished {
    fn drop(&mut self) {
        let mut st = self.0.lock();
        st.in_flight = st.in_flight.saturating_sub(1);
        st.last_active = Instant::now();
    }
}

/// A TCP stream that tells its [`Watch`] when bytes arrive.
struct Watched {
    inner: TcpStream,
    watch: Watch,
}

impl AsyncRead for Watched {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.watch.received();
        }
        polled
    }
}

impl AsyncWrite for Watched {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

/// Serves `router` on `listener` until `shutdown` fires; then closes the listener (new
/// connections are refused), asks every open connection to close once its requests are
/// answered (HTTP/1 graceful shutdown), and returns when all have closed.
///
/// # Errors
/// None today: accept errors are logged and retried after a pause, as `axum::serve` does.
pub(crate) async fn serve(
    listener: TcpListener,
    router: Router,
    limits: Limits,
    shutdown: CancellationToken,
) -> io::Result<()> {
    // One permit per open connection: past the cap, accepting waits for one to close.
    let permits = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let tick = (limits.header_read_timeout.min(limits.keep_alive_timeout) / 4)
        .clamp(Duration::from_millis(50), Duration::from_secs(1));
    loop {
        let permit = tokio::select! {
            permit = permits.clone().acquire_owned() => match permit {
                Ok(permit) => permit,
                Err(_) => return Ok(()),
            },
            () = shutdown.cancelled() => break,
        };
        let (tcp, _peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    tracing::debug!(%error, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = shutdown.cancelled() => break,
        };
        // SSE answers are written in pieces (headers, priming event, message); without
        // TCP_NODELAY each later piece waits for the client's delayed ACK (about 40 ms on Linux).
        if let Err(error) = tcp.set_nodelay(true) {
            tracing::debug!(%error, "setting TCP_NODELAY failed");
        }
        let watch = Watch::new();
        let io = TokioIo::new(Watched {
            inner: tcp,
            watch: watch.clone(),
        });
        let service = {
            let (router, watch) = (router.clone(), watch.clone());
            tower::service_fn(move |request: Request<Incoming>| {
                let finished = watch.request_started();
                let router = router.clone();
                async move {
                    let response = router.oneshot(request.map(Body::new)).await?;
                    Ok::<_, std::convert::Infallible>(response.map(|body| {
                        Body::new(TrackedBody {
                            inner: body,
                            _finished: finished,
                        })
                    }))
                }
            })
        };
        let shutdown = shutdown.clone();
        tokio::spawn(async move {
            let _permit = permit;
            // No hyper timer: its header timeout would also cut idle keep-alive connections;
            // `Watch` times both.
            let connection = hyper::server::conn::http1::Builder::new()
                .serve_connection(io, TowerToHyperService::new(service))
                .with_upgrades();
            tokio::pin!(connection);
            let mut ticks = tokio::time::interval(tick);
            let mut closing = false;
            loop {
                tokio::select! {
                    result = connection.as_mut() => {
                        if let Err(error) = result {
                            tracing::debug!(%error, "connection ended with an error");
                        }
                        return;
                    }
                    _ = ticks.tick() => {
                        if let Some(why) = watch.expired(&limits) {
                            tracing::debug!(reason = why, "closing a connection");
                            return;
                        }
                    }
                    () = shutdown.cancelled(), if !closing => {
                        closing = true;
                        connection.as_mut().graceful_shutdown();
                    }
                }
            }
        });
    }
    // Close the listening socket now, not when the drain ends: connections the kernel would
    // queue for an accept that never comes are refused at once instead, so a balancer retries
    // them on another replica and its health check sees this one go.
    drop(listener);
    // Every connection holds a permit until it closes: wait for them all.
    let all = u32::try_from(limits.max_connections.max(1)).unwrap_or(u32::MAX);
    let _ = permits.acquire_many(all).await;
    Ok(())
}

/// A response body that keeps its request in flight until it is dropped.
struct TrackedBody {
    inner: Body,
    _finished: Finished,
}

impl HttpBody for TrackedBody {
    type Data = bytes::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
