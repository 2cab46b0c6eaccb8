//! [`OmniForge`], the hand-written rmcp [`ServerHandler`]: one value per stdio connection or
//! HTTP session, all sharing one [`Shared`]. Each method delegates to the file of its family.

// `logging/setLevel` is deprecated by SEP-2577 (2026-07-28) but still part of every earlier
// revision we serve, and the conformance suite checks it.
#![allow(deprecated)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use rmcp::ServerHandler;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CancelTaskParams, CompleteRequestParams,
    CompleteResult, CustomRequest, CustomResult, ErrorCode, ErrorData, GetPromptRequestParams,
    GetPromptResponse, GetTaskParams, GetTaskResult, Implementation, InitializeRequestParams,
    InitializeResult, JsonObject, ListPromptsResult, ListResourceTemplatesResult,
    ListResourcesResult, ListToolsResult, LoggingLevel, PaginatedRequestParams,
    ReadResourceRequestParams, ReadResourceResponse, ServerCapabilities, ServerConfig,
    SetLevelRequestParams, SubscribeRequestParams, SubscriptionFilter, TASKS_EXTENSION_ID, Tool,
    UnsubscribeRequestParams, UpdateTaskParams,
};
use rmcp::service::{NotificationContext, RequestContext, RoleServer, SubscriptionContext};

use crate::mcp::listen;
use crate::mcp::metered::metered;
use crate::mcp::prompts;
use crate::mcp::resources;
use crate::mcp::state::Shared;
use crate::mcp::tasks;
use crate::mcp::tools;
use crate::telemetry::spans;
use tracing::Instrument as _;

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
        let mut capabilities = ServerCapabilities::builder()
            .enable_completions()
            .enable_prompts()
            .enable_prompts_list_changed()
            .enable_resources()
            .enable_resources_subscribe()
            .enable_resources_list_changed()
            .enable_tools()
            .enable_tool_list_changed()
            .enable_logging()
            .build();
        if self.shared.stored.is_some() {
            capabilities
                .extensions
                .get_or_insert_with(Default::default)
                .insert(TASKS_EXTENSION_ID.to_owned(), JsonObject::new());
        }
        ServerConfig::new(capabilities)
            .with_server_info(
                Implementation::new("omniforge", env!("CARGO_PKG_VERSION")).with_title("OmniForge"),
            )
            .with_instructions(self.shared.instructions)
    }

    async fn initialize(
        &self,
        request: InitializeRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, ErrorData> {
        // rmcp's own `initialize`, counted.
        ctx.peer.set_peer_info(request.clone());
        metered(&self.shared, "initialize", None, &ctx, async {
            self.negotiate_initialize(&request)
        })
        .await
    }

    async fn ping(&self, ctx: RequestContext<RoleServer>) -> Result<(), ErrorData> {
        metered(&self.shared, "ping", None, &ctx, async { Ok(()) }).await
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        metered(&self.shared, "tools/list", None, &ctx, async {
            tools::list(&self.shared, request, &ctx)
        })
        .await
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.shared.catalog.snapshot().get(name).map(|t| t.tool())
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        // `tools.rs` counts the call and marks the span failed.
        let span = spans::request("tools/call", Some(&request.name), &ctx);
        tools::call(&self.shared, request, &ctx, &self.log_level)
            .instrument(span)
            .await
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        metered(&self.shared, "resources/list", None, &ctx, async {
            resources::list(&self.shared, request)
        })
        .await
    }

    async fn list_resource_templates(
        &self,
        request: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        metered(
            &self.shared,
            "resources/templates/list",
            None,
            &ctx,
            async { resources::list_templates(&self.shared, request) },
        )
        .await
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        metered(
            &self.shared,
            "resources/read",
            None,
            &ctx,
            resources::read(&self.shared, request, &ctx, &self.log_level),
        )
        .await
    }

    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        metered(&self.shared, "resources/subscribe", None, &ctx, async {
            resources::subscribe(&self.shared, self.id, request.uri, ctx.peer.clone())
        })
        .await
    }

    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        metered(&self.shared, "resources/unsubscribe", None, &ctx, async {
            resources::unsubscribe(&self.shared, self.id, &request.uri);
            Ok(())
        })
        .await
    }

    async fn list_prompts(
        &self,
        request: Option<PaginatedRequestParams>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        metered(&self.shared, "prompts/list", None, &ctx, async {
            prompts::list(&self.shared, request)
        })
        .await
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        let name = request.name.clone();
        metered(
            &self.shared,
            "prompts/get",
            Some(&name),
            &ctx,
            prompts::get(&self.shared, request, &ctx, &self.log_level),
        )
        .await
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, ErrorData> {
        metered(
            &self.shared,
            "completion/complete",
            None,
            &ctx,
            prompts::complete(&self.shared, request, ctx.ct.clone()),
        )
        .await
    }

    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        metered(&self.shared, "logging/setLevel", None, &ctx, async {
            *self.log_level.lock().unwrap_or_else(|e| e.into_inner()) = Some(request.level);
            Ok(())
        })
        .await
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

    async fn get_task(
        &self,
        request: GetTaskParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        tasks::get(&self.shared, request, &ctx).await
    }

    async fn update_task(
        &self,
        request: UpdateTaskParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        tasks::update(&self.shared, request, &ctx).await
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        tasks::cancel(&self.shared, request, &ctx).await
    }

    async fn on_custom_request(
        &self,
        request: CustomRequest,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CustomResult, ErrorData> {
        metered(&self.shared, "other", None, &ctx, async {
            Err(ErrorData::new(
                ErrorCode::METHOD_NOT_FOUND,
                format!("Method not found: {}", request.method),
                None,
            ))
        })
        .await
    }
}
