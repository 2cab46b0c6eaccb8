//! The settings a server is built from: plain data, filled in by the binary from flags,
//! environment and config file. Nothing here reads the environment or a file.

use std::time::Duration;

use crate::auth::TokenSet;

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
    /// The largest accepted request body, in bytes.
    pub max_body_bytes: usize,
    /// How long an idle session is kept before it expires (then its id gets 404).
    pub session_idle_timeout: Duration,
}
