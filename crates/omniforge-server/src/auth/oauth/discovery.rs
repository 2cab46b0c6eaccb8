//! The issuer's metadata: RFC 8414 (`/.well-known/oauth-authorization-server`, inserted before
//! a path issuer's path), then OpenID Connect discovery (`/.well-known/openid-configuration`,
//! both forms). The document's `issuer` must equal the configured one (RFC 8414 §3.3).
//! Found on first use; while the issuer is unreachable, asked again at most every
//! [`RETRY`].

use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde::Deserialize;

use super::TokenError;

/// How long a failed discovery is remembered before the next try.
const RETRY: Duration = Duration::from_secs(5);
/// The largest metadata document read.
pub(super) const MAX_DOCUMENT_BYTES: usize = 1 << 20;

/// What this server uses of the issuer's metadata.
#[derive(Debug, Clone, Deserialize)]
pub(super) struct Metadata {
    issuer: String,
    /// Where the signing keys are.
    pub(super) jwks_uri: String,
    /// RFC 7662, when the issuer offers it.
    #[serde(default)]
    pub(super) introspection_endpoint: Option<String>,
    /// Where people sign in (the console's authorization code flow).
    #[serde(default)]
    pub(super) authorization_endpoint: Option<String>,
    /// Where the console exchanges an authorization code.
    #[serde(default)]
    pub(super) token_endpoint: Option<String>,
}

/// The discovered metadata, or when discovery last failed.
#[derive(Default)]
pub(super) struct Discovery {
    found: tokio::sync::OnceCell<Metadata>,
    failed_at: Mutex<Option<Instant>>,
}

impl Discovery {
    /// The issuer's metadata, discovered once (concurrent first callers share one discovery).
    ///
    /// # Errors
    /// [`TokenError::Unavailable`] while the issuer cannot be reached or answers nonsense.
    pub(super) async fn get(
        &self,
        http: &reqwest::Client,
        issuer: &str,
    ) -> Result<&Metadata, TokenError> {
        if let Some(found) = self.found.get() {
            return Ok(found);
        }
        if self
            .failed_at
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_some_and(|at| at.elapsed() < RETRY)
        {
            return Err(TokenError::Unavailable);
        }
        let result = self.found.get_or_try_init(|| discover(http, issuer)).await;
        if result.is_err() {
            *self.failed_at.lock().unwrap_or_else(|e| e.into_inner()) = Some(Instant::now());
        }
        result
    }
}

async fn discover(http: &reqwest::Client, issuer: &str) -> Result<Metadata, TokenError> {
    for url in candidates(issuer) {
        match fetch_json::<Metadata>(http, &url).await {
            Ok(meta) if meta.issuer == issuer => {
                tracing::info!(%issuer, jwks_uri = %meta.jwks_uri, "OAuth issuer discovered");
                return Ok(meta);
            }
            Ok(meta) => {
                tracing::warn!(%url, found = %meta.issuer, expected = %issuer,
                    "the issuer's metadata names another issuer; ignored");
            }
            Err(error) => tracing::debug!(%url, %error, "no issuer metadata here"),
        }
    }
    tracing::warn!(%issuer, "OAuth issuer discovery failed; bearer tokens get 503 until it succeeds");
    Err(TokenError::Unavailable)
}

/// The metadata URLs to try, in order.
fn candidates(issuer: &str) -> Vec<String> {
    let issuer = issuer.trim_end_matches('/');
    let (origin, path) = match issuer.split_once("://") {
        Some((scheme, rest)) => match rest.find('/') {
            Some(at) => (format!("{scheme}://{}", &rest[..at]), &rest[at..]),
            None => (issuer.to_owned(), ""),
        },
        None => (issuer.to_owned(), ""),
    };
    let mut urls = vec![format!(
        "{origin}/.well-known/oauth-authorization-server{path}"
    )];
    if !path.is_empty() {
        urls.push(format!("{origin}/.well-known/openid-configuration{path}"));
    }
    urls.push(format!("{issuer}/.well-known/openid-configuration"));
    urls
}

/// A failed fetch: its cause, for the log only.
#[derive(Debug, thiserror::Error)]
pub(super) enum FetchError {
    /// Connection, timeout, status or body read.
    #[error(transparent)]
    Http(#[from] reqwest::Error),
    /// Larger than [`MAX_DOCUMENT_BYTES`].
    #[error("the document is larger than {MAX_DOCUMENT_BYTES} bytes")]
    TooLarge,
    /// Not the expected JSON.
    #[error(transparent)]
    Json(#[from] serde_json::Error),
}

/// GETs `url` and parses its JSON body, read up to [`MAX_DOCUMENT_BYTES`].
pub(super) async fn fetch_json<T: serde::de::DeserializeOwned>(
    http: &reqwest::Client,
    url: &str,
) -> Result<T, FetchError> {
    let response = http.get(url).send().await?.error_for_status()?;
    read_json(response).await
}

/// Reads a JSON body of at most [`MAX_DOCUMENT_BYTES`].
pub(super) async fn read_json<T: serde::de::DeserializeOwned>(
    mut response: reqwest::Response,
) -> Result<T, FetchError> {
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await? {
        if body.len() + chunk.len() > MAX_DOCUMENT_BYTES {
            return Err(FetchError::TooLarge);
        }
        body.extend_from_slice(&chunk);
    }
    Ok(serde_json::from_slice(&body)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_urls_follow_rfc_8414() {
        assert_eq!(
            candidates("https://auth.example.com"),
            [
                "https://auth.example.com/.well-known/oauth-authorization-server",
                "https://auth.example.com/.well-known/openid-configuration",
            ]
        );
        assert_eq!(
            candidates("https://idp.example.com/realms/team"),
            [
                "https://idp.example.com/.well-known/oauth-authorization-server/realms/team",
                "https://idp.example.com/.well-known/openid-configuration/realms/team",
                "https://idp.example.com/realms/team/.well-known/openid-configuration",
            ]
        );
    }
}
