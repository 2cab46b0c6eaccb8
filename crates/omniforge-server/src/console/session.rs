//! The console's sessions: in memory, keyed by the SHA-256 of the cookie value (so the map
//! never holds a usable cookie), with an idle and an absolute timeout and a cap.
//!
//! A session starts anonymous when the sign-in form is shown (its CSRF token protects the form
//! itself: no login CSRF) and is replaced by a new one, with a new id and a new CSRF token, at
//! sign-in (no session fixation). A session holds the principal, never the token it signed in
//! with.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::auth::Principal;

/// A signed-in session's idle limit.
const IDLE: Duration = Duration::from_secs(30 * 60);
/// No session outlives this, however active.
const ABSOLUTE: Duration = Duration::from_secs(12 * 60 * 60);
/// An anonymous (sign-in form) session's life.
const ANONYMOUS: Duration = Duration::from_secs(10 * 60);
/// Most sessions kept; past it the least recently used anonymous one goes first, then the
/// least recently used of all.
const MAX_SESSIONS: usize = 10_000;

/// A message shown once on the next page (the outcome of a change).
#[derive(Debug, Clone)]
pub(crate) struct Flash {
    /// Whether the change worked (styles the message; the text says it too).
    pub(crate) ok: bool,
    /// What happened, in words.
    pub(crate) text: String,
}

/// One session.
#[derive(Debug, Clone)]
pub(crate) struct Session {
    /// `None` until signed in.
    pub(crate) principal: Option<Principal>,
    /// The synchronizer token every change must carry.
    pub(crate) csrf: String,
    /// The outcome of the last change, shown once.
    flash: Option<Flash>,
    created: Instant,
    last_seen: Instant,
    /// The end of the credential it signed in with (an OAuth access token's expiry).
    until: Option<Instant>,
}

impl Session {
    fn expired(&self, now: Instant) -> bool {
        let idle = if self.principal.is_some() {
            IDLE
        } else {
            ANONYMOUS
        };
        now.duration_since(self.last_seen) > idle
            || now.duration_since(self.created) > ABSOLUTE
            || self.until.is_some_and(|until| now >= until)
    }

    /// Whether `presented` is this session's CSRF token, compared in constant time.
    pub(crate) fn csrf_matches(&self, presented: &str) -> bool {
        bool::from(self.csrf.as_bytes().ct_eq(presented.as_bytes()))
    }
}

/// Every live session.
#[derive(Debug, Default)]
pub(crate) struct Sessions {
    // A std mutex: held only for map operations, never across an await.
    map: Mutex<HashMap<[u8; 32], Session>>,
}

/// 32 random bytes from the OS, base64url: a session id or a CSRF token. `None` only if the
/// OS random source fails (then no session is made).
pub(crate) fn random_token() -> Option<String> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).ok()?;
    Some(URL_SAFE_NO_PAD.encode(bytes))
}

fn key(id: &str) -> [u8; 32] {
    Sha256::digest(id.as_bytes()).into()
}

impl Sessions {
    fn lock(&self) -> MutexGuard<'_, HashMap<[u8; 32], Session>> {
        self.map.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Starts a session, ending at `until` at the latest (besides the idle and absolute
    /// limits); returns its id (the cookie value) and a copy. `None` if no random id could be
    /// made.
    pub(crate) fn start(
        &self,
        principal: Option<Principal>,
        until: Option<Instant>,
    ) -> Option<(String, Session)> {
        let id = random_token()?;
        let now = Instant::now();
        let session = Session {
            principal,
            csrf: random_token()?,
            flash: None,
            created: now,
            last_seen: now,
            until,
        };
        let mut map = self.lock();
        map.retain(|_, s| !s.expired(now));
        if map.len() >= MAX_SESSIONS {
            let oldest = map
                .iter()
                .min_by_key(|(_, s)| (s.principal.is_some(), s.last_seen))
                .map(|(k, _)| *k);
            if let Some(oldest) = oldest {
                map.remove(&oldest);
            }
        }
        map.insert(key(&id), session.clone());
        Some((id, session))
    }

    /// The live session with this id, touched; `None` if unknown or expired.
    pub(crate) fn get(&self, id: &str) -> Option<Session> {
        let now = Instant::now();
        let mut map = self.lock();
        let k = key(id);
        match map.get_mut(&k) {
            Some(s) if !s.expired(now) => {
                s.last_seen = now;
                Some(s.clone())
            }
            Some(_) => {
                map.remove(&k);
                None
            }
            None => None,
        }
    }

    /// Takes the one-shot message.
    pub(crate) fn take_flash(&self, id: &str) -> Option<Flash> {
        self.lock().get_mut(&key(id)).and_then(|s| s.flash.take())
    }

    /// Leaves a message for the session's next page.
    pub(crate) fn set_flash(&self, id: &str, flash: Flash) {
        if let Some(s) = self.lock().get_mut(&key(id)) {
            s.flash = Some(flash);
        }
    }

    /// Ends a session (sign-out, or sign-in replacing the anonymous one).
    pub(crate) fn end(&self, id: &str) {
        self.lock().remove(&key(id));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_random_and_ended_sessions_open_nothing() {
        let sessions = Sessions::default();
        let (a, sa) = sessions.start(None, None).unwrap();
        let (b, sb) = sessions.start(Some(Principal::anonymous()), None).unwrap();
        assert_ne!(a, b);
        assert_ne!(sa.csrf, sb.csrf);
        assert_eq!(a.len(), 43, "32 bytes, base64url without padding");
        assert!(sessions.get(&a).is_some());
        sessions.end(&a);
        assert!(sessions.get(&a).is_none());
        assert!(sessions.get(&b).unwrap().csrf_matches(&sb.csrf));
        assert!(!sessions.get(&b).unwrap().csrf_matches(&sa.csrf));
        assert!(!sessions.get(&b).unwrap().csrf_matches(""));
    }

    #[test]
    fn a_session_ends_with_the_credential_it_signed_in_with() {
        let sessions = Sessions::default();
        let now = Instant::now();
        let (ended, _) = sessions
            .start(Some(Principal::anonymous()), Some(now))
            .unwrap();
        assert!(sessions.get(&ended).is_none(), "an expired token's session");
        let later = now + Duration::from_secs(3600);
        let (live, _) = sessions
            .start(Some(Principal::anonymous()), Some(later))
            .unwrap();
        assert!(sessions.get(&live).is_some());
    }
}
