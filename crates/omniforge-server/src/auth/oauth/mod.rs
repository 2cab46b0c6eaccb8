//! OAuth 2.1 access tokens for the Streamable HTTP front (issue 16; MCP authorization,
//! RFC 9068, RFC 8707, RFC 7662): this server is a resource server of one authorization
//! server (the issuer).
//!
//! - [`discovery`]: the issuer's metadata (RFC 8414, then OpenID discovery), found on first
//!   use and retried at most every few seconds while the issuer is unreachable.
//! - [`jwks`]: the issuer's signing keys, cached, refreshed on an unknown `kid` (one fetch at a
//!   time, with a cooldown) and when older than an hour.
//! - [`jwt`]: the checks of a JWT access token: signature, `iss`, `aud` (this server's resource
//!   URL: no passthrough of tokens minted for another resource), `exp`/`nbf` with leeway.
//! - [`code_flow`]: the console's sign-in through the issuer (authorization code + PKCE),
//!   whose access token is then checked as any other.
//! - [`introspection`]: opaque tokens through the issuer's RFC 7662 endpoint, answers cached by
//!   the token's SHA-256 for at most a minute.
//!
//! A valid token becomes a [`Grant`]: the principal `oauth:ISSUER|SUBJECT` and the strongest
//! OmniForge scope its provider scopes map to ([`ScopeMap`]). Tokens are never logged: only
//! the failure kind ([`TokenError`]) is.

mod code_flow;
mod discovery;
mod introspection;
mod jwks;
mod jwt;

use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{Map, Value};

pub use code_flow::ConsoleClient;
pub(crate) use code_flow::{CodeError, shown_error};

use crate::auth::{PrincipalId, Scope};

/// How this server checks OAuth access tokens. Plain data, filled in by the binary.
#[derive(Debug, Clone)]
pub struct OAuthSettings {
    /// The authorization server's issuer identifier, e.g. `https://auth.example.com`; tokens
    /// must carry exactly this `iss`.
    pub issuer: String,
    /// This server's resource URLs; a token's `aud` must contain one of them. The first is the
    /// `resource` of the protected-resource metadata (RFC 9728) and must be the MCP endpoint's
    /// public URL.
    pub audiences: Vec<String>,
    /// Provider scope → OmniForge scope. Empty: the provider uses OmniForge's names
    /// (`tools:call`, `tools:write`, `admin`).
    pub scopes: ScopeMap,
    /// The claim that names the subject in `oauth:ISSUER|VALUE` [default: `sub`]. A token
    /// without it falls back to `client_id`, then `azp`.
    pub principal_claim: String,
    /// Tolerance for `exp`, `nbf` and `iat` (clock skew) [default: 30 s].
    pub leeway: Duration,
    /// The OmniForge scopes a 401 challenge asks clients to request [default: `tools:call`].
    pub challenge_scopes: Vec<Scope>,
    /// The least time between two JWKS fetches caused by unknown `kid`s [default: 10 s].
    pub jwks_min_refresh: Duration,
    /// Opaque tokens through RFC 7662 introspection; `None`: only JWT access tokens.
    pub introspection: Option<IntrospectionSettings>,
    /// The client the console signs people in as (authorization code + PKCE); `None`: the
    /// console takes pasted access tokens only.
    pub console: Option<ConsoleClient>,
}

/// How to reach the issuer's introspection endpoint (RFC 7662).
#[derive(Clone)]
pub struct IntrospectionSettings {
    /// The endpoint; `None`: the `introspection_endpoint` of the issuer's metadata.
    pub endpoint: Option<String>,
    /// This server's client id at the issuer.
    pub client_id: String,
    /// Its client secret, sent with HTTP Basic authentication. Never logged.
    pub client_secret: String,
}

impl fmt::Debug for IntrospectionSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IntrospectionSettings")
            .field("endpoint", &self.endpoint)
            .field("client_id", &self.client_id)
            .field("client_secret", &"<redacted>")
            .finish()
    }
}

/// Provider scopes → OmniForge scopes. Several provider scopes may map to one OmniForge
/// scope; a token gets the strongest scope any of its scopes maps to.
#[derive(Debug, Clone, Default)]
pub struct ScopeMap {
    entries: Vec<(String, Scope)>,
}

impl ScopeMap {
    /// The map of `entries` (provider scope, OmniForge scope); empty means the identity.
    pub fn new(entries: Vec<(String, Scope)>) -> ScopeMap {
        ScopeMap { entries }
    }

    /// The strongest OmniForge scope the `presented` provider scopes grant, if any.
    pub fn grant<'a>(&self, presented: impl IntoIterator<Item = &'a str>) -> Option<Scope> {
        presented
            .into_iter()
            .filter_map(|s| {
                if self.entries.is_empty() {
                    Scope::parse(s)
                } else {
                    self.entries
                        .iter()
                        .filter(|(name, _)| name == s)
                        .map(|(_, scope)| *scope)
                        .max()
                }
            })
            .max()
    }

    /// The provider's name for `scope`: the first provider scope mapped to it (or, if none,
    /// OmniForge's own name).
    pub fn provider_name(&self, scope: Scope) -> &str {
        self.entries
            .iter()
            .find(|(_, s)| *s == scope)
            .map_or(scope.as_str(), |(name, _)| name)
    }
}

/// What a valid access token grants.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    /// `oauth:ISSUER|SUBJECT`.
    pub principal: PrincipalId,
    /// The strongest OmniForge scope; `None`: the token is valid but grants none (403).
    pub scope: Option<Scope>,
    /// When the token expires (its `exp`), if it says.
    pub expires_at: Option<SystemTime>,
}

/// Why a token was refused. `Display` is the fixed text of the challenge's
/// `error_description`: it never carries token content.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TokenError {
    /// Not a JWT (nor, without introspection, anything else we check).
    #[error("the access token is malformed")]
    Malformed,
    /// The signature does not verify, or the algorithm is not allowed.
    #[error("the access token signature is not valid")]
    Signature,
    /// No key of the issuer's JWKS has the token's `kid`, even after a refresh.
    #[error("the access token is signed with an unknown key")]
    UnknownKey,
    /// `iss` is not the configured issuer.
    #[error("the access token was not issued by the configured issuer")]
    Issuer,
    /// `aud` does not name this server (RFC 8707: no token passthrough).
    #[error("the access token was not issued for this resource")]
    Audience,
    /// Past `exp` (plus leeway).
    #[error("the access token expired")]
    Expired,
    /// Before `nbf` (minus leeway).
    #[error("the access token is not valid yet")]
    NotYetValid,
    /// Introspection says the token is not active.
    #[error("the access token is not active")]
    Inactive,
    /// No claim names a subject.
    #[error("the access token names no subject")]
    NoSubject,
    /// The issuer (discovery, JWKS or introspection) cannot be reached: answered with 503,
    /// so clients keep their token and retry.
    #[error("the authorization server cannot be reached")]
    Unavailable,
}

impl TokenError {
    /// A short label for logs and metrics.
    pub fn kind(self) -> &'static str {
        match self {
            TokenError::Malformed => "malformed",
            TokenError::Signature => "signature",
            TokenError::UnknownKey => "unknown_key",
            TokenError::Issuer => "issuer",
            TokenError::Audience => "audience",
            TokenError::Expired => "expired",
            TokenError::NotYetValid => "not_yet_valid",
            TokenError::Inactive => "inactive",
            TokenError::NoSubject => "no_subject",
            TokenError::Unavailable => "unavailable",
        }
    }
}

/// OAuth settings that cannot work.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OAuthError {
    /// The issuer is not an absolute `https` URL (or `http` on loopback).
    #[error("the OAuth issuer must be an https URL (http only on loopback), got {0:?}")]
    Issuer(String),
    /// No audience, or one that is not an absolute URL.
    #[error("the OAuth audience must be this server's absolute resource URL, got {0:?}")]
    Audience(String),
    /// The HTTP client could not be built.
    #[error("building the HTTP client for the authorization server failed")]
    Client(#[source] reqwest::Error),
}

/// The token checker of one issuer: discovery, keys and introspection answers are cached
/// here for the server's life.
pub struct OAuth {
    settings: OAuthSettings,
    http: reqwest::Client,
    discovery: discovery::Discovery,
    jwks: jwks::Jwks,
    introspection: introspection::Cache,
}

impl fmt::Debug for OAuth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OAuth")
            .field("issuer", &self.settings.issuer)
            .field("audiences", &self.settings.audiences)
            .finish_non_exhaustive()
    }
}

impl OAuth {
    /// A checker for `settings`. Nothing is fetched yet: the issuer's metadata is discovered
    /// on the first token, so a server starts while its issuer is briefly unreachable.
    ///
    /// # Errors
    /// An issuer or audience that is not an acceptable URL, or an HTTP client that cannot be
    /// built.
    pub fn new(settings: OAuthSettings) -> Result<OAuth, OAuthError> {
        if !acceptable_url(&settings.issuer) {
            return Err(OAuthError::Issuer(settings.issuer));
        }
        match settings.audiences.iter().find(|a| !absolute_url(a)) {
            Some(bad) => return Err(OAuthError::Audience(bad.clone())),
            None if settings.audiences.is_empty() => {
                return Err(OAuthError::Audience(String::new()));
            }
            None => {}
        }
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(5))
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(OAuthError::Client)?;
        Ok(OAuth {
            jwks: jwks::Jwks::new(settings.jwks_min_refresh),
            discovery: discovery::Discovery::default(),
            introspection: introspection::Cache::default(),
            settings,
            http,
        })
    }

    /// The settings this checker was built from.
    pub fn settings(&self) -> &OAuthSettings {
        &self.settings
    }

    /// The resource URL of the protected-resource metadata (the first audience).
    pub fn resource(&self) -> &str {
        self.settings.audiences.first().map_or("", String::as_str)
    }

    /// Checks a presented bearer token: locally as a JWT when it is one, else through
    /// introspection when configured.
    ///
    /// # Errors
    /// Why the token is refused; [`TokenError::Unavailable`] when the issuer cannot be asked.
    pub async fn check(&self, token: &str) -> Result<Grant, TokenError> {
        let meta = self
            .discovery
            .get(&self.http, &self.settings.issuer)
            .await?;
        if let Some(header) = jwt::header(token) {
            let key = self.jwks.key(&self.http, &meta.jwks_uri, &header).await?;
            let claims = jwt::verify(token, &header, &key, &self.settings)?;
            return self.grant(&claims);
        }
        match &self.settings.introspection {
            Some(config) => {
                let endpoint = config
                    .endpoint
                    .as_deref()
                    .or(meta.introspection_endpoint.as_deref())
                    .ok_or(TokenError::Unavailable)?;
                let claims = self
                    .introspection
                    .introspect(&self.http, endpoint, config, token, &self.settings)
                    .await?;
                self.grant(&claims)
            }
            None => Err(TokenError::Malformed),
        }
    }

    /// The grant of checked claims: principal and mapped scope.
    fn grant(&self, claims: &Map<String, Value>) -> Result<Grant, TokenError> {
        let subject = [self.settings.principal_claim.as_str(), "client_id", "azp"]
            .into_iter()
            .find_map(|claim| claims.get(claim).and_then(Value::as_str))
            .filter(|s| !s.is_empty())
            .ok_or(TokenError::NoSubject)?;
        Ok(Grant {
            principal: PrincipalId::oauth(&self.settings.issuer, subject),
            scope: self.settings.scopes.grant(scopes(claims)),
            expires_at: claims
                .get("exp")
                .and_then(Value::as_u64)
                .map(|secs| UNIX_EPOCH + Duration::from_secs(secs)),
        })
    }
}

/// The provider scopes of claims: `scope` (space-separated, RFC 9068) or `scp` (an array or
/// a string, as Entra ID and Okta write it).
fn scopes(claims: &Map<String, Value>) -> Vec<&str> {
    match claims.get("scope").or_else(|| claims.get("scp")) {
        Some(Value::String(s)) => s.split_whitespace().collect(),
        Some(Value::Array(items)) => items.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    }
}

/// `scheme://authority...` with a non-empty authority.
fn absolute_url(url: &str) -> bool {
    url.split_once("://")
        .is_some_and(|(scheme, rest)| matches!(scheme, "http" | "https") && !rest.is_empty())
}

/// An https URL, or http to a loopback host (tests, local identity providers).
fn acceptable_url(url: &str) -> bool {
    if url.starts_with("https://") && absolute_url(url) {
        return true;
    }
    let Some(rest) = url.strip_prefix("http://") else {
        return false;
    };
    let authority = rest.split('/').next().unwrap_or("");
    let host = match authority.rsplit_once(':') {
        Some((host, port)) if port.chars().all(|c| c.is_ascii_digit()) => host,
        _ => authority,
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scope_map_grants_the_strongest_mapped_scope() {
        let identity = ScopeMap::default();
        assert_eq!(identity.grant(["openid", "tools:call"]), Some(Scope::Call));
        assert_eq!(
            identity.grant(["tools:write", "tools:call"]),
            Some(Scope::Write)
        );
        assert_eq!(identity.grant(["openid"]), None);
        let map = ScopeMap::new(vec![
            ("mcp.read".into(), Scope::Call),
            ("mcp.write".into(), Scope::Write),
            ("mcp.admin".into(), Scope::Admin),
        ]);
        assert_eq!(map.grant(["mcp.read"]), Some(Scope::Call));
        assert_eq!(map.grant(["mcp.read", "mcp.admin"]), Some(Scope::Admin));
        // OmniForge's own names mean nothing once a map is configured.
        assert_eq!(map.grant(["admin"]), None);
        assert_eq!(map.provider_name(Scope::Write), "mcp.write");
        assert_eq!(identity.provider_name(Scope::Write), "tools:write");
    }

    #[test]
    fn scopes_come_from_scope_or_scp() {
        let claims: Map<String, Value> = serde_json::from_str(r#"{"scope":"a b  c"}"#).unwrap();
        assert_eq!(scopes(&claims), ["a", "b", "c"]);
        let claims: Map<String, Value> = serde_json::from_str(r#"{"scp":["x","y"]}"#).unwrap();
        assert_eq!(scopes(&claims), ["x", "y"]);
    }

    #[test]
    fn issuer_urls() {
        assert!(acceptable_url("https://auth.example.com"));
        assert!(acceptable_url("http://127.0.0.1:4000"));
        assert!(acceptable_url("http://localhost/realms/x"));
        assert!(!acceptable_url("http://auth.example.com"));
        assert!(!acceptable_url("ftp://127.0.0.1"));
        assert!(!acceptable_url("https://"));
    }
}
