//! [`OmniForge`], the hand-written rmcp [`ServerHandler`]: one value per stdio connection or
//! HTTP session, all sharing one [`Shared`]. Each method delegates to the file of its family.

// `logging/setLevel` is deprecated by SEP-2577 (2026-07-28) but still part of every earlier
// revision we serve, and the conformance suite checks it.
#![allow(deprecated)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use rmcp::ServerHandler;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CompleteRequestParams, CompleteResult, CustomRequest,
    CustomResult, ErrorCode, ErrorData, GetPromptRequestParams, GetPromptResponse, Implementation,
    ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult, ListToolsResult,
    LoggingLevel, PaginatedRequestParams, ReadResourceRequestParams, ReadResourceResponse,
    ServerCapabilities, ServerConfig, SetLevelRequestParams, SubscribeRequestParams,
    SubscriptionFilter, Tool, UnsubscribeRequestParams,
};
use rmcp::service::{NotificationContext, RequestContext, RoleServer, SubscriptionContext};

use crate::mcp::listen;
use crate::mcp::prompts;
use crate::mcp::resources;
use crate::mcp::state::Shared;
use crate::mcp::tools;

/// Gives each handler (stdio connection or HTTP session) an id for its resource subscriptions.
static NEXT_HANDLER_ID: AtomicU64 = AtomicU64::new(1);

/// The MCP handler. Cheap to create: one per connection or session.
#[derive(Clone)]
pub(crate) struct OmniForge {
    shared: Arc<Shared>,
    /// This peer's id in resource subscriptions.
    id: u64,
    /// The level set by this peer's `logging/setLevel`; kept per peer (per session).
    log_level: Arc<Mutex<Option<LoggingLevel>>>,
}

impl OmniForge {
    /// A handler for one peer.
    pub(crate) fn new(shared: Arc<Shared>) -> OmniForge {
        OmniForge {
            shared,
            id: NEXT_HANDLER_ID.fetch_add(1, Ordering::Relaxed),
            log_level: Arc::default(),
        }
    }
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
        .with_instructions(self.shared.instructions)
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        tools::list(&self.shared, request, &ctx)
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
        tools::call(&self.shared, request, &ctx, &self.log_level).await
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        resources::list(&self.shared, request)
    }

    async fn list_resource_templates(
        &self,
        request: Option<PaginatedRequestParams>,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        resources::list_templates(&self.shared, request)
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        resources::read(&self.shared, request, &ctx, &self.log_level).await
    }

    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        resources::subscribe(&self.shared, self.id, request.uri, ctx.peer.clone())
    }

    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        resources::unsubscribe(&self.shared, self.id, &request.uri);
        Ok(())
    }

    async fn list_prompts(
        &self,
        request: Option<PaginatedRequestParams>,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        prompts::list(&self.shared, request)
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        prompts::get(&self.shared, request)
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, ErrorData> {
        prompts::complete(&self.shared, request, ctx.ct.clone()).await
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
        listen::accepted(&self.shared, requested)
    }

    async fn listen(&self, ctx: SubscriptionContext) -> Result<(), ErrorData> {
        listen::listen(&self.shared, ctx).await
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
