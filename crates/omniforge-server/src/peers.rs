//! Every connected peer that wants `notifications/tools/list_changed`, and the task that
//! tells them when the catalog changes.
//!
//! rmcp has no "all sessions" broadcast, so we keep the peers ourselves: the stdio peer and
//! each HTTP session's peer register from `notifications/initialized`; 2026-07-28 clients
//! register the sink of their `subscriptions/listen` stream. Closed peers are pruned on
//! every broadcast.

use std::sync::{Arc, Mutex};

use rmcp::service::{Peer, RoleServer, SubscriptionSink};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// The registry of peers to notify.
#[derive(Default)]
pub(crate) struct Peers {
    /// A std lock: held only to push or to clone the lists, never across an `.await`.
    inner: Mutex<Inner>,
    /// Cancelled when the server starts to shut down: subscription streams end then, with
    /// their final result, rather than holding the shutdown for its whole grace period (their
    /// clients listen again, on another replica).
    closing: CancellationToken,
}

#[derive(Default)]
struct Inner {
    sessions: Vec<Peer<RoleServer>>,
    subscriptions: Vec<(SubscriptionSink, CancellationToken)>,
    /// The session count at which `add_session` prunes next.
    prune_at: usize,
}

impl Peers {
    /// Adds a peer of the handshake lifecycle (stdio, or one HTTP session).
    pub(crate) fn add_session(&self, peer: Peer<RoleServer>) {
        let mut inner = self.lock();
        // Without a broadcast the closed peers of expired sessions would pile up: prune
        // whenever the list has doubled since the last prune (amortized O(1) per add).
        if inner.sessions.len() >= inner.prune_at {
            inner.prune();
            inner.prune_at = (inner.sessions.len() * 2).max(64);
        }
        inner.sessions.push(peer);
    }

    /// Adds a 2026-07-28 subscription stream; it is dropped once `ended` is cancelled.
    pub(crate) fn add_subscription(&self, sink: SubscriptionSink, ended: CancellationToken) {
        self.lock().subscriptions.push((sink, ended));
    }

    /// Ends every 2026-07-28 subscription stream, now and from now on (shutdown).
    pub(crate) fn close_subscriptions(&self) {
        self.closing.cancel();
    }

    /// Completes once [`Peers::close_subscriptions`] was called.
    pub(crate) async fn subscriptions_closed(&self) {
        self.closing.cancelled().await;
    }

    /// Forgets the peers whose connection or session has ended (their channels and client
    /// info are freed with them).
    pub(crate) fn prune_closed(&self) {
        let mut inner = self.lock();
        inner.prune();
        inner.prune_at = (inner.sessions.len() * 2).max(64);
    }

    /// Sends `notifications/tools/list_changed` to every open peer.
    pub(crate) async fn notify_tool_list_changed(&self) {
        let (sessions, subscriptions) = {
            let mut inner = self.lock();
            inner.prune();
            (inner.sessions.clone(), inner.subscriptions.clone())
        };
        for peer in sessions {
            if let Err(error) = peer.notify_tool_list_changed().await {
                tracing::debug!(%error, "list_changed not delivered to a session");
            }
        }
        for (sink, _) in subscriptions {
            if let Err(error) = sink.notify_tool_list_changed().await {
                tracing::debug!(%error, "list_changed not delivered to a subscription");
            }
        }
    }

    /// Sends `notifications/resources/list_changed` to every open peer.
    pub(crate) async fn notify_resource_list_changed(&self) {
        let (sessions, subscriptions) = self.open_peers();
        for peer in sessions {
            if let Err(error) = peer.notify_resource_list_changed().await {
                tracing::debug!(%error, "resources/list_changed not delivered to a session");
            }
        }
        for sink in subscriptions {
            if let Err(error) = sink.notify_resource_list_changed().await {
                tracing::debug!(%error, "resources/list_changed not delivered to a subscription");
            }
        }
    }

    /// Sends `notifications/prompts/list_changed` to every open peer.
    pub(crate) async fn notify_prompt_list_changed(&self) {
        let (sessions, subscriptions) = self.open_peers();
        for peer in sessions {
            if let Err(error) = peer.notify_prompt_list_changed().await {
                tracing::debug!(%error, "prompts/list_changed not delivered to a session");
            }
        }
        for sink in subscriptions {
            if let Err(error) = sink.notify_prompt_list_changed().await {
                tracing::debug!(%error, "prompts/list_changed not delivered to a subscription");
            }
        }
    }

    fn open_peers(&self) -> (Vec<Peer<RoleServer>>, Vec<SubscriptionSink>) {
        let mut inner = self.lock();
        inner.prune();
        (
            inner.sessions.clone(),
            inner.subscriptions.iter().map(|(s, _)| s.clone()).collect(),
        )
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Inner {
    fn prune(&mut self) {
        self.sessions.retain(|p| !p.is_transport_closed());
        self.subscriptions
            .retain(|(_, ended)| !ended.is_cancelled());
    }
}

/// Forwards every catalog change to every peer until `shutdown` fires.
pub(crate) async fn broadcast_changes(
    peers: Arc<Peers>,
    mut changes: watch::Receiver<u64>,
    shutdown: CancellationToken,
) {
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return,
            changed = changes.changed() => {
                if changed.is_err() {
                    return;
                }
                peers.notify_tool_list_changed().await;
            }
        }
    }
}
