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
