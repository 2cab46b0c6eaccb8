//! Manifest tools: the RPCs a forge manifest (`gen/mcp/manifest.json`) declares.
//!
//! This crate reads and validates manifests and watches them for changes. It knows nothing
//! of MCP: the server crate turns a [`ManifestTool`] into an MCP tool.
//!
//! # Layout
//! - [`manifest`]: the manifest shape (as the Go reference bridge reads it), loading and
//!   validation with errors that name the file, the tool and the field.
//! - [`dispatch`]: one call to a Connect service (HTTP+JSON) and its [`dispatch::Outcome`],
//!   with a response size cap per upstream and no redirects; proto3 zero-value filling for
//!   output validation.
//! - [`schema_refs`]: inlining of `$ref`/`$defs` for strict clients (`--inline-schema-refs`).
//! - [`watch`]: hot reload: a file watcher that hands over each new valid manifest and keeps
//!   the old one when a new one is bad.

#![deny(missing_docs)]
#![cfg_attr(not(test), warn(clippy::unwrap_used, clippy::expect_used))]

pub mod dispatch;
pub mod manifest;
pub mod schema_refs;
pub mod watch;

pub use manifest::{Manifest, ManifestError, ManifestTool};
