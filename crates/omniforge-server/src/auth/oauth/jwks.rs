//! The issuer's signing keys (its `jwks_uri`), cached by `kid`.
//!
//! A token whose `kid` is not in the cache causes one fetch (concurrent misses wait for the
//! same one), unless a fetch happened less than `min_refresh` ago: random `kid`s cannot turn
//! this server into a JWKS flood. A cache older than [`MAX_AGE`] is fetched again on the next
//! token. A fetch **replaces** the set, so a key the issuer withdrew stops verifying.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use jsonwebtoken::jwk::Jwk;
use jsonwebtoken::{Algorithm, DecodingKey, Header};
use serde::Deserialize;
use serde_json::Value;

use super::TokenError;
use super::discovery::fetch_json;

/// How long a fetched key set is used before it is fetched again.
const MAX_AGE: Duration = Duration::from_secs(3600);

/// One verification key.
#[derive(Clone)]
pub(super) struct Key {
    /// The algorithm the key is for, when the JWK says.
    pub(super) alg: Option<Algorithm>,
    /// The key.
    pub(super) key: DecodingKey,
}

#[derive(Default)]
struct KeySet {
    by_kid: HashMap<String, Key>,
    /// Keys without a `kid` (usable only when the token has none and there is one such key).
    unnamed: Vec<Key>,
    fetched: Option<Instant>,
}

/// The cache.
pub(super) struct Jwks {
    keys: RwLock<Arc<KeySet>>,
    /// Serializes fetches; holds when the last one started.
    fetching: tokio::sync::Mutex<Option<Instant>>,
    min_refresh: Duration,
}

#[derive(Deserialize)]
struct Document {
    keys: Vec<Value>,
}

impl Jwks {
    /// An empty cache whose forced fetches are at least `min_refresh` apart.
    pub(super) fn new(min_refresh: Duration) -> Jwks {
        Jwks {
            keys: RwLock::new(Arc::new(KeySet::default())),
            fetching: tokio::sync::Mutex::new(None),
            min_refresh,
        }
    }

    fn current(&self) -> Arc<KeySet> {
        self.keys.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The key for a token's `header`, fetching the set when needed.
    ///
    /// # Errors
    /// [`TokenError::UnknownKey`] when no key matches after a refresh (or during the
    /// cooldown), [`TokenError::Unavailable`] when the first fetch fails.
    pub(super) async fn key(
        &self,
        http: &reqwest::Client,
        uri: &str,
        header: &Header,
    ) -> Result<Key, TokenError> {
        let fresh = |set: &KeySet| set.fetched.is_some_and(|at| at.elapsed() < MAX_AGE);
        let set = self.current();
        if fresh(&set)
            && let Some(key) = find(&set, header)
        {
            return Ok(key);
        }
        let mut last = self.fetching.lock().await;
        // Another caller may have fetched while this one waited.
        let set = self.current();
        let fresh = fresh(&set);
        if fresh {
            if let Some(key) = find(&set, header) {
                return Ok(key);
            }
            if (*last).is_some_and(|at| at.elapsed() < self.min_refresh) {
                return Err(TokenError::UnknownKey);
            }
        }
        *last = Some(Instant::now());
        let reason = if set.fetched.is_none() {
            "first"
        } else if fresh {
            "unknown_kid"
        } else {
            "expired"
        };
        match fetch_json::<Document>(http, uri).await {
            Ok(document) => {
                let new = parse(document);
                tracing::info!(
                    keys = new.by_kid.len() + new.unnamed.len(),
                    reason,
                    "fetched the OAuth issuer's signing keys"
                );
                let found = find(&new, header);
                *self.keys.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(new);
                found.ok_or(TokenError::UnknownKey)
            }
            Err(error) => {
                tracing::warn!(%error, %uri, "fetching the OAuth issuer's signing keys failed");
                // An old set still verifies the keys it has.
                match find(&set, header) {
                    Some(key) => Ok(key),
                    None if set.fetched.is_none() => Err(TokenError::Unavailable),
                    None => Err(TokenError::UnknownKey),
                }
            }
        }
    }
}

fn find(set: &KeySet, header: &Header) -> Option<Key> {
    match &header.kid {
        Some(kid) => set.by_kid.get(kid).cloned(),
        None => match set.unnamed.as_slice() {
            [only] => Some(only.clone()),
            _ => None,
        },
    }
}

/// The signing keys of a JWKS document; encryption keys and keys this crate cannot use are
/// skipped (one odd key does not lose the others).
fn parse(document: Document) -> KeySet {
    let mut set = KeySet {
        fetched: Some(Instant::now()),
        ..KeySet::default()
    };
    for value in document.keys {
        if value.get("use").and_then(Value::as_str) == Some("enc") {
            continue;
        }
        let Ok(jwk) = serde_json::from_value::<Jwk>(value) else {
            continue;
        };
        let Ok(key) = DecodingKey::from_jwk(&jwk) else {
            continue;
        };
        let alg = jwk
            .common
            .key_algorithm
            .and_then(|a| a.to_string().parse::<Algorithm>().ok());
        let key = Key { alg, key };
        match jwk.common.key_id {
            Some(kid) => {
                set.by_kid.insert(kid, key);
            }
            None => set.unnamed.push(key),
        }
    }
    set
}
