//! Same-id requests on one session (issue 11, finding 5).
//!
//! Some clients send id 1 on every request. rmcp routes an answer to its POST stream by the
//! JSON-RPC id, so of several requests in flight with one id only one was answered and the
//! others stayed open forever. Here a request whose id is already in flight on its session is
//! forwarded under an internal id (a string that carries the client's id); its answer gets
//! the client's id back before it leaves ([`restore`]), on the POST stream or a resumed one.
//! A `notifications/cancelled` naming a shared id cancels every request in flight with it
//! ([`cancellations`]).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use rmcp::model::{
    CancelledNotification, CancelledNotificationParam, ClientJsonRpcMessage, ClientNotification,
    JsonRpcMessage, JsonRpcNotification, JsonRpcVersion2_0, NumberOrString, RequestId,
};
use rmcp::transport::streamable_http_server::session::ServerSseMessage;

use crate::transport::http::sessions::SessionBook;

/// The prefix of internal ids: `omniforge.rid/<n>/<client id as JSON>`.
const PREFIX: &str = "omniforge.rid/";

/// Numbers internal ids, process-wide.
static NEXT: AtomicU64 = AtomicU64::new(0);

/// A request's place among the ids in flight on its session; dropping it (when the request's
/// stream ends) frees the id.
pub(crate) struct Flight {
    book: Arc<SessionBook>,
    session: String,
    key: String,
    /// The internal id it was renamed to, if it was.
    renamed: Option<String>,
}

impl Drop for Flight {
    fn drop(&mut self) {
        self.book.with_in_flight(&self.session, |ids| {
            if let Some(entry) = ids.get_mut(&self.key) {
                match &self.renamed {
                    Some(internal) => entry.renamed.retain(|r| r != internal),
                    None => entry.original = false,
                }
                if !entry.original && entry.renamed.is_empty() {
                    ids.remove(&self.key);
                }
            }
        });
    }
}

/// The JSON text of a request id (the map key, and what an internal id carries).
fn key_of(id: &RequestId) -> String {
    serde_json::to_string(id).unwrap_or_default()
}

/// Registers a request about to be forwarded on `session`; renames it when its id is already
/// in flight there. Not a request: `None`.
pub(crate) fn depart(
    book: &Arc<SessionBook>,
    session: &str,
    message: &mut ClientJsonRpcMessage,
) -> Option<Flight> {
    let ClientJsonRpcMessage::Request(request) = message else {
        return None;
    };
    let key = key_of(&request.id);
    let renamed = book.with_in_flight(session, |ids| {
        let entry = ids.entry(key.clone()).or_default();
        if entry.original || !entry.renamed.is_empty() {
            let n = NEXT.fetch_add(1, Ordering::Relaxed);
            let internal = format!("{PREFIX}{n}/{key}");
            entry.renamed.push(internal.clone());
            Some(internal)
        } else {
            entry.original = true;
            None
        }
    })?;
    if let Some(internal) = &renamed {
        request.id = NumberOrString::String(Arc::from(internal.as_str()));
    }
    Some(Flight {
        book: book.clone(),
        session: session.to_owned(),
        key,
        renamed,
    })
}

/// The client's id inside an internal one.
fn original(id: &RequestId) -> Option<RequestId> {
    let NumberOrString::String(text) = id else {
        return None;
    };
    let rest = text.strip_prefix(PREFIX)?;
    let (_, json) = rest.split_once('/')?;
    serde_json::from_str(json).ok()
}

/// Gives an answer under an internal id the client's id back.
pub(crate) fn restore(mut event: ServerSseMessage) -> ServerSseMessage {
    let Some(message) = &event.message else {
        return event;
    };
    let renamed = match &**message {
        JsonRpcMessage::Response(r) => original(&r.id),
        JsonRpcMessage::Error(e) => e.id.as_ref().and_then(original),
        _ => None,
    };
    if let Some(id) = renamed {
        let mut copy = (**message).clone();
        match &mut copy {
            JsonRpcMessage::Response(r) => r.id = id,
            JsonRpcMessage::Error(e) => e.id = Some(id),
            _ => {}
        }
        event.message = Some(Arc::new(copy));
    }
    event
}

/// For a `notifications/cancelled` on `session`: one more cancellation per request in flight
/// under an internal id for the named id (the message itself reaches the original).
pub(crate) fn cancellations(
    book: &SessionBook,
    session: &str,
    message: &ClientJsonRpcMessage,
) -> Vec<ClientJsonRpcMessage> {
    let ClientJsonRpcMessage::Notification(JsonRpcNotification {
        notification: ClientNotification::CancelledNotification(cancelled),
        ..
    }) = message
    else {
        return Vec::new();
    };
    let Some(id) = &cancelled.params.request_id else {
        return Vec::new();
    };
    let key = key_of(id);
    let renamed = book
        .with_in_flight(session, |ids| {
            ids.get(&key).map(|e| e.renamed.clone()).unwrap_or_default()
        })
        .unwrap_or_default();
    renamed
        .into_iter()
        .map(|internal| {
            let params = CancelledNotificationParam::new(
                Some(NumberOrString::String(Arc::from(internal.as_str()))),
                cancelled.params.reason.clone(),
            );
            ClientJsonRpcMessage::Notification(JsonRpcNotification {
                jsonrpc: JsonRpcVersion2_0,
                notification: ClientNotification::CancelledNotification(
                    CancelledNotification::new(params),
                ),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn internal_ids_carry_the_clients_id() {
        for id in [
            NumberOrString::Number(1),
            NumberOrString::String(Arc::from("a/b\"c")),
        ] {
            let internal = NumberOrString::String(Arc::from(format!("{PREFIX}7/{}", key_of(&id))));
            assert_eq!(original(&internal), Some(id));
        }
        assert_eq!(original(&NumberOrString::String(Arc::from("x"))), None);
    }
}
