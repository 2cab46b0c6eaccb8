//! The OAuth options of `serve` (issue 16): flags, the config file's `[oauth]` table, and their
//! resolution into the server library's [`OAuthSettings`]. The introspection client secret is
//! read from a file or `OMNIFORGE_OAUTH_CLIENT_SECRET`, never from a flag's value (command lines
//! are visible to every user of the machine).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::Args;
use omniforge_server::{ConsoleClient, IntrospectionSettings, OAuthSettings, Scope, ScopeMap};
use serde::Deserialize;

use super::options::parse_duration;

/// OAuth 2.1 access tokens (`serve` only).
#[derive(Debug, Default, Args)]
pub(crate) struct OAuthOptions {
    /// Accept OAuth access tokens issued by this authorization server (its issuer URL; https,
    /// or http on loopback). Turns on the protected-resource metadata and OAuth challenges.
    #[arg(long, env = "OMNIFORGE_OAUTH_ISSUER", value_name = "URL")]
    pub(crate) oauth_issuer: Option<String>,
    /// This server's resource URL, which tokens must name in `aud` (repeatable; the first is
    /// the advertised resource) [default on loopback binds: the endpoint's own URL].
    #[arg(
        long,
        env = "OMNIFORGE_OAUTH_AUDIENCE",
        value_delimiter = ',',
        value_name = "URL"
    )]
    pub(crate) oauth_audience: Vec<String>,
    /// Map a provider scope onto an OmniForge scope, e.g. mcp.read=tools:call (repeatable)
    /// [default: the provider uses tools:call, tools:write and admin].
    #[arg(
        long,
        env = "OMNIFORGE_OAUTH_SCOPE",
        value_delimiter = ',',
        value_name = "PROVIDER=OMNIFORGE"
    )]
    pub(crate) oauth_scope: Vec<String>,
    /// The OmniForge scopes a 401 asks clients to request (repeatable) [default: tools:call].
    #[arg(
        long,
        env = "OMNIFORGE_OAUTH_CHALLENGE_SCOPE",
        value_delimiter = ',',
        value_name = "SCOPE"
    )]
    pub(crate) oauth_challenge_scope: Vec<String>,
    /// The claim naming the subject in oauth:ISSUER|SUBJECT [default: sub].
    #[arg(long, env = "OMNIFORGE_OAUTH_PRINCIPAL_CLAIM", value_name = "CLAIM")]
    pub(crate) oauth_principal_claim: Option<String>,
    /// Clock tolerance for exp and nbf [default: 30s].
    #[arg(long, env = "OMNIFORGE_OAUTH_LEEWAY", value_name = "DURATION", value_parser = parse_duration)]
    pub(crate) oauth_leeway: Option<Duration>,
    /// Least time between two key fetches caused by unknown key ids [default: 10s].
    #[arg(long, env = "OMNIFORGE_OAUTH_JWKS_MIN_REFRESH", value_name = "DURATION", value_parser = parse_duration)]
    pub(crate) oauth_jwks_min_refresh: Option<Duration>,
    /// Check opaque tokens at this RFC 7662 endpoint [default with --oauth-client-id: the
    /// issuer's introspection_endpoint].
    #[arg(long, env = "OMNIFORGE_OAUTH_INTROSPECTION_URL", value_name = "URL")]
    pub(crate) oauth_introspection_url: Option<String>,
    /// This server's client id for introspection; turns introspection on.
    #[arg(long, env = "OMNIFORGE_OAUTH_CLIENT_ID", value_name = "ID")]
    pub(crate) oauth_client_id: Option<String>,
    /// A file whose first line is the introspection client secret (or set
    /// OMNIFORGE_OAUTH_CLIENT_SECRET).
    #[arg(long, env = "OMNIFORGE_OAUTH_CLIENT_SECRET_FILE", value_name = "FILE")]
    pub(crate) oauth_client_secret_file: Option<PathBuf>,
    /// The console's client id at the issuer: turns on "Sign in with ISSUER" (authorization
    /// code + PKCE; register the redirect URI ORIGIN/console/oauth/callback).
    #[arg(long, env = "OMNIFORGE_OAUTH_CONSOLE_CLIENT_ID", value_name = "ID")]
    pub(crate) oauth_console_client_id: Option<String>,
    /// A file whose first line is the console client's secret (or set
    /// OMNIFORGE_OAUTH_CONSOLE_CLIENT_SECRET) [default: a public client].
    #[arg(
        long,
        env = "OMNIFORGE_OAUTH_CONSOLE_CLIENT_SECRET_FILE",
        value_name = "FILE"
    )]
    pub(crate) oauth_console_client_secret_file: Option<PathBuf>,
    /// The console's redirect URI as registered [default: the first audience's origin
    /// followed by /console/oauth/callback].
    #[arg(long, env = "OMNIFORGE_OAUTH_CONSOLE_REDIRECT_URI", value_name = "URL")]
    pub(crate) oauth_console_redirect_uri: Option<String>,
}

/// The config file's `[oauth]` table.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct FileOAuth {
    issuer: Option<String>,
    #[serde(default)]
    audience: Vec<String>,
    /// Provider scope → OmniForge scope (`[oauth.scopes]`).
    #[serde(default)]
    scopes: BTreeMap<String, String>,
    #[serde(default)]
    challenge_scopes: Vec<String>,
    principal_claim: Option<String>,
    leeway: Option<String>,
    jwks_min_refresh: Option<String>,
    introspection: Option<FileIntrospection>,
    console: Option<FileConsole>,
}

/// `[oauth.console]`: the client the console signs people in as.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct FileConsole {
    client_id: Option<String>,
    client_secret_file: Option<PathBuf>,
    redirect_uri: Option<String>,
    #[serde(default)]
    scopes: Vec<String>,
}

/// `[oauth.introspection]`.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct FileIntrospection {
    endpoint: Option<String>,
    client_id: Option<String>,
    client_secret_file: Option<PathBuf>,
}

/// The OAuth settings, or `None` when no issuer is configured. `audiences` may be empty: the
/// server then fills in its own URL on a loopback bind.
///
/// # Errors
/// A bad scope or duration, a missing or unreadable client secret, options without an issuer.
pub(crate) fn resolve(
    args: OAuthOptions,
    file: Option<&FileOAuth>,
) -> Result<Option<OAuthSettings>> {
    let empty = FileOAuth::default();
    let file = file.unwrap_or(&empty);
    let Some(issuer) = args.oauth_issuer.or_else(|| file.issuer.clone()) else {
        if args.oauth_client_id.is_some()
            || !args.oauth_audience.is_empty()
            || args.oauth_console_client_id.is_some()
        {
            bail!("the --oauth-* options need --oauth-issuer");
        }
        return Ok(None);
    };
    let scopes = if args.oauth_scope.is_empty() {
        file.scopes
            .iter()
            .map(|(provider, ours)| scope_entry(provider, ours))
            .collect::<Result<Vec<_>>>()?
    } else {
        args.oauth_scope
            .iter()
            .map(|entry| match entry.split_once('=') {
                Some((provider, ours)) => scope_entry(provider, ours),
                None => bail!("--oauth-scope takes PROVIDER=OMNIFORGE, got {entry:?}"),
            })
            .collect::<Result<Vec<_>>>()?
    };
    let challenge = if args.oauth_challenge_scope.is_empty() {
        file.challenge_scopes.clone()
    } else {
        args.oauth_challenge_scope
    };
    let challenge_scopes = if challenge.is_empty() {
        vec![Scope::Call]
    } else {
        challenge
            .iter()
            .map(|s| parse_scope(s))
            .collect::<Result<Vec<_>>>()?
    };
    let duration =
        |flag: Option<Duration>, text: &Option<String>, default: u64| -> Result<Duration> {
            match (flag, text) {
                (Some(d), _) => Ok(d),
                (None, Some(text)) => parse_duration(text).map_err(anyhow::Error::msg),
                (None, None) => Ok(Duration::from_secs(default)),
            }
        };
    let introspection_file = file.introspection.clone().unwrap_or_default();
    let client_id = args.oauth_client_id.or(introspection_file.client_id);
    let introspection = match client_id {
        None => None,
        Some(client_id) => Some(IntrospectionSettings {
            endpoint: args.oauth_introspection_url.or(introspection_file.endpoint),
            client_id,
            client_secret: client_secret(
                args.oauth_client_secret_file
                    .or(introspection_file.client_secret_file),
            )?,
        }),
    };
    let console_file = file.console.clone().unwrap_or_default();
    let console = match args.oauth_console_client_id.or(console_file.client_id) {
        None => None,
        Some(client_id) => Some(ConsoleClient {
            client_id,
            client_secret: optional_secret(
                args.oauth_console_client_secret_file
                    .or(console_file.client_secret_file),
                "OMNIFORGE_OAUTH_CONSOLE_CLIENT_SECRET",
            )?,
            redirect_uri: args
                .oauth_console_redirect_uri
                .or(console_file.redirect_uri),
            scopes: console_file.scopes,
        }),
    };
    Ok(Some(OAuthSettings {
        issuer,
        console,
        audiences: if args.oauth_audience.is_empty() {
            file.audience.clone()
        } else {
            args.oauth_audience
        },
        scopes: ScopeMap::new(scopes),
        principal_claim: args
            .oauth_principal_claim
            .or_else(|| file.principal_claim.clone())
            .unwrap_or_else(|| "sub".into()),
        leeway: duration(args.oauth_leeway, &file.leeway, 30)?,
        challenge_scopes,
        jwks_min_refresh: duration(args.oauth_jwks_min_refresh, &file.jwks_min_refresh, 10)?,
        introspection,
    }))
}

fn parse_scope(s: &str) -> Result<Scope> {
    Scope::parse(s.trim()).with_context(|| {
        format!("unknown OmniForge scope {s:?} (expected tools:call, tools:write or admin)")
    })
}

fn scope_entry(provider: &str, ours: &str) -> Result<(String, Scope)> {
    let provider = provider.trim();
    if provider.is_empty() || provider.contains(char::is_whitespace) {
        bail!("a provider scope must be one word, got {provider:?}");
    }
    Ok((provider.to_owned(), parse_scope(ours)?))
}

/// The console client's secret: the first line of `file` (which must hold one), else the
/// variable `env`, else none (a public client). Errors name the file, never its content.
fn optional_secret(file: Option<PathBuf>, env: &str) -> Result<Option<String>> {
    let secret = match file {
        Some(path) => {
            let text = std::fs::read_to_string(&path).with_context(|| {
                format!(
                    "reading the OAuth console client secret file {}",
                    path.display()
                )
            })?;
            let secret = text.lines().next().unwrap_or("").trim().to_owned();
            if secret.is_empty() {
                bail!(
                    "the OAuth console client secret file {} is empty",
                    path.display()
                );
            }
            secret
        }
        None => std::env::var(env).unwrap_or_default(),
    };
    Ok(Some(secret).filter(|s| !s.is_empty()))
}

/// The introspection client secret: the first line of `file`, else
/// `OMNIFORGE_OAUTH_CLIENT_SECRET`. The error names the file, never its content.
fn client_secret(file: Option<PathBuf>) -> Result<String> {
    let secret = match file {
        Some(path) => {
            let text = std::fs::read_to_string(&path).with_context(|| {
                format!("reading the OAuth client secret file {}", path.display())
            })?;
            text.lines().next().unwrap_or("").trim().to_owned()
        }
        None => std::env::var("OMNIFORGE_OAUTH_CLIENT_SECRET").unwrap_or_default(),
    };
    if secret.is_empty() {
        bail!(
            "introspection needs the client secret: give --oauth-client-secret-file or set \
             OMNIFORGE_OAUTH_CLIENT_SECRET"
        );
    }
    Ok(secret)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(text: &str) -> FileOAuth {
        #[derive(Deserialize)]
        struct Wrapper {
            oauth: FileOAuth,
        }
        toml::from_str::<Wrapper>(text).unwrap().oauth
    }

    #[test]
    fn the_oauth_table_resolves() {
        let dir = tempfile::tempdir().unwrap();
        let secret = dir.path().join("secret");
        std::fs::write(&secret, "s3cret\n").unwrap();
        let table = file(&format!(
            r#"
            [oauth]
            issuer = "https://id.example.com/realms/team"
            audience = ["https://mcp.example.com/mcp"]
            challenge_scopes = ["tools:call", "tools:write"]
            leeway = "5s"
            [oauth.scopes]
            "mcp:read" = "tools:call"
            "mcp:admin" = "admin"
            [oauth.introspection]
            client_id = "omniforge"
            client_secret_file = "{0}"
            [oauth.console]
            client_id = "omniforge-console"
            client_secret_file = "{0}"
            scopes = ["mcp:read", "mcp:admin"]
            "#,
            secret.display()
        ));
        let settings = resolve(OAuthOptions::default(), Some(&table))
            .unwrap()
            .unwrap();
        assert_eq!(settings.issuer, "https://id.example.com/realms/team");
        assert_eq!(settings.audiences, ["https://mcp.example.com/mcp"]);
        assert_eq!(settings.challenge_scopes, [Scope::Call, Scope::Write]);
        assert_eq!(settings.leeway, Duration::from_secs(5));
        assert_eq!(settings.principal_claim, "sub");
        assert_eq!(settings.scopes.grant(["mcp:read"]), Some(Scope::Call));
        assert_eq!(settings.scopes.provider_name(Scope::Admin), "mcp:admin");
        let introspection = settings.introspection.unwrap();
        assert_eq!(introspection.client_secret, "s3cret");
        assert!(!format!("{introspection:?}").contains("s3cret"));
        let console = settings.console.clone().unwrap();
        assert_eq!(console.client_id, "omniforge-console");
        assert_eq!(console.client_secret.as_deref(), Some("s3cret"));
        assert_eq!(console.scopes, ["mcp:read", "mcp:admin"]);
        assert!(!format!("{console:?}").contains("s3cret"));
        // A flag replaces the file's value.
        let flags = OAuthOptions {
            oauth_scope: vec!["x=admin".into()],
            ..OAuthOptions::default()
        };
        let settings = resolve(flags, Some(&table)).unwrap().unwrap();
        assert_eq!(settings.scopes.grant(["mcp:read"]), None);
        assert_eq!(settings.scopes.grant(["x"]), Some(Scope::Admin));
    }

    #[test]
    fn bad_oauth_options_are_refused() {
        assert!(resolve(OAuthOptions::default(), None).unwrap().is_none());
        let issuer = || OAuthOptions {
            oauth_issuer: Some("https://id.example.com".into()),
            ..OAuthOptions::default()
        };
        let bad_scope = OAuthOptions {
            oauth_scope: vec!["mcp:read=tools:all".into()],
            ..issuer()
        };
        assert!(resolve(bad_scope, None).is_err());
        let no_equals = OAuthOptions {
            oauth_scope: vec!["mcp:read".into()],
            ..issuer()
        };
        assert!(resolve(no_equals, None).is_err());
        let without_issuer = OAuthOptions {
            oauth_client_id: Some("x".into()),
            ..OAuthOptions::default()
        };
        assert!(resolve(without_issuer, None).is_err());
        let missing_secret = OAuthOptions {
            oauth_client_id: Some("x".into()),
            oauth_client_secret_file: Some("/nonexistent/secret".into()),
            ..issuer()
        };
        assert!(resolve(missing_secret, None).is_err());
    }
}
