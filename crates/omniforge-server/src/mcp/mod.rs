//! The MCP face: the hand-written rmcp [`ServerHandler`](rmcp::ServerHandler), one file per
//! method family, and the one module that turns the server's own results and errors into
//! wire types.
//!
//! - [`state`]: [`Shared`](state::Shared), the server-wide state every handler shares.
//! - [`handler`]: [`OmniForge`](handler::OmniForge), one per stdio connection or HTTP session;
//!   its `ServerHandler` methods delegate to the files below.
//! - [`tools`]: `tools/list`, `tools/call`.
//! - [`resources`]: `resources/list`, `resources/templates/list`, `resources/read`,
//!   `resources/subscribe`, `resources/unsubscribe`.
//! - [`prompts`]: `prompts/list`, `prompts/get`, `completion/complete`.
//! - [`listen`]: 2026-07-28 `subscriptions/listen`.
//! - [`tasks`]: the Tasks extension: `tools/call` as a task, `tasks/get|update|cancel`.
//! - [`script_task`]: a `tools/call` whose script starts its task (`taskStart: "script"`).
//! - [`pagination`]: the opaque cursor.
//! - [`to_wire`]: [`CallError`](crate::error::CallError) and
//!   [`ContentError`](crate::error::ContentError) to `isError` results and JSON-RPC errors.

pub(crate) mod handler;
pub(crate) mod listen;
pub(crate) mod metered;
pub(crate) mod pagination;
pub(crate) mod prompts;
pub(crate) mod resources;
pub(crate) mod script_task;
pub(crate) mod state;
pub(crate) mod tasks;
pub(crate) mod to_wire;
pub(crate) mod tools;
