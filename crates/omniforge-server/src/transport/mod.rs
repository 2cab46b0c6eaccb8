//! The two transports and the JSON-RPC layer in front of rmcp that both share.
//!
//! - [`jsonrpc`]: envelope checks, the known-method list, the `tools/call` arguments rewrite,
//!   protocol revision facts.
//! - [`stateless`]: the 2026-07-28 request rules (SEP-2575), codes and HTTP statuses.
//! - [`stdio`]: MCP over stdin/stdout, behind a line filter.
//! - [`http`]: Streamable HTTP behind an axum front.
//! - [`unparsable`]: what rmcp would drop unanswered, and ids recovered from lines that do not
//!   parse.

pub(crate) mod http;
pub(crate) mod jsonrpc;
pub(crate) mod stateless;
pub(crate) mod stdio;
pub(crate) mod unparsable;

#[cfg(test)]
mod proptests;
