//! OpenTelemetry traces (issue 16): `omniforge serve --otlp-endpoint` exporting to a real
//! OTLP/HTTP receiver (`tests/fixtures/otlp/receiver.py`, which decodes the protobuf with the
//! official `opentelemetry-proto` messages), the client's `_meta.traceparent` continued, child
//! spans for an environment build, a sandbox run and a Connect upstream call whose
//! `traceparent` the Connect fixture records, no token in any span, and nothing exported
//! without the flag.

use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};

use crate::support::{
    Fixture, Serve, bearer_post as post, bearer_session as open_session, data_home, deps,
    eventually, fixture_manifest, http_client, repo_root, require, uv,
};

const TOKENS: &str = "root s3cret-admin-5d1 admin\n";
const TOKEN: &str = "s3cret-admin-5d1";
const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const PARENT: &str = "00f067aa0ba902b7";

/// The OTLP receiver: `.deps/py-obs/bin/python tests/fixtures/otlp/receiver.py`.
struct Receiver {
    _child: Child,
    /// Kept open: the receiver exits when its stdin reaches EOF.
    _stdin: ChildStdin,
    /// `http://127.0.0.1:PORT`, the OTLP endpoint base.
    url: String,
}

impl Receiver {
    async fn start() -> Receiver {
        let python = deps().join("py-obs/bin/python");
        require(std::slice::from_ref(&python));
        let mut child = Command::new(python)
            .arg(repo_root().join("tests/fixtures/otlp/receiver.py"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let line = tokio::time::timeout(Duration::from_secs(20), lines.next_line())
            .await
            .expect("the receiver prints LISTENING within 20 s")
            .unwrap()
            .unwrap_or_default();
        let url = line
            .strip_prefix("LISTENING ")
            .unwrap_or_else(|| panic!("not a LISTENING line: {line:?}"))
            .to_owned();
        Receiver {
            _child: child,
            _stdin: stdin,
            url,
        }
    }

    async fn get(&self, path: &str) -> Value {
        http_client()
            .get(format!("{}{path}", self.url))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }

    /// The spans received so far, once every name in `names` is among them (the exporter
    /// sends in batches); panics after 30 s with what arrived.
    async fn spans_named(&self, names: &[&str]) -> Vec<Value> {
        let what = format!("spans {names:?} all arrived");
        eventually(Duration::from_secs(30), &what, async || {
            let spans = self.get("/spans").await;
            let spans = spans.as_array().cloned().unwrap_or_default();
            if names.iter().all(|n| spans.iter().any(|s| s["name"] == *n)) {
                Ok(spans)
            } else {
                let got: Vec<_> = spans.iter().map(|s| s["name"].clone()).collect();
                Err(format!("got {got:?}"))
            }
        })
        .await
    }
}

fn one<'a>(spans: &'a [Value], name: &str) -> &'a Value {
    let found: Vec<&Value> = spans.iter().filter(|s| s["name"] == name).collect();
    assert_eq!(found.len(), 1, "{name}: {found:?}");
    found[0]
}

fn call(id: u64, tool: &str, arguments: Value, traceparent: Option<&str>) -> Value {
    let mut params = json!({"name": tool, "arguments": arguments});
    if let Some(traceparent) = traceparent {
        params["_meta"] = json!({ "traceparent": traceparent });
    }
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params})
}

async fn serve(data: &std::path::Path, extra: &[&str], env: &[(&str, &str)]) -> Serve {
    let tokens = data.join("tokens");
    std::fs::write(&tokens, TOKENS).unwrap();
    let mut command = Serve::command()
        .args(&["--data-dir".as_ref(), data.as_os_str()])
        .args(&["--uv".as_ref(), uv().as_os_str()])
        .args(&["--token-file".as_ref(), tokens.as_os_str()])
        .args(extra);
    // Batches every 100 ms instead of 5 s, so the test does not wait.
    command.cmd().env("OTEL_BSP_SCHEDULE_DELAY", "100");
    for (name, value) in env {
        command.cmd().env(name, value);
    }
    command.start().await
}

#[tokio::test]
async fn spans_follow_the_client_trace_into_the_sandbox_and_the_upstream() {
    crate::support::needs_deps!();
    let receiver = Receiver::start().await;
    let fixture = Fixture::start().await;
    let manifest = fixture_manifest();
    let (_dir, data) = data_home();
    let server = serve(
        &data,
        &[
            "--otlp-endpoint",
            &receiver.url,
            "--manifest",
            manifest.to_str().unwrap(),
            "--upstream",
            &fixture.url,
        ],
        &[],
    )
    .await;
    let session = open_session(&server.url, TOKEN).await;
    let send = async |message: Value| {
        let reply = post(&server.url, Some(TOKEN), Some(&session), message).await;
        assert_eq!(reply.status, 200, "{:?}", reply.messages);
        reply.messages[0].clone()
    };
    let traceparent = format!("00-{TRACE}-{PARENT}-01");
    let answer = send(call(
        2,
        "omniforge_instructions",
        json!({}),
        Some(&traceparent),
    ))
    .await;
    assert_ne!(answer["result"]["isError"], true, "{answer}");
    let answer = send(call(3, "no_such_tool_4711", json!({}), None)).await;
    assert_eq!(answer["result"]["isError"], true, "{answer}");
    let create = json!({"name": "hello", "description": "Says hello.", "code": "print('hello')\n"});
    let answer = send(call(4, "omniforge_create_tool", create, None)).await;
    assert_ne!(answer["result"]["isError"], true, "{answer}");
    let answer = send(call(5, "hello", json!({}), None)).await;
    assert_ne!(answer["result"]["isError"], true, "{answer}");
    let answer = send(call(
        6,
        "fixture_echo",
        json!({"text": "hi"}),
        Some(&traceparent),
    ))
    .await;
    assert_ne!(answer["result"]["isError"], true, "{answer}");

    let spans = receiver
        .spans_named(&[
            "tools/call omniforge_instructions",
            "tools/call no_such_tool_4711",
            "tools/call hello",
            "omniforge.sandbox.run",
            "omniforge.environment.build",
            "tools/call fixture_echo",
            "fixture.v1.FixtureService/Echo",
        ])
        .await;

    // The client's trace is continued: its trace id, its span as the parent.
    let instructions = one(&spans, "tools/call omniforge_instructions");
    assert_eq!(instructions["trace_id"], TRACE, "{instructions}");
    assert_eq!(instructions["parent_span_id"], PARENT, "{instructions}");
    assert_eq!(instructions["kind"], "SPAN_KIND_SERVER", "{instructions}");
    let attributes = &instructions["attributes"];
    assert_eq!(
        attributes["mcp.method.name"], "tools/call",
        "{instructions}"
    );
    assert_eq!(attributes["gen_ai.tool.name"], "omniforge_instructions");
    assert_eq!(attributes["gen_ai.operation.name"], "execute_tool");
    assert_eq!(attributes["jsonrpc.request.id"], "2");
    assert_eq!(
        attributes["mcp.session.id"],
        session.as_str(),
        "the request span names its session: {instructions}"
    );
    assert_eq!(instructions["resource"]["service.name"], "omniforge");

    // isError: error.type = tool_error, status ERROR; without a traceparent, a new trace.
    let unknown = one(&spans, "tools/call no_such_tool_4711");
    assert_eq!(
        unknown["attributes"]["error.type"], "tool_error",
        "{unknown}"
    );
    assert_eq!(unknown["status"]["code"], "STATUS_CODE_ERROR", "{unknown}");
    assert_ne!(unknown["trace_id"], TRACE);

    // Children: the environment build under the create call, the sandbox run under the call.
    let create = one(&spans, "tools/call omniforge_create_tool");
    let build = one(&spans, "omniforge.environment.build");
    assert_eq!(build["parent_span_id"], create["span_id"], "{build}");
    let hello = one(&spans, "tools/call hello");
    let run = one(&spans, "omniforge.sandbox.run");
    assert_eq!(run["parent_span_id"], hello["span_id"], "{run}");
    assert_eq!(run["trace_id"], hello["trace_id"]);
    assert_eq!(
        run["attributes"]["omniforge.sandbox.outcome"], "ok",
        "{run}"
    );

    // One trace crosses client → OmniForge → Connect service.
    let echo = one(&spans, "tools/call fixture_echo");
    let upstream = one(&spans, "fixture.v1.FixtureService/Echo");
    assert_eq!(echo["trace_id"], TRACE);
    assert_eq!(upstream["parent_span_id"], echo["span_id"], "{upstream}");
    assert_eq!(upstream["kind"], "SPAN_KIND_CLIENT", "{upstream}");
    assert_eq!(upstream["attributes"]["rpc.system.name"], "connectrpc");
    let seen: Value = http_client()
        .get(format!("{}/_fixture/trace-context", fixture.url))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let echo_call = seen
        .as_array()
        .unwrap()
        .iter()
        .rfind(|c| c["procedure"] == "/fixture.v1.FixtureService/Echo")
        .unwrap_or_else(|| panic!("the fixture saw no Echo call: {seen}"));
    let span_id = upstream["span_id"].as_str().unwrap();
    assert_eq!(
        echo_call["traceparent"],
        format!("00-{TRACE}-{span_id}-01"),
        "{echo_call}"
    );

    // No token in any span.
    let text = serde_json::to_string(&spans).unwrap();
    assert!(!text.contains(TOKEN), "a token in the spans: {text}");
}

#[tokio::test]
async fn nothing_is_exported_without_otlp_endpoint() {
    crate::support::needs_deps!();
    let receiver = Receiver::start().await;
    let (_dir, data) = data_home();
    // The standard OpenTelemetry variables alone turn nothing on.
    let endpoint = receiver.url.clone();
    let mut server = serve(
        &data,
        &[],
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint),
            (
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                &format!("{endpoint}/v1/traces"),
            ),
        ],
    )
    .await;
    let session = open_session(&server.url, TOKEN).await;
    let traceparent = format!("00-{TRACE}-{PARENT}-01");
    let reply = post(
        &server.url,
        Some(TOKEN),
        Some(&session),
        call(2, "omniforge_instructions", json!({}), Some(&traceparent)),
    )
    .await;
    assert_eq!(reply.status, 200);
    server.kill();
    // scenario: nothing arrives: a few batch periods (100 ms each) for anything that was sent
    tokio::time::sleep(Duration::from_millis(500)).await;
    let stats = receiver.get("/stats").await;
    let spans = receiver.get("/spans").await;
    assert_eq!(spans, json!([]), "stats {stats}");
}
