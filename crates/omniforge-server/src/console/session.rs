//! The console's sessions: in memory, keyed by the SHA-256 of the cookie value (so the map
//! never holds a usable cookie), with an idle and an absolute timeout and a cap.
//!
//! A session starts anonymous when the sign-in form is shown (its CSRF token protects the form
//! itself: no login CSRF) and is replaced by a new one, with a new id and a new CSRF token, at
//! sign-in (no session fixation). A session holds the principal, never the token it signed in
//! with.
//!
//! An anonymous session is **stateless**: its cookie is `a.NONCE.EXPIRY.MAC`, signed with a
//! key this process drew at start (HMAC-SHA256), and its CSRF token is derived from the nonce
//! with the same key. Nothing is stored for it, so unauthenticated traffic, however much,
//! cannot push anyone's open sign-in form (or signed-in session) out of the map: only
//! signed-in sessions count against [`MAX_SESSIONS`]. A form served by one replica is
//! submitted to the same one, as every console session is.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use std::time::{SystemTime, UNIX_EPOCH};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, KeyInit, Mac};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::auth::Principal;

/// A signed-in session's idle limit.
const IDLE: Duration = Duration::from_secs(30 * 60);
/// No session outlives this, however active.
const ABSOLUTE: Duration = Duration::from_secs(12 * 60 * 60);
/// An anonymous (sign-in form) session's life.
const ANONYMOUS: Duration = Duration::from_secs(10 * 60);
/// Most signed-in sessions kept; past it the least recently used goes first.
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

/// Every live signed-in session, and the key of the anonymous ones.
pub(crate) struct Sessions {
    // A std mutex: held only for map operations, never across an await.
    map: Mutex<HashMap<[u8; 32], Session>>,
    /// Signs anonymous session cookies and derives their CSRF tokens; drawn at start. `None`
    /// if the OS random source failed (then no anonymous session is made).
    anonymous_key: Option<[u8; 32]>,
}

impl Default for Sessions {
    fn default() -> Sessions {
        let mut key = [0u8; 32];
        Sessions {
            map: Mutex::default(),
            anonymous_key: getrandom::fill(&mut key).ok().map(|()| key),
        }
    }
}

impl std::fmt::Debug for Sessions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sessions").finish_non_exhaustive()
    }
}

/// The prefix of an anonymous session's cookie (signed-in ids are base64url: no dot).
const ANONYMOUS_PREFIX: &str = "a.";

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
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
        if principal.is_none() {
            return self.start_anonymous(unix_now());
        }
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

    /// A new anonymous session, made at `now` (unix seconds): its cookie and a copy. Nothing
    /// is stored.
    fn start_anonymous(&self, now: u64) -> Option<(String, Session)> {
        let nonce = random_token()?;
        let expires = now + ANONYMOUS.as_secs();
        let body = format!("{ANONYMOUS_PREFIX}{nonce}.{expires}");
        let id = format!("{body}.{}", self.sign(b"cookie", &body)?);
        Some((id, self.anonymous(&nonce)?))
    }

    /// HMAC-SHA256 of `purpose` and `text` under the anonymous key, base64url.
    fn sign(&self, purpose: &[u8], text: &str) -> Option<String> {
        let mut mac = Hmac::<Sha256>::new_from_slice(self.anonymous_key.as_ref()?).ok()?;
        mac.update(purpose);
        mac.update(b"\0");
        mac.update(text.as_bytes());
        Some(URL_SAFE_NO_PAD.encode(mac.finalize().into_bytes()))
    }

    /// The anonymous session of `nonce`: its CSRF token is derived from it.
    fn anonymous(&self, nonce: &str) -> Option<Session> {
        let now = Instant::now();
        Some(Session {
            principal: None,
            csrf: self.sign(b"csrf", nonce)?,
            flash: None,
            created: now,
            last_seen: now,
            until: None,
        })
    }

    /// The anonymous session of cookie `id` at `now` (unix seconds): `None` unless its MAC
    /// (compared in constant time) is this process's and it has not expired.
    fn get_anonymous(&self, id: &str, now: u64) -> Option<Session> {
        let (body, mac) = id.rsplit_once('.')?;
        let expected = self.sign(b"cookie", body)?;
        if !bool::from(expected.as_bytes().ct_eq(mac.as_bytes())) {
            return None;
        }
        let (nonce, expires) = body.strip_prefix(ANONYMOUS_PREFIX)?.split_once('.')?;
        let expires: u64 = expires.parse().ok()?;
        (now < expires).then(|| self.anonymous(nonce))?
    }

    /// The live session with this id, touched; `None` if unknown or expired.
    pub(crate) fn get(&self, id: &str) -> Option<Session> {
        if id.starts_with(ANONYMOUS_PREFIX) {
            return self.get_anonymous(id, unix_now());
        }
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

    /// Ends a signed-in session (sign-out, sign-in replacing the old one). An anonymous one
    /// is stateless and ends only at its expiry: it grants nothing but its own form.
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
        let (a, sa) = sessions.start(Some(Principal::anonymous()), None).unwrap();
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
    fn anonymous_traffic_cannot_evict_an_open_sign_in_form() {
        let sessions = Sessions::default();
        let (victim, form) = sessions.start(None, None).unwrap();
        let (signed_in, _) = sessions.start(Some(Principal::anonymous()), None).unwrap();
        // The reported flood: more unauthenticated sign-in forms than the cap.
        for _ in 0..MAX_SESSIONS + 52 {
            sessions.start(None, None).unwrap();
        }
        assert_eq!(
            sessions.lock().len(),
            1,
            "anonymous sessions are not stored"
        );
        let still = sessions
            .get(&victim)
            .expect("the victim's form is still open");
        assert!(still.principal.is_none());
        assert!(still.csrf_matches(&form.csrf));
        assert!(sessions.get(&signed_in).is_some());
    }

    #[test]
    fn an_anonymous_cookie_opens_only_signed_and_unexpired() {
        let sessions = Sessions::default();
        let now = unix_now();
        let (id, session) = sessions.start_anonymous(now).unwrap();
        assert!(id.starts_with("a."));
        let opened = sessions.get_anonymous(&id, now + 1).unwrap();
        assert!(opened.csrf_matches(&session.csrf));
        // Expired.
        assert!(
            sessions
                .get_anonymous(&id, now + ANONYMOUS.as_secs())
                .is_none()
        );
        // A later expiry, a changed nonce, or another process's key: refused.
        let (body, mac) = id.rsplit_once('.').unwrap();
        let (nonce, expires) = body.rsplit_once('.').unwrap();
        let later = format!("{nonce}.{}.{mac}", expires.parse::<u64>().unwrap() + 3600);
        assert!(sessions.get(&later).is_none());
        let other_nonce = format!("a.{}.{expires}.{mac}", random_token().unwrap());
        assert!(sessions.get(&other_nonce).is_none());
        assert!(Sessions::default().get(&id).is_none());
        assert!(sessions.get("a.").is_none() && sessions.get("a.x.y.z").is_none());
        // Two forms get different CSRF tokens.
        let (_, other) = sessions.start(None, None).unwrap();
        assert!(!other.csrf_matches(&session.csrf));
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
