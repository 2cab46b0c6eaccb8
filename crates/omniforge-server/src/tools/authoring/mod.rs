//! The authoring built-ins, one file per family, each a [`ToolCall`](crate::catalog::call::ToolCall)
//! bound to its operation when registered (never looked up by name):
//! - [`tool`]: create, update, delete, get, rollback and test tools ([`describe`]: what get
//!   and the command line print of a tool); [`draft`]: their
//!   arguments and validation (shared with pack imports), [`param_headers`]: the
//!   `x-mcp-header` rules of an inputSchema; [`examples`]: a version's example calls, checked
//!   and run before it goes live, on demand and before a rollback;
//! - [`approval`]: the approval gate (`--require-approval`): pending versions, approve and
//!   reject;
//! - [`secret`]: set, delete and list secrets (`admin`);
//! - [`content`]: create, update and delete resources, templates and prompts; get a definition.

pub(crate) mod approval;
pub(crate) mod content;
pub(crate) mod describe;
pub(crate) mod draft;
pub(crate) mod examples;
pub(crate) mod param_headers;
pub(crate) mod secret;
pub(crate) mod tool;
