//! The script call loop: one script run for a request, and everything the script and the
//! caller say to each other while it runs. Stored tools (`tools::stored`) and content scripts
//! (`content`: script templates and prompts) both run through it; it knows neither.
//!
//! - [`run`]: the loop (progress, logs, heartbeat, the script's requests to the client).
//! - [`client_requests`]: a script's `sample`, `elicit`, `roots`, `close_sse_stream` and
//!   `client_capabilities`.
//! - [`call_builtin`]: a script's `call_builtin`, routed as its caller's call.
//! - [`content_run`]: a content script's run through the same loop (its questions too).
//! - [`input_required`]: 2026-07-28 input-required rounds (replay, sealed request state).
//! - [`questions`]: the script↔server question protocol (`ask` with keys).
//! - [`task_input`]: the questions of a call running as a task, through the task's record.
//! - [`protocol_error`]: a script ending its call with a JSON-RPC error.
//! - [`redact`]: secret values out of everything a call sends.

pub(crate) mod call_builtin;
pub(crate) mod client_requests;
pub(crate) mod content_run;
pub(crate) mod input_required;
pub(crate) mod protocol_error;
pub(crate) mod questions;
pub(crate) mod redact;
pub(crate) mod run;
pub(crate) mod task_input;
