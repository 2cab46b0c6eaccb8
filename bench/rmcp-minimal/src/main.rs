//! A minimal rmcp 3.11 server: one hand-written `ServerHandler` with one tool that answers a
//! constant text, over stdio or Streamable HTTP (session or stateless mode). The "ceiling of
//! our stack" peer of OmniForge's benchmarks: same rmcp version and features, nothing else.
//!
//!     rmcp-minimal stdio --text-file GUIDE.txt
//!     rmcp-minimal http  --text-file GUIDE.txt --listen 127.0.0.1:PORT [--stateless]
//!
//! HTTP connections get `TCP_NODELAY` (axum's `ListenerExt::tap_io`), as a tuned server would:
//! without it, rmcp's SSE answers (written in two pieces) wait for the client's delayed ACK,
//! about 40 ms per request on Linux. `--nagle` leaves it off, to measure that effect.
//!
//! The tool is named `omniforge_instructions` and answers the contents of `--text-file` (the
//! benchmark puts OmniForge's own answer there), so a `tools/call` moves the same bytes as
//! against OmniForge.

use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ErrorData,
    Implementation, JsonObject, ListToolsResult, PaginatedRequestParams, ServerCapabilities,
    ServerConfig, Tool, ToolAnnotations,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use axum::serve::ListenerExt;
use rmcp::{ServerHandler, ServiceExt};

const TOOL: &str = "omniforge_instructions";

#[derive(Clone)]
struct Minimal {
    text: Arc<str>,
    tool: Arc<Tool>,
}

impl Minimal {
    fn new(text: String) -> Minimal {
        let mut schema = JsonObject::new();
        schema.insert("type".into(), "object".into());
        schema.insert("properties".into(), JsonObject::new().into());
        schema.insert("additionalProperties".into(), false.into());
        let tool = Tool::new(TOOL, "A constant text (benchmark tool).", Arc::new(schema))
            .with_annotations(
                ToolAnnotations::new()
                    .read_only(true)
                    .destructive(false)
                    .idempotent(true)
                    .open_world(false),
            );
        Minimal {
            text: text.into(),
            tool: Arc::new(tool),
        }
    }
}

impl ServerHandler for Minimal {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("rmcp-minimal", "0.1.0"))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(vec![(*self.tool).clone()]))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        (name == TOOL).then(|| (*self.tool).clone())
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let result = if request.name == TOOL {
            CallToolResult::success(vec![ContentBlock::text(self.text.to_string())])
        } else {
            CallToolResult::error(vec![ContentBlock::text("Unknown tool")])
        };
        Ok(result.into())
    }
}

fn usage() -> ! {
    eprintln!(
        "usage: rmcp-minimal stdio --text-file FILE | http --text-file FILE --listen ADDR [--stateless] [--nagle]"
    );
    std::process::exit(2)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let mode = args.next().unwrap_or_else(|| usage());
    let (mut text_file, mut listen, mut stateless, mut nagle) = (None, None, false, false);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--text-file" => text_file = args.next(),
            "--listen" => listen = args.next(),
            "--stateless" => stateless = true,
            "--nagle" => nagle = true,
            _ => usage(),
        }
    }
    let text = std::fs::read_to_string(text_file.unwrap_or_else(|| usage()))?;
    let handler = Minimal::new(text);
    match mode.as_str() {
        "stdio" => {
            let running = handler.serve(rmcp::transport::stdio()).await?;
            running.waiting().await?;
        }
        "http" => {
            let listen = listen.unwrap_or_else(|| usage());
            let config = StreamableHttpServerConfig::default().with_legacy_session_mode(!stateless);
            let svc = StreamableHttpService::new(
                move || Ok(handler.clone()),
                Arc::new(LocalSessionManager::default()),
                config,
            );
            let app = axum::Router::new().nest_service("/mcp", svc);
            let listener = tokio::net::TcpListener::bind(&listen).await?;
            eprintln!(
                "rmcp-minimal listening on http://{listen}/mcp (stateless: {stateless}, nagle: {nagle})"
            );
            let listener = listener.tap_io(move |tcp| {
                if !nagle {
                    let _ = tcp.set_nodelay(true);
                }
            });
            axum::serve(listener, app).await?;
        }
        _ => usage(),
    }
    Ok(())
}
