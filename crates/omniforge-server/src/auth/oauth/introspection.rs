//! Opaque access tokens through the issuer's RFC 7662 introspection endpoint: a form POST
//! (`token`, `token_type_hint=access_token`) with HTTP Basic client authentication. Only an
//! `active` answer counts, and then `iss` (when present) must be the issuer, `aud` (when
//! present) must name this server, `exp` (when present) must not have passed.
//!
//! Answers are cached by the token's SHA-256 (the token itself is never kept as a key) until
//! the token's `exp`, at most [`MAX_TTL`]; refusals for [`REFUSED_TTL`]. So a revoked token
//! may keep working for up to [`MAX_TTL`] after its revocation.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use super::discovery::read_json;
use super::jwt::now_secs;
use super::{IntrospectionSettings, OAuthSettings, TokenError};

/// The longest an active answer is reused.
const MAX_TTL: Duration = Duration::from_secs(60);
/// How long a refusal is reused.
const REFUSED_TTL: Duration = Duration::from_secs(10);
/// Cached answers beyond which expired ones are dropped.
const PRUNE_AT: usize = 10_000;

type Answer = Result<Map<String, Value>, TokenError>;

/// Introspection answers by token digest.
#[derive(Default)]
pub(super) struct Cache {
    answers: Mutex<HashMap<[u8; 32], (Instant, Answer)>>,
}

impl Cache {
    /// The checked claims of an opaque `token`.
    ///
    /// # Errors
    /// [`TokenError::Inactive`] and the claim checks' errors; [`TokenError::Unavailable`]
    /// when the endpoint cannot be asked (not cached).
    pub(super) async fn introspect(
        &self,
        http: &reqwest::Client,
        endpoint: &str,
        config: &IntrospectionSettings,
        token: &str,
        settings: &OAuthSettings,
    ) -> Answer {
        let digest: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        if let Some((until, answer)) = self.lock().get(&digest)
            && Instant::now() < *until
        {
            return answer.clone();
        }
        let response = http
            .post(endpoint)
            .basic_auth(&config.client_id, Some(&config.client_secret))
            .form(&[("token", token), ("token_type_hint", "access_token")])
            .send()
            .await
            .and_then(reqwest::Response::error_for_status);
        let claims: Map<String, Value> = match response {
            Ok(response) => match read_json(response).await {
                Ok(claims) => claims,
                Err(error) => {
                    tracing::warn!(%error, "the introspection answer is not a JSON object");
                    return Err(TokenError::Unavailable);
                }
            },
            Err(error) => {
                tracing::warn!(%error, "token introspection failed");
                return Err(TokenError::Unavailable);
            }
        };
        let answer = check(claims, settings);
        let ttl = match &answer {
            Ok(claims) => claims
                .get("exp")
                .and_then(Value::as_u64)
                .map_or(MAX_TTL, |exp| {
                    Duration::from_secs(exp.saturating_sub(now_secs())).min(MAX_TTL)
                }),
            Err(_) => REFUSED_TTL,
        };
        let mut answers = self.lock();
        if answers.len() >= PRUNE_AT {
            let now = Instant::now();
            answers.retain(|_, (until, _)| *until > now);
        }
        if answers.len() < PRUNE_AT {
            answers.insert(digest, (Instant::now() + ttl, answer.clone()));
        }
        answer
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<[u8; 32], (Instant, Answer)>> {
        self.answers.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// RFC 7662 §2.2: only `active: true` counts; then the claims present must fit.
fn check(claims: Map<String, Value>, settings: &OAuthSettings) -> Answer {
    if claims.get("active") != Some(&Value::Bool(true)) {
        return Err(TokenError::Inactive);
    }
    if let Some(iss) = claims.get("iss")
        && iss.as_str() != Some(settings.issuer.as_str())
    {
        return Err(TokenError::Issuer);
    }
    let ours = |v: &Value| {
        v.as_str()
            .is_some_and(|a| settings.audiences.iter().any(|ours| ours == a))
    };
    match claims.get("aud") {
        None => {}
        Some(Value::Array(items)) if items.iter().any(ours) => {}
        Some(v) if ours(v) => {}
        Some(_) => return Err(TokenError::Audience),
    }
    if let Some(exp) = claims.get("exp").and_then(Value::as_u64)
        && exp.saturating_add(settings.leeway.as_secs()) < now_secs()
    {
        return Err(TokenError::Expired);
    }
    Ok(claims)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::oauth::ScopeMap;

    fn settings() -> OAuthSettings {
        OAuthSettings {
            issuer: "https://idp.example".into(),
            audiences: vec!["https://mcp.example/mcp".into()],
            scopes: ScopeMap::default(),
            principal_claim: "sub".into(),
            leeway: Duration::from_secs(0),
            challenge_scopes: vec![],
            jwks_min_refresh: Duration::from_secs(10),
            console: None,
            introspection: None,
        }
    }

    fn run(json: &str) -> Answer {
        check(serde_json::from_str(json).unwrap(), &settings())
    }

    #[test]
    fn only_active_answers_for_this_resource_count() {
        assert_eq!(run(r#"{"active":false}"#), Err(TokenError::Inactive));
        assert_eq!(run(r#"{"active":"true"}"#), Err(TokenError::Inactive));
        assert_eq!(
            run(r#"{"active":true,"iss":"https://other"}"#),
            Err(TokenError::Issuer)
        );
        assert_eq!(
            run(r#"{"active":true,"aud":"https://other/mcp"}"#),
            Err(TokenError::Audience)
        );
        assert_eq!(run(r#"{"active":true,"exp":1}"#), Err(TokenError::Expired));
        assert!(run(r#"{"active":true,"aud":["x","https://mcp.example/mcp"]}"#).is_ok());
        assert!(run(r#"{"active":true}"#).is_ok());
    }
}
