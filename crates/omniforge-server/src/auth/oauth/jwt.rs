//! The checks of a JWT access token (RFC 9068, RFC 8725): an allowed asymmetric algorithm
//! (never `none` or HMAC: no algorithm confusion), matching the key's own; the signature;
//! `iss` equal to the configured issuer; `aud` naming this server; `exp` required and `nbf`
//! when present, with leeway; `typ` `at+jwt` or, as Entra ID, Okta and Auth0 issue them,
//! `JWT` or none.

use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::{Algorithm, Header, Validation};
use serde_json::{Map, Value};

use super::jwks::Key;
use super::{OAuthSettings, TokenError};

/// The algorithms a token may be signed with.
const ALLOWED: &[Algorithm] = &[
    Algorithm::RS256,
    Algorithm::RS384,
    Algorithm::RS512,
    Algorithm::PS256,
    Algorithm::PS384,
    Algorithm::PS512,
    Algorithm::ES256,
    Algorithm::ES384,
    Algorithm::EdDSA,
];

/// The header of `token` when it has the shape of a JWS (three base64url segments whose first
/// is a JOSE header); `None` for anything else (an opaque token).
pub(super) fn header(token: &str) -> Option<Header> {
    if token.split('.').count() != 3 {
        return None;
    }
    jsonwebtoken::decode_header(token).ok()
}

/// Verifies `token` with `key` and returns its claims.
///
/// # Errors
/// The first check that fails, as a [`TokenError`].
pub(super) fn verify(
    token: &str,
    header: &Header,
    key: &Key,
    settings: &OAuthSettings,
) -> Result<Map<String, Value>, TokenError> {
    if !ALLOWED.contains(&header.alg) || key.alg.is_some_and(|alg| alg != header.alg) {
        return Err(TokenError::Signature);
    }
    if let Some(typ) = &header.typ
        && !["at+jwt", "application/at+jwt", "jwt"]
            .iter()
            .any(|t| t.eq_ignore_ascii_case(typ))
    {
        return Err(TokenError::Malformed);
    }
    let mut validation = Validation::new(header.alg);
    validation.set_issuer(&[&settings.issuer]);
    validation.set_audience(&settings.audiences);
    validation.set_required_spec_claims(&["exp", "iss", "aud"]);
    validation.leeway = settings.leeway.as_secs();
    validation.validate_nbf = true;
    let data =
        jsonwebtoken::decode::<Map<String, Value>>(token, &key.key, &validation).map_err(|e| {
            match e.kind() {
                ErrorKind::ExpiredSignature => TokenError::Expired,
                ErrorKind::ImmatureSignature => TokenError::NotYetValid,
                ErrorKind::InvalidIssuer => TokenError::Issuer,
                ErrorKind::InvalidAudience => TokenError::Audience,
                ErrorKind::MissingRequiredClaim(claim) if claim == "aud" => TokenError::Audience,
                ErrorKind::MissingRequiredClaim(claim) if claim == "iss" => TokenError::Issuer,
                ErrorKind::InvalidSignature | ErrorKind::InvalidAlgorithm => TokenError::Signature,
                _ => TokenError::Malformed,
            }
        })?;
    let claims = data.claims;
    // `iat` in the future (beyond the leeway) is a token from a broken or hostile clock.
    if let Some(iat) = claims.get("iat").and_then(Value::as_u64)
        && iat > now_secs().saturating_add(settings.leeway.as_secs())
    {
        return Err(TokenError::NotYetValid);
    }
    Ok(claims)
}

/// Seconds since the Unix epoch.
pub(super) fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use jsonwebtoken::{DecodingKey, EncodingKey, Header, encode};
    use serde_json::json;

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

    #[test]
    fn hmac_and_unsigned_tokens_are_refused() {
        // Algorithm confusion: an HMAC token "signed" with bytes the attacker knows (e.g. the
        // issuer's public key) is refused before any key is used.
        let claims = json!({"iss": "https://idp.example", "aud": "https://mcp.example/mcp",
                            "sub": "mallory", "exp": now_secs() + 600, "scope": "admin"});
        let token = encode(
            &Header::new(Algorithm::HS256),
            &claims,
            &EncodingKey::from_secret(b"public key bytes").unwrap(),
        )
        .unwrap();
        let header = header(&token).unwrap();
        let key = Key {
            alg: None,
            key: DecodingKey::from_secret(b"public key bytes").unwrap(),
        };
        assert_eq!(
            verify(&token, &header, &key, &settings()),
            Err(TokenError::Signature)
        );
        // `alg: none` has no JOSE header this crate accepts: not a JWT at all.
        let unsigned = format!(
            "{}.{}.",
            base64::Engine::encode(
                &base64::engine::general_purpose::URL_SAFE_NO_PAD,
                br#"{"alg":"none","typ":"at+jwt"}"#
            ),
            base64::Engine::encode(
                &base64::engine::general_purpose::URL_SAFE_NO_PAD,
                claims.to_string()
            ),
        );
        assert!(super::header(&unsigned).is_none());
    }
}
