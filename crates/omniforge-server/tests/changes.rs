//! The change feed consumer: writes made by another store instance on the same database (as
//! the command line or another process makes them) reach a running server's catalog and
//! content, and its peers hear `list_changed` for each kind. Driven in-process through
//! `Server::app()`, a session's standalone SSE stream awaited for the notifications.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use http::Request;
use http_body_util::BodyExt;
use omniforge_script::SandboxLevel;
use omniforge_server::{
    HttpSettings, SchemaProfile, ScriptSettings, Server, Settings, StoreSettings, TokenSet,
};
use omniforge_store::{
    Actor, Annotations, ContentStore, Limits, NewResource, NewStatus, NewVersion, ResourceBody,
    Runtime, SqliteStore, ToolStore, WriteMode,
};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

async fn server(dir: &std::path::Path) -> Server {
    let store = SqliteStore::open(dir.join("omniforge.db")).await.unwrap();
    Server::start(Settings {
        page_size: 1000,
        schema_profile: SchemaProfile::AsAuthored,
        manifests: Vec::new(),
        inline_schema_refs: false,
        metrics_max_tools: omniforge_server::DEFAULT_METRICS_MAX_TOOLS,
        metrics: true,
        store: Some(StoreSettings {
            store: Arc::new(store),
            scripts: ScriptSettings {
                data_dir: dir.to_owned(),
                python: "python3".into(),
                uv: None,
                allow_source_builds: false,
                sandbox: SandboxLevel::Off,
                default_timeout: Duration::from_secs(30),
                max_timeout: Duration::from_secs(600),
                memory_bytes: 512 << 20,
                host: omniforge_script::HostEnv::from_vars(std::env::vars_os()),
                disabled_layers: Vec::new(),
                warm_pool: 0,
                warm_idle: std::time::Duration::from_secs(600),
            },
            authoring: false,
            max_result_bytes: 64 * 1024,
            output_ttl: Duration::from_secs(3600),
            audit_retention: None,
            keep_failed_drafts: false,
            require_approval: false,
            tasks: omniforge_server::TaskSettings::default(),
            call_log: omniforge_server::CallLogSettings::default(),
            request_state_keys: Vec::new(),
        }),
    })
    .await
    .unwrap()
}

fn app(server: &Server) -> Router {
    server.app(
        HttpSettings {
            path: "/mcp".into(),
            stateless: false,
            allowed_origins: Vec::new(),
            allowed_hosts: Vec::new(),
            check_host: false,
            tokens: TokenSet::default(),
            oauth: None,
            max_body_bytes: 1 << 20,
            session_idle_timeout: Duration::from_secs(300),
            max_sessions: 1000,
            header_read_timeout: Duration::from_secs(30),
            keep_alive_timeout: Duration::from_secs(75),
            max_connections: 1024,
        },
        CancellationToken::new(),
    )
}

fn post(body: Value, session: Option<&str>) -> Request<Body> {
    let mut request = Request::post("/mcp")
        .header("host", "localhost")
        .header("content-type", "application/json")
        .header("accept", "application/json");
    if let Some(session) = session {
        request = request.header("mcp-session-id", session);
    }
    request.body(Body::from(body.to_string())).unwrap()
}

async fn json(app: &Router, request: Request<Body>) -> (http::HeaderMap, Value) {
    let response = app.clone().oneshot(request).await.unwrap();
    let headers = response.headers().clone();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    (
        headers,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

async fn tool_names(app: &Router, session: &str) -> Vec<String> {
    let (_, body) = json(
        app,
        post(
            json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
            Some(session),
        ),
    )
    .await;
    body["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect()
}

/// Reads the standalone SSE stream until a notification with `method` arrives.
async fn next_notification(body: &mut Body, method: &str) {
    let mut seen = String::new();
    let wait = async {
        while let Some(frame) = body.frame().await {
            if let Ok(data) = frame.unwrap().into_data() {
                seen.push_str(&String::from_utf8_lossy(&data));
                if seen.contains(method) {
                    return;
                }
            }
        }
        panic!("the stream ended before {method}");
    };
    tokio::time::timeout(Duration::from_secs(30), wait)
        .await
        .unwrap_or_else(|_| panic!("no {method} within 30 s"));
}

fn version(description: &str) -> NewVersion {
    NewVersion {
        title: None,
        description: description.into(),
        input_schema: json!({"type": "object"}).as_object().cloned().unwrap(),
        output_schema: None,
        annotations: Annotations::default(),
        runtime: Runtime::Python,
        code: "print('hi')".into(),
        dependencies: vec![],
        limits: Limits {
            timeout_ms: 10_000,
            memory_bytes: 256 << 20,
            network: false,
        },
        lock: String::new(),
        env_id: "env-none".into(),
        secrets: vec![],
        author: "other-process".into(),
        examples: Vec::new(),
        execution: Default::default(),
    }
}

#[tokio::test]
async fn another_writers_changes_reach_the_catalog_and_content() {
    let dir = tempfile::tempdir().unwrap();
    let server = server(dir.path()).await;
    let app = app(&server);
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "t", "version": "0"}}});
    let (headers, body) = json(&app, post(init, None)).await;
    assert!(headers.contains_key("mcp-session-id"), "{body}");
    let session = headers["mcp-session-id"].to_str().unwrap().to_owned();
    let (_, _) = json(
        &app,
        post(
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
            Some(&session),
        ),
    )
    .await;
    let get = Request::get("/mcp")
        .header("host", "localhost")
        .header("accept", "text/event-stream")
        .header("mcp-session-id", &session)
        .body(Body::empty())
        .unwrap();
    let mut events = app.clone().oneshot(get).await.unwrap().into_body();
    assert!(!tool_names(&app, &session).await.contains(&"ext".to_owned()));

    // Another writer (the command line, another process) on the same database.
    let other = SqliteStore::open(dir.path().join("omniforge.db"))
        .await
        .unwrap();
    other
        .create_tool(&Actor::new("t"), "ext", version("v1"), NewStatus::Live)
        .await
        .unwrap();
    next_notification(&mut events, "notifications/tools/list_changed").await;
    assert!(tool_names(&app, &session).await.contains(&"ext".to_owned()));

    other
        .set_enabled(&Actor::new("t"), "ext", false)
        .await
        .unwrap();
    next_notification(&mut events, "notifications/tools/list_changed").await;
    assert!(!tool_names(&app, &session).await.contains(&"ext".to_owned()));

    other
        .put_resource(
            &Actor::new("t"),
            NewResource {
                uri: "docs://ext".into(),
                name: "ext".into(),
                title: None,
                description: None,
                mime_type: Some("text/plain".into()),
                body: ResourceBody::Text("hello".into()),
            },
            WriteMode::Create,
        )
        .await
        .unwrap();
    next_notification(&mut events, "notifications/resources/list_changed").await;
    let (_, body) = json(
        &app,
        post(
            json!({"jsonrpc": "2.0", "id": 3, "method": "resources/read", "params": {"uri": "docs://ext"}}),
            Some(&session),
        ),
    )
    .await;
    assert_eq!(body["result"]["contents"][0]["text"], "hello");
}
