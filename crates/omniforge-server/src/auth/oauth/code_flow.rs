//! The console's own sign-in through the issuer (authorization code with PKCE, RFC 6749 §4.1,
//! RFC 7636, with the RFC 8707 `resource` of this server): the authorization request URL,
//! and the exchange of the code for an access token. The token is then checked exactly as a
//! bearer token on `/mcp` ([`OAuth::check`]); this module never trusts it by itself.

use std::fmt;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::Deserialize;
use sha2::{Digest, Sha256};

use super::discovery::{FetchError, Metadata, read_json};
use super::{OAuth, TokenError};
use crate::auth::Scope;

/// The client the console signs people in as, registered at the issuer with the redirect URI
/// `…/console/oauth/callback`.
#[derive(Clone, Default)]
pub struct ConsoleClient {
    /// Its client id.
    pub client_id: String,
    /// Its secret (HTTP Basic at the token endpoint); `None`: a public client (PKCE alone).
    pub client_secret: Option<String>,
    /// The redirect URI registered for it; `None`: the origin of the first audience followed
    /// by `/console/oauth/callback`.
    pub redirect_uri: Option<String>,
    /// The provider scopes it asks for; empty: the provider's names of `tools:call`,
    /// `tools:write` and `admin` (the provider grants what the person may have).
    pub scopes: Vec<String>,
}

impl fmt::Debug for ConsoleClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConsoleClient")
            .field("client_id", &self.client_id)
            .field(
                "client_secret",
                &self.client_secret.as_ref().map(|_| "<redacted>"),
            )
            .field("redirect_uri", &self.redirect_uri)
            .field("scopes", &self.scopes)
            .finish()
    }
}

/// Why an authorization code brought no access token. `Display` is what the person is told:
/// it never carries the code, the token or the provider's free text.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum CodeError {
    /// No console client is configured.
    #[error("OAuth sign-in is not configured")]
    NotConfigured,
    /// The issuer's metadata lacks the endpoint, or the issuer cannot be reached.
    #[error("the authorization server cannot be reached")]
    Unavailable,
    /// The token endpoint refused the code (`error` as RFC 6749 §5.2 names it).
    #[error("the authorization server refused the sign-in ({0})")]
    Refused(String),
}

#[derive(Deserialize)]
struct TokenResponse {
    access_token: String,
}

#[derive(Deserialize)]
struct ErrorResponse {
    error: String,
}

/// The S256 code challenge of a PKCE verifier.
pub(crate) fn code_challenge(verifier: &str) -> String {
    URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()))
}

/// An RFC 6749 error code as shown: its characters are a fixed set (§5.2), anything else is
/// replaced.
fn error_code(text: &str) -> String {
    let ok = !text.is_empty()
        && text.len() <= 64
        && text.bytes().all(|b| b.is_ascii_lowercase() || b == b'_');
    if ok {
        text.to_owned()
    } else {
        "unknown_error".into()
    }
}

impl OAuth {
    /// The console's client, if configured.
    pub(crate) fn console_client(&self) -> Option<&ConsoleClient> {
        self.settings.console.as_ref()
    }

    /// The console's redirect URI: configured, or the first audience's origin followed by
    /// `/console/oauth/callback`.
    pub(crate) fn console_redirect_uri(&self) -> Option<String> {
        let client = self.console_client()?;
        if let Some(uri) = &client.redirect_uri {
            return Some(uri.clone());
        }
        let origin = reqwest::Url::parse(self.resource()).ok()?.origin();
        Some(format!(
            "{}/console/oauth/callback",
            origin.ascii_serialization()
        ))
    }

    /// The issuer's name for people, e.g. `https://id.example.com`.
    pub(crate) fn issuer(&self) -> &str {
        &self.settings.issuer
    }

    /// The console's client, its redirect URI, and the endpoint `pick` names in the issuer's
    /// metadata.
    async fn console_endpoint(
        &self,
        pick: fn(&Metadata) -> Option<&str>,
    ) -> Result<(&ConsoleClient, String, String), CodeError> {
        let client = self.console_client().ok_or(CodeError::NotConfigured)?;
        let redirect = self
            .console_redirect_uri()
            .ok_or(CodeError::NotConfigured)?;
        let meta = self
            .discovery
            .get(&self.http, &self.settings.issuer)
            .await
            .map_err(|_: TokenError| CodeError::Unavailable)?;
        let endpoint = pick(meta).ok_or(CodeError::Unavailable)?.to_owned();
        Ok((client, redirect, endpoint))
    }

    /// The authorization request to send the browser to.
    ///
    /// # Errors
    /// No console client, or the issuer's metadata cannot be had or names no authorization
    /// endpoint.
    pub(crate) async fn authorization_url(
        &self,
        state: &str,
        verifier: &str,
    ) -> Result<String, CodeError> {
        let (client, redirect, endpoint) = self
            .console_endpoint(|meta| meta.authorization_endpoint.as_deref())
            .await?;
        let scope = if client.scopes.is_empty() {
            [Scope::Call, Scope::Write, Scope::Admin]
                .map(|s| self.settings.scopes.provider_name(s).to_owned())
                .join(" ")
        } else {
            client.scopes.join(" ")
        };
        let challenge = code_challenge(verifier);
        let url = reqwest::Url::parse_with_params(
            &endpoint,
            [
                ("response_type", "code"),
                ("client_id", client.client_id.as_str()),
                ("redirect_uri", redirect.as_str()),
                ("scope", scope.as_str()),
                ("state", state),
                ("code_challenge", challenge.as_str()),
                ("code_challenge_method", "S256"),
                ("resource", self.resource()),
            ],
        )
        .map_err(|_| CodeError::Unavailable)?;
        Ok(url.into())
    }

    /// Exchanges an authorization code (with its PKCE verifier) for an access token, which the
    /// caller then checks with [`OAuth::check`].
    ///
    /// # Errors
    /// No console client, the issuer cannot be reached, or it refuses the code.
    pub(crate) async fn exchange_code(
        &self,
        code: &str,
        verifier: &str,
    ) -> Result<String, CodeError> {
        let (client, redirect, endpoint) = self
            .console_endpoint(|meta| meta.token_endpoint.as_deref())
            .await?;
        let mut form = vec![
            ("grant_type", "authorization_code"),
            ("code", code),
            ("redirect_uri", redirect.as_str()),
            ("code_verifier", verifier),
            ("resource", self.resource()),
        ];
        let mut request = self.http.post(&endpoint);
        match &client.client_secret {
            Some(secret) => request = request.basic_auth(&client.client_id, Some(secret)),
            None => form.push(("client_id", client.client_id.as_str())),
        }
        let response = request.form(&form).send().await.map_err(|error| {
            tracing::warn!(%error, "the token endpoint cannot be reached");
            CodeError::Unavailable
        })?;
        if response.status().is_success() {
            let body: TokenResponse = read_json(response).await.map_err(|error: FetchError| {
                tracing::warn!(%error, "the token endpoint answered no access token");
                CodeError::Unavailable
            })?;
            return Ok(body.access_token);
        }
        let status = response.status();
        let code = read_json::<ErrorResponse>(response)
            .await
            .map(|e| error_code(&e.error))
            .unwrap_or_else(|_| format!("HTTP {}", status.as_u16()));
        tracing::info!(error = %code, "the token endpoint refused an authorization code");
        Err(CodeError::Refused(code))
    }
}

/// An RFC 6749 `error` from the authorization response, as shown.
pub(crate) fn shown_error(text: &str) -> String {
    error_code(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn challenge_is_rfc_7636_s256() {
        // BASE64URL(SHA-256(verifier)) without padding, as computed independently with
        // Python: base64.urlsafe_b64encode(hashlib.sha256(v.encode()).digest()).rstrip(b"=").
        assert_eq!(
            code_challenge("dBjftJeZ4CVP-mJ92K9uZUFi4WXHrWPUJ1XEA6kSjdc"),
            "DFx0dWCoHVjjyyxswbyroqijY0b4ktFA9t8_qghJvwQ"
        );
        assert_eq!(error_code("invalid_grant"), "invalid_grant");
        assert_eq!(error_code("<script>"), "unknown_error");
    }
}
