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
//! Servers and clients come from [`crate::support`]; [`serve_in`] only names the arguments of
//! servers a test must signal (SIGTERM), start with its own token file, or bind to `0.0.0.0`.

mod access;
mod body_limit;
mod catalog;
mod healthz;
mod manifests;
mod pagination;
mod ping;
mod rev_2026;
mod schema;
mod shutdown;
mod stateless;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tempfile::TempDir;

use crate::support::{
    ANY_TOOL, Auth, HttpReply, HttpServer, REPLY_TIMEOUT, START_TIMEOUT, Serve, StdioServer,
    eventually, get_headers, http_client, http_send, init_http, init_stdio, initialize_request,
    is_list_changed, is_response, omniforge_run, open_stream, post_headers,
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

use schema::assert_valid;

/// `omniforge serve --listen LISTEN --data-dir <dir>/data ARGS...`, ready: for servers a test
/// must signal (SIGTERM), start with its own token file, or bind to `0.0.0.0`.
async fn serve_in(dir: &TempDir, listen: &str, args: &[&str]) -> Serve {
    let data = dir.path().join("data");
    Serve::command()
        .listen(listen)
        .args(&["--data-dir".as_ref(), data.as_os_str()])
        .args(args)
        .start()
        .await
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

/// Waits until `text()` contains every needle; panics with `what` and the text after `timeout`.
async fn eventually_contains(
    what: &str,
    text: impl Fn() -> String,
    needles: &[&str],
    timeout: Duration,
) {
    eventually(timeout, what, async || {
        let t = text();
        if needles.iter().all(|n| t.contains(n)) {
            Ok(())
        } else {
            Err(t)
        }
    })
    .await;
}
