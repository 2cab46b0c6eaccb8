//! Scripts that speak full MCP, end to end: the conformance test tools
//! (the `tools` of `packs/conformance.toml`) and scripts that ask the client (sampling, elicitation,
//! roots), called by the official Python SDK (2.x, and 1.x for the conformance tools) and
//! TypeScript SDK clients over stdio and Streamable HTTP. Stricter than the conformance suite:
//! exact content and mimeTypes, progress values, log messages, the sampling request and the
//! elicitation schema as the client received them, and the errors a script gets when the client
//! lacks a capability or the revision forbids server-to-client requests.
//!
//! The drivers (`support/py/features_client.py`, `support/node/features_client.mjs`) declare a capability only when the
//! test gives them an answer for it, record every request and notification they receive
//! during a call, and answer one JSON command line with one JSON line.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};
use tempfile::TempDir;
use tokio::io::AsyncWriteExt;
use tokio::process::{Child, ChildStdin};
use tokio::sync::mpsc;

use crate::support::{
    Captured, Serve, StdioGuard, add_tools, data_home, drain, http_client, line_channel, no_proxy,
    node_driver, node_script, node22, omniforge_cli, py_driver, python_driver, python1, python2,
    repo_root, require, spawn_piped, stdio_argv, ts_modules, unique, uv,
};

const COMMAND_TIMEOUT: Duration = Duration::from_secs(90);

/// The official client SDK a driver runs on.
#[derive(Debug, Clone, Copy)]
enum Sdk {
    /// PyPI `mcp` 1.x, `.deps/py-mcp1`.
    Py1,
    /// PyPI `mcp` 2.x, `.deps/py-mcp2`.
    Py2,
    /// npm `@modelcontextprotocol/sdk`, run by `.deps/bin/node22`.
    Ts,
}

/// The 1x1 red PNG and the silent WAV inlined in the conformance tools' code.
const RED_PIXEL_PNG: &str =
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC";
const SILENT_WAV: &str = "UklGRiwAAABXQVZFZm10IBAAAAABAAEAQB8AAEAfAAABAAgAZGF0YQgAAACAgICAgICAgA==";

fn pack_path() -> PathBuf {
    repo_root().join("packs/conformance.toml")
}

/// The `tools` entries of the conformance tools pack.
fn pack_tools() -> Vec<Value> {
    let text = std::fs::read_to_string(pack_path()).unwrap();
    let pack: Value = toml::from_str(&text).unwrap();
    assert_eq!(pack["format"], 1, "pack format");
    pack["tools"].as_array().cloned().unwrap()
}

/// Imports the whole conformance pack into the store in `data` with `omniforge pack import`,
/// as scripts/conformance does.
async fn import_pack(data: &Path) {
    let pack = pack_path();
    let (ok, out, err) =
        omniforge_cli(data, &["pack", "import", pack.to_str().unwrap()], None).await;
    assert!(ok, "omniforge pack import failed: {out}{err}");
}

/// A running `client.py` / `client.mjs`.
struct Client {
    sdk: Sdk,
    transport: &'static str,
    _child: Child,
    stdin: ChildStdin,
    lines: mpsc::UnboundedReceiver<String>,
    stderr: Captured,
    _dir: TempDir,
}

impl Client {
    /// Starts the driver over `transport` (`stdio` or `http`) against `target` with the
    /// client `features` (answers for sampling, elicitation, roots), after initialize.
    async fn start(sdk: Sdk, transport: &'static str, target: &str, features: &Value) -> Client {
        let dir = tempfile::tempdir().unwrap();
        let mut cmd = match sdk {
            Sdk::Py1 | Sdk::Py2 => {
                let python = match sdk {
                    Sdk::Py1 => python1(),
                    _ => python2(),
                };
                require(std::slice::from_ref(&python));
                python_driver(&python, &py_driver("features_client.py"))
            }
            Sdk::Ts => {
                require(&[
                    node22(),
                    ts_modules().join("@modelcontextprotocol/sdk/package.json"),
                ]);
                node_driver(dir.path(), &node_script("features_client.mjs"))
            }
        };
        cmd.arg(transport)
            .arg(target)
            .arg(features.to_string())
            .current_dir(dir.path())
            .env("NO_COLOR", "1");
        no_proxy(&mut cmd);
        let mut child = spawn_piped(&mut cmd)
            .unwrap_or_else(|e| panic!("cannot start the {sdk:?} driver: {e}"));
        let stdin = child.stdin.take().unwrap();
        let stderr = Captured::default();
        drain(child.stderr.take().unwrap(), stderr.clone());
        let lines = line_channel(child.stdout.take().unwrap());
        let mut client = Client {
            sdk,
            transport,
            _child: child,
            stdin,
            lines,
            stderr,
            _dir: dir,
        };
        let ready = client.read().await;
        assert_eq!(
            ready["event"],
            "ready",
            "{sdk:?} over {transport} did not initialize: {ready}\n{}",
            client.stderr.tail(6000)
        );
        client
    }

    async fn read(&mut self) -> Value {
        loop {
            match tokio::time::timeout(COMMAND_TIMEOUT, self.lines.recv()).await {
                Ok(Some(line)) if line.trim().is_empty() => continue,
                Ok(Some(line)) => return serde_json::from_str(&line).unwrap(),
                other => panic!(
                    "{:?} driver over {}: no answer ({other:?}); stderr:\n{}",
                    self.sdk,
                    self.transport,
                    self.stderr.tail(8000)
                ),
            }
        }
    }

    /// One command; its answer must be `ok`.
    async fn cmd(&mut self, command: Value) -> Value {
        let mut line = command.to_string();
        line.push('\n');
        self.stdin.write_all(line.as_bytes()).await.unwrap();
        self.stdin.flush().await.unwrap();
        let reply = self.read().await;
        assert_eq!(
            reply["ok"],
            true,
            "{:?} over {}: {command} failed: {reply}\nstderr:\n{}",
            self.sdk,
            self.transport,
            self.stderr.tail(6000)
        );
        reply
    }

    /// `tools/call`: the driver's answer (`result`, `progress`, `logs`, `sampling`,
    /// `elicitation`, `roots`).
    async fn call(&mut self, name: &str, args: Value) -> Value {
        self.cmd(json!({"op": "call", "name": name, "args": args, "progress": true}))
            .await
    }

    fn what(&self) -> String {
        format!("{:?} over {}", self.sdk, self.transport)
    }
}

/// The text of a result's content item `i`.
fn text(result: &Value, i: usize) -> &str {
    result["content"][i]["text"].as_str().unwrap_or_default()
}

fn assert_ok(result: &Value, what: &str) {
    assert_ne!(result["isError"], true, "{what}: an error result: {result}");
}

/// Everything the conformance tools return, checked exactly, for one client.
async fn check_conformance_tools(client: &mut Client, pack: &[Value]) {
    let who = client.what();

    // tools/list: the 2020-12 tool's inputSchema exactly as authored.
    let listed = client.cmd(json!({"op": "list"})).await;
    let tools = listed["tools"].as_array().unwrap();
    let authored = pack
        .iter()
        .find(|t| t["name"] == "json_schema_2020_12_tool")
        .unwrap();
    let served = tools
        .iter()
        .find(|t| t["name"] == "json_schema_2020_12_tool")
        .unwrap_or_else(|| panic!("{who}: json_schema_2020_12_tool not listed"));
    assert_eq!(served["inputSchema"], authored["inputSchema"], "{who}");
    assert_eq!(
        served["inputSchema"]["$schema"],
        "https://json-schema.org/draft/2020-12/schema"
    );
    for tool in pack {
        assert!(
            tools.iter().any(|t| t["name"] == tool["name"]),
            "{who}: {} not listed",
            tool["name"]
        );
    }

    let r = client.call("test_simple_text", json!({})).await;
    assert_eq!(
        r["result"]["content"],
        json!([{"type": "text", "text": "This is a simple text response for testing."}]),
        "{who}"
    );
    assert_ok(&r["result"], &who);

    let r = client.call("test_image_content", json!({})).await;
    assert_eq!(
        r["result"]["content"],
        json!([{"type": "image", "data": RED_PIXEL_PNG, "mimeType": "image/png"}]),
        "{who}"
    );

    let r = client.call("test_audio_content", json!({})).await;
    assert_eq!(
        r["result"]["content"],
        json!([{"type": "audio", "data": SILENT_WAV, "mimeType": "audio/wav"}]),
        "{who}"
    );

    let r = client.call("test_embedded_resource", json!({})).await;
    assert_eq!(
        r["result"]["content"],
        json!([{"type": "resource", "resource": {
            "uri": "test://embedded-resource",
            "mimeType": "text/plain",
            "text": "This is an embedded resource content."
        }}]),
        "{who}"
    );

    let r = client.call("test_multiple_content_types", json!({})).await;
    assert_eq!(
        r["result"]["content"],
        json!([
            {"type": "text", "text": "Multiple content types test:"},
            {"type": "image", "data": RED_PIXEL_PNG, "mimeType": "image/png"},
            {"type": "resource", "resource": {
                "uri": "test://mixed-content-resource",
                "mimeType": "application/json",
                "text": "{\"test\":\"data\",\"value\":123}"
            }}
        ]),
        "{who}"
    );

    let r = client.call("test_error_handling", json!({})).await;
    assert_eq!(r["result"]["isError"], true, "{who}: {r}");
    assert_eq!(
        r["result"]["content"],
        json!([{"type": "text", "text": "This tool intentionally returns an error for testing"}]),
        "{who}"
    );

    // Logging: default level (info) lets the three info messages through; at warning none.
    client
        .cmd(json!({"op": "set_level", "level": "warning"}))
        .await;
    let r = client.call("test_tool_with_logging", json!({})).await;
    assert_eq!(r["logs"], json!([]), "{who}: warning level filters info");
    client
        .cmd(json!({"op": "set_level", "level": "debug"}))
        .await;
    let r = client.call("test_tool_with_logging", json!({})).await;
    assert_eq!(
        r["logs"],
        json!([
            {"level": "info", "logger": "script", "data": "Tool execution started"},
            {"level": "info", "logger": "script", "data": "Tool processing data"},
            {"level": "info", "logger": "script", "data": "Tool execution completed"},
        ]),
        "{who}"
    );
    assert_eq!(
        text(&r["result"], 0),
        "Tool with logging executed successfully"
    );

    let r = client.call("test_tool_with_progress", json!({})).await;
    let progress: Vec<(f64, f64)> = r["progress"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["progress"].as_f64().unwrap(),
                p["total"].as_f64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        progress,
        [(0.0, 100.0), (50.0, 100.0), (100.0, 100.0)],
        "{who}: {r}"
    );

    // Sampling: the request as the client received it, and its answer in the result.
    let prompt = unique("What is 2+2? ");
    let r = client
        .call("test_sampling", json!({"prompt": prompt}))
        .await;
    let sampled = r["sampling"].as_array().unwrap();
    assert_eq!(sampled.len(), 1, "{who}: {r}");
    assert_eq!(
        sampled[0]["messages"],
        json!([{"role": "user", "content": {"type": "text", "text": prompt}}]),
        "{who}"
    );
    assert_eq!(sampled[0]["maxTokens"], 100, "{who}");
    assert_eq!(
        text(&r["result"], 0),
        "LLM response: the client's own answer",
        "{who}"
    );

    let r = client
        .call(
            "test_elicitation",
            json!({"message": "Please provide your information"}),
        )
        .await;
    let asked = r["elicitation"].as_array().unwrap();
    assert_eq!(asked.len(), 1, "{who}: {r}");
    assert_eq!(asked[0]["message"], "Please provide your information");
    assert_eq!(
        asked[0]["requestedSchema"],
        json!({
            "type": "object",
            "properties": {
                "username": {"type": "string", "description": "User's response"},
                "email": {"type": "string", "description": "User's email address"}
            },
            "required": ["username", "email"]
        }),
        "{who}"
    );
    assert_eq!(
        text(&r["result"], 0),
        "User response: action=accept, content={\"email\": \"e2e@example.com\", \"username\": \"e2e-user\"}",
        "{who}"
    );

    let r = client
        .call("test_elicitation_sep1034_defaults", json!({}))
        .await;
    assert_eq!(
        r["elicitation"][0]["requestedSchema"],
        json!({
            "type": "object",
            "properties": {
                "name": {"type": "string", "description": "User name", "default": "John Doe"},
                "age": {"type": "integer", "description": "User age", "default": 30},
                "score": {"type": "number", "description": "User score", "default": 95.5},
                "status": {"type": "string", "description": "User status",
                           "enum": ["active", "inactive", "pending"], "default": "active"},
                "verified": {"type": "boolean", "description": "Verification status", "default": true}
            },
            "required": []
        }),
        "{who}"
    );

    let r = client
        .call("test_elicitation_sep1330_enums", json!({}))
        .await;
    assert_eq!(
        r["elicitation"][0]["requestedSchema"]["properties"],
        json!({
            "untitledSingle": {"type": "string", "description": "Untitled single-select",
                               "enum": ["option1", "option2", "option3"]},
            "titledSingle": {"type": "string", "description": "Titled single-select", "oneOf": [
                {"const": "value1", "title": "First Option"},
                {"const": "value2", "title": "Second Option"},
                {"const": "value3", "title": "Third Option"}]},
            "legacyEnum": {"type": "string", "description": "Legacy titled enum (enumNames, deprecated)",
                           "enum": ["opt1", "opt2", "opt3"],
                           "enumNames": ["Option One", "Option Two", "Option Three"]},
            "untitledMulti": {"type": "array", "description": "Untitled multi-select",
                              "items": {"type": "string", "enum": ["option1", "option2", "option3"]}},
            "titledMulti": {"type": "array", "description": "Titled multi-select", "items": {"anyOf": [
                {"const": "value1", "title": "First Choice"},
                {"const": "value2", "title": "Second Choice"},
                {"const": "value3", "title": "Third Choice"}]}}
        }),
        "{who}"
    );

    // Over HTTP the tool closes its POST stream mid-call; the SDK resumes with Last-Event-ID.
    let r = client.call("test_reconnection", json!({})).await;
    assert_eq!(
        r["result"]["content"],
        json!([{"type": "text", "text": "Reconnection test completed successfully"}]),
        "{who}"
    );
}

/// The answers the drivers give for each client feature.
fn full_features() -> Value {
    json!({
        "sampling": {"role": "assistant", "content": {"type": "text", "text": "the client's own answer"},
                     "model": "e2e-model", "stopReason": "endTurn"},
        "elicitation": {"action": "accept", "content": {"username": "e2e-user", "email": "e2e@example.com"}},
        "roots": [{"uri": "file:///e2e/project", "name": "project"}, {"uri": "file:///e2e/other"}]
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conformance_tools_answer_exactly_over_stdio_and_http() {
    crate::support::needs_deps!();
    require(&[uv(), pack_path()]);
    let (_home, data) = data_home();
    let _guard = StdioGuard(data.clone());
    let pack = pack_tools();
    import_pack(&data).await;
    let server = Serve::on_data(&data, &[]).await;
    for sdk in [Sdk::Py2, Sdk::Ts, Sdk::Py1] {
        let mut client = Client::start(sdk, "http", &server.url, &full_features()).await;
        check_conformance_tools(&mut client, &pack).await;
        let mut client =
            Client::start(sdk, "stdio", &stdio_argv(&data, &[]), &full_features()).await;
        check_conformance_tools(&mut client, &pack).await;
    }
    server.assert_no_panic();
}

/// A tool that asks for all three and reports each answer or error as structured content.
const ASK_ALL: &str = r#"import omniforge
out = {}
for name, ask in [
    ("sample", lambda: omniforge.sample("Say hi", max_tokens=10, system_prompt="Be brief", temperature=0.5)),
    ("elicit", lambda: omniforge.elicit("Name?", {"type": "object", "properties": {"username": {"type": "string"}}})),
    ("roots", lambda: omniforge.roots()),
]:
    try:
        out[name] = {"answer": ask()}
    except omniforge.RequestError as e:
        out[name] = {"code": e.code, "message": e.message}
omniforge.result(structured=out)
"#;

fn ask_all_tool() -> Value {
    json!({"name": "ask_all", "description": "Asks the client for sampling, elicitation and roots", "code": ASK_ALL})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scripts_get_the_clients_answers_or_a_clear_error() {
    crate::support::needs_deps!();
    require(&[uv()]);
    let (_home, data) = data_home();
    let _guard = StdioGuard(data.clone());
    add_tools(&data, &[ask_all_tool()]);
    let server = Serve::on_data(&data, &[]).await;
    for (sdk, transport) in [
        (Sdk::Py2, "stdio"),
        (Sdk::Py2, "http"),
        (Sdk::Ts, "stdio"),
        (Sdk::Ts, "http"),
    ] {
        let target = if transport == "http" {
            server.url.clone()
        } else {
            stdio_argv(&data, &[])
        };
        // Every capability declared: the client's exact answers reach the script.
        let features = full_features();
        let mut client = Client::start(sdk, transport, &target, &features).await;
        let who = client.what();
        let r = client.call("ask_all", json!({})).await;
        let out = &r["result"]["structuredContent"];
        let sample = &out["sample"]["answer"];
        assert_eq!(
            sample["content"], features["sampling"]["content"],
            "{who}: {out}"
        );
        assert_eq!(sample["model"], "e2e-model", "{who}");
        assert_eq!(sample["stopReason"], "endTurn", "{who}");
        assert_eq!(sample["role"], "assistant", "{who}");
        assert_eq!(
            out["elicit"]["answer"], features["elicitation"],
            "{who}: {out}"
        );
        assert_eq!(out["roots"]["answer"], features["roots"], "{who}: {out}");
        assert_eq!(r["roots"], 1, "{who}: one roots/list");
        let asked = &r["sampling"][0];
        assert_eq!(asked["systemPrompt"], "Be brief", "{who}: {asked}");
        assert_eq!(asked["temperature"], 0.5, "{who}");
        assert_eq!(asked["maxTokens"], 10, "{who}");

        // No capability declared: nothing is sent, and each request fails with a clear error.
        let mut client = Client::start(sdk, transport, &target, &json!({})).await;
        let r = client.call("ask_all", json!({})).await;
        let out = &r["result"]["structuredContent"];
        for (name, method, capability) in [
            ("sample", "sampling/createMessage", "sampling"),
            ("elicit", "elicitation/create", "elicitation (form mode)"),
            ("roots", "roots/list", "roots"),
        ] {
            assert_eq!(out[name]["code"], -32601, "{who}: {out}");
            assert_eq!(
                out[name]["message"],
                format!(
                    "{method} cannot be sent: the client did not declare the {capability} capability"
                ),
                "{who}"
            );
        }
        assert_eq!(r["sampling"], json!([]), "{who}");
        assert_eq!(r["elicitation"], json!([]), "{who}");
        assert_eq!(r["roots"], 0, "{who}");
    }
    server.assert_no_panic();
}

/// Under the stateless revision 2026-07-28 a script's question is never a request on the
/// response stream: the call answers `input_required`, its first question (`q1`, the
/// sampling request with its params unchanged) under `inputRequests`, with a sealed state.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revision_2026_07_28_asks_through_an_input_required_result() {
    crate::support::needs_deps!();
    require(&[uv()]);
    let (_home, data) = data_home();
    add_tools(&data, &[ask_all_tool()]);
    let server = Serve::on_data(&data, &[]).await;
    let body = json!({
        "jsonrpc": "2.0", "id": 7, "method": "tools/call",
        "params": {"name": "ask_all", "arguments": {}, "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"},
            "io.modelcontextprotocol/clientCapabilities": {"sampling": {}, "elicitation": {}, "roots": {}}
        }}
    });
    let response = http_client()
        .post(&server.url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", "ask_all")
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    let status = response.status();
    let text = response.text().await.unwrap();
    assert!(status.is_success(), "{status}: {text}");
    // The answer may come as JSON or as one SSE event.
    let message: Value = text
        .lines()
        .find_map(|l| {
            l.strip_prefix("data:")
                .map(str::trim)
                .filter(|d| !d.is_empty())
        })
        .map_or_else(|| serde_json::from_str(&text), serde_json::from_str)
        .unwrap_or_else(|e| panic!("{e}: {text}"));
    let result = &message["result"];
    assert_eq!(result["resultType"], "input_required", "{message}");
    let asked = &result["inputRequests"];
    assert_eq!(asked.as_object().unwrap().len(), 1, "{message}");
    assert_eq!(asked["q1"]["method"], "sampling/createMessage", "{message}");
    assert_eq!(
        asked["q1"]["params"]["systemPrompt"], "Be brief",
        "{message}"
    );
    assert_eq!(asked["q1"]["params"]["maxTokens"], 10, "{message}");
    assert!(
        result["requestState"]
            .as_str()
            .is_some_and(|s| !s.is_empty()),
        "{message}"
    );
    // Only the answer: no server-to-client request went out on the stream.
    let requests = text
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
        .filter(|m| m.get("method").is_some())
        .count();
    assert_eq!(requests, 0, "{text}");
    server.assert_no_panic();
}

/// A content item a script gets wrong is an error result that names it, never text.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_content_items_are_named_errors() {
    crate::support::needs_deps!();
    require(&[uv()]);
    let (_home, data) = data_home();
    let _guard = StdioGuard(data.clone());
    let tool = |name: &str, content: &str| {
        json!({"name": name, "description": "returns bad content",
               "code": format!("import omniforge\nomniforge.result(content={content})\n")})
    };
    add_tools(
        &data,
        &[
            tool(
                "bad_base64",
                r#"[omniforge.text("ok"), {"type": "image", "data": "not base64!", "mimeType": "image/png"}]"#,
            ),
            tool("no_type", r#"[{"text": "hi"}]"#),
            tool("bad_kind", "42"),
        ],
    );
    let mut client = Client::start(Sdk::Py2, "stdio", &stdio_argv(&data, &[]), &json!({})).await;
    for (name, expected) in [
        (
            "bad_base64",
            "the script's result content item 1 is not valid MCP content: image: \"data\" is not base64",
        ),
        (
            "no_type",
            "the script's result content item 0 is not valid MCP content: it has no \"type\" (one of text, image, audio, resource, resource_link)",
        ),
        (
            "bad_kind",
            "the script's result content must be a list of content items, one item or a string; got a number",
        ),
    ] {
        let r = client.call(name, json!({})).await;
        assert_eq!(r["result"]["isError"], true, "{name}: {r}");
        assert_eq!(
            r["result"]["content"].as_array().unwrap().len(),
            1,
            "{name}: {r}"
        );
        assert!(
            text(&r["result"], 0).starts_with(expected),
            "{name}: {}",
            text(&r["result"], 0)
        );
    }
}

/// One server-sent event: its `id`, `retry` and joined `data` lines.
#[derive(Debug, Default)]
struct Event {
    id: Option<String>,
    retry: Option<u64>,
    data: String,
}

fn events(body: &str) -> Vec<Event> {
    body.replace("\r\n", "\n")
        .split("\n\n")
        .filter(|block| !block.trim().is_empty())
        .map(|block| {
            let mut event = Event::default();
            let mut data = Vec::new();
            for line in block.lines() {
                let (field, value) = line.split_once(':').unwrap_or((line, ""));
                let value = value.strip_prefix(' ').unwrap_or(value);
                match field {
                    "id" => event.id = Some(value.to_owned()),
                    "retry" => event.retry = value.parse().ok(),
                    "data" => data.push(value),
                    _ => {}
                }
            }
            event.data = data.join("\n");
            event
        })
        .collect()
}

/// SEP-1699 on the wire: the POST stream of `test_reconnection` starts with a priming event,
/// ends (closed by the tool) with a priming event carrying the tool's `retry`, without the
/// response; a GET with `Last-Event-ID` resumes it and delivers the response.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_post_stream_is_resumed_with_last_event_id() {
    crate::support::needs_deps!();
    require(&[uv(), pack_path()]);
    let (_home, data) = data_home();
    let reconnection: Vec<Value> = pack_tools()
        .into_iter()
        .filter(|t| t["name"] == "test_reconnection")
        .collect();
    add_tools(&data, &reconnection);
    let server = Serve::on_data(&data, &[]).await;
    let http = http_client();
    let session = raw_session(&http, &server.url, json!({})).await;
    let call = raw_post(
        &http,
        &server.url,
        &session,
        "application/json, text/event-stream",
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
               "params": {"name": "test_reconnection", "arguments": {}}}),
    )
    .await;
    assert_eq!(call.headers()["content-type"], "text/event-stream");
    // The body ends when the tool closes the stream.
    let body = tokio::time::timeout(Duration::from_secs(30), call.text())
        .await
        .expect("the POST stream was not closed mid-call")
        .unwrap();
    let posted = events(&body);
    let first = &posted[0];
    assert!(
        first.id.is_some() && first.data.is_empty() && first.retry.is_some(),
        "the first event is not a priming event: {posted:?}"
    );
    let last = posted.last().unwrap();
    assert!(
        last.id.is_some() && last.data.is_empty() && last.retry == Some(500),
        "the stream did not end with a priming event with the tool's retry (500 ms): {posted:?}"
    );
    assert!(
        !posted.iter().any(|e| e.data.contains("\"result\"")),
        "the response came on the closed stream: {posted:?}"
    );

    let resumed = http
        .get(&server.url)
        .header("accept", "text/event-stream")
        .header("mcp-session-id", &session)
        .header("mcp-protocol-version", "2025-11-25")
        .header("last-event-id", last.id.clone().unwrap())
        .send()
        .await
        .unwrap();
    assert!(resumed.status().is_success(), "{}", resumed.status());
    let body = tokio::time::timeout(Duration::from_secs(30), resumed.text())
        .await
        .expect("the resumed stream did not end after the response")
        .unwrap();
    let response = events(&body)
        .into_iter()
        .filter_map(|e| serde_json::from_str::<Value>(&e.data).ok())
        .find(|m| m["id"] == 2)
        .unwrap_or_else(|| panic!("no response to the call on the resumed stream: {body}"));
    assert_eq!(
        response["result"]["content"],
        json!([{"type": "text", "text": "Reconnection test completed successfully"}])
    );
    server.assert_no_panic();
}

/// A POST in session `session` with `accept`.
async fn raw_post(
    http: &reqwest::Client,
    url: &str,
    session: &str,
    accept: &str,
    body: Value,
) -> reqwest::Response {
    http.post(url)
        .header("content-type", "application/json")
        .header("accept", accept)
        .header("mcp-session-id", session)
        .header("mcp-protocol-version", "2025-11-25")
        .body(body.to_string())
        .send()
        .await
        .unwrap()
}

/// initialize (with client `capabilities`) and notifications/initialized over raw HTTP: the
/// session id.
async fn raw_session(http: &reqwest::Client, url: &str, capabilities: Value) -> String {
    let init = http
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": capabilities,
                "clientInfo": {"name": "raw", "version": "0"}}})
            .to_string(),
        )
        .send()
        .await
        .unwrap();
    let session = init.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned();
    init.text().await.unwrap();
    let initialized = raw_post(
        http,
        url,
        &session,
        "application/json, text/event-stream",
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    )
    .await;
    assert!(initialized.status().is_success());
    session
}

/// A client that accepts only `application/json` gets the call's answer as one JSON response,
/// so it can receive no request during the call: the script is told so at once (instead of
/// waiting for an answer that cannot come), even though the client declared the capabilities.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_only_calls_cannot_ask_the_client() {
    crate::support::needs_deps!();
    require(&[uv()]);
    let (_home, data) = data_home();
    add_tools(&data, &[ask_all_tool()]);
    let server = Serve::on_data(&data, &[]).await;
    let http = http_client();
    let session = raw_session(
        &http,
        &server.url,
        json!({"sampling": {}, "elicitation": {}, "roots": {}}),
    )
    .await;
    let started = std::time::Instant::now();
    let response = raw_post(
        &http,
        &server.url,
        &session,
        "application/json",
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
               "params": {"name": "ask_all", "arguments": {}}}),
    )
    .await;
    assert_eq!(response.headers()["content-type"], "application/json");
    let message: Value = response.json().await.unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "the script waited"
    );
    let out = &message["result"]["structuredContent"];
    for (name, method) in [
        ("sample", "sampling/createMessage"),
        ("elicit", "elicitation/create"),
        ("roots", "roots/list"),
    ] {
        assert_eq!(out[name]["code"], -32600, "{message}");
        assert_eq!(
            out[name]["message"],
            format!(
                "{method} cannot be sent: the client accepts only application/json for this \
                 call, so it cannot receive requests while the call runs"
            ),
            "{message}"
        );
    }
    server.assert_no_panic();
}

/// A client that does not answer in time: the script gets -32001 after its `timeout`, and the
/// client's request is cancelled (`notifications/cancelled`); the call goes on. A run that ends
/// while an answer is pending cancels the client's request too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_client_answer_times_out_and_is_cancelled() {
    crate::support::needs_deps!();
    require(&[uv()]);
    let (_home, data) = data_home();
    let _guard = StdioGuard(data.clone());
    add_tools(
        &data,
        &[
            json!({"name": "impatient", "description": "samples with a 1 s timeout",
                 "code": "import omniforge\ntry:\n    omniforge.sample('hi', timeout=1)\nexcept omniforge.RequestError as e:\n    omniforge.result(structured={'code': e.code, 'message': e.message})\n"}),
            json!({"name": "outlived", "description": "samples until its own 2 s limit ends it",
                   "timeout_s": 2, "code": "import omniforge\nomniforge.sample('hi')\n"}),
        ],
    );
    let mut features = full_features();
    features["sampling_delay"] = json!(30);
    let server = Serve::on_data(&data, &[]).await;
    for (transport, target) in [
        ("stdio", stdio_argv(&data, &[])),
        ("http", server.url.clone()),
    ] {
        let mut client = Client::start(Sdk::Py2, transport, &target, &features).await;
        let started = std::time::Instant::now();
        let r = client.call("impatient", json!({})).await;
        assert!(
            started.elapsed() < Duration::from_secs(15),
            "{transport}: {r}"
        );
        assert_eq!(
            r["result"]["structuredContent"],
            json!({"code": -32001, "message": "the client did not answer sampling/createMessage within 1.0 s"}),
            "{transport}: {r}"
        );
        assert_eq!(
            r["sampling"].as_array().unwrap().len(),
            1,
            "{transport}: {r}"
        );
        assert_eq!(
            r["sampling_cancelled"], 1,
            "{transport}: the client's request was not cancelled: {r}"
        );

        // The run ends (its time limit) while the client's answer is pending: cancelled too.
        let r = client.call("outlived", json!({})).await;
        assert_eq!(r["result"]["isError"], true, "{transport}: {r}");
        assert!(
            text(&r["result"], 0).contains("[timeout]"),
            "{transport}: {r}"
        );
        assert_eq!(
            r["sampling_cancelled"], 1,
            "{transport}: the client's request was not cancelled: {r}"
        );
    }
    server.assert_no_panic();
}

/// Over Streamable HTTP (session mode) the script's `sampling/createMessage` travels on the
/// call's own POST SSE stream (SEP-2260), not on the GET stream; the client's answer is a POST,
/// and the result then follows on the same stream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_script_request_rides_the_calls_post_stream() {
    crate::support::needs_deps!();
    require(&[uv()]);
    let (_home, data) = data_home();
    add_tools(
        &data,
        &[json!({"name": "sample_once", "description": "samples once",
                 "code": "import omniforge\nr = omniforge.sample('ping?', max_tokens=5)\nomniforge.result(content=[omniforge.text(r['content']['text'])])\n"})],
    );
    let server = Serve::on_data(&data, &[]).await;
    let http = http_client();
    let session = raw_session(&http, &server.url, json!({"sampling": {}})).await;
    let mut call = raw_post(
        &http,
        &server.url,
        &session,
        "application/json, text/event-stream",
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
               "params": {"name": "sample_once", "arguments": {}}}),
    )
    .await;
    // Read the POST stream until `want` finds a message in it.
    async fn next_message(
        call: &mut reqwest::Response,
        buf: &mut String,
        want: impl Fn(&Value) -> bool,
    ) -> Value {
        loop {
            if let Some(end) = buf.find("\n\n") {
                let block: String = buf.drain(..end + 2).collect();
                let found = events(&block)
                    .into_iter()
                    .filter_map(|e| serde_json::from_str::<Value>(&e.data).ok())
                    .find(|m| want(m));
                if let Some(found) = found {
                    return found;
                }
                continue;
            }
            let chunk = tokio::time::timeout(Duration::from_secs(30), call.chunk())
                .await
                .expect("nothing more on the POST stream")
                .unwrap()
                .unwrap_or_else(|| panic!("the POST stream ended; unread: {buf}"));
            buf.push_str(&String::from_utf8_lossy(&chunk));
        }
    }
    let mut buf = String::new();
    let request = next_message(&mut call, &mut buf, |m| m.get("method").is_some()).await;
    assert_eq!(request["method"], "sampling/createMessage", "{request}");
    assert_eq!(
        request["params"]["messages"],
        json!([{"role": "user", "content": {"type": "text", "text": "ping?"}}])
    );
    let answered = raw_post(
        &http,
        &server.url,
        &session,
        "application/json, text/event-stream",
        json!({"jsonrpc": "2.0", "id": request["id"], "result": {
            "role": "assistant", "content": {"type": "text", "text": "pong!"},
            "model": "raw", "stopReason": "endTurn"}}),
    )
    .await;
    assert!(answered.status().is_success(), "{}", answered.status());
    let response = next_message(&mut call, &mut buf, |m| m["id"] == 2).await;
    assert_eq!(
        response["result"]["content"],
        json!([{"type": "text", "text": "pong!"}]),
        "{response}"
    );
    server.assert_no_panic();
}

/// A script cannot flood the client: at most 8 of its requests wait for answers at once; the
/// ninth and tenth are refused at once, the eight get their answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_most_eight_requests_wait_for_the_client() {
    crate::support::needs_deps!();
    require(&[uv()]);
    let (_home, data) = data_home();
    let _guard = StdioGuard(data.clone());
    let code = r#"import threading
import omniforge
answers, refused, lock = [], [], threading.Lock()
def ask():
    try:
        r = omniforge.sample("x", timeout=30)
        with lock:
            answers.append(r["content"]["text"])
    except omniforge.RequestError as e:
        with lock:
            refused.append([e.code, e.message])
threads = [threading.Thread(target=ask) for _ in range(10)]
for t in threads:
    t.start()
for t in threads:
    t.join()
omniforge.result(structured={"answers": len(answers), "refused": refused})
"#;
    add_tools(
        &data,
        &[json!({"name": "flood", "description": "ten samples at once", "code": code})],
    );
    let mut features = full_features();
    features["sampling_delay"] = json!(1);
    let mut client = Client::start(Sdk::Py2, "stdio", &stdio_argv(&data, &[]), &features).await;
    let r = client.call("flood", json!({})).await;
    let out = &r["result"]["structuredContent"];
    assert_eq!(out["answers"], 8, "{r}");
    let refusal = json!([
        -32600,
        "too many requests to the client at once (at most 8); wait for an answer first"
    ]);
    assert_eq!(out["refused"], json!([refusal, refusal]), "{r}");
    assert_eq!(r["sampling"].as_array().unwrap().len(), 8, "{r}");
}

/// A secret the tool may read never reaches the client: not in a log message, a progress
/// message, a sampling request or an embedded resource of the result.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secrets_are_redacted_from_everything_sent_to_the_client() {
    crate::support::needs_deps!();
    require(&[uv()]);
    let (_home, data) = data_home();
    let _guard = StdioGuard(data.clone());
    let secret = unique("sk-e2e-");
    let (ok, _, err) = omniforge_cli(&data, &["secret", "set", "E2E_KEY"], Some(&secret)).await;
    assert!(ok, "omniforge secret set: {err}");
    let code = r#"import os
import omniforge
key = os.environ["E2E_KEY"]
omniforge.log("info", {"using": key})
omniforge.progress(1, 2, "calling with " + key)
omniforge.sample("the key is " + key, max_tokens=5)
omniforge.result(content=[omniforge.resource("test://k", text="key=" + key, mime_type="text/plain")])
"#;
    add_tools(
        &data,
        &[
            json!({"name": "leaky", "description": "uses a secret", "code": code, "secrets": ["E2E_KEY"]}),
        ],
    );
    let mut client =
        Client::start(Sdk::Py2, "stdio", &stdio_argv(&data, &[]), &full_features()).await;
    let r = client.call("leaky", json!({})).await;
    assert!(
        !r.to_string().contains(&secret),
        "the secret reached the client: {r}"
    );
    assert_eq!(r["logs"][0]["data"], json!({"using": "[redacted]"}), "{r}");
    assert_eq!(
        r["progress"][0]["message"], "calling with [redacted]",
        "{r}"
    );
    assert_eq!(
        r["sampling"][0]["messages"][0]["content"]["text"], "the key is [redacted]",
        "{r}"
    );
    assert_eq!(
        r["result"]["content"][0]["resource"]["text"], "key=[redacted]",
        "{r}"
    );
}
