//! In-process tests of the HTTP front's rules: `Server::app()` driven with
//! `tower::ServiceExt::oneshot`, no socket. Host, Origin, token, Accept, Content-Type, body
//! limit, batches, the version header, session ownership and unknown sessions, `/healthz`,
//! and a built-in call through the whole stack (catalog, request context, to_wire).

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use http::{Request, Response, StatusCode};
use http_body_util::BodyExt;
use omniforge_script::SandboxLevel;
use omniforge_server::{
    HttpSettings, SchemaProfile, ScriptSettings, Server, Settings, StoreSettings, TokenSet,
};
use omniforge_store::SqliteStore;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

const LIMIT: usize = 64 * 1024;

/// A server with a real SQLite store in a temporary directory (scripts are never run here).
struct Fixture {
    server: Server,
    _dir: tempfile::TempDir,
}

async fn fixture() -> Fixture {
    fixture_with(false).await
}

/// [`fixture`], with the approval gate (`--require-approval`) on when `require_approval`.
async fn fixture_with(require_approval: bool) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path().join("omniforge.db"))
        .await
        .unwrap();
    let settings = Settings {
        page_size: 1000,
        schema_profile: SchemaProfile::AsAuthored,
        manifests: Vec::new(),
        inline_schema_refs: false,
        metrics_max_tools: omniforge_server::DEFAULT_METRICS_MAX_TOOLS,
        metrics: true,
        store: Some(StoreSettings {
            store: Arc::new(store),
            scripts: ScriptSettings {
                data_dir: dir.path().to_owned(),
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
            authoring: true,
            max_result_bytes: 64 * 1024,
            output_ttl: Duration::from_secs(3600),
            audit_retention: None,
            keep_failed_drafts: false,
            require_approval,
            tasks: omniforge_server::TaskSettings::default(),
            call_log: omniforge_server::CallLogSettings::default(),
            request_state_keys: Vec::new(),
        }),
    };
    Fixture {
        server: Server::start(settings).await.unwrap(),
        _dir: dir,
    }
}

fn http_settings(tokens: &str) -> HttpSettings {
    HttpSettings {
        path: "/mcp".into(),
        stateless: false,
        allowed_origins: vec!["https://app.example.com".into()],
        allowed_hosts: Vec::new(),
        check_host: true,
        tokens: TokenSet::parse(tokens).unwrap(),
        oauth: None,
        max_body_bytes: LIMIT,
        session_idle_timeout: Duration::from_secs(300),
        max_sessions: 1000,
        header_read_timeout: Duration::from_secs(30),
        keep_alive_timeout: Duration::from_secs(75),
        max_connections: 1024,
    }
}

fn app(f: &Fixture, tokens: &str) -> Router {
    f.server
        .app(http_settings(tokens), CancellationToken::new())
}

/// A POST of `body` to `/mcp` with JSON-only Accept; `headers` added.
fn post(body: &str, headers: &[(&str, &str)]) -> Request<Body> {
    let mut request = Request::post("/mcp")
        .header("host", "127.0.0.1:8080")
        .header("content-type", "application/json")
        .header("accept", "application/json");
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    request.body(Body::from(body.to_owned())).unwrap()
}

async fn send(app: &Router, request: Request<Body>) -> (StatusCode, http::HeaderMap, Value) {
    let response: Response<Body> = app.clone().oneshot(request).await.unwrap();
    let status = response.status();
    let headers = response.headers().clone();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    let value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    (status, headers, value)
}

fn initialize(version: &str) -> String {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": version, "capabilities": {},
        "clientInfo": {"name": "t", "version": "0"}}})
    .to_string()
}

/// Opens a session with `version`; returns its id.
async fn open_session(app: &Router, version: &str, headers: &[(&str, &str)]) -> String {
    let (status, headers, body) = send(app, post(&initialize(version), headers)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["result"]["protocolVersion"], version);
    headers["mcp-session-id"].to_str().unwrap().to_owned()
}

#[tokio::test]
async fn host_outside_the_allowlist_is_forbidden() {
    let f = fixture().await;
    let app = app(&f, "");
    let mut request = post(&initialize("2025-06-18"), &[]);
    request
        .headers_mut()
        .insert("host", "evil.example.com".parse().unwrap());
    let (status, _, body) = send(&app, request).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_eq!(body["error"]["code"], -32001);
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("Host 'evil.example.com' is not allowed")
    );
    open_session(&app, "2025-06-18", &[("host", "localhost:9")]).await;
}

#[tokio::test]
async fn origins_are_checked_and_allowed_ones_get_cors() {
    let f = fixture().await;
    let app = app(&f, "");
    let (status, _, body) = send(
        &app,
        post(
            &initialize("2025-06-18"),
            &[("origin", "https://evil.example")],
        ),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_eq!(body["error"]["code"], -32001);
    let (status, headers, _) = send(
        &app,
        post(
            &initialize("2025-06-18"),
            &[("origin", "https://app.example.com")],
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        headers["access-control-allow-origin"],
        "https://app.example.com"
    );
    let preflight = Request::options("/mcp")
        .header("host", "localhost")
        .header("origin", "http://localhost:3000")
        .body(Body::empty())
        .unwrap();
    let (status, headers, _) = send(&app, preflight).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    assert_eq!(
        headers["access-control-allow-origin"],
        "http://localhost:3000"
    );
    assert!(headers.contains_key("access-control-allow-headers"));
    let null_origin = post(&initialize("2025-06-18"), &[("origin", "null")]);
    assert_eq!(send(&app, null_origin).await.0, StatusCode::FORBIDDEN);
}

#[tokio::test]
async fn tokens_are_required_and_sessions_belong_to_theirs() {
    let f = fixture().await;
    let app = app(&f, "alice a-secret tools:call\nbob b-secret tools:call\n");
    let (status, headers, body) = send(&app, post(&initialize("2025-06-18"), &[])).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(headers["www-authenticate"], r#"Bearer realm="omniforge""#);
    assert_eq!(body["error"]["code"], -32001);
    let (status, headers, _) = send(
        &app,
        post(
            &initialize("2025-06-18"),
            &[("authorization", "Bearer wrong")],
        ),
    )
    .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert!(
        headers["www-authenticate"]
            .to_str()
            .unwrap()
            .contains("invalid_token")
    );
    let session = open_session(&app, "2025-06-18", &[("authorization", "Bearer a-secret")]).await;
    let list = r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#;
    let (status, _, body) = send(
        &app,
        post(
            list,
            &[
                ("authorization", "Bearer b-secret"),
                ("mcp-session-id", &session),
            ],
        ),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("belongs to another token")
    );
    let (status, _, body) = send(
        &app,
        post(
            list,
            &[
                ("authorization", "Bearer a-secret"),
                ("mcp-session-id", &session),
            ],
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    // tools:call sees the built-ins that need no more than tools:call.
    let names: Vec<&str> = body["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "omniforge_instructions",
            "omniforge_search_tools",
            "omniforge_get_tool_schemas",
            "omniforge_call_tool"
        ]
    );
}

#[tokio::test]
async fn accept_and_content_type_are_negotiated() {
    let f = fixture().await;
    let app = app(&f, "");
    let mut request = post(&initialize("2025-06-18"), &[]);
    request
        .headers_mut()
        .insert("accept", "text/html".parse().unwrap());
    let (status, _, body) = send(&app, request).await;
    assert_eq!(status, StatusCode::NOT_ACCEPTABLE);
    assert_eq!(body["error"]["code"], -32600);
    let mut request = post(&initialize("2025-06-18"), &[]);
    request
        .headers_mut()
        .insert("content-type", "text/plain".parse().unwrap());
    let (status, _, body) = send(&app, request).await;
    assert_eq!(status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    assert_eq!(body["error"]["code"], -32600);
    // JSON-only Accept gets one JSON answer, not an event stream.
    let (status, headers, body) = send(&app, post(&initialize("2025-11-25"), &[])).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(headers["content-type"], "application/json");
    assert_eq!(body["id"], 1);
}

#[tokio::test]
async fn the_body_limit_answers_413_with_a_json_rpc_body() {
    let f = fixture().await;
    let app = app(&f, "");
    let big = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"ping","params":{{"pad":"{}"}}}}"#,
        "x".repeat(LIMIT)
    );
    let (status, _, body) = send(&app, post(&big, &[])).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(body["error"]["code"], -32600);
    let (status, _, body) = send(&app, post("{not json", &[])).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(body["error"]["code"], -32700);
}

#[tokio::test]
async fn batches_follow_the_negotiated_revision() {
    let f = fixture().await;
    let app = app(&f, "");
    let batch = r#"[{"jsonrpc":"2.0","id":"a","method":"ping"},{"jsonrpc":"2.0","method":"notifications/x"},{"jsonrpc":"2.0","id":"b","method":"tools/list"}]"#;
    let old = open_session(&app, "2025-03-26", &[]).await;
    let (status, _, body) = send(&app, post(batch, &[("mcp-session-id", &old)])).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let mut ids: Vec<String> = body
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].to_string())
        .collect();
    ids.sort();
    assert_eq!(ids, ["\"a\"", "\"b\""]);
    let new = open_session(&app, "2025-06-18", &[]).await;
    let (status, _, body) = send(&app, post(batch, &[("mcp-session-id", &new)])).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(body["error"]["code"], -32600);
    let (status, _, body) = send(&app, post("[]", &[("mcp-session-id", &old)])).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(body["error"]["message"], "Invalid Request: empty batch");
}

#[tokio::test]
async fn the_version_header_must_name_a_served_revision() {
    let f = fixture().await;
    let app = app(&f, "");
    let session = open_session(&app, "2025-06-18", &[]).await;
    let ping = r#"{"jsonrpc":"2.0","id":3,"method":"ping"}"#;
    let (status, _, body) = send(
        &app,
        post(
            ping,
            &[
                ("mcp-session-id", &session),
                ("mcp-protocol-version", "1999-01-01"),
            ],
        ),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("unsupported MCP-Protocol-Version '1999-01-01'")
    );
    // Absent, the session's negotiated revision is used.
    let (status, _, body) = send(&app, post(ping, &[("mcp-session-id", &session)])).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body, json!({"jsonrpc": "2.0", "id": 3, "result": {}}));
}

#[tokio::test]
async fn an_unknown_session_is_404_with_a_json_rpc_body() {
    let f = fixture().await;
    let app = app(&f, "");
    let ping = r#"{"jsonrpc":"2.0","id":4,"method":"ping"}"#;
    let (status, _, body) = send(&app, post(ping, &[("mcp-session-id", "no-such-session")])).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(body["error"]["code"], -32001);
    assert_eq!(body["id"], Value::Null);
    // A session that was deleted is unknown afterwards.
    let session = open_session(&app, "2025-06-18", &[]).await;
    let delete = Request::delete("/mcp")
        .header("host", "localhost")
        .header("mcp-session-id", &session)
        .body(Body::empty())
        .unwrap();
    assert_eq!(send(&app, delete).await.0, StatusCode::NO_CONTENT);
    let (status, _, _) = send(&app, post(ping, &[("mcp-session-id", &session)])).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn a_built_in_is_called_through_the_catalog() {
    let f = fixture().await;
    let app = app(&f, "");
    let session = open_session(&app, "2025-06-18", &[]).await;
    let call = |name: &str, arguments: Value| {
        json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
            "params": {"name": name, "arguments": arguments}})
        .to_string()
    };
    let (_, _, body) = send(
        &app,
        post(
            &call("omniforge_instructions", json!({})),
            &[("mcp-session-id", &session)],
        ),
    )
    .await;
    assert_eq!(body["result"]["isError"], false);
    assert!(
        body["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .starts_with("# OmniForge")
    );
    let (_, _, body) = send(
        &app,
        post(
            &call(
                "omniforge_call_tool",
                json!({"name": "omniforge_instructions", "arguments": {"x": 1}}),
            ),
            &[("mcp-session-id", &session)],
        ),
    )
    .await;
    assert_eq!(body["result"]["isError"], true);
    assert!(
        body["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .starts_with("Arguments do not match inputSchema")
    );
    let (_, _, body) = send(
        &app,
        post(
            &call("no_such_tool", json!({})),
            &[("mcp-session-id", &session)],
        ),
    )
    .await;
    assert_eq!(
        body["result"],
        json!({"content": [{"type": "text", "text": "Unknown or inactive tool"}], "isError": true})
    );
    let (_, _, body) = send(
        &app,
        post(
            &json!({"jsonrpc": "2.0", "id": 6, "method": "tools/call",
                "params": {"name": "omniforge_instructions", "arguments": null}})
            .to_string(),
            &[("mcp-session-id", &session)],
        ),
    )
    .await;
    assert_eq!(
        body["result"]["content"][0]["text"],
        "arguments must be a JSON object"
    );
}

/// The built-ins as `tools/list` shows them to an admin on a server with authoring and the
/// approval gate on (every built-in listed): names, descriptions, annotations and inputSchemas,
/// pinned in `tests/snapshots/builtins_tools_list.json`. `UPDATE_EXPECT=1` rewrites the file;
/// a change to it is a change of what every MCP client sees.
#[tokio::test]
async fn builtins_tools_list_snapshot() {
    let f = fixture_with(true).await;
    let app = app(&f, "root r-secret admin\n");
    let auth = ("authorization", "Bearer r-secret");
    let session = open_session(&app, "2025-06-18", &[auth]).await;
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}});
    let (status, _, body) = send(
        &app,
        post(&list.to_string(), &[auth, ("mcp-session-id", &session)]),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(body["result"]["nextCursor"].is_null(), "{body}");
    let tools = body["result"]["tools"].as_array().unwrap();
    assert!(
        tools.iter().all(|t| t["name"]
            .as_str()
            .is_some_and(|n| n.starts_with("omniforge_"))),
        "a fresh store serves built-ins only: {body}"
    );
    let text = serde_json::to_string_pretty(&body["result"]["tools"]).unwrap() + "\n";
    expect_test::expect_file!["snapshots/builtins_tools_list.json"].assert_eq(&text);
}

#[tokio::test]
async fn healthz_counts_tools_and_sessions() {
    let f = fixture().await;
    let app = app(&f, "");
    open_session(&app, "2025-06-18", &[]).await;
    let request = Request::get("/healthz").body(Body::empty()).unwrap();
    let (status, _, body) = send(&app, request).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["status"], "ok");
    assert_eq!(body["sessions"], 1);
    // instructions, search and schemas, 7 tool and 6 secret built-ins, call_tool, 10
    // content built-ins.
    assert_eq!(body["tools"]["builtin"], 30);
    assert_eq!(body["tools"]["stored"], 0);
}

// --- The 2026-07-28 request rules (SEP-2575, issue 12) -------------------------------------

const STATELESS: &str = "2026-07-28";

/// A 2026-07-28 request body: `method` with `meta` as `params._meta` (plus `params`).
fn stateless_request(id: i64, method: &str, meta: Value, params: Value) -> String {
    let mut params = params;
    params["_meta"] = meta;
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string()
}

fn full_meta(version: &str) -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": version,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "0"},
    })
}

/// POSTs `body` with `MCP-Protocol-Version: header` and the routing header `Mcp-Method`
/// (SEP-2243); (status, body).
async fn send_versioned(app: &Router, body: &str, header: &str) -> (StatusCode, Value) {
    let message: Value = serde_json::from_str(body).unwrap();
    let method = message["method"].as_str().unwrap();
    let headers = [("mcp-protocol-version", header), ("mcp-method", method)];
    let (status, _, body) = send(app, post(body, &headers)).await;
    (status, body)
}

#[tokio::test]
async fn stateless_missing_or_incomplete_meta_is_invalid_params_400() {
    let f = fixture().await;
    let app = app(&f, "");
    let no_meta = json!({"jsonrpc": "2.0", "id": 101, "method": "server/discover", "params": {}});
    let (status, body) = send_versioned(&app, &no_meta.to_string(), STATELESS).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(body["id"], 101);
    assert_eq!(body["error"]["code"], -32602, "{body}");
    let no_version = json!({
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "0"},
    });
    let request = stateless_request(102, "server/discover", no_version, json!({}));
    let (status, body) = send_versioned(&app, &request, STATELESS).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(
        (body["id"].clone(), body["error"]["code"].clone()),
        (json!(102), json!(-32602))
    );
    let no_caps = json!({"io.modelcontextprotocol/protocolVersion": STATELESS});
    let request = stateless_request(103, "tools/list", no_caps, json!({}));
    let (status, body) = send_versioned(&app, &request, STATELESS).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(body["error"]["code"], -32602, "{body}");
    // clientInfo is optional.
    let mut meta = full_meta(STATELESS);
    meta.as_object_mut()
        .unwrap()
        .remove("io.modelcontextprotocol/clientInfo");
    let request = stateless_request(104, "server/discover", meta, json!({}));
    let (status, body) = send_versioned(&app, &request, STATELESS).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(body["result"]["supportedVersions"].is_array(), "{body}");
}

#[tokio::test]
async fn stateless_removed_and_unknown_methods_are_method_not_found_404() {
    let f = fixture().await;
    let app = app(&f, "");
    let methods = [
        "initialize",
        "ping",
        "logging/setLevel",
        "resources/subscribe",
        "resources/unsubscribe",
        "unknown/method",
    ];
    for (i, method) in (500..).zip(methods) {
        let request = stateless_request(i, method, full_meta(STATELESS), json!({}));
        let (status, body) = send_versioned(&app, &request, STATELESS).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{method}: {body}");
        assert_eq!(body["id"], i, "{method}: {body}");
        assert_eq!(body["error"]["code"], -32601, "{method}: {body}");
    }
}

#[tokio::test]
async fn stateless_unsupported_version_lists_the_supported_ones_with_the_id() {
    let f = fixture().await;
    let app = app(&f, "");
    let discover = stateless_request(1, "server/discover", full_meta(STATELESS), json!({}));
    let (_, discovered) = send_versioned(&app, &discover, STATELESS).await;
    let request = stateless_request(301, "server/discover", full_meta("v999.0.0"), json!({}));
    let (status, body) = send_versioned(&app, &request, "v999.0.0").await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(body["id"], 301, "{body}");
    assert_eq!(body["error"]["code"], -32022, "{body}");
    assert_eq!(body["error"]["data"]["requested"], "v999.0.0");
    assert_eq!(
        body["error"]["data"]["supported"], discovered["result"]["supportedVersions"],
        "{body} vs {discovered}"
    );
}

#[tokio::test]
async fn stateless_header_and_meta_disagreeing_is_header_mismatch_400() {
    let f = fixture().await;
    let app = app(&f, "");
    let request = stateless_request(9, "tools/list", full_meta("v999.0.0"), json!({}));
    let (status, body) = send_versioned(&app, &request, STATELESS).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(
        (body["id"].clone(), body["error"]["code"].clone()),
        (json!(9), json!(-32020))
    );
    let request = stateless_request(10, "tools/list", full_meta(STATELESS), json!({}));
    let (status, body) = send_versioned(&app, &request, "2025-06-18").await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(body["error"]["code"], -32020, "{body}");
}

#[tokio::test]
async fn legacy_requests_keep_their_answers() {
    let f = fixture().await;
    let app = app(&f, "");
    let session = open_session(&app, "2025-06-18", &[]).await;
    let in_session = [("mcp-session-id", session.as_str())];
    // WIRE-14: an empty-params server/discover probe is -32601 (HTTP 200), so the client
    // falls back to initialize.
    let probe = r#"{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{}}"#;
    let (status, _, body) = send(&app, post(probe, &[])).await;
    assert_eq!(
        (status, body["error"]["code"].clone()),
        (StatusCode::OK, json!(-32601)),
        "{body}"
    );
    let unknown = r#"{"jsonrpc":"2.0","id":2,"method":"unknown/method"}"#;
    let (status, _, body) = send(&app, post(unknown, &in_session)).await;
    assert_eq!(
        (status, body["error"]["code"].clone()),
        (StatusCode::OK, json!(-32601)),
        "{body}"
    );
    let ping = r#"{"jsonrpc":"2.0","id":3,"method":"ping"}"#;
    let (status, _, body) = send(&app, post(ping, &in_session)).await;
    assert_eq!(
        (status, body),
        (
            StatusCode::OK,
            json!({"jsonrpc": "2.0", "id": 3, "result": {}})
        )
    );
    // An unsupported header on a legacy request: today's -32600, now with the request's id.
    let headers = [
        ("mcp-session-id", session.as_str()),
        ("mcp-protocol-version", "1999-01-01"),
    ];
    let (status, _, body) = send(&app, post(ping, &headers)).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(
        (body["id"].clone(), body["error"]["code"].clone()),
        (json!(3), json!(-32600))
    );
}

#[tokio::test]
async fn authoring_refuses_invalid_x_mcp_header_declarations() {
    let f = fixture().await;
    let app = app(&f, "");
    let session = open_session(&app, "2025-06-18", &[]).await;
    let create = |properties: Value| {
        json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {
            "name": "omniforge_create_tool", "arguments": {
                "name": "headed", "description": "d", "code": "print(1)",
                "inputSchema": {"type": "object", "properties": properties}}}})
        .to_string()
    };
    let cases = [
        (
            json!({"a": {"type": "number", "x-mcp-header": "A"}}),
            "properties.a",
        ),
        (
            json!({"a": {"type": "string", "x-mcp-header": "Two Words"}}),
            "HTTP token",
        ),
        (
            json!({"a": {"type": "array", "items": {"type": "string", "x-mcp-header": "A"}}}),
            "properties.a.items",
        ),
    ];
    for (properties, needle) in cases {
        let request = create(properties.clone());
        let (_, _, body) = send(&app, post(&request, &[("mcp-session-id", &session)])).await;
        assert_eq!(body["result"]["isError"], true, "{properties}: {body}");
        let text = body["result"]["content"][0]["text"].as_str().unwrap();
        assert!(
            text.contains("inputSchema") && text.contains("x-mcp-header") && text.contains(needle),
            "{properties}: {text}"
        );
    }
}
