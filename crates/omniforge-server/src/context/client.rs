//! How a running tool call reaches the client that made it: what a script's requests to the
//! client (sampling, elicitation, roots) and its stream closing need.

use std::collections::BTreeMap;
use std::sync::Arc;

use rmcp::model::{ClientCapabilities, ProtocolVersion, RequestId};
use rmcp::service::{Peer, RoleServer};
use serde_json::Value;

use crate::context::stream::StreamLink;
use crate::context::task::{TaskLink, TaskStarter};

/// How a tool call reaches the client that made it. Built only for calls that may need it
/// (stored tools), from [`RequestCx::client`](crate::context::request::RequestCx::client).
#[derive(Clone, Default)]
pub(crate) struct ClientLink {
    /// The calling session's peer; `None` on the command line.
    pub(crate) peer: Option<Peer<RoleServer>>,
    /// The `tools/call` request id: server requests are associated with it (SEP-2260).
    pub(crate) request_id: Option<RequestId>,
    /// The revision the calling request was made under.
    pub(crate) protocol_version: Option<ProtocolVersion>,
    /// What the client declared (`initialize`, or the request `_meta` under 2026-07-28).
    pub(crate) capabilities: Option<ClientCapabilities>,
    /// The call's POST SSE stream, over Streamable HTTP in session mode (never for a JSON-only
    /// reply).
    pub(crate) stream: Option<StreamLink>,
    /// The HTTP front collapses the answer into one JSON response: the client cannot receive
    /// requests during the call.
    pub(crate) json_reply: bool,
    /// The task the call runs as: its questions go through the task's record in the store
    /// (`input_required`, answered by `tasks/update`), not to the peer.
    pub(crate) task: Option<TaskLink>,
    /// The task the call may start itself (`taskStart: "script"`): before it starts, the
    /// call is an ordinary request; after, its questions go through that task.
    pub(crate) starter: Option<Arc<TaskStarter>>,
}

impl ClientLink {
    /// The task the call runs as now: the one it started with, or the one its script
    /// started.
    pub(crate) fn task_link(&self) -> Option<TaskLink> {
        self.task
            .clone()
            .or_else(|| self.starter.as_ref().and_then(|s| s.link()))
    }

    /// Whether the call's script started its task (`taskStart: "script"`).
    pub(crate) fn task_started(&self) -> bool {
        self.starter.as_ref().is_some_and(|s| s.link().is_some())
    }
}

/// The client's part of one input-required round (2026-07-28): what a retry carries as top-level
/// params of `tools/call`, `prompts/get` or `resources/read`.
#[derive(Default, Clone, Debug)]
pub(crate) struct InputRound {
    /// `inputResponses`, by key.
    pub(crate) responses: BTreeMap<String, Value>,
    /// `requestState`, as the client echoed it.
    pub(crate) state: Option<String>,
}
