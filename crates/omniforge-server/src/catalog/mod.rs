//! The tool catalog: one ordered, de-duplicated view over every tool source, and the one
//! place a `tools/call` is routed.
//!
//! - [`call`]: [`ToolCall`](call::ToolCall), the one trait through which every source's tools
//!   are called. The catalog knows no source's types: a source hands it entries whose call
//!   objects it never looks into.
//! - [`entry`]: [`Entry`](entry::Entry), one tool as served, with its call.
//! - [`pages`]: pages of `tools/list` as `Tool`s, the last few kept per snapshot.
//! - [`publish`]: [`Catalog`](publish::Catalog), the per-source lists and their merge,
//!   published under one lock as an immutable [`Snapshot`](snapshot::Snapshot).
//! - [`search`]: the search index (BM25F over each entry's fields), kept in step by every
//!   publish; [`terms`]: a tool's fields and text as search terms.
//! - [`snapshot`]: lookup, visibility, argument checks and the call itself.
//! - [`schema_profile`]: how schemas are served (`as-authored`, `conservative`).

pub(crate) mod call;
pub(crate) mod entry;
pub(crate) mod pages;
pub(crate) mod publish;
pub(crate) mod schema_profile;
pub(crate) mod search;
pub(crate) mod snapshot;
pub(crate) mod terms;
