//! The settings a server is built from: plain data, filled in by the binary from flags,
//! environment and config file. Nothing here reads the environment or a file.

use std::sync::Arc;
use std::time::Duration;

use crate::auth::TokenSet;
use crate::auth::oauth::OAuth;

/// How the Streamable HTTP front is configured.
#[derive(Debug, Clone)]
pub struct HttpSettings {
    /// The MCP endpoint path, e.g. `/mcp`.
    pub path: String,
    /// Serve without sessions, so any replica can answer any request.
    pub stateless: bool,
    /// Browser origins allowed besides loopback ones, e.g. `https://claude.ai`.
    pub allowed_origins: Vec<String>,
    /// Extra `Host` values accepted, e.g. `mcp.example.com` or `mcp-upstream:8000`.
    pub allowed_hosts: Vec<String>,
    /// Whether to check `Host` at all: on for loopback binds and when `allowed_hosts` is set.
    pub check_host: bool,
    /// Accepted bearer tokens; empty means no authentication (loopback binds only).
    pub tokens: TokenSet,
    /// OAuth 2.1 access tokens of one issuer (issue 16), beside or instead of `tokens`. When
    /// set, 401s point clients to the protected-resource metadata (RFC 9728), served at
    /// `/.well-known/oauth-protected-resource` plus `path` and at the root form.
    pub oauth: Option<Arc<OAuth>>,
    /// The largest accepted request body, in bytes.
    pub max_body_bytes: usize,
    /// How long an idle session is kept before it expires (then its id gets 404).
    pub session_idle_timeout: Duration,
    /// The most live sessions; past it a new session gets 503 (default
    /// [`HttpSettings::DEFAULT_MAX_SESSIONS`]).
    pub max_sessions: usize,
    /// How long a connection may take to send a request's whole head, from when it opens or
    /// from the first byte of a later request (default [`HttpSettings::DEFAULT_HEADER_READ_TIMEOUT`]).
    pub header_read_timeout: Duration,
    /// How long a connection with no request in flight and no byte received stays open
    /// (default [`HttpSettings::DEFAULT_KEEP_ALIVE_TIMEOUT`]).
    pub keep_alive_timeout: Duration,
    /// The most open connections; past it new ones wait in the listen backlog (default
    /// [`HttpSettings::DEFAULT_MAX_CONNECTIONS`]).
    pub max_connections: usize,
}

impl HttpSettings {
    /// The default for [`HttpSettings::max_sessions`].
    pub const DEFAULT_MAX_SESSIONS: usize = 1000;
    /// The default for [`HttpSettings::header_read_timeout`]: 30 s.
    pub const DEFAULT_HEADER_READ_TIMEOUT: Duration = Duration::from_secs(30);
    /// The default for [`HttpSettings::keep_alive_timeout`]: 75 s.
    pub const DEFAULT_KEEP_ALIVE_TIMEOUT: Duration = Duration::from_secs(75);
    /// The default for [`HttpSettings::max_connections`].
    pub const DEFAULT_MAX_CONNECTIONS: usize = 1024;
}
