//! The 2026-07-28 request rules that need a real server and real scripts (issue 12): a
//! request needing a client capability it did not declare is refused with -32021 and HTTP 400
//! (a script's `omniforge.protocol_error`, after reading `omniforge.client_capabilities()`),
//! script log messages reach a 2026-07-28 request only at its `_meta` logLevel, and stdio
//! decides by the request's `_meta` which rules apply. The HTTP front's rules are tested
//! in-process in `crates/omniforge-server/tests/app.rs`.

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::{
    Serve, StdioServer, add_tools, data_home, http_client, parse_sse, require, uv,
};

const STATELESS: &str = "2026-07-28";

fn meta(capabilities: Value, log_level: Option<&str>) -> Value {
    let mut meta = json!({
        "io.modelcontextprotocol/protocolVersion": STATELESS,
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"},
        "io.modelcontextprotocol/clientCapabilities": capabilities,
    });
    if let Some(level) = log_level {
        meta["io.modelcontextprotocol/logLevel"] = json!(level);
    }
    meta
}

/// A 2026-07-28 `tools/call` of `name` over raw HTTP: (status, the messages of the answer).
async fn call(url: &str, id: i64, name: &str, arguments: Value, meta: Value) -> (u16, Vec<Value>) {
    call_as(url, None, id, name, arguments, meta).await
}

/// [`call`] with a bearer `token`.
async fn call_as(
    url: &str,
    token: Option<&str>,
    id: i64,
    name: &str,
    arguments: Value,
    meta: Value,
) -> (u16, Vec<Value>) {
    let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": name, "arguments": arguments, "_meta": meta}});
    let mut post = http_client().post(url);
    if let Some(token) = token {
        post = post.bearer_auth(token);
    }
    let response = post
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", STATELESS)
        .header("mcp-method", "tools/call")
        .header("mcp-name", name)
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    let is_sse = response
        .headers()
        .get("content-type")
        .is_some_and(|v| v.to_str().unwrap_or("").starts_with("text/event-stream"));
    let bytes = response.bytes().await.unwrap();
    let messages = if is_sse {
        parse_sse(&bytes, true).0
    } else {
        vec![
            serde_json::from_slice(&bytes)
                .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&bytes))),
        ]
    };
    (status, messages)
}

/// The answer among `messages` (the one with an id and no method).
fn answer(messages: &[Value]) -> &Value {
    messages
        .iter()
        .find(|m| m.get("method").is_none() && m.get("id").is_some())
        .unwrap_or_else(|| panic!("no answer in {messages:?}"))
}

/// A tool that needs sampling: without it in the declared capabilities it ends the request
/// with `code` (default -32021); with it, it returns what the client declared.
fn needs_sampling_tool() -> Value {
    json!({
        "name": "needs_sampling",
        "description": "Ends the request with a protocol error unless the client declared sampling",
        "inputSchema": {"type": "object", "properties": {"code": {"type": "integer"}}},
        "code": r#"
import omniforge
caps = omniforge.client_capabilities()
if "sampling" not in caps:
    omniforge.protocol_error(
        omniforge.args().get("code", -32021),
        "needs the client's sampling capability",
        {"requiredCapabilities": {"sampling": {}}},
    )
omniforge.result(structured={"declared": caps})
"#,
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stateless_undeclared_capability_is_missing_capability_400() {
    crate::support::needs_deps!();
    require(&[uv()]);
    let (_home, data) = data_home();
    add_tools(&data, &[needs_sampling_tool()]);
    let server = Serve::on_data(&data, &[]).await;
    let (status, messages) = call(
        &server.url,
        401,
        "needs_sampling",
        json!({}),
        meta(json!({}), None),
    )
    .await;
    let error = answer(&messages);
    assert_eq!(status, 400, "{messages:?}");
    assert_eq!(error["id"], 401, "{error}");
    assert_eq!(error["error"]["code"], -32021, "{error}");
    assert_eq!(
        error["error"]["data"]["requiredCapabilities"],
        json!({"sampling": {}}),
        "{error}"
    );
    // Declared: the script sees exactly what the request declared.
    let declared = json!({"sampling": {}, "roots": {}});
    let (status, messages) = call(
        &server.url,
        402,
        "needs_sampling",
        json!({}),
        meta(declared.clone(), None),
    )
    .await;
    let result = answer(&messages);
    assert_eq!(status, 200, "{messages:?}");
    assert_eq!(
        result["result"]["structuredContent"]["declared"], declared,
        "{result}"
    );
    // A script cannot forge the transport's own errors: an isError result instead.
    let (status, messages) = call(
        &server.url,
        403,
        "needs_sampling",
        json!({"code": -32022}),
        meta(json!({}), None),
    )
    .await;
    let result = answer(&messages);
    assert_eq!(status, 200, "{messages:?}");
    assert_eq!(result["result"]["isError"], true, "{result}");
    let text = result["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("code -32022 is not allowed"), "{text}");
    server.assert_no_panic();
}

/// A tool that calls the built-in named by its `builtin` argument with `arguments`, and
/// declares only `omniforge_update_tool` and `omniforge_set_secret` in its PEP 723 block.
fn builtin_caller_tool() -> Value {
    json!({
        "name": "builtin_caller",
        "description": "Calls one authoring built-in",
        "inputSchema": {"type": "object", "properties": {
            "builtin": {"type": "string"}, "arguments": {"type": "object"}}},
        "code": r#"# /// script
# [tool.omniforge]
# builtins = ["omniforge_update_tool", "omniforge_set_secret"]
# ///
import omniforge
a = omniforge.args()
try:
    out = omniforge.call_builtin(a["builtin"], a.get("arguments", {}))
    omniforge.result(structured={"answer": out})
except omniforge.RequestError as e:
    omniforge.result(structured={"refused": e.message})
"#,
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn call_builtin_runs_declared_builtins_under_the_callers_scopes() {
    crate::support::needs_deps!();
    require(&[uv()]);
    let (home, data) = data_home();
    add_tools(
        &data,
        &[
            builtin_caller_tool(),
            json!({
        "name": "target", "description": "before", "code": "print(1)",
        "inputSchema": {"type": "object", "properties": {}}}),
        ],
    );
    let tokens = home.path().join("tokens.txt");
    std::fs::write(
        &tokens,
        "writer writer-token tools:write\ncaller caller-token tools:call\nboss boss-token admin\n",
    )
    .unwrap();
    {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&tokens, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    let server = Serve::on_data(&data, &["--token-file", tokens.to_str().unwrap()]).await;
    let run = async |token: &str, builtin: &str, arguments: Value| -> Value {
        let (status, messages) = call_as(
            &server.url,
            Some(token),
            1,
            "builtin_caller",
            json!({"builtin": builtin, "arguments": arguments}),
            meta(json!({}), None),
        )
        .await;
        assert_eq!(status, 200, "{messages:?}");
        answer(&messages)["result"]["structuredContent"].clone()
    };
    // Declared, and the caller may write: it runs (a new version of `target`).
    let out = run(
        "writer-token",
        "omniforge_update_tool",
        json!({"name": "target", "description": "after"}),
    )
    .await;
    assert_eq!(out["answer"]["isError"], false, "{out}");
    // Declared, but the caller may only call tools: the built-in refuses, as it would refuse
    // the caller directly.
    let out = run(
        "caller-token",
        "omniforge_update_tool",
        json!({"name": "target", "description": "again"}),
    )
    .await;
    assert_eq!(out["answer"]["isError"], true, "{out}");
    // Not declared by the code: refused before anything runs.
    let out = run(
        "writer-token",
        "omniforge_delete_tool",
        json!({"name": "target"}),
    )
    .await;
    let refused = out["refused"].as_str().unwrap_or_else(|| panic!("{out}"));
    assert!(refused.contains("does not declare"), "{refused}");
    // Declared, but a secret built-in is never callable from a tool.
    let out = run(
        "writer-token",
        "omniforge_set_secret",
        json!({"name": "K", "value": "v"}),
    )
    .await;
    let refused = out["refused"].as_str().unwrap_or_else(|| panic!("{out}"));
    assert!(
        refused.contains("cannot be called from a tool"),
        "{refused}"
    );
    // An admin calling the writer's tool lends it no admin authority: a version the script
    // writes is not granted the secrets it declares, as the admin's own write would be.
    let (_, messages) = call_as(
        &server.url,
        Some("boss-token"),
        3,
        "omniforge_set_secret",
        json!({"name": "LENT", "value": "lent-value"}),
        meta(json!({}), None),
    )
    .await;
    assert_eq!(
        answer(&messages)["result"]["isError"],
        false,
        "{messages:?}"
    );
    let out = run(
        "boss-token",
        "omniforge_update_tool",
        json!({"name": "target", "secrets": ["LENT"]}),
    )
    .await;
    assert_eq!(out["answer"]["isError"], false, "{out}");
    let (_, messages) = call_as(
        &server.url,
        Some("boss-token"),
        4,
        "omniforge_list_secret_requests",
        json!({"tool": "target"}),
        meta(json!({}), None),
    )
    .await;
    let requests = &answer(&messages)["result"]["structuredContent"]["requests"];
    assert_eq!(requests[0]["secret"], "LENT", "{messages:?}");
    assert_eq!(
        requests[0]["granted"],
        Value::Null,
        "a script run by an admin got a grant: {messages:?}"
    );
    // `target` was updated by the writer (and then by the admin's call, which kept "after").
    let (_, messages) = call_as(
        &server.url,
        Some("writer-token"),
        2,
        "omniforge_get_tool",
        json!({"name": "target"}),
        meta(json!({}), None),
    )
    .await;
    let text = answer(&messages)["result"]["content"][0]["text"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(text.contains("after") && !text.contains("again"), "{text}");
    server.assert_no_panic();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stateless_logs_only_at_the_meta_log_level() {
    crate::support::needs_deps!();
    require(&[uv()]);
    let (_home, data) = data_home();
    add_tools(
        &data,
        &[json!({
            "name": "logs_three",
            "description": "Logs at debug, info and warning",
            "inputSchema": {"type": "object", "properties": {}},
            "code": "import omniforge\nfor level in ('debug', 'info', 'warning'):\n    omniforge.log(level, level)\nprint('done')\n",
        })],
    );
    let server = Serve::on_data(&data, &[]).await;
    let logs = |messages: &[Value]| -> Vec<Value> {
        messages
            .iter()
            .filter(|m| m["method"] == "notifications/message")
            .map(|m| m["params"]["level"].clone())
            .collect()
    };
    let (status, messages) = call(
        &server.url,
        1,
        "logs_three",
        json!({}),
        meta(json!({}), None),
    )
    .await;
    assert_eq!(status, 200, "{messages:?}");
    assert_eq!(answer(&messages)["result"]["content"][0]["text"], "done");
    assert_eq!(logs(&messages), Vec::<Value>::new(), "{messages:?}");
    let (_, messages) = call(
        &server.url,
        2,
        "logs_three",
        json!({}),
        meta(json!({}), Some("info")),
    )
    .await;
    assert_eq!(
        logs(&messages),
        vec![json!("info"), json!("warning")],
        "{messages:?}"
    );
    server.assert_no_panic();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdio_applies_the_2026_rules_by_the_request_meta() {
    let mut server = StdioServer::start(&[]);
    let wait = Duration::from_secs(30);
    // No per-request key: the earlier revisions' answers (WIRE-14's probe).
    let probe = json!({"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {}});
    server.send_line(&probe.to_string()).await.unwrap();
    let probe = server.read_message(wait).await.unwrap();
    assert_eq!(probe["error"]["code"], -32601, "{probe}");
    // A 2025 client on this process: its ping exists.
    let init = json!({"jsonrpc": "2.0", "id": 2, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "t", "version": "0"}}});
    server.send_line(&init.to_string()).await.unwrap();
    let init = server.read_message(wait).await.unwrap();
    assert_eq!(init["result"]["protocolVersion"], "2025-06-18", "{init}");
    server
        .send_line(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)
        .await
        .unwrap();
    let mut ask = async |request: Value| -> Value {
        server.send_line(&request.to_string()).await.unwrap();
        server.read_message(wait).await.unwrap()
    };
    let pong = ask(json!({"jsonrpc": "2.0", "id": 3, "method": "ping"})).await;
    assert_eq!(pong, json!({"jsonrpc": "2.0", "id": 3, "result": {}}));
    // A per-request key: the 2026-07-28 rules, on the same process.
    let ping = ask(json!({"jsonrpc": "2.0", "id": 4, "method": "ping",
        "params": {"_meta": meta(json!({}), None)}}))
    .await;
    assert_eq!(
        (ping["id"].clone(), ping["error"]["code"].clone()),
        (json!(4), json!(-32601)),
        "{ping}"
    );
    let incomplete = ask(json!({"jsonrpc": "2.0", "id": 5, "method": "tools/list",
        "params": {"_meta": {"io.modelcontextprotocol/protocolVersion": STATELESS}}}))
    .await;
    assert_eq!(incomplete["error"]["code"], -32602, "{incomplete}");
    let unsupported = ask(json!({"jsonrpc": "2.0", "id": 6, "method": "tools/list",
        "params": {"_meta": {"io.modelcontextprotocol/protocolVersion": "v999.0.0",
            "io.modelcontextprotocol/clientCapabilities": {}}}}))
    .await;
    assert_eq!(unsupported["error"]["code"], -32022, "{unsupported}");
    assert_eq!(
        unsupported["error"]["data"]["requested"], "v999.0.0",
        "{unsupported}"
    );
    let list = ask(json!({"jsonrpc": "2.0", "id": 7, "method": "tools/list",
        "params": {"_meta": meta(json!({}), None)}}))
    .await;
    assert!(list["result"]["tools"].is_array(), "{list}");
}
