//! [`RequestCx`]: one request as every tool and content handler sees it, built once.
//!
//! Over HTTP the front puts one [`FrontInfo`] into the request (rmcp hands it to the handler
//! inside `http::request::Parts`), and the session manager puts a
//! [`StreamLink`](crate::context::stream::StreamLink); on both transports the JSON-RPC layer
//! may mark bad `tools/call` arguments in `_meta` ([`INVALID_ARGUMENTS_META`]). This module is
//! the only reader of these markers.
//! A request over stdio comes from the trusted parent process ([`Principal::local`]).

// `LoggingLevel` is deprecated by SEP-2577 (2026-07-28) but `logging/setLevel` is part of every
// earlier revision we serve.
#![allow(deprecated)]
use std::sync::{Arc, LazyLock, Mutex};

use omniforge_store::Actor;
use rmcp::model::LoggingLevel;
use rmcp::service::{RequestContext, RoleServer};
use tokio_util::sync::CancellationToken;

use crate::auth::{Principal, PrincipalId, Scope};
use crate::context::client::{ClientLink, InputRound};
use crate::context::progress::{Progress, ProgressSink};
use crate::context::stream::StreamLink;
use crate::context::task::{TaskLink, TaskStarter};

/// `_meta` key the front layer ([`crate::transport::jsonrpc`]) sets on a `tools/call` whose
/// `arguments` was `null` or not an object (rmcp would refuse or drop it).
pub(crate) const INVALID_ARGUMENTS_META: &str = "io.omniforge/invalidArguments";

/// What the HTTP front tells the handler about one request.
#[derive(Debug, Clone)]
pub(crate) struct FrontInfo {
    /// The authenticated caller.
    pub(crate) principal: Principal,
    /// The front collapses the answer into one JSON response (the client accepts only
    /// `application/json`, or sent a batch): nothing else on the request's SSE stream reaches
    /// the client, so a tool cannot ask it anything or close the stream for a resume.
    pub(crate) json_reply: bool,
}

/// Which of a script's log messages a request receives as `notifications/message`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum LogFilter {
    /// Those at or above this level: the peer's `logging/setLevel`, or a 2026-07-28
    /// request's `_meta` `io.modelcontextprotocol/logLevel`; `None`: info (the default of
    /// earlier revisions).
    AtLeast(Option<LoggingLevel>),
    /// None: a 2026-07-28 request without `_meta` logLevel (SEP-2575: the server emits log
    /// messages for a request only at the level it asks for).
    Off,
}

/// The parent process of a stdio server.
static LOCAL: LazyLock<Principal> = LazyLock::new(Principal::local);

/// One request: who calls, how to reach them, when to stop. Borrows; cheap to build.
pub(crate) struct RequestCx<'a> {
    /// `None`: an HTTP request that reached the handler without the front's marker; it sees
    /// nothing.
    principal: Option<&'a Principal>,
    origin: Origin<'a>,
    /// The input-required round the request carries (2026-07-28 retries).
    input: Option<&'a InputRound>,
}

#[derive(Clone)]
enum Origin<'a> {
    /// An MCP request.
    Mcp {
        ctx: &'a RequestContext<RoleServer>,
        json_reply: bool,
        stream: Option<&'a StreamLink>,
        /// The peer's `logging/setLevel` level, read only by a call that sends log messages.
        log_level: Option<&'a Mutex<Option<LoggingLevel>>>,
    },
    /// A command-line action.
    Local {
        ct: CancellationToken,
        progress: Option<ProgressSink>,
    },
}

impl<'a> RequestCx<'a> {
    /// The context of an MCP request; `log_level` holds what the peer set with
    /// `logging/setLevel` (read only when a call needs it, so a built-in takes no lock).
    pub(crate) fn of(
        ctx: &'a RequestContext<RoleServer>,
        log_level: Option<&'a Mutex<Option<LoggingLevel>>>,
    ) -> Self {
        let (principal, json_reply) = match ctx.extensions.get::<http::request::Parts>() {
            Some(parts) => match parts.extensions.get::<FrontInfo>() {
                Some(front) => (Some(&front.principal), front.json_reply),
                None => (None, false),
            },
            None => (Some(&*LOCAL), false),
        };
        let stream = if json_reply {
            None
        } else {
            ctx.extensions.get::<StreamLink>()
        };
        RequestCx {
            principal,
            origin: Origin::Mcp {
                ctx,
                json_reply,
                stream,
                log_level,
            },
            input: None,
        }
    }

    /// A command-line action by `principal`: no peer to notify, never cancelled; progress
    /// messages go to `progress`.
    pub(crate) fn local(principal: &'a Principal, progress: Option<ProgressSink>) -> Self {
        RequestCx {
            principal: Some(principal),
            origin: Origin::Local {
                ct: CancellationToken::new(),
                progress,
            },
            input: None,
        }
    }

    /// The same request acting as `principal` instead (a narrower authority for work done on
    /// the caller's behalf, e.g. a script's `call_builtin`): same peer, stream and
    /// cancellation.
    pub(crate) fn acting_as<'b>(&'b self, principal: &'b Principal) -> RequestCx<'b> {
        RequestCx {
            principal: Some(principal),
            origin: self.origin.clone(),
            input: None,
        }
    }

    /// The same request carrying `round`, the client's answers of an input-required round.
    pub(crate) fn with_input(mut self, round: &'a InputRound) -> Self {
        self.input = Some(round);
        self
    }

    /// The client's answers of an input-required round, when the request carries one.
    pub(crate) fn input(&self) -> Option<&'a InputRound> {
        self.input
    }

    /// The caller with its scope capped at `most` (`None` without a caller).
    pub(crate) fn principal_capped(&self, most: Scope) -> Option<Principal> {
        self.principal
            .map(|p| Principal::new(p.id.clone(), p.scope.min(most)))
    }

    /// Whether the front layer marked the request's `arguments` as not an object.
    pub(crate) fn arguments_not_object(&self) -> bool {
        match &self.origin {
            Origin::Mcp { ctx, .. } => ctx.meta.get(INVALID_ARGUMENTS_META).is_some(),
            Origin::Local { .. } => false,
        }
    }

    /// The caller as the store records who did a write (in the audit log).
    pub(crate) fn actor(&self) -> Actor {
        Actor::new(self.author())
    }

    /// The caller's id; `None` for an HTTP request without the front's marker.
    pub(crate) fn principal(&self) -> Option<&PrincipalId> {
        self.principal.map(|p| &p.id)
    }

    /// Whether the caller holds `scope`.
    pub(crate) fn allows(&self, scope: Scope) -> bool {
        self.principal.is_some_and(|p| p.allows(scope))
    }

    /// The caller's principal id as text, recorded as an author and in the call and audit
    /// logs: `token:NAME`, `stdio`, `cli:USER`, `anonymous`.
    pub(crate) fn author(&self) -> &str {
        self.principal.map_or("anonymous", |p| p.id.as_str())
    }

    /// Fires when the request is cancelled (or the server shuts down).
    pub(crate) fn ct(&self) -> &CancellationToken {
        match &self.origin {
            Origin::Mcp { ctx, .. } => &ctx.ct,
            Origin::Local { ct, .. } => ct,
        }
    }

    /// Whether the call runs as a task (its context carries the task runner's [`TaskLink`], or
    /// its script started its task).
    pub(crate) fn in_task(&self) -> bool {
        self.task_ttl().is_some()
    }

    /// The TTL of the task the call runs as, if it runs as one.
    pub(crate) fn task_ttl(&self) -> Option<std::time::Duration> {
        match &self.origin {
            Origin::Mcp { ctx, .. } => match ctx.extensions.get::<TaskLink>() {
                Some(task) => Some(task.ttl),
                None => ctx
                    .extensions
                    .get::<Arc<TaskStarter>>()
                    .and_then(|s| s.link())
                    .map(|t| t.ttl),
            },
            Origin::Local { .. } => None,
        }
    }

    /// Which log messages the request receives: under 2026-07-28 what its `_meta` asks for
    /// (none without `logLevel`), before it the level the peer set with `logging/setLevel`.
    pub(crate) fn log_filter(&self) -> LogFilter {
        match &self.origin {
            Origin::Mcp { ctx, .. } if ctx.meta.protocol_version().is_some() => ctx
                .meta
                .log_level()
                .map_or(LogFilter::Off, |level| LogFilter::AtLeast(Some(level))),
            Origin::Mcp {
                log_level: Some(level),
                ..
            } => LogFilter::AtLeast(*level.lock().unwrap_or_else(|e| e.into_inner())),
            Origin::Mcp { .. } | Origin::Local { .. } => LogFilter::AtLeast(None),
        }
    }

    /// Progress notifications for this request (silent without a progress token).
    pub(crate) fn progress(&self) -> Progress {
        match &self.origin {
            Origin::Mcp { ctx, .. } => {
                Progress::new(ctx.meta.get_progress_token(), Some(ctx.peer.clone()))
            }
            Origin::Local { progress, .. } => Progress::to_sink(progress.clone()),
        }
    }

    /// Whether results may carry `resource_link` content (protocol revision 2025-06-18 on).
    pub(crate) fn resource_links(&self) -> bool {
        match &self.origin {
            Origin::Mcp { ctx, .. } => ctx
                .peer
                .peer_info()
                .is_none_or(|info| info.protocol_version.as_str() >= "2025-06-18"),
            Origin::Local { .. } => true,
        }
    }

    /// Tells this request's session that its tool list changed (the caller's own pending
    /// version, issue 17: nobody else's list changed, so the catalog announces nothing). Sent
    /// from a task of its own, so it goes to the session's stream, not into this request's
    /// answer. Nothing for the command line or a request without a session (2026-07-28).
    pub(crate) fn tell_tool_list_changed(&self) {
        let Origin::Mcp { ctx, .. } = &self.origin else {
            return;
        };
        let session = ctx
            .peer
            .peer_info()
            .is_some_and(|info| info.protocol_version.as_str() < "2026-07-28");
        if !session {
            return;
        }
        let peer = ctx.peer.clone();
        tokio::spawn(async move {
            if let Err(error) = peer.notify_tool_list_changed().await {
                tracing::debug!(%error, "list_changed not delivered to the author's session");
            }
        });
    }

    /// How a running script reaches the client (empty for the command line).
    pub(crate) fn client(&self) -> ClientLink {
        match &self.origin {
            Origin::Mcp {
                ctx,
                json_reply,
                stream,
                ..
            } => ClientLink {
                peer: Some(ctx.peer.clone()),
                request_id: Some(ctx.id.clone()),
                protocol_version: ctx.protocol_version(),
                capabilities: ctx.client_capabilities(),
                stream: stream.cloned(),
                json_reply: *json_reply,
                task: ctx.extensions.get::<TaskLink>().cloned(),
                starter: ctx.extensions.get::<Arc<TaskStarter>>().cloned(),
            },
            Origin::Local { .. } => ClientLink::default(),
        }
    }
}
