//! Server behaviour end to end: access control, stateless mode, the body limit, `/healthz`,
//! pagination, the tool catalog, manifests and hot reload, the 2026-07-28 revision,
//! `logging/setLevel` and `ping`, and graceful shutdown.
//!
//! Every JSON-RPC message the server sends in these tests is validated against the official
//! schema of the revision in use (`tests/data/schema/<rev>/schema.json`, copied from
//! `shared/interop/schema`), see [`schema`]. One allowance: an error response whose `id` is
//! `null` (JSON-RPC 2.0 §5: the id could not be determined, e.g. a 401 before the body is
//! read) is validated with the `id` member left out, against 2025-11-25's
//! `JSONRPCErrorResponse`, the first revision in which `id` is optional; no MCP schema
//! admits `"id": null`.
//!
//! The fixtures of [`crate::support`] are used where they fit; [`Spawned`] is the one this
//! module adds, for servers a test must signal (SIGTERM), start with its own token file, or
//! bind to `0.0.0.0`.

use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tempfile::TempDir;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::Command;

use crate::support::{
    ANY_TOOL, Auth, BIN, HttpReply, HttpServer, REPLY_TIMEOUT, START_TIMEOUT, Serve, StdioServer,
    get_headers, http_client, http_send, init_http, init_stdio, initialize_request,
    is_list_changed, is_response, open_stream, post_headers,
};

/// The built-in tools, in catalog order, followed by `rest`: what tools/list shows.
fn with_builtins(rest: &[&str]) -> Vec<String> {
    BUILTINS.iter().chain(rest).map(|s| s.to_string()).collect()
}

/// The built-in tools of a default server, in catalog order (as an `admin` principal, such
/// as `anonymous` without tokens, sees them).
const BUILTINS: [&str; 30] = [
    "omniforge_instructions",
    "omniforge_search_tools",
    "omniforge_get_tool_schemas",
    "omniforge_create_tool",
    "omniforge_update_tool",
    "omniforge_delete_tool",
    "omniforge_get_tool",
    "omniforge_rollback_tool",
    "omniforge_test_tool",
    "omniforge_check_tool",
    "omniforge_list_pending_tools",
    "omniforge_approve_tool",
    "omniforge_reject_tool",
    "omniforge_set_secret",
    "omniforge_delete_secret",
    "omniforge_list_secrets",
    "omniforge_grant_secret",
    "omniforge_revoke_secret",
    "omniforge_list_secret_requests",
    "omniforge_call_tool",
    "omniforge_create_resource",
    "omniforge_update_resource",
    "omniforge_delete_resource",
    "omniforge_create_resource_template",
    "omniforge_update_resource_template",
    "omniforge_delete_resource_template",
    "omniforge_create_prompt",
    "omniforge_update_prompt",
    "omniforge_delete_prompt",
    "omniforge_get_definition",
];

/// The revisions with an `initialize` handshake.
const HANDSHAKE_VERSIONS: [&str; 4] = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];

/// Every revision omniforge serves.
const ALL_VERSIONS: [&str; 5] = [
    "2024-11-05",
    "2025-03-26",
    "2025-06-18",
    "2025-11-25",
    "2026-07-28",
];

/// The stateless revision.
const V2026: &str = "2026-07-28";

/// The revision most session tests negotiate.
const V2025: &str = "2025-11-25";

/// How long a change may take to show up (hot reload, notifications).
const CHANGE_TIMEOUT: Duration = Duration::from_secs(10);

// ---------------------------------------------------------------------------------------
// Schema validation
// ---------------------------------------------------------------------------------------

/// The official MCP JSON Schemas, one per revision, and validators for their definitions.
mod schema {
    use std::collections::HashMap;
    use std::sync::{Arc, Mutex, OnceLock};

    use serde_json::Value;

    const FILES: [(&str, &str); 5] = [
        (
            "2024-11-05",
            include_str!("../data/schema/2024-11-05/schema.json"),
        ),
        (
            "2025-03-26",
            include_str!("../data/schema/2025-03-26/schema.json"),
        ),
        (
            "2025-06-18",
            include_str!("../data/schema/2025-06-18/schema.json"),
        ),
        (
            "2025-11-25",
            include_str!("../data/schema/2025-11-25/schema.json"),
        ),
        (
            "2026-07-28",
            include_str!("../data/schema/2026-07-28/schema.json"),
        ),
    ];

    type Cache = Mutex<HashMap<(String, String), Arc<jsonschema::Validator>>>;

    fn cache() -> &'static Cache {
        static CACHE: OnceLock<Cache> = OnceLock::new();
        CACHE.get_or_init(Cache::default)
    }

    /// A validator for definition `def` of revision `rev`'s schema (`definitions` in the
    /// draft-07 files, `$defs` in the 2020-12 ones): the whole document with a root `$ref`.
    fn validator(rev: &str, def: &str) -> Result<Arc<jsonschema::Validator>, String> {
        let key = (rev.to_owned(), def.to_owned());
        if let Some(v) = cache().lock().unwrap().get(&key) {
            return Ok(v.clone());
        }
        let text = FILES
            .iter()
            .find(|(r, _)| *r == rev)
            .map(|(_, t)| *t)
            .ok_or_else(|| format!("no schema for revision {rev}"))?;
        let mut doc: Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
        let section = if doc.get("$defs").is_some() {
            "$defs"
        } else {
            "definitions"
        };
        if doc.pointer(&format!("/{section}/{def}")).is_none() {
            return Err(format!("the {rev} schema has no definition {def}"));
        }
        doc["$ref"] = Value::String(format!("#/{section}/{def}"));
        let v = Arc::new(
            jsonschema::validator_for(&doc)
                .map_err(|e| format!("the {rev} schema does not compile: {e}"))?,
        );
        cache().lock().unwrap().insert(key, v.clone());
        Ok(v)
    }

    /// Checks `value` against definition `def` of revision `rev`.
    pub(super) fn check(rev: &str, def: &str, value: &Value) -> Result<(), String> {
        let v = validator(rev, def)?;
        let problems: Vec<String> = v
            .iter_errors(value)
            .map(|e| format!("  at {}: {e}", e.instance_path()))
            .take(10)
            .collect();
        if problems.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "not a valid {rev} {def}:\n{}\nvalue: {value}",
                problems.join("\n")
            ))
        }
    }
}

/// The schema definition of the result of `method`, where the test checks one.
fn result_def(method: &str) -> Option<&'static str> {
    Some(match method {
        "initialize" => "InitializeResult",
        "tools/list" => "ListToolsResult",
        "tools/call" => "CallToolResult",
        "ping" | "logging/setLevel" => "EmptyResult",
        "server/discover" => "DiscoverResult",
        "subscriptions/listen" => "SubscriptionsListenResult",
        _ => return None,
    })
}

/// Validates one message the server sent under revision `rev`. `method` is the method of
/// the request a response answers (`None` for notifications and transport-level errors).
fn validate(rev: &str, method: Option<&str>, message: &Value) -> Result<(), String> {
    let new_envelopes = rev >= "2025-11-25";
    if message.get("error").is_some() {
        if message.get("id") == Some(&Value::Null) {
            // See the module docs: `"id": null` is JSON-RPC 2.0 but in no MCP schema.
            let mut without_id = message.clone();
            without_id.as_object_mut().unwrap().remove("id");
            return schema::check("2025-11-25", "JSONRPCErrorResponse", &without_id);
        }
        let def = if new_envelopes {
            "JSONRPCErrorResponse"
        } else {
            "JSONRPCError"
        };
        return schema::check(rev, def, message);
    }
    if message.get("result").is_some() {
        let def = if new_envelopes {
            "JSONRPCResultResponse"
        } else {
            "JSONRPCResponse"
        };
        schema::check(rev, def, message)?;
        if let Some(def) = method.and_then(result_def) {
            schema::check(rev, def, &message["result"])?;
        }
        return Ok(());
    }
    match message.get("method").and_then(Value::as_str) {
        Some("notifications/tools/list_changed") => {
            schema::check(rev, "ToolListChangedNotification", message)
        }
        Some("notifications/subscriptions/acknowledged") => {
            schema::check(rev, "SubscriptionsAcknowledgedNotification", message)
        }
        Some(_) if message.get("id").is_none() => {
            schema::check(rev, "JSONRPCNotification", message)
        }
        _ => schema::check(rev, "JSONRPCMessage", message),
    }
}

/// Panics unless every message conforms (see [`validate`]).
#[track_caller]
fn assert_valid(rev: &str, method: Option<&str>, messages: &[Value]) {
    for m in messages {
        if let Err(e) = validate(rev, method, m) {
            panic!("schema violation ({}): {e}", method.unwrap_or("-"));
        }
    }
}

/// The validation above must be able to fail: broken messages are rejected.
#[test]
fn schema_validation_rejects_nonconforming_messages() {
    let ok = json!({"jsonrpc": "2.0", "id": 1, "result": {"tools": []}});
    for rev in HANDSHAKE_VERSIONS {
        validate(rev, Some("tools/list"), &ok).unwrap();
        let bad = json!({"jsonrpc": "2.0", "id": 1, "result": {"tools": [{"name": 3}]}});
        assert!(validate(rev, Some("tools/list"), &bad).is_err(), "{rev}");
        let bad = json!({"jsonrpc": "2.0", "id": 1, "result": {"content": "x"}});
        assert!(validate(rev, Some("tools/call"), &bad).is_err(), "{rev}");
        let bad = json!({"jsonrpc": "2.0", "id": 1, "result": {"capabilities": {}}});
        assert!(validate(rev, Some("initialize"), &bad).is_err(), "{rev}");
    }
    // 2026-07-28 results carry resultType (and list results ttlMs/cacheScope).
    assert!(validate(V2026, Some("tools/list"), &ok).is_err());
    let mut discover = json!({"jsonrpc": "2.0", "id": 1, "result": {
        "resultType": "complete", "supportedVersions": ["2026-07-28"], "capabilities": {},
        "ttlMs": 0, "cacheScope": "private"}});
    validate(V2026, Some("server/discover"), &discover).unwrap();
    discover["result"]["supportedVersions"] = json!("2026-07-28");
    assert!(validate(V2026, Some("server/discover"), &discover).is_err());
    let bad = json!({"jsonrpc": "2.0", "id": 1, "result": {"resultType": "complete"}});
    assert!(validate(V2026, Some("server/discover"), &bad).is_err());
    // Error envelopes: code must be an integer; a null id is tolerated, a bool id is not.
    let bad = json!({"jsonrpc": "2.0", "id": null, "error": {"code": "x", "message": "m"}});
    assert!(validate(V2025, None, &bad).is_err());
    let bad = json!({"jsonrpc": "2.0", "id": true, "error": {"code": 1, "message": "m"}});
    assert!(validate(V2025, None, &bad).is_err());
    let good = json!({"jsonrpc": "2.0", "id": null, "error": {"code": 1, "message": "m"}});
    validate(V2025, None, &good).unwrap();
    let bad = json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed", "params": 1});
    assert!(validate(V2025, None, &bad).is_err());
}

// ---------------------------------------------------------------------------------------
// Fixtures
// ---------------------------------------------------------------------------------------

type Captured = Arc<Mutex<Vec<u8>>>;

fn captured_text(c: &Captured) -> String {
    String::from_utf8_lossy(&c.lock().unwrap()).into_owned()
}

/// `omniforge serve` started by this module (through [`Serve`]): the test can signal it and
/// wait for its exit.
struct Spawned {
    server: Serve,
    /// `http://127.0.0.1:PORT/mcp` (a `0.0.0.0` bind is reached through 127.0.0.1).
    url: String,
    _dir: TempDir,
}

impl Spawned {
    /// Starts `omniforge serve --listen LISTEN --data-dir <dir>/data ARGS...` and waits until it
    /// is ready. `dir` lives as long as the server.
    async fn serve(dir: TempDir, listen: &str, args: &[&str]) -> Spawned {
        let data = dir.path().join("data");
        let server = Serve::command()
            .listen(listen)
            .args(&["--data-dir".as_ref(), data.as_os_str()])
            .args(args)
            .start()
            .await;
        Spawned {
            url: server.url.clone(),
            server,
            _dir: dir,
        }
    }

    /// Sends SIGTERM with `kill -TERM <pid>`.
    fn sigterm(&self) {
        let pid = self.server.pid();
        let status = std::process::Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -TERM {pid} failed: {status}");
    }

    /// Waits up to `timeout` for the process to exit.
    async fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        self.server.wait_exit(timeout).await
    }

    fn stderr_text(&self) -> String {
        self.server.stderr()
    }
}

/// Runs `omniforge ARGS...` to completion (stdin closed), killing it after `timeout`.
/// `None` if it was still running then.
async fn run_to_exit(args: &[&str], timeout: Duration) -> Option<std::process::Output> {
    let child = Command::new(BIN)
        .args(args)
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .output();
    tokio::time::timeout(timeout, child)
        .await
        .ok()
        .map(|r| r.unwrap())
}

/// A forge manifest with one unary tool per `(name, description)`.
fn manifest(tools: &[(&str, &str)]) -> String {
    let tools: Vec<Value> = tools
        .iter()
        .map(|(name, description)| {
            let method = name.to_uppercase();
            json!({
                "name": name,
                "description": description,
                "inputSchema": {"type": "object"},
                "service": "p.v1.S",
                "method": method,
                "procedure": format!("/p.v1.S/{method}"),
            })
        })
        .collect();
    json!({"project": "p", "tools": tools}).to_string()
}

/// Replaces `path` the way generators do: write a temp file, rename it over.
fn replace_file(path: &Path, text: &str) {
    let tmp = path.with_extension("json.tmp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// A temp dir holding `manifest.json` with `tools`.
fn manifest_dir(tools: &[(&str, &str)]) -> (TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("manifest.json");
    std::fs::write(&path, manifest(tools)).unwrap();
    (dir, path)
}

fn tool_names(result: &Value) -> Vec<String> {
    result["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("no tools array in {result}"))
        .iter()
        .map(|t| t["name"].as_str().unwrap_or("<no name>").to_owned())
        .collect()
}

fn rpc(id: u64, method: &str, params: Option<Value>) -> Value {
    let mut m = json!({"jsonrpc": "2.0", "id": id, "method": method});
    if let Some(p) = params {
        m["params"] = p;
    }
    m
}

/// Sends one request over stdio and returns its response; every message read on the way
/// is validated against `rev`'s schema.
async fn stdio_call(server: &mut StdioServer, rev: &str, request: Value) -> Value {
    let id = request["id"].clone();
    let method = request["method"].as_str().unwrap().to_owned();
    server.send_line(&request.to_string()).await.unwrap();
    let deadline = Instant::now() + REPLY_TIMEOUT;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let m = server
            .read_message(left)
            .await
            .unwrap_or_else(|e| panic!("{method}: {e}; stderr:\n{}", server.stderr_text()));
        let answers = is_response(&m) && m["id"] == id;
        assert_valid(
            rev,
            answers.then_some(method.as_str()),
            std::slice::from_ref(&m),
        );
        if answers {
            return m;
        }
    }
}

/// POSTs one message and waits for the answer to `id` (if any).
async fn post(
    client: &reqwest::Client,
    url: &str,
    headers: &[(String, String)],
    body: &Value,
) -> HttpReply {
    let ids: Vec<Value> = body.get("id").cloned().into_iter().collect();
    http_send(
        client,
        "POST",
        url,
        headers,
        Some(body.to_string().into_bytes()),
        &ids,
    )
    .await
    .unwrap_or_else(|e| panic!("POST {body}: {e}"))
}

/// The response to request `id` in `reply`, after validating every message in it.
#[track_caller]
fn answer(reply: &HttpReply, rev: &str, method: &str, id: u64) -> Value {
    assert_eq!(
        reply.status,
        200,
        "{method}: HTTP {} {}",
        reply.status,
        String::from_utf8_lossy(&reply.body)
    );
    for m in &reply.messages {
        let answers = is_response(m) && m["id"] == json!(id);
        assert_valid(rev, answers.then_some(method), std::slice::from_ref(m));
    }
    reply
        .messages
        .iter()
        .find(|m| is_response(m) && m["id"] == json!(id))
        .cloned()
        .unwrap_or_else(|| {
            panic!(
                "{method}: no response to id {id} in {:?} (notes {:?})",
                reply.messages, reply.notes
            )
        })
}

/// Asserts an HTTP error reply: `status`, a JSON content type, and a body that is one
/// JSON-RPC error object (id null or absent) valid against the schema.
#[track_caller]
fn assert_rpc_error(reply: &HttpReply, status: u16, what: &str) -> Value {
    let body = String::from_utf8_lossy(&reply.body);
    assert_eq!(reply.status, status, "{what}: HTTP status; body {body}");
    assert_eq!(
        reply.content_type().as_deref(),
        Some("application/json"),
        "{what}: content type; body {body}"
    );
    assert_eq!(
        reply.messages.len(),
        1,
        "{what}: one JSON-RPC message; body {body}"
    );
    let m = reply.messages[0].clone();
    assert_eq!(m["jsonrpc"], json!("2.0"), "{what}: {m}");
    assert!(m["error"]["code"].is_i64(), "{what}: error.code: {m}");
    assert!(
        m["error"]["message"].is_string(),
        "{what}: error.message: {m}"
    );
    assert!(m.get("result").is_none(), "{what}: {m}");
    assert_valid(V2025, None, std::slice::from_ref(&m));
    m
}

fn with_header(
    mut headers: Vec<(String, String)>,
    name: &str,
    value: &str,
) -> Vec<(String, String)> {
    headers.push((name.to_owned(), value.to_owned()));
    headers
}

/// Polls `text()` until it contains every needle, or `timeout` passes.
async fn eventually_contains(
    text: impl Fn() -> String,
    needles: &[&str],
    timeout: Duration,
) -> Result<(), String> {
    let deadline = Instant::now() + timeout;
    loop {
        let t = text();
        if needles.iter().all(|n| t.contains(n)) {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(t);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

// ---------------------------------------------------------------------------------------
// 1. Access control
// ---------------------------------------------------------------------------------------

const TOKEN_A: &str = "tok-alice-7d1e0c55a9b34f21";
const TOKEN_B: &str = "tok-bob-2b94f0e6c1d84a73";

fn bearer(token: &str) -> (String, String) {
    ("Authorization".to_owned(), format!("Bearer {token}"))
}

/// `serve --token-file F`: no token and a wrong token get 401 with a Bearer challenge and a
/// JSON-RPC body; a listed token opens a session; another listed token cannot use it (403),
/// and the owner still can.
#[tokio::test]
async fn access_control_bearer_tokens_and_session_owner() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens");
    std::fs::write(
        &tokens,
        format!("# name token scopes\nalice {TOKEN_A} tools:call\nbob {TOKEN_B} tools:call,tools:write\n"),
    )
    .unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&tokens, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    let tokens = tokens.to_str().unwrap().to_owned();
    let server = Spawned::serve(dir, "127.0.0.1:0", &["--token-file", &tokens]).await;
    let client = http_client();
    let init = initialize_request(1, V2025);
    let ctx = || format!("stderr:\n{}", server.stderr_text());

    // No token.
    let reply = post(&client, &server.url, &post_headers(None, None), &init).await;
    assert_rpc_error(&reply, 401, "initialize without a token");
    let challenge = reply
        .header("www-authenticate")
        .unwrap_or_else(|| panic!("401 without WWW-Authenticate: {:?}", reply.headers));
    assert!(challenge.starts_with("Bearer"), "challenge {challenge:?}");
    assert!(
        reply.header("mcp-session-id").is_none(),
        "401 opened a session"
    );

    // A token that is not in the file (and a non-Bearer scheme).
    let reply = post(
        &client,
        &server.url,
        &with_header(
            post_headers(None, None),
            "Authorization",
            "Bearer not-a-listed-token",
        ),
        &init,
    )
    .await;
    assert_rpc_error(&reply, 401, "initialize with a wrong token");
    let challenge = reply.header("www-authenticate").unwrap_or("");
    assert!(
        challenge.starts_with("Bearer") && challenge.contains("invalid_token"),
        "a wrong token's challenge should say error=\"invalid_token\" (RFC 6750 §3.1): {challenge:?}"
    );
    let reply = post(
        &client,
        &server.url,
        &with_header(
            post_headers(None, None),
            "Authorization",
            &format!("Basic {TOKEN_A}"),
        ),
        &init,
    )
    .await;
    assert_rpc_error(&reply, 401, "initialize with Basic instead of Bearer");
    assert!(
        reply
            .header("www-authenticate")
            .is_some_and(|c| c.starts_with("Bearer"))
    );

    // GET and DELETE need a token too.
    for method in ["GET", "DELETE"] {
        let reply = http_send(
            &client,
            method,
            &server.url,
            &[("Accept".to_owned(), "text/event-stream".to_owned())],
            None,
            &[],
        )
        .await
        .unwrap();
        assert_rpc_error(&reply, 401, &format!("{method} without a token"));
        assert!(
            reply
                .header("www-authenticate")
                .is_some_and(|c| c.starts_with("Bearer"))
        );
    }

    // Alice opens a session.
    let mut headers_a = post_headers(None, None);
    headers_a.push(bearer(TOKEN_A));
    let reply = post(&client, &server.url, &headers_a, &init).await;
    let result = answer(&reply, V2025, "initialize", 1);
    assert_eq!(
        result["result"]["protocolVersion"],
        json!(V2025),
        "{}",
        ctx()
    );
    let session = reply
        .header("mcp-session-id")
        .unwrap_or_else(|| panic!("no Mcp-Session-Id; {}", ctx()))
        .to_owned();
    let mut in_a = post_headers(Some(&session), Some(V2025));
    in_a.push(bearer(TOKEN_A));
    let reply = post(
        &client,
        &server.url,
        &in_a,
        &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    )
    .await;
    assert_eq!(reply.status, 202, "notifications/initialized: {reply:?}");
    let reply = post(&client, &server.url, &in_a, &rpc(2, "tools/list", None)).await;
    let list = answer(&reply, V2025, "tools/list", 2);
    assert!(
        tool_names(&list["result"]).contains(&ANY_TOOL.to_owned()),
        "{list}"
    );

    // Bob, with a valid token of his own, cannot use Alice's session.
    let mut in_a_as_b = post_headers(Some(&session), Some(V2025));
    in_a_as_b.push(bearer(TOKEN_B));
    let reply = post(
        &client,
        &server.url,
        &in_a_as_b,
        &rpc(3, "tools/list", None),
    )
    .await;
    let err = assert_rpc_error(&reply, 403, "tools/list in another token's session");
    assert!(
        reply.messages.iter().all(|m| m.get("result").is_none()),
        "403 must not carry a result: {err}"
    );
    let reply = post(
        &client,
        &server.url,
        &in_a_as_b,
        &json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": ANY_TOOL}}),
    )
    .await;
    assert_rpc_error(&reply, 403, "tools/call in another token's session");
    let mut get_as_b = get_headers(&session, V2025);
    get_as_b.push(bearer(TOKEN_B));
    let reply = http_send(&client, "GET", &server.url, &get_as_b, None, &[])
        .await
        .unwrap();
    assert_rpc_error(&reply, 403, "GET stream of another token's session");
    let mut delete_as_b = vec![
        ("Mcp-Session-Id".to_owned(), session.clone()),
        ("MCP-Protocol-Version".to_owned(), V2025.to_owned()),
    ];
    delete_as_b.push(bearer(TOKEN_B));
    let reply = http_send(&client, "DELETE", &server.url, &delete_as_b, None, &[])
        .await
        .unwrap();
    assert_rpc_error(&reply, 403, "DELETE of another token's session");

    // The refusals did not harm the session: Alice still uses it.
    let reply = post(
        &client,
        &server.url,
        &in_a,
        &json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": ANY_TOOL, "arguments": {}}}),
    )
    .await;
    let call = answer(&reply, V2025, "tools/call", 5);
    assert_ne!(call["result"]["isError"], json!(true), "{call}");
}

/// A non-loopback bind without tokens is refused with a message that names the ways out.
#[tokio::test]
async fn public_bind_without_tokens_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_str().unwrap();
    let out = run_to_exit(
        &["serve", "--listen", "0.0.0.0:0", "--data-dir", data],
        START_TIMEOUT,
    )
    .await
    .expect("serve --listen 0.0.0.0:0 without tokens kept running (it must refuse to start)");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "exit status {}; stderr:\n{stderr}",
        out.status
    );
    assert!(
        stderr.contains("--token-file") && stderr.contains("--insecure-no-auth"),
        "stderr should name --token-file and --insecure-no-auth:\n{stderr}"
    );
    assert!(
        !stderr.contains("listening"),
        "it said it was listening:\n{stderr}"
    );
    assert!(
        out.stdout.is_empty(),
        "stdout: {:?}",
        String::from_utf8_lossy(&out.stdout)
    );
}

/// With `--insecure-no-auth` the same bind starts (and is reachable without a token). The
/// server is killed as soon as that is established.
#[tokio::test]
async fn public_bind_with_insecure_no_auth_starts() {
    let server = Spawned::serve(
        tempfile::tempdir().unwrap(),
        "0.0.0.0:0",
        &["--insecure-no-auth"],
    )
    .await;
    let client = http_client();
    let reply = post(
        &client,
        &server.url,
        &post_headers(None, None),
        &initialize_request(1, V2025),
    )
    .await;
    answer(&reply, V2025, "initialize", 1);
}

// ---------------------------------------------------------------------------------------
// 2. Stateless mode
// ---------------------------------------------------------------------------------------

/// `--stateless`: initialize has no session id; tools/list and tools/call work in separate
/// POSTs without a session; GET is 405 with an Allow header.
#[tokio::test]
async fn stateless_mode_serves_without_sessions() {
    let server = HttpServer::start(&["--stateless"], &Auth::None).await;
    let client = http_client();
    let ctx = || format!("server output:\n{}", server.output_text());

    let reply = post(
        &client,
        server.url(),
        &post_headers(None, None),
        &initialize_request(1, V2025),
    )
    .await;
    let init = answer(&reply, V2025, "initialize", 1);
    assert_eq!(init["result"]["protocolVersion"], json!(V2025));
    assert!(
        reply.header("mcp-session-id").is_none(),
        "stateless initialize answered with Mcp-Session-Id {:?}; {}",
        reply.header("mcp-session-id"),
        ctx()
    );

    let headers = post_headers(None, Some(V2025));
    let reply = post(&client, server.url(), &headers, &rpc(2, "tools/list", None)).await;
    let list = answer(&reply, V2025, "tools/list", 2);
    assert!(
        tool_names(&list["result"]).contains(&ANY_TOOL.to_owned()),
        "{list}"
    );
    assert!(reply.header("mcp-session-id").is_none());

    let reply = post(
        &client,
        server.url(),
        &headers,
        &rpc(
            3,
            "tools/call",
            Some(json!({"name": ANY_TOOL, "arguments": {}})),
        ),
    )
    .await;
    let call = answer(&reply, V2025, "tools/call", 3);
    assert_ne!(call["result"]["isError"], json!(true), "{call}");
    let text = call["result"]["content"][0]["text"].as_str().unwrap_or("");
    assert!(text.contains("OmniForge"), "instructions text: {call}");

    // Accept: application/json only also works without a session.
    let json_only = vec![
        ("Content-Type".to_owned(), "application/json".to_owned()),
        ("Accept".to_owned(), "application/json".to_owned()),
        ("MCP-Protocol-Version".to_owned(), V2025.to_owned()),
    ];
    let reply = post(
        &client,
        server.url(),
        &json_only,
        &rpc(4, "tools/list", None),
    )
    .await;
    assert_eq!(
        reply.content_type().as_deref(),
        Some("application/json"),
        "{reply:?}"
    );
    answer(&reply, V2025, "tools/list", 4);

    let reply = http_send(
        &client,
        "GET",
        server.url(),
        &[("Accept".to_owned(), "text/event-stream".to_owned())],
        None,
        &[],
    )
    .await
    .unwrap();
    assert_rpc_error(&reply, 405, "GET in stateless mode");
    let allow = reply
        .header("allow")
        .unwrap_or_else(|| panic!("405 without Allow: {:?}", reply.headers));
    let allowed: Vec<String> = allow
        .split(',')
        .map(|m| m.trim().to_ascii_uppercase())
        .collect();
    assert!(allowed.contains(&"POST".to_owned()), "Allow: {allow}");
    assert!(
        !allowed.contains(&"GET".to_owned()),
        "Allow lists the refused GET: {allow}"
    );
}

// ---------------------------------------------------------------------------------------
// 3. Body limit
// ---------------------------------------------------------------------------------------

/// `--max-body-bytes 1000`: a 5000-byte POST gets 413 with a JSON-RPC error; the session
/// and the server keep serving.
#[tokio::test]
async fn oversized_body_gets_413_and_server_keeps_serving() {
    let server = HttpServer::start(&["--max-body-bytes", "1000"], &Auth::None).await;
    let client = http_client();
    let session = init_http(&client, &server, V2025, true).await.unwrap();
    let headers = post_headers(Some(&session.id), Some(&session.version));

    let mut big =
        json!({"jsonrpc": "2.0", "id": 7, "method": "ping", "params": {"_meta": {"pad": ""}}});
    let pad = 5000 - big.to_string().len();
    big["params"]["_meta"]["pad"] = json!("x".repeat(pad));
    let body = big.to_string().into_bytes();
    assert_eq!(body.len(), 5000);
    let reply = http_send(&client, "POST", server.url(), &headers, Some(body), &[])
        .await
        .unwrap();
    let err = assert_rpc_error(&reply, 413, "5000-byte POST");
    assert!(
        err.get("id").is_none() || err["id"] == Value::Null || err["id"] == json!(7),
        "{err}"
    );

    // The same session still answers, and so does a new one.
    let reply = post(&client, server.url(), &headers, &rpc(8, "ping", None)).await;
    let pong = answer(&reply, V2025, "ping", 8);
    assert_eq!(pong["result"], json!({}));
    init_http(&client, &server, V2025, true)
        .await
        .unwrap_or_else(|e| panic!("{e}; server output:\n{}", server.output_text()));
}

// ---------------------------------------------------------------------------------------
// 4. /healthz
// ---------------------------------------------------------------------------------------

/// `GET /healthz`: 200 JSON with status "ok", the version, and tool counts per source.
#[tokio::test]
async fn healthz_reports_status_version_and_tool_counts() {
    let (_m, path) = manifest_dir(&[("t1", "d"), ("t2", "d"), ("t3", "d")]);
    let server = HttpServer::start(&["--manifest", path.to_str().unwrap()], &Auth::None).await;
    let client = http_client();
    let reply = http_send(
        &client,
        "GET",
        &format!("{}/healthz", server.base()),
        &[],
        None,
        &[],
    )
    .await
    .unwrap();
    assert_eq!(reply.status, 200, "{reply:?}");
    assert_eq!(reply.content_type().as_deref(), Some("application/json"));
    let body: Value = serde_json::from_slice(&reply.body).expect("healthz body is JSON");
    assert_eq!(body["status"], json!("ok"), "{body}");
    assert_eq!(body["version"], json!(env!("CARGO_PKG_VERSION")), "{body}");
    assert_eq!(
        body["tools"],
        json!({"builtin": BUILTINS.len(), "manifest": 3, "stored": 0}),
        "{body}"
    );
}

// ---------------------------------------------------------------------------------------
// 5. Pagination
// ---------------------------------------------------------------------------------------

/// `--page-size 1` over stdio: following nextCursor yields every tool once, in catalog
/// order, and the last page has no nextCursor; a bad cursor is -32602.
#[tokio::test]
async fn tools_list_pagination_over_stdio() {
    let (_m, path) = manifest_dir(&[("t1", "d"), ("t2", "d"), ("t3", "d")]);
    let mut server =
        StdioServer::start(&["--page-size", "1", "--manifest", path.to_str().unwrap()]);
    let rev = init_stdio(&mut server, V2025).await.unwrap();
    assert_eq!(rev, V2025);

    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    let mut id = 10;
    loop {
        id += 1;
        let params = cursor.as_ref().map(|c| json!({"cursor": c}));
        let reply = stdio_call(&mut server, &rev, rpc(id, "tools/list", params)).await;
        let result = &reply["result"];
        let names = tool_names(result);
        assert_eq!(names.len(), 1, "page {} of size 1: {reply}", seen.len() + 1);
        seen.extend(names);
        match result.get("nextCursor") {
            None => break,
            Some(Value::String(c)) => cursor = Some(c.clone()),
            Some(other) => panic!("nextCursor is not a string: {other}"),
        }
        assert!(
            seen.len() < BUILTINS.len() + 10,
            "nextCursor never ends: {seen:?}"
        );
    }
    assert_eq!(seen, with_builtins(&["t1", "t2", "t3"]));

    for bad in ["not-a-cursor", "", "bzo5OTk"] {
        let reply = stdio_call(
            &mut server,
            &rev,
            rpc(99, "tools/list", Some(json!({"cursor": bad}))),
        )
        .await;
        assert_eq!(
            reply["error"]["code"],
            json!(-32602),
            "cursor {bad:?}: {reply}"
        );
        assert!(reply.get("result").is_none(), "{reply}");
    }
}

// ---------------------------------------------------------------------------------------
// 6. Catalog: collisions and call errors
// ---------------------------------------------------------------------------------------

/// A manifest tool named like a built-in is skipped with a warning; manifest tools have no
/// upstream; unknown tools, `null` arguments and schema mismatches are tool errors.
#[tokio::test]
async fn manifest_name_collision_and_call_errors() {
    let (_m, path) = manifest_dir(&[
        (ANY_TOOL, "manifest copy that must be skipped"),
        ("t1", "d"),
    ]);
    let mut server = StdioServer::start(&["--manifest", path.to_str().unwrap()]);
    let rev = init_stdio(&mut server, V2025).await.unwrap();

    let reply = stdio_call(&mut server, &rev, rpc(1, "tools/list", None)).await;
    let tools = reply["result"]["tools"].as_array().unwrap().clone();
    let named: Vec<&Value> = tools
        .iter()
        .filter(|t| t["name"] == json!(ANY_TOOL))
        .collect();
    assert_eq!(
        named.len(),
        1,
        "{ANY_TOOL} listed {} times: {reply}",
        named.len()
    );
    let description = named[0]["description"].as_str().unwrap_or("");
    assert!(
        description.contains("OmniForge") && !description.contains("manifest copy"),
        "{ANY_TOOL} is not the built-in: {}",
        named[0]
    );
    assert_eq!(tool_names(&reply["result"]), with_builtins(&["t1"]));
    eventually_contains(
        || server.stderr_text(),
        &["collision", ANY_TOOL],
        Duration::from_secs(5),
    )
    .await
    .unwrap_or_else(|stderr| panic!("no collision warning naming {ANY_TOOL} on stderr:\n{stderr}"));

    let call = |id: u64, params: Value| rpc(id, "tools/call", Some(params));
    let text_of = |reply: &Value| -> String {
        assert_eq!(reply["result"]["isError"], json!(true), "{reply}");
        reply["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_else(|| panic!("no text content: {reply}"))
            .to_owned()
    };

    let reply = stdio_call(
        &mut server,
        &rev,
        call(2, json!({"name": "t1", "arguments": {}})),
    )
    .await;
    let text = text_of(&reply);
    assert!(text.contains("no upstream"), "manifest tool call: {text:?}");

    let reply = stdio_call(
        &mut server,
        &rev,
        call(3, json!({"name": "no_such_tool", "arguments": {}})),
    )
    .await;
    assert_eq!(text_of(&reply), "Unknown or inactive tool");

    let reply = stdio_call(
        &mut server,
        &rev,
        call(4, json!({"name": ANY_TOOL, "arguments": null})),
    )
    .await;
    assert_eq!(text_of(&reply), "arguments must be a JSON object");

    let reply = stdio_call(
        &mut server,
        &rev,
        call(5, json!({"name": ANY_TOOL, "arguments": {"x": 1}})),
    )
    .await;
    let text = text_of(&reply);
    assert!(
        text.starts_with("Arguments do not match inputSchema"),
        "{{\"x\":1}} against additionalProperties:false: {text:?}"
    );

    // And the built-in itself still works.
    let reply = stdio_call(&mut server, &rev, call(6, json!({"name": ANY_TOOL}))).await;
    assert_ne!(reply["result"]["isError"], json!(true), "{reply}");
}

// ---------------------------------------------------------------------------------------
// 7. Manifests: start-up errors and hot reload
// ---------------------------------------------------------------------------------------

/// A malformed manifest at start-up ends the process with an error naming the file, the
/// tool and the field, for both transports.
#[tokio::test]
async fn malformed_manifest_at_startup_is_fatal() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("broken-manifest.json");
    let text = json!({"project": "p", "tools": [
        {"name": "good_tool", "inputSchema": {"type": "object"}, "procedure": "/p.v1.S/Good"},
        {"name": "bad_tool", "inputSchema": {"type": "string"}, "procedure": "/p.v1.S/Bad"},
    ]});
    std::fs::write(&path, text.to_string()).unwrap();
    let manifest = path.to_str().unwrap();
    let data = dir.path().join("data");
    let data = data.to_str().unwrap();
    let runs: [&[&str]; 2] = [
        &["stdio", "--data-dir", data, "--manifest", manifest],
        &[
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--data-dir",
            data,
            "--insecure-no-auth",
            "--manifest",
            manifest,
        ],
    ];
    for args in runs {
        let out = run_to_exit(args, START_TIMEOUT)
            .await
            .unwrap_or_else(|| panic!("{args:?} kept running with a malformed manifest"));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success(),
            "{args:?}: exit {}; stderr:\n{stderr}",
            out.status
        );
        for needle in [manifest, "bad_tool", "inputSchema"] {
            assert!(
                stderr.contains(needle),
                "{args:?}: stderr does not name {needle:?}:\n{stderr}"
            );
        }
        assert!(
            out.stdout.is_empty(),
            "{args:?}: stdout {:?}",
            String::from_utf8_lossy(&out.stdout)
        );
    }
}

/// Over an HTTP session with its GET stream open, replacing the manifest (temp + rename)
/// delivers list_changed on the GET stream and tools/list shows the new tools; a broken
/// rewrite keeps the previous tools.
#[tokio::test]
async fn manifest_hot_reload_over_http_get_stream() {
    let (_m, path) = manifest_dir(&[("t1", "d"), ("t2", "d"), ("t3", "d")]);
    let server = HttpServer::start(&["--manifest", path.to_str().unwrap()], &Auth::None).await;
    let client = http_client();
    let session = init_http(&client, &server, V2025, true).await.unwrap();
    let headers = post_headers(Some(&session.id), Some(&session.version));
    let list = |id: u64| {
        let client = &client;
        let headers = &headers;
        let url = server.url().to_owned();
        async move {
            let reply = post(client, &url, headers, &rpc(id, "tools/list", None)).await;
            tool_names(&answer(&reply, V2025, "tools/list", id)["result"])
        }
    };
    assert_eq!(list(2).await, with_builtins(&["t1", "t2", "t3"]));

    let (status, _, stream) = open_stream(
        &client,
        reqwest::Method::GET,
        server.url(),
        &get_headers(&session.id, &session.version),
        None,
    )
    .await;
    assert_eq!(
        status,
        200,
        "GET stream: {stream:?}",
        stream = stream.as_ref().err()
    );
    let mut stream = stream.unwrap_or_else(|body| panic!("GET is not an SSE stream: {body}"));

    let started = Instant::now();
    replace_file(&path, &manifest(&[("t1", "d"), ("t4", "new")]));
    let (note, before) = stream
        .wait_for(CHANGE_TIMEOUT, is_list_changed)
        .await
        .unwrap_or_else(|e| {
            panic!(
                "GET stream after the rewrite: {e}; server output:\n{}",
                server.output_text()
            )
        });
    eprintln!("list_changed after {:?}", started.elapsed());
    assert_valid(V2025, None, &before);
    assert_valid(V2025, None, std::slice::from_ref(&note));
    assert_eq!(list(3).await, with_builtins(&["t1", "t4"]));

    // A broken rewrite: the server says so on stderr and keeps the tools it had.
    replace_file(
        &path,
        r#"{"project": "p", "tools": [{"name": "t5", "inputSchema": "#,
    );
    eventually_contains(|| server.output_text(), &["not valid"], CHANGE_TIMEOUT)
        .await
        .unwrap_or_else(|out| panic!("no log line about the invalid manifest:\n{out}"));
    assert_eq!(list(4).await, with_builtins(&["t1", "t4"]));
    let late = stream.drain_now();
    assert!(
        !late.iter().any(is_list_changed),
        "a broken rewrite announced list_changed: {late:?}"
    );
    assert_valid(V2025, None, &late);
}

// ---------------------------------------------------------------------------------------
// 8. The 2026-07-28 revision over HTTP
// ---------------------------------------------------------------------------------------

/// The `_meta` every 2026-07-28 request carries.
fn meta_2026() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": V2026,
        "io.modelcontextprotocol/clientCapabilities": {}
    })
}

/// POST headers of a 2026-07-28 request: the version header, and `Mcp-Method`, which
/// 2026-07-28 clients must send (SEP-2243).
fn headers_2026(method: &str) -> Vec<(String, String)> {
    with_header(post_headers(None, Some(V2026)), "Mcp-Method", method)
}

/// Without a session: server/discover lists the supported versions, tools/list works, and
/// subscriptions/listen keeps a stream open that receives list_changed after a rewrite.
#[tokio::test]
async fn rev_2026_discover_tools_list_and_subscriptions_listen() {
    let (_m, path) = manifest_dir(&[("t1", "d")]);
    let server = HttpServer::start(&["--manifest", path.to_str().unwrap()], &Auth::None).await;
    let client = http_client();
    let ctx = || format!("server output:\n{}", server.output_text());

    let reply = post(
        &client,
        server.url(),
        &headers_2026("server/discover"),
        &rpc(1, "server/discover", Some(json!({"_meta": meta_2026()}))),
    )
    .await;
    let discover = answer(&reply, V2026, "server/discover", 1);
    assert!(
        reply.header("mcp-session-id").is_none(),
        "discover opened a session"
    );
    let versions: Vec<&str> = discover["result"]["supportedVersions"]
        .as_array()
        .unwrap_or_else(|| panic!("no supportedVersions: {discover}; {}", ctx()))
        .iter()
        .filter_map(Value::as_str)
        .collect();
    for v in ALL_VERSIONS {
        assert!(
            versions.contains(&v),
            "supportedVersions {versions:?} lacks {v}"
        );
    }

    let reply = post(
        &client,
        server.url(),
        &headers_2026("tools/list"),
        &rpc(2, "tools/list", Some(json!({"_meta": meta_2026()}))),
    )
    .await;
    let list = answer(&reply, V2026, "tools/list", 2);
    assert_eq!(tool_names(&list["result"]), with_builtins(&["t1"]));
    assert!(
        reply.header("mcp-session-id").is_none(),
        "tools/list opened a session"
    );

    // The same request without `Mcp-Method` is refused: 400 with a HeaderMismatchError
    // (-32020), which is why the requests above carry the header.
    let reply = post(
        &client,
        server.url(),
        &post_headers(None, Some(V2026)),
        &rpc(9, "tools/list", Some(json!({"_meta": meta_2026()}))),
    )
    .await;
    let body = String::from_utf8_lossy(&reply.body);
    assert_eq!(reply.status, 400, "tools/list without Mcp-Method: {body}");
    assert_eq!(reply.messages.len(), 1, "{body}");
    let err = &reply.messages[0];
    assert_eq!(err["error"]["code"], json!(-32020), "{err}");
    schema::check(V2026, "HeaderMismatchError", err).unwrap();

    let listen_id = 3;
    let (status, headers, stream) = open_stream(
        &client,
        reqwest::Method::POST,
        server.url(),
        &headers_2026("subscriptions/listen"),
        Some(rpc(
            listen_id,
            "subscriptions/listen",
            Some(json!({"_meta": meta_2026(), "notifications": {"toolsListChanged": true}})),
        )),
    )
    .await;
    let mut stream = stream.unwrap_or_else(|body| {
        panic!(
            "subscriptions/listen: HTTP {status} {headers:?} is not an SSE stream: {body}; {}",
            ctx()
        )
    });
    assert_eq!(status, 200);
    let subscribed = |m: &Value| {
        m.pointer("/params/_meta/io.modelcontextprotocol~1subscriptionId")
            == Some(&json!(listen_id))
    };
    let (ack, before) = stream
        .wait_for(CHANGE_TIMEOUT, |m| {
            m["method"] == json!("notifications/subscriptions/acknowledged")
        })
        .await
        .unwrap_or_else(|e| panic!("no acknowledgement: {e}; {}", ctx()));
    assert!(
        before.is_empty(),
        "messages before the acknowledgement: {before:?}"
    );
    assert_valid(V2026, None, std::slice::from_ref(&ack));
    assert!(
        subscribed(&ack),
        "acknowledgement without the subscription id: {ack}"
    );
    assert_eq!(
        ack["params"]["notifications"]["toolsListChanged"],
        json!(true),
        "{ack}"
    );

    replace_file(&path, &manifest(&[("t1", "d"), ("t2", "d")]));
    let (note, before) = stream
        .wait_for(CHANGE_TIMEOUT, is_list_changed)
        .await
        .unwrap_or_else(|e| panic!("subscriptions/listen after the rewrite: {e}; {}", ctx()));
    assert_valid(V2026, None, &before);
    assert_valid(V2026, None, std::slice::from_ref(&note));
    assert!(
        subscribed(&note),
        "list_changed without the subscription id: {note}"
    );

    let reply = post(
        &client,
        server.url(),
        &headers_2026("tools/list"),
        &rpc(4, "tools/list", Some(json!({"_meta": meta_2026()}))),
    )
    .await;
    let list = answer(&reply, V2026, "tools/list", 4);
    assert_eq!(tool_names(&list["result"]), with_builtins(&["t1", "t2"]));
}

// ---------------------------------------------------------------------------------------
// 9. logging/setLevel and ping
// ---------------------------------------------------------------------------------------

/// Over stdio, under every handshake revision: logging/setLevel and ping answer `{}`.
#[tokio::test]
async fn logging_set_level_and_ping_over_stdio() {
    for version in HANDSHAKE_VERSIONS {
        let mut server = StdioServer::start(&[]);
        let init = stdio_call(&mut server, version, initialize_request(0, version)).await;
        assert_eq!(init["result"]["protocolVersion"], json!(version), "{init}");
        server
            .send_line(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)
            .await
            .unwrap();
        let reply = stdio_call(
            &mut server,
            version,
            rpc(1, "logging/setLevel", Some(json!({"level": "debug"}))),
        )
        .await;
        assert_eq!(reply["result"], json!({}), "{version}: {reply}");
        let reply = stdio_call(&mut server, version, rpc(2, "ping", None)).await;
        assert_eq!(reply["result"], json!({}), "{version}: {reply}");
    }
}

/// Over HTTP, in a session of every handshake revision: logging/setLevel and ping answer `{}`.
#[tokio::test]
async fn logging_set_level_and_ping_over_http() {
    let server = HttpServer::start(&[], &Auth::None).await;
    let client = http_client();
    for version in HANDSHAKE_VERSIONS {
        let session = init_http(&client, &server, version, true).await.unwrap();
        assert_eq!(session.version, version);
        let header = (version >= "2025-06-18").then_some(version);
        let headers = post_headers(Some(&session.id), header);
        let reply = post(
            &client,
            server.url(),
            &headers,
            &rpc(1, "logging/setLevel", Some(json!({"level": "warning"}))),
        )
        .await;
        let set = answer(&reply, version, "logging/setLevel", 1);
        assert_eq!(set["result"], json!({}), "{version}: {set}");
        let reply = post(&client, server.url(), &headers, &rpc(2, "ping", None)).await;
        let pong = answer(&reply, version, "ping", 2);
        assert_eq!(pong["result"], json!({}), "{version}: {pong}");
    }
}

// ---------------------------------------------------------------------------------------
// 10. Graceful shutdown
// ---------------------------------------------------------------------------------------

/// Initializes a 2025-11-25 session at `url` (with `notifications/initialized`); its id.
async fn open_session(client: &reqwest::Client, url: &str) -> String {
    let reply = post(
        client,
        url,
        &post_headers(None, None),
        &initialize_request(1, V2025),
    )
    .await;
    answer(&reply, V2025, "initialize", 1);
    let session = reply
        .header("mcp-session-id")
        .expect("session id")
        .to_owned();
    let reply = post(
        client,
        url,
        &post_headers(Some(&session), Some(V2025)),
        &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    )
    .await;
    assert_eq!(reply.status, 202);
    session
}

/// SIGTERM to `serve` with a session's GET stream open: exit status 0 within the grace
/// period (2 s) plus 5 s.
#[tokio::test]
async fn sigterm_serve_with_open_get_stream_exits_cleanly() {
    let mut server = Spawned::serve(
        tempfile::tempdir().unwrap(),
        "127.0.0.1:0",
        &["--shutdown-grace", "2s"],
    )
    .await;
    let client = http_client();
    let session = open_session(&client, &server.url).await;
    let (status, _, stream) = open_stream(
        &client,
        reqwest::Method::GET,
        &server.url,
        &get_headers(&session, V2025),
        None,
    )
    .await;
    assert_eq!(status, 200);
    let _stream = stream.unwrap_or_else(|body| panic!("GET is not an SSE stream: {body}"));
    // The server is up and answering before the signal.
    let health = http_send(
        &client,
        "GET",
        &format!("{}/healthz", server.server.base),
        &[],
        None,
        &[],
    )
    .await
    .unwrap();
    assert_eq!(health.status, 200);

    let sent = Instant::now();
    server.sigterm();
    let limit = Duration::from_secs(2 + 5);
    let status = server.wait_exit(limit).await.unwrap_or_else(|| {
        panic!(
            "still running {limit:?} after SIGTERM; stderr:\n{}",
            server.stderr_text()
        )
    });
    eprintln!(
        "serve exited {:?} after SIGTERM with {status}",
        sent.elapsed()
    );
    assert!(
        status.success(),
        "exit status {status}; stderr:\n{}",
        server.stderr_text()
    );
}

/// SIGTERM to `serve` while a tool call runs: the call finishes inside the grace period and
/// its answer still reaches the client on the POST's stream before the server exits.
#[tokio::test]
async fn sigterm_serve_delivers_a_call_that_finishes_within_the_grace() {
    let mut server = Spawned::serve(
        tempfile::tempdir().unwrap(),
        "127.0.0.1:0",
        &["--shutdown-grace", "30s"],
    )
    .await;
    let client = http_client();
    let session = open_session(&client, &server.url).await;
    let headers = post_headers(Some(&session), Some(V2025));
    let code = "import time, omniforge\nomniforge.progress(1, 2, 'asleep')\ntime.sleep(3)\nprint('awake')\n";
    // The environment build may take a while on a loaded machine: read the stream, not a body.
    let (status, _, stream) = open_stream(
        &client,
        reqwest::Method::POST,
        &server.url,
        &headers,
        Some(
            json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "omniforge_create_tool",
            "arguments": {"name": "nap", "description": "Sleeps 3 s.", "code": code}}}),
        ),
    )
    .await;
    assert_eq!(status, 200);
    let (created, _) = stream
        .unwrap_or_else(|body| panic!("create is not an SSE stream: {body}"))
        .wait_for(Duration::from_secs(300), |m| m["id"] == json!(2))
        .await
        .unwrap_or_else(|e| panic!("no answer to create: {e}"));
    assert_ne!(created["result"]["isError"], json!(true), "{created}");

    let (status, _, stream) = open_stream(
        &client,
        reqwest::Method::POST,
        &server.url,
        &headers,
        Some(
            json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
            "name": "nap", "arguments": {}, "_meta": {"progressToken": "nap"}}}),
        ),
    )
    .await;
    assert_eq!(status, 200);
    let mut stream = stream.unwrap_or_else(|body| panic!("the call is not an SSE stream: {body}"));
    // The script is running once its progress arrives: only then the signal.
    stream
        .wait_for(Duration::from_secs(60), |m| {
            m["method"] == json!("notifications/progress")
        })
        .await
        .unwrap_or_else(|e| panic!("no progress from the call: {e}"));
    let sent = Instant::now();
    server.sigterm();
    let (done, _) = stream
        .wait_for(Duration::from_secs(30), |m| m["id"] == json!(3))
        .await
        .unwrap_or_else(|e| {
            panic!(
                "the call's answer was lost after SIGTERM: {e}; stderr:\n{}",
                server.stderr_text()
            )
        });
    assert_ne!(done["result"]["isError"], json!(true), "{done}");
    assert!(done["result"].to_string().contains("awake"), "{done}");
    let status = server
        .wait_exit(Duration::from_secs(30))
        .await
        .expect("serve still running after the call was answered");
    eprintln!("answered and exited {:?} after SIGTERM", sent.elapsed());
    assert!(status.success(), "exit status {status}");
}

/// stdin closed while a tool call runs: the call finishes, its answer is written to stdout,
/// then the server exits 0 (EOF is how a stdio client says "no more requests", not "drop the
/// calls I am waiting for").
#[tokio::test]
async fn stdio_eof_answers_the_calls_in_flight_before_exiting() {
    let mut server = StdioServer::start(&[]);
    init_stdio(&mut server, V2025).await.expect("initialize");
    let code = "import time, omniforge\nomniforge.progress(1, 2, 'asleep')\ntime.sleep(3)\nprint('awake')\n";
    let create = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "omniforge_create_tool",
        "arguments": {"name": "nap", "description": "Sleeps 3 s.", "code": code}}});
    server.send_line(&create.to_string()).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(300);
    let created = loop {
        let m = server
            .read_message(deadline.saturating_duration_since(Instant::now()))
            .await
            .unwrap_or_else(|e| panic!("no answer to create: {e}"));
        if m["id"] == json!(2) {
            break m;
        }
    };
    assert_ne!(created["result"]["isError"], json!(true), "{created}");
    let call = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
        "name": "nap", "arguments": {}, "_meta": {"progressToken": "nap"}}});
    server.send_line(&call.to_string()).await.unwrap();
    loop {
        let m = server
            .read_message(Duration::from_secs(60))
            .await
            .unwrap_or_else(|e| panic!("no progress from the call: {e}"));
        if m["method"] == json!("notifications/progress") {
            break;
        }
    }
    let status = server
        .close(Duration::from_secs(30))
        .await
        .unwrap_or_else(|| panic!("still running after EOF: {}", server.stderr_text()));
    let out = String::from_utf8_lossy(&server.stdout_bytes()).into_owned();
    let answer = out
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .find(|m| m["id"] == json!(3))
        .unwrap_or_else(|| {
            panic!(
                "the call's answer was lost at EOF; stdout:\n{out}\nstderr:\n{}",
                server.stderr_text()
            )
        });
    assert_ne!(answer["result"]["isError"], json!(true), "{answer}");
    assert!(answer["result"].to_string().contains("awake"), "{answer}");
    assert!(status.success(), "exit status {status}");
}

/// SIGTERM to `stdio` (stdin still open, session initialized): exits promptly with status 0.
#[tokio::test]
async fn sigterm_stdio_exits_promptly() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(BIN)
        .arg("stdio")
        .arg("--data-dir")
        .arg(dir.path())
        .env("NO_COLOR", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let pid = child.id().unwrap().to_string();
    let stderr: Captured = Arc::default();
    {
        let sink = stderr.clone();
        let mut pipe = BufReader::new(child.stderr.take().unwrap());
        tokio::spawn(async move {
            let mut line = Vec::new();
            while let Ok(n) = pipe.read_until(b'\n', &mut line).await {
                if n == 0 {
                    break;
                }
                sink.lock().unwrap().append(&mut line);
            }
        });
    }
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap()).lines();
    let line = format!("{}\n", initialize_request(0, V2025));
    stdin.write_all(line.as_bytes()).await.unwrap();
    stdin.flush().await.unwrap();
    let answer = tokio::time::timeout(REPLY_TIMEOUT, stdout.next_line())
        .await
        .expect("no initialize answer in time")
        .unwrap()
        .expect("stdout closed before the initialize answer");
    let answer: Value = serde_json::from_str(&answer).unwrap();
    assert_valid(V2025, Some("initialize"), std::slice::from_ref(&answer));
    stdin
        .write_all(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n")
        .await
        .unwrap();
    stdin.flush().await.unwrap();

    let sent = Instant::now();
    let status = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap();
    assert!(status.success(), "kill -TERM {pid}: {status}");
    let limit = Duration::from_secs(5);
    let status = tokio::time::timeout(limit, child.wait())
        .await
        .unwrap_or_else(|_| {
            panic!(
                "stdio still running {limit:?} after SIGTERM (stdin open); stderr:\n{}",
                captured_text(&stderr)
            )
        })
        .unwrap();
    eprintln!(
        "stdio exited {:?} after SIGTERM with {status}",
        sent.elapsed()
    );
    assert!(
        status.success(),
        "exit status {status}; stderr:\n{}",
        captured_text(&stderr)
    );
    drop(stdin);
}
