//! The MCP face of OmniForge: the rmcp [`ServerHandler`](rmcp::ServerHandler), the tool
//! catalog that merges every tool source, and the two transports.
//!
//! # Layout
//! - [`catalog`]: the merged, ordered tool list and its change signal.
//! - [`handler`]: the hand-written rmcp handler (tools, logging, subscriptions).
//! - [`builtins`]: the `omniforge_*` tools compiled into the server.
//! - [`content`]: stored resources, resource templates and prompts (and their built-ins).
//! - [`pack`]: pack files (import and export of tools, resources and prompts).
//! - [`forge`]: script tools: the stored tool source, the authoring built-ins, script calls.
//! - [`client_requests`]: a script's requests to the calling client (sampling, elicitation,
//!   roots).
//! - [`manifests`]: the manifest tool source (forge manifests, hot reload).
//! - [`peers`]: who gets `notifications/tools/list_changed`.
//! - [`jsonrpc`]: the thin layer in front of rmcp's dispatch (envelope checks, version facts).
//! - [`stdio`]: MCP over stdin/stdout, behind a line filter.
//! - [`http`]: Streamable HTTP behind an axum front (Origin, Host, tokens, Accept, batches).
//! - [`streams`]: resumable POST SSE streams a tool may close mid-call (SEP-1699).
//! - [`auth`]: bearer tokens and scopes.
//! - [`schema`]: JSON Schema checks of arguments and results.
//! - [`schema_profile`]: how tool schemas are served (`as-authored`, `conservative`).
//!
//! Only this crate (and the binary) touches rmcp types.

pub mod auth;
pub mod builtins;
pub mod catalog;
pub mod client_requests;
pub mod content;
pub mod forge;
pub mod handler;
pub mod http;
pub mod jsonrpc;
pub mod manifests;
pub mod pack;
pub mod peers;
pub mod schema;
pub mod schema_profile;
pub mod stdio;
pub mod streams;

/// Re-exported so the binary can configure manifest upstreams without naming the bridge crate.
pub use omniforge_bridge::dispatch::{DEFAULT_MAX_RESPONSE_BYTES, UpstreamConfig};
