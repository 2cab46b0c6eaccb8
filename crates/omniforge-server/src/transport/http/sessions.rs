//! The front's own record of each HTTP session, beside rmcp's: the revision `initialize`
//! negotiated (rmcp does not expose it) and the principal that opened the session (a session
//! belongs to its token). Records of sessions rmcp has dropped are pruned every 30 s.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use rmcp::transport::streamable_http_server::SessionManager;

use crate::transport::http::resume::ResumableSessions;

/// Per-session facts the front needs and rmcp does not expose.
#[derive(Debug, Clone)]
struct SessionInfo {
    /// The revision negotiated by `initialize`.
    version: &'static str,
    /// The name of the principal that opened the session.
    owner: Arc<str>,
}

/// The session records, by session id.
#[derive(Default)]
pub(super) struct SessionBook {
    /// A std lock: held for map operations only, never across an `.await`.
    sessions: Mutex<HashMap<String, SessionInfo>>,
}

impl SessionBook {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, SessionInfo>> {
        self.sessions.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records a session that `owner` opened with revision `version`.
    pub(super) fn open(&self, id: &str, version: &'static str, owner: Arc<str>) {
        self.lock()
            .insert(id.to_owned(), SessionInfo { version, owner });
    }

    /// Forgets a session (deleted, or unknown to rmcp).
    pub(super) fn close(&self, id: &str) {
        self.lock().remove(id);
    }

    /// Whether the session is known.
    pub(super) fn contains(&self, id: &str) -> bool {
        self.lock().contains_key(id)
    }

    /// The revision the session negotiated.
    pub(super) fn version(&self, id: &str) -> Option<&'static str> {
        self.lock().get(id).map(|s| s.version)
    }

    /// Whether `principal` may use the session: it opened it, or the session is unknown here
    /// (rmcp then answers for it).
    pub(super) fn may_use(&self, id: &str, principal: &str) -> bool {
        self.lock().get(id).is_none_or(|s| &*s.owner == principal)
    }

    /// How many sessions are recorded.
    pub(super) fn len(&self) -> usize {
        self.lock().len()
    }
}

/// Every 30 s, forgets the records of sessions rmcp no longer has (expired ones), until the
/// book is dropped.
pub(super) async fn prune(book: Weak<SessionBook>, manager: Arc<ResumableSessions>) {
    let mut tick = tokio::time::interval(Duration::from_secs(30));
    loop {
        tick.tick().await;
        let Some(book) = book.upgrade() else { return };
        let ids: Vec<String> = book.lock().keys().cloned().collect();
        for id in ids {
            if !manager
                .has_session(&id.clone().into())
                .await
                .unwrap_or(false)
            {
                book.close(&id);
            }
        }
    }
}
