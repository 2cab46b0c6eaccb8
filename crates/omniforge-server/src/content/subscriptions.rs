//! Who is told when a stored resource changes (`notifications/resources/updated`): sessions
//! that sent `resources/subscribe`, and 2026-07-28 `subscriptions/listen` streams that
//! accepted the URI.

use std::collections::HashMap;
use std::sync::Mutex;

use rmcp::service::{Peer, RoleServer, SubscriptionSink};
use tokio_util::sync::CancellationToken;

/// The subscriptions of one server.
#[derive(Default)]
pub(crate) struct Subscriptions {
    /// Sessions subscribed to each URI, by handler id. A std lock held for map operations only.
    by_uri: Mutex<HashMap<String, HashMap<u64, Peer<RoleServer>>>>,
    /// 2026-07-28 streams that accepted resource URIs, until their token is cancelled. A std
    /// lock held for vector operations only.
    sinks: Mutex<Vec<(Vec<String>, SubscriptionSink, CancellationToken)>>,
}

impl Subscriptions {
    /// Handler `handler` subscribes to `uri` (the caller checked that it exists).
    pub(crate) fn subscribe(&self, handler: u64, uri: &str, peer: Peer<RoleServer>) {
        let mut subs = self.by_uri.lock().unwrap_or_else(|e| e.into_inner());
        // Forget sessions that have gone, so the map does not grow with every past session.
        subs.retain(|_, by_handler| {
            by_handler.retain(|_, p| !p.is_transport_closed());
            !by_handler.is_empty()
        });
        subs.entry(uri.to_owned())
            .or_default()
            .insert(handler, peer);
    }

    /// Forgets a subscription (unknown ones are fine).
    pub(crate) fn unsubscribe(&self, handler: u64, uri: &str) {
        let mut subs = self.by_uri.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(by_handler) = subs.get_mut(uri) {
            by_handler.remove(&handler);
            if by_handler.is_empty() {
                subs.remove(uri);
            }
        }
    }

    /// A `subscriptions/listen` stream that accepted `uris`, until `ended` is cancelled.
    pub(crate) fn add_sink(
        &self,
        uris: Vec<String>,
        sink: SubscriptionSink,
        ended: CancellationToken,
    ) {
        let mut sinks = self.sinks.lock().unwrap_or_else(|e| e.into_inner());
        sinks.retain(|(_, _, ended)| !ended.is_cancelled());
        sinks.push((uris, sink, ended));
    }

    /// Tells every subscriber of `uri` that it changed.
    pub(crate) async fn notify_updated(&self, uri: &str) {
        let peers: Vec<Peer<RoleServer>> = {
            let mut subs = self.by_uri.lock().unwrap_or_else(|e| e.into_inner());
            match subs.get_mut(uri) {
                Some(by_handler) => {
                    by_handler.retain(|_, p| !p.is_transport_closed());
                    by_handler.values().cloned().collect()
                }
                None => Vec::new(),
            }
        };
        let sinks: Vec<SubscriptionSink> = {
            let mut sinks = self.sinks.lock().unwrap_or_else(|e| e.into_inner());
            sinks.retain(|(_, _, ended)| !ended.is_cancelled());
            sinks
                .iter()
                .filter(|(uris, _, _)| uris.iter().any(|u| u == uri))
                .map(|(_, sink, _)| sink.clone())
                .collect()
        };
        for sink in sinks {
            if let Err(error) = sink.notify_resource_updated(uri).await {
                tracing::debug!(%error, "resources/updated not delivered to a subscription");
            }
        }
        for peer in peers {
            let param = rmcp::model::ResourceUpdatedNotificationParam::new(uri);
            if let Err(error) = peer.notify_resource_updated(param).await {
                tracing::debug!(%error, "resources/updated not delivered");
            }
        }
    }
}
