//! Stored (script) tools: forged by agents, kept in the store, run in the sandbox.
//!
//! - [`source`]: the enabled tools as catalog entries; one entry updated per change.
//! - [`call`]: one call: secrets, the run, the result shaped and redacted, the call log.
//! - [`versions`]: the versions calls run, read from the store at call time (LRU cache).
//! - [`run`]: the call loop (progress, logs, heartbeat, the script's requests to the client).
//! - [`client_requests`]: a script's `sample`, `elicit`, `roots`, `close_sse_stream` and
//!   `client_capabilities`.
//! - [`content_run`]: a script template's run through the same loop (its questions too).
//! - [`input_required`]: 2026-07-28 input-required rounds (replay, sealed request state).
//! - [`questions`]: the script↔server question protocol (`ask` with keys).
//! - [`task_input`]: the questions of a call running as a task, through the task's record.
//! - [`protocol_error`]: a script ending its call with a JSON-RPC error.
//! - [`shape`]: a run's output to a result (helper result, outputSchema, size cap).
//! - [`kept`]: the whole output behind a cut result's resource link.
//! - [`redact`]: secret values out of everything a call sends.

pub(crate) mod call;
pub(crate) mod client_requests;
pub(crate) mod content_run;
pub(crate) mod input_required;
pub(crate) mod kept;
pub(crate) mod protocol_error;
pub(crate) mod questions;
pub(crate) mod redact;
pub(crate) mod run;
pub(crate) mod shape;
pub(crate) mod source;
pub(crate) mod task_input;
pub(crate) mod versions;
