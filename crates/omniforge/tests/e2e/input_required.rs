//! Input-required results (SEP-2322, protocol 2026-07-28): a script's questions (a tool's, a
//! template's, a prompt's) answered over rounds through the official Python SDK 2.x client, and
//! the sealed `requestState` refused when tampered, another principal's, another request's, or
//! sealed under a key no longer in the ring (raw JSON-RPC over HTTP, to send exactly those
//! states).

use std::path::Path;

use serde_json::{Value, json};

use crate::support::{
    Serve, add_definitions, add_tools, data_home, http_client, omniforge_cli, parse_sse,
    python_driver, python2, require, two_steps_tool, uv,
};

const STATELESS: &str = "2026-07-28";

/// A 2026-07-28 `tools/call` over raw HTTP with `extra` params (`inputResponses`,
/// `requestState`): the JSON-RPC answer.
async fn call(url: &str, token: Option<&str>, arguments: Value, extra: Value) -> Value {
    call_tool(url, token, "two_steps", arguments, extra).await
}

/// [`call`] of the tool `name`.
async fn call_tool(
    url: &str,
    token: Option<&str>,
    name: &str,
    arguments: Value,
    extra: Value,
) -> Value {
    let params = json!({"name": name, "arguments": arguments});
    request(url, token, "tools/call", name, params, extra).await
}

/// A 2026-07-28 `resources/read` of `uri` over raw HTTP with `extra` params.
async fn read(url: &str, uri: &str, extra: Value) -> Value {
    request(url, None, "resources/read", uri, json!({"uri": uri}), extra).await
}

/// A 2026-07-28 request over raw HTTP (`name`: its `Mcp-Name` header) with `extra` params
/// (`inputResponses`, `requestState`): the JSON-RPC answer.
async fn request(
    url: &str,
    token: Option<&str>,
    method: &str,
    name: &str,
    mut params: Value,
    extra: Value,
) -> Value {
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": STATELESS,
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"},
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}, "sampling": {}},
    });
    for (k, v) in extra.as_object().into_iter().flatten() {
        params[k] = v.clone();
    }
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    let mut post = http_client().post(url);
    if let Some(token) = token {
        post = post.bearer_auth(token);
    }
    let response = post
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", STATELESS)
        .header("mcp-method", method)
        .header("mcp-name", name)
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    let sse = response
        .headers()
        .get("content-type")
        .is_some_and(|v| v.to_str().unwrap_or("").starts_with("text/event-stream"));
    let bytes = response.bytes().await.unwrap();
    let messages: Vec<Value> = if sse {
        parse_sse(&bytes, true).0
    } else {
        vec![serde_json::from_slice(&bytes).unwrap()]
    };
    messages
        .into_iter()
        .find(|m| m.get("method").is_none() && m.get("id").is_some())
        .unwrap_or_else(|| panic!("no answer: {}", String::from_utf8_lossy(&bytes)))
}

fn accept(field: &str, value: &str) -> Value {
    json!({"action": "accept", "content": {field: value}})
}

/// Writes a request-state key file of `keys` (id, one byte repeated 32 times), mode 0600.
fn key_file(path: &Path, keys: &[(&str, u8)]) {
    use base64::Engine as _;
    let text: String = keys
        .iter()
        .map(|(id, b)| {
            let key = base64::engine::general_purpose::STANDARD.encode([*b; 32]);
            format!("{id} {key}\n")
        })
        .collect();
    std::fs::write(path, text).unwrap();
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).unwrap();
}

fn refused(answer: &Value) {
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
    assert_eq!(
        answer["error"]["message"], "requestState failed verification",
        "{answer}"
    );
}

/// Runs `support/py/content_request.py` with `args` (after the URL): its JSON line.
async fn content_request(url: &str, args: &[&str]) -> Value {
    let driver = crate::support::py_driver("content_request.py");
    let out = python_driver(&python2(), &driver)
        .arg(url)
        .args(args)
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The `message` of each elicitation a driver answered, in order.
fn asked(out: &Value) -> Vec<&str> {
    out["asked"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["message"].as_str().unwrap())
        .collect()
}

/// The SDK client meets `input_required` twice and retries with each answer: the script re-runs
/// and completes with both answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_elicitation_over_two_rounds_through_the_python_sdk() {
    crate::support::needs_deps!();
    require(&[uv(), python2()]);
    let (_home, data) = data_home();
    add_tools(&data, &[two_steps_tool()]);
    let server = Serve::on_data(&data, &[]).await;
    let driver = crate::support::py_driver("input_required.py");
    let answers = json!([accept("name", "Alice"), accept("color", "blue")]);
    let out = python_driver(&python2(), &driver)
        .args([server.url.as_str(), "two_steps", &answers.to_string()])
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        out["result"]["content"][0]["text"], "Alice likes blue",
        "{out}"
    );
    assert_eq!(asked(&out), ["Name?", "Colour?"], "{out}");
    server.assert_no_panic();
}

/// A state opens only for the principal, tool and arguments it was sealed for, untampered,
/// under a key still in the ring (rotation: a new first key, the old one second, still opens).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_state_opens_only_for_its_caller_request_and_keyring() {
    crate::support::needs_deps!();
    require(&[uv()]);
    let (home, data) = data_home();
    add_tools(&data, &[two_steps_tool()]);
    let tokens = home.path().join("tokens.txt");
    std::fs::write(
        &tokens,
        "alice alice-token tools:call\nbob bob-token tools:call\n",
    )
    .unwrap();
    {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&tokens, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    let keys = home.path().join("request-state.key");
    let serve = async |ring: &[(&str, u8)]| {
        key_file(&keys, ring);
        Serve::on_data(
            &data,
            &[
                "--token-file",
                tokens.to_str().unwrap(),
                "--request-state-key-file",
                keys.to_str().unwrap(),
            ],
        )
        .await
    };
    let args = json!({"x": 1});
    let server = serve(&[("k1", 1)]).await;
    let alice = Some("alice-token");
    let first = call(&server.url, alice, args.clone(), json!({})).await;
    let result = &first["result"];
    assert_eq!(result["resultType"], "input_required", "{first}");
    assert_eq!(
        result["inputRequests"]["step1"]["method"], "elicitation/create",
        "{first}"
    );
    let state = result["requestState"].as_str().unwrap().to_owned();
    let step1 = json!({"step1": accept("name", "Alice")});
    let round2 = json!({"inputResponses": step1, "requestState": state});
    // Round 2 as alice: the next question, with a new state.
    let second = call(&server.url, alice, args.clone(), round2.clone()).await;
    assert_eq!(second["result"]["resultType"], "input_required", "{second}");
    assert!(second["result"]["inputRequests"]["step2"].is_object());
    assert_ne!(second["result"]["requestState"], state.as_str());
    // Tampered, another principal's, another request's (other arguments): refused.
    let tampered = json!({"inputResponses": step1, "requestState": format!("{state}-TAMPERED")});
    refused(&call(&server.url, alice, args.clone(), tampered).await);
    refused(&call(&server.url, Some("bob-token"), args.clone(), round2.clone()).await);
    refused(&call(&server.url, alice, json!({"x": 2}), round2.clone()).await);
    drop(server);

    // Rotated in: k2 seals, k1 (second) still opens round 1's state.
    let server = serve(&[("k2", 2), ("k1", 1)]).await;
    let second = call(&server.url, alice, args.clone(), round2.clone()).await;
    assert_eq!(second["result"]["resultType"], "input_required", "{second}");
    let state2 = second["result"]["requestState"].as_str().unwrap();
    let round3 = json!({"inputResponses": {"step2": accept("color", "blue")},
        "requestState": state2});
    let done = call(&server.url, alice, args.clone(), round3.clone()).await;
    assert_eq!(
        done["result"]["content"][0]["text"], "Alice likes blue",
        "{done}"
    );
    drop(server);

    // Rotated out: k1 is gone, so round 1's state no longer opens; k2's still does.
    let server = serve(&[("k3", 3), ("k2", 2)]).await;
    refused(&call(&server.url, alice, args.clone(), round2).await);
    let done = call(&server.url, alice, args, round3).await;
    assert_eq!(
        done["result"]["content"][0]["text"], "Alice likes blue",
        "{done}"
    );
    server.assert_no_panic();
}

/// A question asked through an input-required result passes the same secret redaction as one
/// sent live: the secret's value never reaches the client.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_question_under_replay_has_secret_values_redacted() {
    crate::support::needs_deps!();
    require(&[uv()]);
    let (_home, data) = data_home();
    let secret = format!("sk-mrtr-{}", std::process::id());
    let (ok, _, err) = omniforge_cli(&data, &["secret", "set", "E2E_KEY"], Some(&secret)).await;
    assert!(ok, "omniforge secret set: {err}");
    let code = r#"import os
import omniforge
omniforge.sample("the key is " + os.environ["E2E_KEY"], max_tokens=5, key="leak")
omniforge.result("done")
"#;
    add_tools(
        &data,
        &[
            json!({"name": "leaky", "description": "asks with a secret", "code": code,
            "secrets": ["E2E_KEY"]}),
        ],
    );
    let server = Serve::on_data(&data, &[]).await;
    let answer = call_tool(&server.url, None, "leaky", json!({}), json!({})).await;
    assert!(!answer.to_string().contains(&secret), "{answer}");
    let asked = &answer["result"]["inputRequests"]["leak"];
    assert_eq!(
        asked["params"]["messages"][0]["content"]["text"], "the key is [redacted]",
        "{answer}"
    );
    server.assert_no_panic();
}

/// Stores the script template `ask://{topic}` in `data` with `omniforge resource add`: it asks
/// one question (key `detail`) and prints `<topic>: <detail>`.
fn add_asking_template(data: &Path) {
    let code = r#"import json, sys
import omniforge
v = json.load(sys.stdin)
answer = omniforge.elicit("More about %s?" % v["topic"], {"type": "object",
    "properties": {"detail": {"type": "string"}}, "required": ["detail"]}, key="detail")
print("%s: %s" % (v["topic"], (answer.get("content") or {}).get("detail")), end="")
"#;
    let template = json!({"uriTemplate": "ask://{topic}", "name": "ask",
        "mimeType": "text/plain", "code": code});
    add_definitions(data, "resource", &[template]);
}

/// A script template's question reaches the official Python SDK 2.x client under both
/// revisions: as an `elicitation/create` request in a 2025-11-25 session, and as an
/// `input_required` result that the client answers by retrying `resources/read` under
/// 2026-07-28. Either way the read completes with the answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_template_script_asks_the_python_sdk_under_either_revision() {
    crate::support::needs_deps!();
    require(&[uv(), python2()]);
    let (_home, data) = data_home();
    add_asking_template(&data);
    let server = Serve::on_data(&data, &[]).await;
    let answers = json!([accept("detail", "fast")]).to_string();
    for mode in ["legacy", STATELESS] {
        let out = content_request(&server.url, &["resource", "ask://rust", &answers, mode]).await;
        assert_eq!(
            out["result"]["contents"],
            json!([{"uri": "ask://rust", "mimeType": "text/plain", "text": "rust: fast"}]),
            "{mode}: {out}"
        );
        // Asked once, with the script's question (a legacy request also carries `_meta`).
        let asked = out["asked"].as_array().unwrap();
        assert_eq!(asked.len(), 1, "{mode}: {out}");
        assert_eq!(asked[0]["message"], "More about rust?", "{mode}: {out}");
        assert_eq!(
            asked[0]["requestedSchema"]["required"],
            json!(["detail"]),
            "{mode}: {out}"
        );
    }
    server.assert_no_panic();
}

/// A template read's `requestState` opens only for the URI it was sealed for, untampered; the
/// retry with the answer completes the read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_template_request_state_is_bound_to_its_uri() {
    crate::support::needs_deps!();
    require(&[uv()]);
    let (_home, data) = data_home();
    add_asking_template(&data);
    let server = Serve::on_data(&data, &[]).await;
    let first = read(&server.url, "ask://rust", json!({})).await;
    let result = &first["result"];
    assert_eq!(result["resultType"], "input_required", "{first}");
    assert_eq!(
        result["inputRequests"]["detail"]["params"]["message"], "More about rust?",
        "{first}"
    );
    let state = result["requestState"].as_str().unwrap().to_owned();
    let responses = json!({"detail": accept("detail", "fast")});
    let retry = json!({"inputResponses": responses, "requestState": state});
    refused(&read(&server.url, "ask://go", retry.clone()).await);
    let tampered =
        json!({"inputResponses": responses, "requestState": format!("{state}-TAMPERED")});
    refused(&read(&server.url, "ask://rust", tampered).await);
    let done = read(&server.url, "ask://rust", retry).await;
    assert_eq!(
        done["result"]["contents"],
        json!([{"uri": "ask://rust", "mimeType": "text/plain", "text": "rust: fast"}]),
        "{done}"
    );
    server.assert_no_panic();
}

/// A 2026-07-28 `prompts/get` of `name` with `arguments` over raw HTTP with `extra` params.
async fn get_prompt(url: &str, name: &str, arguments: Value, extra: Value) -> Value {
    let params = json!({"name": name, "arguments": arguments});
    request(url, None, "prompts/get", name, params, extra).await
}

/// The script prompt `plan` (argument `topic`): asks a goal (key `goal`), then a deadline (key
/// `deadline`), and prints two messages naming the three.
fn plan_prompt() -> Value {
    let code = r#"import json, sys
import omniforge
args = json.load(sys.stdin)
def ask(message, field):
    answer = omniforge.elicit(message, {"type": "object",
        "properties": {field: {"type": "string"}}, "required": [field]}, key=field)
    return (answer.get("content") or {}).get(field)
goal = ask("Goal for %s?" % args["topic"], "goal")
deadline = ask("Deadline?", "deadline")
print(json.dumps({"description": "plan for " + args["topic"], "messages": [
    {"role": "user", "content": "Plan %s: %s" % (args["topic"], goal)},
    {"role": "assistant", "content": {"type": "text", "text": "Due %s" % deadline}},
]}))
"#;
    json!({"name": "plan", "description": "Plans a topic",
        "arguments": [{"name": "topic", "required": true}], "code": code})
}

/// A script prompt's questions over two rounds of `input_required` under 2026-07-28 (raw
/// HTTP): each round a new state, bound to the prompt's arguments and untampered; the last
/// round answers the messages the script printed. A script that fails or prints no messages
/// is a -32603 JSON-RPC error naming the prompt, and the server goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prompt_script_asks_over_two_rounds_of_input_required() {
    crate::support::needs_deps!();
    require(&[uv()]);
    let (_home, data) = data_home();
    add_definitions(
        &data,
        "prompt",
        &[
            plan_prompt(),
            json!({"name": "broken", "code": "raise RuntimeError('no plan today')"}),
            json!({"name": "mute", "code": "print('{\"text\": 1}')"}),
        ],
    );
    let server = Serve::on_data(&data, &[]).await;
    let args = json!({"topic": "release"});
    let first = get_prompt(&server.url, "plan", args.clone(), json!({})).await;
    let result = &first["result"];
    assert_eq!(result["resultType"], "input_required", "{first}");
    assert_eq!(
        result["inputRequests"]["goal"]["params"]["message"], "Goal for release?",
        "{first}"
    );
    let state = result["requestState"].as_str().unwrap().to_owned();
    let round2 = json!({"inputResponses": {"goal": accept("goal", "ship 1.0")},
        "requestState": state});
    let second = get_prompt(&server.url, "plan", args.clone(), round2.clone()).await;
    assert_eq!(second["result"]["resultType"], "input_required", "{second}");
    assert_eq!(
        second["result"]["inputRequests"]["deadline"]["params"]["message"], "Deadline?",
        "{second}"
    );
    let state2 = second["result"]["requestState"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_ne!(state2, state);
    // Another request's arguments, or a tampered state: refused before the script runs.
    refused(
        &get_prompt(
            &server.url,
            "plan",
            json!({"topic": "other"}),
            round2.clone(),
        )
        .await,
    );
    let tampered = json!({"inputResponses": {"goal": accept("goal", "x")},
        "requestState": format!("{state}-TAMPERED")});
    refused(&get_prompt(&server.url, "plan", args.clone(), tampered).await);
    let round3 = json!({"inputResponses": {"deadline": accept("deadline", "Friday")},
        "requestState": state2});
    let done = get_prompt(&server.url, "plan", args, round3).await;
    assert_eq!(
        done["result"],
        json!({"resultType": "complete", "description": "plan for release", "messages": [
            {"role": "user", "content": {"type": "text", "text": "Plan release: ship 1.0"}},
            {"role": "assistant", "content": {"type": "text", "text": "Due Friday"}}]}),
        "{done}"
    );

    let broken = get_prompt(&server.url, "broken", json!({}), json!({})).await;
    assert_eq!(broken["error"]["code"], -32603, "{broken}");
    let message = broken["error"]["message"].as_str().unwrap();
    assert!(
        message.starts_with("prompt broken failed:") && message.contains("no plan today"),
        "{broken}"
    );
    let mute = get_prompt(&server.url, "mute", json!({}), json!({})).await;
    assert_eq!(mute["error"]["code"], -32603, "{mute}");
    assert!(
        mute["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("prompt mute: its script printed no usable messages"),
        "{mute}"
    );
    server.assert_no_panic();
}

/// A script prompt's questions reach the official Python SDK 2.x client under both revisions:
/// as `elicitation/create` requests in a 2025-11-25 session, and as `input_required` results
/// that the client answers by retrying `prompts/get` under 2026-07-28.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prompt_script_asks_the_python_sdk_under_either_revision() {
    crate::support::needs_deps!();
    require(&[uv(), python2()]);
    let (_home, data) = data_home();
    add_definitions(&data, "prompt", &[plan_prompt()]);
    let server = Serve::on_data(&data, &[]).await;
    let answers = json!([accept("goal", "ship"), accept("deadline", "May")]).to_string();
    for mode in ["legacy", STATELESS] {
        let arguments = r#"{"topic": "docs"}"#;
        let out =
            content_request(&server.url, &["prompt", "plan", &answers, mode, arguments]).await;
        assert_eq!(
            out["result"]["messages"][0]["content"]["text"], "Plan docs: ship",
            "{mode}: {out}"
        );
        assert_eq!(
            out["result"]["messages"][1]["content"]["text"], "Due May",
            "{mode}: {out}"
        );
        assert_eq!(
            asked(&out),
            ["Goal for docs?", "Deadline?"],
            "{mode}: {out}"
        );
    }
    server.assert_no_panic();
}
