//! Sign-ins through the issuer that have left for its pages and not come back yet: per
//! `state`, the PKCE verifier (kept here, never sent to the browser) and the hash of a
//! binding value the browser holds in a cookie of its own. The callback is accepted only
//! with both (so nobody can finish a sign-in another browser started: no login CSRF), and
//! only once, within ten minutes.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// How long a sign-in may stay at the issuer.
pub(crate) const LIFETIME: Duration = Duration::from_secs(10 * 60);
/// Most sign-ins waiting at once; past it the oldest is dropped.
const MAX_PENDING: usize = 1000;

struct Pending {
    verifier: String,
    binding: [u8; 32],
    started: Instant,
}

/// The waiting sign-ins, keyed by the SHA-256 of their `state`.
#[derive(Default)]
pub(crate) struct Logins {
    map: Mutex<HashMap<[u8; 32], Pending>>,
}

fn hash(text: &str) -> [u8; 32] {
    Sha256::digest(text.as_bytes()).into()
}

impl Logins {
    /// Remembers a sign-in that left with `state`, its PKCE `verifier` and the browser's
    /// `binding` cookie value.
    pub(crate) fn insert(&self, state: &str, verifier: String, binding: &str) {
        let now = Instant::now();
        let mut map = self.map.lock().unwrap_or_else(PoisonError::into_inner);
        map.retain(|_, p| now.duration_since(p.started) < LIFETIME);
        if map.len() >= MAX_PENDING {
            let oldest = map.iter().min_by_key(|(_, p)| p.started).map(|(k, _)| *k);
            if let Some(oldest) = oldest {
                map.remove(&oldest);
            }
        }
        map.insert(
            hash(state),
            Pending {
                verifier,
                binding: hash(binding),
                started: now,
            },
        );
    }

    /// The verifier of the sign-in that left with `state`, if this browser (`binding`)
    /// started it less than [`LIFETIME`] ago. A state is taken once, whatever the answer: a
    /// replayed or forged callback finds nothing.
    pub(crate) fn take(&self, state: &str, binding: Option<&str>) -> Option<String> {
        let pending = self
            .map
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&hash(state))?;
        let same_browser = binding.is_some_and(|b| bool::from(hash(b).ct_eq(&pending.binding)));
        (same_browser && pending.started.elapsed() < LIFETIME).then_some(pending.verifier)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_state_opens_once_and_only_for_its_browser() {
        let logins = Logins::default();
        logins.insert("s1", "v1".into(), "b1");
        assert_eq!(logins.take("s1", Some("other")), None, "another browser");
        assert_eq!(
            logins.take("s1", Some("b1")),
            None,
            "taken by the failed try"
        );
        logins.insert("s2", "v2".into(), "b2");
        assert_eq!(logins.take("s2", None), None, "no binding cookie");
        logins.insert("s3", "v3".into(), "b3");
        assert_eq!(logins.take("s3", Some("b3")).as_deref(), Some("v3"));
        assert_eq!(logins.take("s3", Some("b3")), None, "replayed");
        assert_eq!(logins.take("nope", Some("b3")), None);
    }
}
