//! The request context: who is calling and how to reach them, read once per request.
//!
//! - [`actor`]: [`Actor`](actor::Actor), who runs an operation and where the call came from
//!   ([`Via`](actor::Via)), a running script acting for its caller among them.
//! - [`request`]: [`RequestCx`](request::RequestCx), built once from rmcp's `RequestContext`
//!   (or for a command-line action): principal, author, cancellation, the `logging/setLevel`
//!   level, and the markers the HTTP front and the session manager left (JSON-only reply, POST
//!   stream). Nothing else reads request extensions.
//! - [`client`]: [`ClientLink`](client::ClientLink), what a running script needs to send
//!   requests to the client that called it.
//! - [`progress`]: `notifications/progress` for the request.
//! - [`task`]: [`TaskLink`](task::TaskLink), the task a call runs as, and
//!   [`TaskStarter`](task::TaskStarter), the task a running call starts itself
//!   (`taskStart: "script"`, the script's `omniforge.start_task()`).
//! - [`stream`]: the POST SSE stream a tool may close for a resume, as a trait the HTTP
//!   transport implements (so this module never depends on the transport).

pub(crate) mod actor;
pub(crate) mod client;
pub(crate) mod progress;
pub(crate) mod request;
pub(crate) mod stream;
pub(crate) mod task;
