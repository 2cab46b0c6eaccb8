//! 2026-07-28 `subscriptions/listen`: which subscriptions are accepted, and the stream that
//! receives list changes and resource updates until the client ends it.

use rmcp::model::{ErrorData, SubscriptionFilter};
use rmcp::service::SubscriptionContext;

use crate::mcp::state::Shared;

/// The part of `requested` this server serves: list changes, and resource URIs it knows.
pub(crate) fn accepted(
    shared: &Shared,
    requested: &SubscriptionFilter,
) -> Option<SubscriptionFilter> {
    let mut accepted = SubscriptionFilter::builder();
    if requested.tools_list_changed == Some(true) {
        accepted = accepted.tools_list_changed();
    }
    if requested.prompts_list_changed == Some(true) {
        accepted = accepted.prompts_list_changed();
    }
    if requested.resources_list_changed == Some(true) {
        accepted = accepted.resources_list_changed();
    }
    if let (Some(uris), Some(stored)) = (&requested.resource_subscriptions, &shared.stored) {
        let content = stored.content();
        let known: Vec<&String> = uris.iter().filter(|u| content.is_known(u)).collect();
        if !known.is_empty() {
            accepted = accepted.resource_subscriptions(known);
        }
    }
    let accepted = accepted.build();
    (accepted != SubscriptionFilter::default()).then_some(accepted)
}

/// Registers the stream's sink until the request ends, or until the server starts to shut
/// down: then the stream ends with its final result (graceful teardown), so the client
/// listens again elsewhere while the server drains its calls.
///
/// # Errors
/// None: the stream simply ends.
pub(crate) async fn listen(shared: &Shared, ctx: SubscriptionContext) -> Result<(), ErrorData> {
    // A child of the request's token: ending the stream at shutdown must not cancel the
    // request itself, whose final result is still to be sent.
    let ended = ctx.request_context().ct.child_token();
    if let (Some(uris), Some(stored)) = (&ctx.accepted().resource_subscriptions, &shared.stored) {
        stored
            .content()
            .subscriptions
            .add_sink(uris.clone(), ctx.sink().clone(), ended.clone());
    }
    shared
        .peers
        .add_subscription(ctx.sink().clone(), ended.clone());
    tokio::select! {
        () = ended.cancelled() => {}
        () = shared.peers.subscriptions_closed() => {}
    }
    // The sinks are forgotten with it.
    ended.cancel();
    Ok(())
}
