//! The one call trait every tool source implements, and what a call is given and ends in.
//! The catalog routes through [`ToolCall`] only: it never looks into a source's types.

use futures::future::{BoxFuture, Either, Ready};
use rmcp::model::{CallToolResult, JsonObject};

use crate::context::request::RequestCx;
use crate::error::CallError;

/// What a call ends in.
pub(crate) type CallResult = Result<CallToolResult, CallError>;

/// A call in progress: answered at once ([`ready`]) or running ([`running`]). An answer that is
/// ready costs no allocation for its future (the built-ins on the hot path).
pub(crate) type CallFuture<'a> = Either<Ready<CallResult>, BoxFuture<'a, CallResult>>;

/// An answer that is ready now.
pub(crate) fn ready<'a>(result: CallResult) -> CallFuture<'a> {
    Either::Left(futures::future::ready(result))
}

/// An answer that takes work.
pub(crate) fn running<'a>(work: impl Future<Output = CallResult> + Send + 'a) -> CallFuture<'a> {
    Either::Right(Box::pin(work))
}

/// One call of one entry: its checked arguments and who asks.
pub(crate) struct Call<'a> {
    /// The arguments, already checked against the entry's inputSchema.
    pub(crate) arguments: JsonObject,
    /// The request.
    pub(crate) cx: &'a RequestCx<'a>,
    /// The catalog the call was routed in (`omniforge_call_tool` routes in it again).
    pub(crate) catalog: &'a dyn Router,
    /// The call came through `omniforge_call_tool`.
    pub(crate) forwarded: bool,
}

/// How a tool is called. Every source implements it; the catalog routes through it only.
pub(crate) trait ToolCall: Send + Sync {
    /// Runs the call.
    fn call<'a>(&'a self, call: Call<'a>) -> CallFuture<'a>;
}

/// Routes a call by name: what `omniforge_call_tool` needs of the catalog.
pub(crate) trait Router: Send + Sync {
    /// Routes `name` with `arguments` for `cx`, as if called directly (`forwarded` set).
    fn route<'a>(
        &'a self,
        name: &'a str,
        arguments: JsonObject,
        cx: &'a RequestCx<'a>,
    ) -> BoxFuture<'a, CallResult>;
}
