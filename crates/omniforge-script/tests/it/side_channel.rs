//! The side channel and the helper module.

use std::time::Duration;

use omniforge_script::*;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::util::*;

const SCRIPT: &str = r#"
import omniforge
omniforge.progress(1, 3, "one")
omniforge.progress(1, 3, "repeat: dropped")
omniforge.progress(2, 3)
omniforge.log("warning", {"rows": 10})
answer = omniforge.request("sample", {"prompt": "hi"}, timeout=10)
print("answer", answer)
try:
    omniforge.request("elicit", {}, timeout=10)
except omniforge.RequestError as e:
    print("elicit error", e.code)
try:
    omniforge.request("roots", None, timeout=10)
except omniforge.RequestError as e:
    print("roots error", e.code, e.message)
omniforge.result(content="done", structured={"n": 3})
"#;

#[tokio::test]
async fn progress_log_result_and_requests_round_trip() {
    let (tx, mut rx) = mpsc::channel(16);
    let mut s = spec(SCRIPT).await;
    s.messages = Some(tx);
    let runner = sandboxed();
    let run = tokio::spawn(async move { runner.run(s, CancellationToken::new()).await.unwrap() });
    let mut seen = Vec::new();
    while let Some(msg) = rx.recv().await {
        match msg {
            ScriptMessage::Progress(p) => {
                seen.push(format!("progress {} {:?} {:?}", p.done, p.total, p.message))
            }
            ScriptMessage::Log(l) => seen.push(format!("log {} {}", l.level, l.data)),
            ScriptMessage::Result(r) => {
                seen.push(format!("result {:?} {:?}", r.content, r.structured))
            }
            ScriptMessage::Request(req) => {
                seen.push(format!("request {} {}", req.method(), req.params()));
                match req.method() {
                    "sample" => req.respond(Ok(json!({"text": "hello back"}))),
                    "roots" => req.respond(Err(RpcError {
                        code: -32601,
                        message: "no roots".into(),
                        data: None,
                    })),
                    _ => drop(req), // unanswered: the script gets an error
                }
            }
            other => seen.push(format!("other {other:?}")),
        }
    }
    let out = run.await.unwrap();
    assert_eq!(
        seen,
        [
            "progress 1 Some(3.0) Some(\"one\")",
            "progress 2 Some(3.0) None",
            "log warning {\"rows\":10}",
            "request sample {\"prompt\":\"hi\"}",
            "request elicit {}",
            "request roots null",
            "result Some(String(\"done\")) Some(Object {\"n\": Number(3)})",
        ]
    );
    assert_eq!(
        stdout(&out),
        "answer {'text': 'hello back'}\nelicit error -32603\nroots error -32601 no roots\n",
        "{out:?}"
    );
    assert_eq!(
        out.result,
        Some(ScriptResult {
            content: Some(json!("done")),
            structured: Some(json!({"n": 3})),
            is_error: false,
        })
    );
}

#[tokio::test]
async fn without_a_receiver_requests_fail_and_result_is_kept() {
    let code = "import omniforge\ntry:\n    omniforge.request('sample', {}, timeout=5)\nexcept omniforge.RequestError as e:\n    print(e.code)\nomniforge.result(structured={'ok': True})\n";
    let out = run(&sandboxed(), spec(code).await).await;
    assert_eq!(stdout(&out), "-32601\n");
    assert_eq!(out.result.unwrap().structured, Some(json!({"ok": true})));
}

#[tokio::test]
async fn helper_works_when_run_by_hand() {
    // No OMNIFORGE_FD: progress and log do nothing, result prints JSON, request raises.
    let env = base_env().await;
    let code = "import omniforge\nomniforge.progress(1)\nomniforge.log('info', 'x')\nomniforge.result(content='c', structured={'a': 1})\ntry:\n    omniforge.request('sample')\nexcept RuntimeError:\n    print('no channel')\nprint(omniforge.args())\n";
    let out = tokio::process::Command::new(env.python())
        .args(["-I", "-c", code])
        .env_clear()
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "{\"content\": \"c\", \"structured\": {\"a\": 1}}\nno channel\n{}\n"
    );
}

#[tokio::test]
async fn request_times_out_in_the_script() {
    let (tx, mut rx) = mpsc::channel(4);
    let code = "import omniforge\ntry:\n    omniforge.request('sample', {}, timeout=0.3)\nexcept TimeoutError:\n    print('timed out')\n";
    let mut s = spec(code).await;
    s.messages = Some(tx);
    let runner = sandboxed();
    let run = tokio::spawn(async move { runner.run(s, CancellationToken::new()).await.unwrap() });
    // Hold the request without answering until the run is over.
    let held = rx.recv().await;
    let out = tokio::time::timeout(Duration::from_secs(10), run)
        .await
        .unwrap()
        .unwrap();
    drop(held);
    assert_eq!(stdout(&out), "timed out\n");
}

#[tokio::test]
async fn content_builders_make_mcp_items() {
    let env = base_env().await;
    let code = r#"import json, omniforge
items = [
    omniforge.text("hi"),
    omniforge.image(b"\x89PNG", "image/png"),
    omniforge.audio("UklGRg==", "audio/wav", annotations={"audience": ["user"]}),
    omniforge.resource("test://t", text="body", mime_type="text/plain"),
    omniforge.resource("test://b", blob=b"\x00\x01"),
    omniforge.resource_link("test://l", "l", mime_type="text/csv", size=3),
]
print(json.dumps(items, sort_keys=True))
for bad in (lambda: omniforge.image("not base64!", "image/png"),
            lambda: omniforge.resource("test://x"),
            lambda: omniforge.resource("test://x", text="a", blob=b"b"),
            lambda: omniforge.audio(42, "audio/wav")):
    try:
        bad()
    except (ValueError, TypeError) as e:
        print(type(e).__name__, e)
"#;
    let out = tokio::process::Command::new(env.python())
        .args(["-I", "-c", code])
        .env_clear()
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    let mut lines = text.lines();
    let items: serde_json::Value = serde_json::from_str(lines.next().unwrap()).unwrap();
    assert_eq!(
        items,
        json!([
            {"type": "text", "text": "hi"},
            {"type": "image", "data": "iVBORw==", "mimeType": "image/png"},
            {"type": "audio", "data": "UklGRg==", "mimeType": "audio/wav",
             "annotations": {"audience": ["user"]}},
            {"type": "resource", "resource": {"uri": "test://t", "mimeType": "text/plain", "text": "body"}},
            {"type": "resource", "resource": {"uri": "test://b", "blob": "AAE="}},
            {"type": "resource_link", "uri": "test://l", "name": "l", "mimeType": "text/csv", "size": 3},
        ])
    );
    assert_eq!(
        lines.collect::<Vec<_>>(),
        [
            "ValueError image: a str must be base64 text (pass bytes to have it encoded)",
            "ValueError resource: give exactly one of text= or blob=",
            "ValueError resource: give exactly one of text= or blob=",
            "TypeError audio: expected bytes or base64 str, got int",
        ]
    );
}

/// `sample`, `elicit`, `roots` and `ask` send one `ask` request per round: the MCP params
/// unchanged, each question under its key (`key=`, else `q1`, `q2`, … in asking order).
#[tokio::test]
async fn questions_are_asked_by_key_with_their_mcp_params() {
    let (tx, mut rx) = mpsc::channel(8);
    let code = r#"import omniforge
print(omniforge.sample("hi", max_tokens=5, system_prompt="terse", temperature=0.2, timeout=3))
print(omniforge.elicit("Name?", {"type": "object", "properties": {"n": {"type": "string", "default": "x"}}}, key="name"))
print(omniforge.roots())
print(omniforge.ask({"a": omniforge.roots_request(), "b": omniforge.elicit_request("B?", {})}))
"#;
    let mut s = spec(code).await;
    s.messages = Some(tx);
    let runner = sandboxed();
    let run = tokio::spawn(async move { runner.run(s, CancellationToken::new()).await.unwrap() });
    let mut seen = Vec::new();
    while let Some(message) = rx.recv().await {
        if let ScriptMessage::Request(request) = message {
            seen.push((request.method().to_owned(), request.params().clone()));
            let mut responses = serde_json::Map::new();
            for (key, question) in request.params()["requests"].as_object().unwrap() {
                let answer = match question["method"].as_str().unwrap() {
                    "sampling/createMessage" => {
                        json!({"role": "assistant", "content": {"type": "text", "text": "yo"}})
                    }
                    "elicitation/create" => json!({"action": "decline"}),
                    _ => json!({"roots": [{"uri": "file:///r"}]}),
                };
                responses.insert(key.clone(), answer);
            }
            request.respond(Ok(json!({"responses": responses})));
        }
    }
    let out = tokio::time::timeout(Duration::from_secs(20), run)
        .await
        .unwrap()
        .unwrap();
    let ask = |requests: Value| ("ask".to_owned(), json!({"requests": requests}));
    let mut first = ask(json!({"q1": {"method": "sampling/createMessage", "params":
        {"messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}],
         "maxTokens": 5, "systemPrompt": "terse", "temperature": 0.2}}}));
    first.1["timeout_s"] = json!(3.0);
    assert_eq!(
        seen,
        [
            first,
            ask(
                json!({"name": {"method": "elicitation/create", "params": {"message": "Name?",
                "requestedSchema": {"type": "object", "properties": {"n": {"type": "string", "default": "x"}}}}}})
            ),
            // The named question did not use a number: the next unnamed one is q2.
            ask(json!({"q2": {"method": "roots/list", "params": {}}})),
            ask(json!({"a": {"method": "roots/list", "params": {}},
                       "b": {"method": "elicitation/create", "params": {"message": "B?", "requestedSchema": {}}}})),
        ]
    );
    assert_eq!(
        stdout(&out),
        "{'content': {'text': 'yo', 'type': 'text'}, 'role': 'assistant'}\n{'action': 'decline'}\n\
         [{'uri': 'file:///r'}]\n{'a': {'roots': [{'uri': 'file:///r'}]}, 'b': {'action': 'decline'}}\n"
    );
}
