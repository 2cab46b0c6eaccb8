//! The issuer's signing keys (its `jwks_uri`), cached by `kid`.
//!
//! A token whose `kid` is not in the cache causes one fetch at once (concurrent misses wait for
//! the same one), unless the last fetch was itself caused by an unknown `kid` less than
//! `min_refresh` ago: random `kid`s cannot turn this server into a JWKS flood (one fetch per
//! `min_refresh` at most), while a key rotated in just after the start-up fetch (or any other
//! fetch) verifies on its first token. A cache older than [`MAX_AGE`] is fetched again on the next
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
    /// Serializes fetches; holds when the last one started and why.
    fetching: tokio::sync::Mutex<Option<(Instant, Reason)>>,
    min_refresh: Duration,
}

/// Why a fetch was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reason {
    /// The cache was empty.
    First,
    /// The cache was older than [`MAX_AGE`].
    Expired,
    /// A token named a `kid` the fresh cache does not hold: the only reason an outsider can
    /// cause, so the only one `min_refresh` holds back.
    UnknownKid,
}

impl Reason {
    fn as_str(self) -> &'static str {
        match self {
            Reason::First => "first",
            Reason::Expired => "expired",
            Reason::UnknownKid => "unknown_kid",
        }
    }
}

#[derive(Deserialize)]
struct Document {
    keys: Vec<Value>,
}

impl Jwks {
    /// An empty cache whose fetches for unknown `kid`s are at least `min_refresh` apart.
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
    /// [`TokenError::UnknownKey`] when no key matches after a refresh (or within
    /// `min_refresh` of a fetch for another unknown `kid`), [`TokenError::Unavailable`] when the first fetch fails.
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
            if (*last).is_some_and(|(at, reason)| {
                reason == Reason::UnknownKid && at.elapsed() < self.min_refresh
            }) {
                return Err(TokenError::UnknownKey);
            }
        }
        let reason = if set.fetched.is_none() {
            Reason::First
        } else if fresh {
            Reason::UnknownKid
        } else {
            Reason::Expired
        };
        *last = Some((Instant::now(), reason));
        match fetch_json::<Document>(http, uri).await {
            Ok(document) => {
                let new = parse(document);
                tracing::info!(
                    keys = new.by_kid.len() + new.unnamed.len(),
                    reason = reason.as_str(),
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

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use axum::Router;
    use axum::routing::get;
    use serde_json::json;

    use super::*;

    /// A JWKS endpoint on a real socket whose key set the test changes (a rotation), counting
    /// its fetches.
    struct Issuer {
        uri: String,
        kids: Arc<RwLock<Vec<&'static str>>>,
        fetches: Arc<AtomicUsize>,
    }

    async fn issuer(kids: &[&'static str]) -> Issuer {
        let kids = Arc::new(RwLock::new(kids.to_vec()));
        let fetches = Arc::new(AtomicUsize::new(0));
        let app = Router::new().route(
            "/jwks",
            get({
                let (kids, fetches) = (kids.clone(), fetches.clone());
                move || async move {
                    fetches.fetch_add(1, Ordering::SeqCst);
                    let keys: Vec<Value> = kids
                        .read()
                        .unwrap()
                        .iter()
                        .map(|kid| json!({"kty": "oct", "kid": kid, "alg": "HS256", "k": "c2VjcmV0LWtleS1ieXRlcw"}))
                        .collect();
                    axum::Json(json!({"keys": keys}))
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let uri = format!("http://{}/jwks", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        Issuer { uri, kids, fetches }
    }

    fn header(kid: &str) -> Header {
        let mut header = Header::new(Algorithm::HS256);
        header.kid = Some(kid.into());
        header
    }

    #[tokio::test]
    async fn a_key_rotated_in_after_the_start_up_fetch_verifies_at_once() {
        let idp = issuer(&["old"]).await;
        let http = reqwest::Client::new();
        let jwks = Jwks::new(Duration::from_secs(3600));
        // The start-up fetch (the first token).
        let key = jwks.key(&http, &idp.uri, &header("old")).await.unwrap();
        assert_eq!(key.alg, Some(Algorithm::HS256));
        assert_eq!(idp.fetches.load(Ordering::SeqCst), 1);
        // The issuer rotates a new key in; its first token is verified without waiting.
        idp.kids.write().unwrap().push("new");
        assert!(jwks.key(&http, &idp.uri, &header("new")).await.is_ok());
        assert_eq!(idp.fetches.load(Ordering::SeqCst), 2);
        // Known keys need no fetch.
        assert!(jwks.key(&http, &idp.uri, &header("old")).await.is_ok());
        assert_eq!(idp.fetches.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn unknown_kids_cause_one_fetch_per_window() {
        let idp = issuer(&["old"]).await;
        let http = reqwest::Client::new();
        let jwks = Jwks::new(Duration::from_secs(3600));
        assert!(jwks.key(&http, &idp.uri, &header("old")).await.is_ok());
        // A flood of random kids: one fetch, then refused from the cache.
        for i in 0..20 {
            let kid = format!("random-{i}");
            assert!(matches!(
                jwks.key(&http, &idp.uri, &header(&kid)).await,
                Err(TokenError::UnknownKey)
            ));
        }
        assert_eq!(idp.fetches.load(Ordering::SeqCst), 2);
        // Within the window of that fetch, even a real new key waits for the window.
        idp.kids.write().unwrap().push("new");
        assert!(jwks.key(&http, &idp.uri, &header("new")).await.is_err());
        assert_eq!(idp.fetches.load(Ordering::SeqCst), 2);
        // A window that has passed allows the next fetch.
        // (Long enough that the two calls below fall within it on a loaded machine.)
        let jwks = Jwks::new(Duration::from_secs(2));
        assert!(jwks.key(&http, &idp.uri, &header("old")).await.is_ok());
        assert!(jwks.key(&http, &idp.uri, &header("gone")).await.is_err());
        assert!(jwks.key(&http, &idp.uri, &header("gone")).await.is_err());
        assert_eq!(idp.fetches.load(Ordering::SeqCst), 4);
        idp.kids.write().unwrap().push("newer");
        assert!(jwks.key(&http, &idp.uri, &header("newer")).await.is_err());
        tokio::time::sleep(Duration::from_millis(2100)).await;
        assert!(jwks.key(&http, &idp.uri, &header("newer")).await.is_ok());
        assert_eq!(idp.fetches.load(Ordering::SeqCst), 5);
    }
}
