//! The e2e support module: what every test file builds on, and the only thing in this crate a
//! test file imports (`use crate::support::...`; `tests/architecture.rs`-style tidy test:
//! `tidy.rs`).
//!
//! - [`server`]: THE server builder, [`Serve`] (`omniforge serve`, ready by its
//!   `--ready-file`), and the handles built on it: [`StdioServer`] (raw stdio), [`HttpServer`]
//!   (a fresh data dir and an [`Auth`]); the command line ([`omniforge_cli`], [`cli_ok`]).
//! - [`client`]: THE MCP clients, [`HttpClient`] and [`StdioClient`]: initialize, request,
//!   list, call a tool, wait for a notification; [`text_of`] for results.
//! - [`http`] and [`sse`]: raw Streamable HTTP exchanges and SSE streams, for tests that look
//!   at the wire itself.
//! - [`eventually()`]: the one way to wait for a condition (no fixed sleeps).
//! - [`paths`] and [`process`]: the binary, `.deps/`, temp data dirs; child processes with
//!   complete output capture, killed by pid.
//! - [`fixtures`]: the Connect service, PostgreSQL, the OAuth provider, HAProxy, the official
//!   clients' line drivers, shared tools and the Tasks requests.
//!
//! Everything is re-exported flat, so a test writes `use crate::support::{Serve, HttpClient}`.

pub(crate) mod client;
pub(crate) mod eventually;
pub(crate) mod fixtures;
pub(crate) mod http;
pub(crate) mod paths;
pub(crate) mod process;
pub(crate) mod server;
pub(crate) mod sse;

pub(crate) use client::*;
pub(crate) use eventually::*;
pub(crate) use fixtures::balancer::*;
pub(crate) use fixtures::connect::*;
pub(crate) use fixtures::oauth::*;
pub(crate) use fixtures::postgres::*;
pub(crate) use fixtures::sdk_driver::*;
pub(crate) use fixtures::tools::*;
pub(crate) use http::*;
pub(crate) use paths::*;
pub(crate) use process::*;
pub(crate) use server::*;
pub(crate) use sse::*;
