//! The MCP face of OmniForge: the rmcp [`ServerHandler`](rmcp::ServerHandler), the tool
//! catalog that merges every tool source, stored resources and prompts, and the two
//! transports. Only this crate (and the binary) touches rmcp types.
//!
//! # Public API
//! The binary builds a [`Server`] from [`Settings`] and serves it with
//! [`Server::serve_stdio`] or [`Server::serve_http`]; [`Server::app`] is the HTTP app for
//! in-process tests. The command line's one-shot actions are methods on [`Server`] too
//! ([`Server::write_tool`], [`Server::run_tool`], [`Server::import_pack`], ...), answering in
//! plain types ([`Outcome`], [`CallOutput`], text).
//!
//! # Layout (dependencies point down this list, never up)
//! - [`server`](Server), `commands`: the public API and the wiring.
//! - `transport`: stdio (a line filter) and Streamable HTTP (an axum front split by concern),
//!   and the JSON-RPC fix-ups both share.
//! - `mcp`: the rmcp handler, one file per method family, and `to_wire`, where the server's
//!   errors become `isError` results or JSON-RPC errors.
//! - `changes`: the change feed consumer (store → catalog and content); `pack`: packs.
//! - `tools`: the tool sources — `builtin`, `authoring` (one file per built-in family),
//!   `manifest`, `stored` — each publishing catalog entries with a `ToolCall`; `ops`: the
//!   built-ins as typed operations, their derived inputSchemas and their one MCP adapter.
//! - `content`: stored resources, templates and prompts (a script template or prompt runs
//!   through `runs`).
//! - `runs`: the script call loop stored tools and content scripts share (progress, logs,
//!   the script's questions and requests, input-required rounds, redaction).
//! - `script_host`: the one script host tools and content share.
//! - `catalog`: entries, the `ToolCall` trait, the merged snapshot and call routing.
//! - `context`: the request context, built once per request, and who acts (`Actor`).
//! - `error`, `schema`, `auth`, `peers`, `settings`, `human_time`: leaves.

#![deny(missing_docs)]
#![cfg_attr(not(test), warn(clippy::unwrap_used, clippy::expect_used))]

mod auth;
mod catalog;
mod changes;
mod commands;
mod console;
mod content;
mod context;
mod error;
mod human_time;
mod mcp;
mod pack;
mod peers;
mod retention;
mod runs;
mod schema;
mod script_host;
mod server;
mod settings;
mod tasks;
mod telemetry;
mod tools;
mod transport;

pub use auth::oauth::{
    ConsoleClient, IntrospectionSettings, OAuth, OAuthError, OAuthSettings, ScopeMap,
};
pub use auth::{PrincipalId, PrincipalIdError, PrincipalKind, Scope, TokenFileError, TokenSet};
pub use catalog::schema_profile::SchemaProfile;
pub use commands::{CallOutput, Caller, CommandError};
pub use content::definitions::Kind as DefinitionKind;
pub use context::progress::ProgressSink;
pub use error::AuthoringError;
pub use human_time::utc as utc_time;
pub use pack::{PackError, export as export_pack};
pub use script_host::host::ScriptSettings;
pub use server::{Served, Server, Settings, StartError, StoreSettings};
pub use settings::HttpSettings;
pub use tasks::{DEFAULT_TASK_LEASE, DEFAULT_TASK_POLL_INTERVAL, DEFAULT_TASK_TTL, TaskSettings};
pub use telemetry::call_log::{
    CallLogSettings, DEFAULT_BATCH_WAIT as DEFAULT_CALL_LOG_BATCH_WAIT,
    DEFAULT_QUEUE_ROWS as DEFAULT_CALL_LOG_QUEUE,
};
pub use telemetry::metrics::DEFAULT_MAX_TOOLS as DEFAULT_METRICS_MAX_TOOLS;
pub use tools::authoring::describe::{call_json, describe_tool, version_status};
pub use tools::authoring::secret::{DeclaredSecret, change_grant, secret_requests};
pub use tools::manifest::source::{ManifestConfig, ManifestSourceError};
pub use tools::ops::Outcome;

/// Re-exported so the binary can configure manifest upstreams without naming the bridge crate.
pub use omniforge_bridge::dispatch::{DEFAULT_MAX_RESPONSE_BYTES, UpstreamConfig};
