//! The two transports and the JSON-RPC layer in front of rmcp that both share.
//!
//! - [`jsonrpc`]: envelope checks, the known-method list, the `tools/call` arguments rewrite,
//!   protocol revision facts.
//! - [`stdio`]: MCP over stdin/stdout, behind a line filter.
//! - [`http`]: Streamable HTTP behind an axum front.

pub(crate) mod http;
pub(crate) mod jsonrpc;
pub(crate) mod stdio;
