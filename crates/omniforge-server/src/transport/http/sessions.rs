//! The front's own record of each HTTP session, beside rmcp's: the revision `initialize`
//! negotiated (rmcp does not expose it), the principal that opened the session (a session
//! belongs to its token), and what keeps it alive.
//!
//! **Expiry counts work, not time alone** (issue 11, finding 3). rmcp's own idle timer
//! (`SessionConfig::keep_alive`) restarts only when a message passes, so a silent call longer
//! than the timeout lost its session mid-call. rmcp's timer is off; instead a session is idle
//! only when it has no open stream (a POST waiting for its answer, a GET, a resumed stream) and
//! no request came for `idle_timeout`. [`SessionBook::expired`] names those; `expiry.rs`
//! closes them.
//!
//! **A cap** (finding 4): at most `max_sessions` live sessions; [`SessionBook::admit`]
//! reserves a place for an `initialize` before rmcp creates the session.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::auth::PrincipalId;

/// Per-session facts the front needs and rmcp does not expose.
#[derive(Debug)]
struct SessionInfo {
    /// The revision negotiated by `initialize` (none until it is answered).
    version: Option<&'static str>,
    /// The name of the principal that opened the session (none until `initialize` is
    /// answered).
    owner: Option<PrincipalId>,
    /// Open streams: POSTs waiting for their answer, GET streams, resumed streams.
    busy: usize,
    /// When the last stream closed or the last message arrived.
    last_active: Instant,
    /// Client request ids in flight on this session, with how many POSTs carry each
    /// (see `request_ids.rs`).
    in_flight: HashMap<String, InFlight>,
}

/// The POSTs in flight that carry one client request id.
#[derive(Debug, Default)]
pub(crate) struct InFlight {
    /// Whether one of them was forwarded with the client's own id.
    pub(crate) original: bool,
    /// The internal ids the others were forwarded with.
    pub(crate) renamed: Vec<String>,
}

/// The session records, by session id.
pub(crate) struct SessionBook {
    /// A std lock: held for map operations only, never across an `.await`.
    sessions: Mutex<HashMap<String, SessionInfo>>,
    /// `initialize` requests admitted and not yet answered (they hold a place under the cap).
    pending: Mutex<usize>,
    /// The most live sessions.
    max_sessions: usize,
}

impl SessionBook {
    /// An empty book that admits at most `max_sessions` sessions.
    pub(crate) fn new(max_sessions: usize) -> SessionBook {
        SessionBook {
            sessions: Mutex::default(),
            pending: Mutex::new(0),
            max_sessions,
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, SessionInfo>> {
        self.sessions.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn pending(&self) -> MutexGuard<'_, usize> {
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Reserves a place for a new session, or `None` when `max_sessions` are live or
    /// being opened. The place is released when the [`Admission`] drops (by then the session
    /// exists, or the `initialize` failed).
    pub(super) fn admit(self: &Arc<Self>) -> Option<Admission> {
        // Lock order: sessions, then pending (as everywhere).
        let live = self.lock().len();
        let mut pending = self.pending();
        if live + *pending >= self.max_sessions {
            return None;
        }
        *pending += 1;
        Some(Admission(self.clone()))
    }

    /// Records a session rmcp just created.
    pub(crate) fn create(&self, id: &str) {
        self.lock().insert(
            id.to_owned(),
            SessionInfo {
                version: None,
                owner: None,
                busy: 0,
                last_active: Instant::now(),
                in_flight: HashMap::new(),
            },
        );
    }

    /// Records that `owner` opened the session with revision `version` (if it still exists).
    pub(super) fn open(&self, id: &str, version: &'static str, owner: PrincipalId) {
        if let Some(info) = self.lock().get_mut(id) {
            info.version = Some(version);
            info.owner = Some(owner);
        }
    }

    /// Forgets a session (deleted, expired, or unknown to rmcp).
    pub(crate) fn close(&self, id: &str) {
        self.lock().remove(id);
    }

    /// Whether the session is known.
    pub(super) fn contains(&self, id: &str) -> bool {
        self.lock().contains_key(id)
    }

    /// The revision the session negotiated.
    pub(super) fn version(&self, id: &str) -> Option<&'static str> {
        self.lock().get(id).and_then(|s| s.version)
    }

    /// Whether `principal` may use the session: it opened it, or the session is unknown here
    /// (rmcp then answers for it).
    pub(super) fn may_use(&self, id: &str, principal: &PrincipalId) -> bool {
        self.lock()
            .get(id)
            .and_then(|s| s.owner.as_ref())
            .is_none_or(|owner| owner == principal)
    }

    /// How many sessions are live.
    pub(super) fn len(&self) -> usize {
        self.lock().len()
    }

    /// A message arrived on the session: its idle time starts again.
    pub(crate) fn touch(&self, id: &str) {
        if let Some(info) = self.lock().get_mut(id) {
            info.last_active = Instant::now();
        }
    }

    /// A stream opened on the session: it is busy until the guard drops.
    pub(crate) fn busy(self: &Arc<Self>, id: &str) -> Busy {
        if let Some(info) = self.lock().get_mut(id) {
            info.busy += 1;
            info.last_active = Instant::now();
        }
        Busy {
            book: self.clone(),
            session: id.to_owned(),
        }
    }

    /// Sessions with no open stream and no message for `idle_timeout`.
    pub(crate) fn expired(&self, idle_timeout: Duration) -> Vec<String> {
        self.lock()
            .iter()
            .filter(|(_, s)| s.busy == 0 && s.last_active.elapsed() >= idle_timeout)
            .map(|(id, _)| id.clone())
            .collect()
    }

    /// Runs `f` on the in-flight ids of a session (`None` when the session is gone).
    pub(crate) fn with_in_flight<T>(
        &self,
        id: &str,
        f: impl FnOnce(&mut HashMap<String, InFlight>) -> T,
    ) -> Option<T> {
        self.lock().get_mut(id).map(|s| f(&mut s.in_flight))
    }
}

/// A place under `max_sessions`, held while an `initialize` is answered.
pub(super) struct Admission(Arc<SessionBook>);

impl Drop for Admission {
    fn drop(&mut self) {
        let mut pending = self.0.pending();
        *pending = pending.saturating_sub(1);
    }
}

/// An open stream on a session (see [`SessionBook::busy`]).
pub(crate) struct Busy {
    book: Arc<SessionBook>,
    session: String,
}

impl Drop for Busy {
    fn drop(&mut self) {
        if let Some(info) = self.book.lock().get_mut(&self.session) {
            info.busy = info.busy.saturating_sub(1);
            info.last_active = Instant::now();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_busy_session_never_expires_and_an_idle_one_does() {
        let book = Arc::new(SessionBook::new(10));
        book.create("a");
        book.create("b");
        let guard = book.busy("a");
        assert_eq!(book.expired(Duration::ZERO), vec!["b".to_owned()]);
        drop(guard);
        let mut expired = book.expired(Duration::ZERO);
        expired.sort();
        assert_eq!(expired, vec!["a".to_owned(), "b".to_owned()]);
        assert!(book.expired(Duration::from_secs(3600)).is_empty());
    }

    #[test]
    fn admissions_count_against_the_cap_until_released() {
        let book = Arc::new(SessionBook::new(2));
        book.create("a");
        let first = book.admit().expect("one place left");
        assert!(
            book.admit().is_none(),
            "the pending initialize holds the place"
        );
        drop(first);
        book.create("b");
        assert!(book.admit().is_none(), "two live sessions fill the cap");
        book.close("a");
        assert!(book.admit().is_some());
    }
}
