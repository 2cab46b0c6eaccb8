//! The hand-written rmcp [`ServerHandler`]: one value per stdio connection or HTTP session,
//! all sharing one [`Shared`].

// `logging/setLevel` is deprecated by SEP-2577 (2026-07-28) but still part of every earlier
// revision we serve, and the conformance suite checks it.
#![allow(deprecated)]

use std::sync::{Arc, Mutex};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use rmcp::ServerHandler;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CompleteRequestParams, CompleteResult,
    ContentBlock, CustomRequest, CustomResult, ErrorCode, ErrorData, GetPromptRequestParams,
    GetPromptResponse, Implementation, ListPromptsResult, ListResourceTemplatesResult,
    ListResourcesResult, ListToolsResult, LoggingLevel, PaginatedRequestParams,
    ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult, ResourceContents,
    ServerCapabilities, ServerConfig, SetLevelRequestParams, SubscribeRequestParams,
    SubscriptionFilter, Tool, UnsubscribeRequestParams,
};
use rmcp::service::{NotificationContext, RequestContext, RoleServer, SubscriptionContext};
use serde_json::Value;
use tokio_util::task::TaskTracker;

use crate::auth::Principal;
use crate::builtins;
use crate::catalog::{Catalog, Route};
use crate::transport::jsonrpc::INVALID_ARGUMENTS_META;
use crate::peers::Peers;
use crate::{content, forge, manifests};

/// Server-wide state every handler shares.
pub struct Shared {
    /// The merged tool catalog.
    pub catalog: Arc<Catalog>,
    /// Peers to tell about catalog changes.
    pub peers: Arc<Peers>,
    /// Tools per `tools/list` page. Large by default: several clients ignore `nextCursor`.
    pub page_size: usize,
    /// Tracks in-flight `tools/call`s so shutdown can wait for them.
    pub calls: TaskTracker,
    /// Script tools and the authoring built-ins; `None` when no store is configured.
    pub forge: Option<Arc<forge::Forge>>,
    /// Stored resources, resource templates and prompts; set once after start
    /// ([`Shared::set_content`]), empty in bridge mode.
    content: std::sync::OnceLock<Arc<content::Content>>,
}

impl Shared {
    /// Shared state over `catalog`, with `page_size` tools per page (at least 1).
    pub fn new(
        catalog: Arc<Catalog>,
        page_size: usize,
        forge: Option<Arc<forge::Forge>>,
    ) -> Arc<Shared> {
        Arc::new(Shared {
            catalog,
            peers: Arc::new(Peers::default()),
            page_size: page_size.max(1),
            calls: TaskTracker::new(),
            forge,
            content: std::sync::OnceLock::new(),
        })
    }

    /// Serves `content` (stored resources, templates, prompts); only the first call counts.
    pub fn set_content(&self, content: Arc<content::Content>) {
        let _ = self.content.set(content);
    }

    /// The stored resources, templates and prompts, when configured.
    pub fn content(&self) -> Option<&Arc<content::Content>> {
        self.content.get()
    }
}

/// Gives each handler (stdio connection or HTTP session) an id for its resource subscriptions.
static NEXT_HANDLER_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// The MCP handler. Cheap to create: one per connection or session.
#[derive(Clone)]
pub struct OmniForge {
    shared: Arc<Shared>,
    /// This peer's id in resource subscriptions.
    id: u64,
    /// The level set by this peer's `logging/setLevel`; kept per peer (per session).
    log_level: Arc<Mutex<Option<LoggingLevel>>>,
}

impl OmniForge {
    /// A handler for one peer.
    pub fn new(shared: Arc<Shared>) -> OmniForge {
        OmniForge {
            shared,
            id: NEXT_HANDLER_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            log_level: Arc::default(),
        }
    }

    /// The level this peer asked for with `logging/setLevel`, if any.
    pub fn log_level(&self) -> Option<LoggingLevel> {
        *self.log_level.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The caller: the token an HTTP request presented (put there by the HTTP front), or the
/// trusted parent process on stdio. An HTTP request without a principal sees nothing.
fn principal(ctx: &RequestContext<RoleServer>) -> Option<Principal> {
    match ctx.extensions.get::<http::request::Parts>() {
        Some(parts) => parts.extensions.get::<Principal>().cloned(),
        None => Some(Principal::local()),
    }
}

fn tool_error(text: impl Into<String>) -> CallToolResponse {
    CallToolResult::error(vec![ContentBlock::text(text.into())]).into()
}

fn encode_cursor(offset: usize) -> String {
    URL_SAFE_NO_PAD.encode(format!("o:{offset}"))
}

/// One page of `items` from the request's cursor, and the cursor of the next page.
fn paginate<T>(
    mut items: Vec<T>,
    request: Option<PaginatedRequestParams>,
    page_size: usize,
) -> Result<(Vec<T>, Option<String>), ErrorData> {
    let offset = match request.and_then(|r| r.cursor) {
        None => 0,
        Some(cursor) => decode_cursor(&cursor)
            .filter(|o| *o <= items.len())
            .ok_or_else(|| ErrorData::invalid_params(format!("invalid cursor: {cursor}"), None))?,
    };
    let end = (offset + page_size).min(items.len());
    let next = (end < items.len()).then(|| encode_cursor(end));
    items.truncate(end);
    Ok((items.split_off(offset), next))
}

fn decode_cursor(cursor: &str) -> Option<usize> {
    let bytes = URL_SAFE_NO_PAD.decode(cursor).ok()?;
    std::str::from_utf8(&bytes)
        .ok()?
        .strip_prefix("o:")?
        .parse()
        .ok()
}

impl ServerHandler for OmniForge {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_completions()
                .enable_prompts()
                .enable_prompts_list_changed()
                .enable_resources()
                .enable_resources_subscribe()
                .enable_resources_list_changed()
                .enable_tools()
                .enable_tool_list_changed()
                .enable_logging()
                .build(),
        )
        .with_server_info(
            Implementation::new("omniforge", env!("CARGO_PKG_VERSION")).with_title("OmniForge"),
        )
        .with_instructions(
            if self
                .shared
                .catalog
                .snapshot()
                .get(builtins::INSTRUCTIONS)
                .is_some()
            {
                builtins::SERVER_INSTRUCTIONS
            } else {
                builtins::BRIDGE_INSTRUCTIONS
            },
        )
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let principal = principal(&ctx);
        let snapshot = self.shared.catalog.snapshot();
        let offset = match request.and_then(|r| r.cursor) {
            None => 0,
            Some(cursor) => decode_cursor(&cursor).ok_or_else(|| {
                ErrorData::invalid_params(format!("invalid cursor: {cursor}"), None)
            })?,
        };
        let visible: Vec<&Tool> = snapshot
            .tools()
            .iter()
            .filter(|t| {
                t.is_listed()
                    && principal
                        .as_ref()
                        .is_some_and(|p| p.allows(t.required_scope))
            })
            .map(|t| &t.tool)
            .collect();
        if offset > visible.len() {
            return Err(ErrorData::invalid_params(
                "invalid cursor: past the end of the list",
                None,
            ));
        }
        let end = (offset + self.shared.page_size).min(visible.len());
        let mut result = ListToolsResult::with_all_items(
            visible[offset..end].iter().map(|t| (*t).clone()).collect(),
        );
        result.next_cursor = (end < visible.len()).then(|| encode_cursor(end));
        Ok(result)
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.shared
            .catalog
            .snapshot()
            .get(name)
            .map(|t| t.tool.clone())
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let _in_flight = self.shared.calls.token();
        if ctx.meta.get(INVALID_ARGUMENTS_META).is_some() {
            return Ok(tool_error("arguments must be a JSON object"));
        }
        let principal = principal(&ctx);
        let snapshot = self.shared.catalog.snapshot();
        let mut name = request.name.to_string();
        let mut arguments = request.arguments.unwrap_or_default();
        // omniforge_call_tool: for clients that cannot see tools forged mid-session, call the
        // named tool under the caller's own scopes, as if it had been called directly.
        for hop in 0..2 {
            let Some(entry) = snapshot.get(&name).filter(|t| {
                principal
                    .as_ref()
                    .is_some_and(|p| p.allows(t.required_scope))
            }) else {
                return Ok(tool_error("Unknown or inactive tool"));
            };
            if let Err(problems) = entry.check_arguments(&Value::Object(arguments.clone())) {
                return Ok(tool_error(format!(
                    "Arguments do not match inputSchema\n{problems}"
                )));
            }
            if name == forge::names::CALL {
                if hop > 0 {
                    return Ok(tool_error(
                        "omniforge_call_tool cannot call omniforge_call_tool",
                    ));
                }
                name = arguments
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned();
                arguments = match arguments.get("arguments") {
                    Some(Value::Object(inner)) => inner.clone(),
                    None => serde_json::Map::new(),
                    Some(_) => return Ok(tool_error("arguments must be a JSON object")),
                };
                continue;
            }
            let result = match &entry.route {
                Route::Builtin if name == builtins::INSTRUCTIONS => builtins::call(&name),
                Route::Builtin if content::is_builtin(&name) => {
                    match (self.shared.content(), &principal) {
                        (Some(content), Some(p)) => {
                            content
                                .call_builtin(&name, arguments, &forge::Caller::request(&ctx, p))
                                .await
                        }
                        _ => CallToolResult::error(vec![ContentBlock::text(
                            "Unknown or inactive tool",
                        )]),
                    }
                }
                Route::Builtin => match (&self.shared.forge, &principal) {
                    (Some(forge), Some(p)) => {
                        forge
                            .call_builtin(&name, arguments, &forge::Caller::request(&ctx, p))
                            .await
                    }
                    _ => {
                        CallToolResult::error(vec![ContentBlock::text("Unknown or inactive tool")])
                    }
                },
                Route::Manifest(route) => {
                    tokio::select! {
                        result = route.call(&arguments) => result,
                        // Dropping the call aborts the upstream request; rmcp drops the response.
                        () = ctx.ct.cancelled() => {
                            tracing::debug!(tool = %name, "call cancelled");
                            return Err(ErrorData::internal_error("cancelled", None));
                        }
                    }
                }
                Route::Streaming => manifests::streaming_not_supported(&name),
                Route::Stored(route) => match &self.shared.forge {
                    Some(forge) => {
                        let level = self.log_level().and_then(|l| serde_json::to_value(l).ok());
                        let level = level.as_ref().and_then(Value::as_str);
                        forge
                            .call_stored(
                                route,
                                arguments,
                                level,
                                &forge::Caller::request(
                                    &ctx,
                                    principal.as_ref().unwrap_or(&Principal::anonymous()),
                                ),
                            )
                            .await
                    }
                    None => {
                        CallToolResult::error(vec![ContentBlock::text("Unknown or inactive tool")])
                    }
                },
            };
            return Ok(result.into());
        }
        Ok(tool_error("Unknown or inactive tool"))
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        // The outputs behind resource links of cut results are not listed: each is reachable
        // from the result that links to it, for an hour.
        let resources = self
            .shared
            .content()
            .map(|c| c.list_resources())
            .unwrap_or_default();
        let (page, next) = paginate(resources, request, self.shared.page_size)?;
        let mut result = ListResourcesResult::with_all_items(page);
        result.next_cursor = next;
        Ok(result)
    }

    async fn list_resource_templates(
        &self,
        request: Option<PaginatedRequestParams>,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        let templates = self
            .shared
            .content()
            .map(|c| c.list_templates())
            .unwrap_or_default();
        let (page, next) = paginate(templates, request, self.shared.page_size)?;
        let mut result = ListResourceTemplatesResult::with_all_items(page);
        result.next_cursor = next;
        Ok(result)
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        if request.uri.starts_with(forge::RUN_OUTPUT_PREFIX) {
            let text = self
                .shared
                .forge
                .as_ref()
                .and_then(|f| f.read_output(&request.uri));
            return match text {
                Some(text) => Ok(ReadResourceResult::new(vec![
                    ResourceContents::text(text, request.uri.clone()).with_mime_type("text/plain"),
                ])
                .into()),
                None => Err(ErrorData::resource_not_found(
                    format!(
                        "resource not found: {} (outputs of cut results are kept for an hour)",
                        request.uri
                    ),
                    Some(serde_json::json!({"uri": request.uri})),
                )),
            };
        }
        if let Some(content) = self.shared.content()
            && let Some(contents) = content.read(&request.uri, ctx.ct.clone()).await?
        {
            return Ok(ReadResourceResult::new(vec![contents]).into());
        }
        Err(ErrorData::resource_not_found(
            format!("resource not found: {}", request.uri),
            Some(serde_json::json!({"uri": request.uri})),
        ))
    }

    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        match self.shared.content() {
            Some(content) => content.subscribe(self.id, &request.uri, ctx.peer.clone()),
            None => Err(ErrorData::resource_not_found(
                format!("resource not found: {}", request.uri),
                Some(serde_json::json!({"uri": request.uri})),
            )),
        }
    }

    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        if let Some(content) = self.shared.content() {
            content.unsubscribe(self.id, &request.uri);
        }
        Ok(())
    }

    async fn list_prompts(
        &self,
        request: Option<PaginatedRequestParams>,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        let prompts = self
            .shared
            .content()
            .map(|c| c.list_prompts())
            .unwrap_or_default();
        let (page, next) = paginate(prompts, request, self.shared.page_size)?;
        let mut result = ListPromptsResult::with_all_items(page);
        result.next_cursor = next;
        Ok(result)
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        match self.shared.content() {
            Some(content) => Ok(content.get_prompt(&request)?.into()),
            None => Err(ErrorData::invalid_params(
                format!("unknown prompt {:?}", request.name),
                None,
            )),
        }
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, ErrorData> {
        match self.shared.content() {
            Some(content) => content.complete(&request, ctx.ct.clone()).await,
            None => Err(ErrorData::invalid_params("nothing to complete", None)),
        }
    }

    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        *self.log_level.lock().unwrap_or_else(|e| e.into_inner()) = Some(request.level);
        Ok(())
    }

    async fn on_initialized(&self, ctx: NotificationContext<RoleServer>) {
        self.shared.peers.add_session(ctx.peer);
    }

    fn accepted_subscription_filter(
        &self,
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
        if let (Some(uris), Some(content)) =
            (&requested.resource_subscriptions, self.shared.content())
        {
            let known: Vec<&String> = uris.iter().filter(|u| content.is_known(u)).collect();
            if !known.is_empty() {
                accepted = accepted.resource_subscriptions(known);
            }
        }
        let accepted = accepted.build();
        (accepted != SubscriptionFilter::default()).then_some(accepted)
    }

    async fn listen(&self, ctx: SubscriptionContext) -> Result<(), ErrorData> {
        let ended = ctx.request_context().ct.clone();
        if let (Some(uris), Some(content)) = (
            &ctx.accepted().resource_subscriptions,
            self.shared.content(),
        ) {
            content.add_sink(uris.clone(), ctx.sink().clone(), ended.clone());
        }
        self.shared
            .peers
            .add_subscription(ctx.sink().clone(), ended);
        ctx.cancelled().await;
        Ok(())
    }

    async fn on_custom_request(
        &self,
        request: CustomRequest,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<CustomResult, ErrorData> {
        Err(ErrorData::new(
            ErrorCode::METHOD_NOT_FOUND,
            format!("Method not found: {}", request.method),
            None,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_follow_the_cursor() {
        let items: Vec<u32> = (0..5).collect();
        let (page, next) = paginate(items.clone(), None, 2).unwrap();
        assert_eq!(page, [0, 1]);
        let cursor = next.unwrap();
        let request =
            |c: &str| Some(PaginatedRequestParams::default().with_cursor(Some(c.to_owned())));
        let (page, next) = paginate(items.clone(), request(&cursor), 2).unwrap();
        assert_eq!(page, [2, 3]);
        let (page, next) = paginate(items.clone(), request(&next.unwrap()), 2).unwrap();
        assert_eq!((page, next), (vec![4], None));
        assert!(paginate(items.clone(), request("bogus"), 2).is_err());
        assert!(paginate(items, request(&encode_cursor(9)), 2).is_err());
    }

    #[test]
    fn cursor_round_trip() {
        assert_eq!(decode_cursor(&encode_cursor(1000)), Some(1000));
        assert_eq!(decode_cursor("not-a-cursor"), None);
        assert_eq!(decode_cursor(""), None);
    }
}
