//! Stored resources, resource templates and prompts end to end: the conformance pack imported
//! with `omniforge pack import`, served by the real binary over stdio, checked exactly (the
//! conformance suite only checks shapes); subscriptions and list changes after CLI writes; the
//! authoring built-ins; pack idempotence, atomicity and export/import round trips; and the
//! official Python SDK (1.x and 2.x) reading resources and prompts.
//!
//! Each test has its own temporary data directory; every server is a child killed by its own
//! pid when the test ends (`kill_on_drop` as the backstop).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::process::Command;

use crate::support::{
    BIN, HttpClient, StdioClient, cli_ok, http_client, omniforge_cli, open_stream, repo_root,
    text_of, uv, wait_message,
};

/// The 1x1 red PNG of the conformance suite's reference server.
const PNG_B64: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";

fn conformance_pack() -> PathBuf {
    repo_root().join("packs/conformance.toml")
}

/// A data directory with the conformance pack imported.
async fn data_with_pack() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let pack = conformance_pack();
    cli_ok(dir.path(), &["pack", "import", pack.to_str().unwrap()]).await;
    dir
}

#[tokio::test]
async fn conformance_pack_is_served_exactly() {
    crate::support::needs_deps!();
    let dir = data_with_pack().await;
    let mut mcp = StdioClient::start(dir.path(), &[]).await;
    let caps = &mcp.initialize["capabilities"];
    assert_eq!(
        caps["resources"],
        json!({"subscribe": true, "listChanged": true})
    );
    assert_eq!(caps["prompts"], json!({"listChanged": true}));
    assert_eq!(caps["completions"], json!({}));

    let list = mcp.result("resources/list", json!({})).await;
    assert_eq!(
        list["resources"],
        json!([
            {"uri": "test://static-binary", "name": "static-binary", "title": "Static Binary Resource",
             "description": "A static binary resource (image) for testing", "mimeType": "image/png", "size": 70},
            {"uri": "test://static-text", "name": "static-text", "title": "Static Text Resource",
             "description": "A static text resource for testing", "mimeType": "text/plain", "size": 48},
            {"uri": "test://watched-resource", "name": "watched-resource", "title": "Watched Resource",
             "description": "A resource that changes when it is written again (subscribe to it for notifications/resources/updated)",
             "mimeType": "text/plain", "size": 24},
        ])
    );
    let templates = mcp.result("resources/templates/list", json!({})).await;
    assert_eq!(
        templates["resourceTemplates"],
        json!([{"uriTemplate": "test://template/{id}/data", "name": "template", "title": "Resource Template",
                "description": "A resource template with parameter substitution", "mimeType": "application/json"}])
    );

    let read = |uri: &str| json!({"uri": uri});
    let text = mcp
        .result("resources/read", read("test://static-text"))
        .await;
    assert_eq!(
        text,
        json!({"contents": [{"uri": "test://static-text", "mimeType": "text/plain",
                             "text": "This is the content of the static text resource."}]})
    );
    let binary = mcp
        .result("resources/read", read("test://static-binary"))
        .await;
    assert_eq!(
        binary,
        json!({"contents": [{"uri": "test://static-binary", "mimeType": "image/png", "blob": PNG_B64}]})
    );
    let templated = mcp
        .result("resources/read", read("test://template/123/data"))
        .await;
    assert_eq!(
        templated,
        json!({"contents": [{"uri": "test://template/123/data", "mimeType": "application/json",
                             "text": r#"{"id":"123","templateTest":true,"data":"Data for ID: 123"}"#}]})
    );
    for unknown in [
        "test://nothing-here",
        "test://template/1/2/data",
        "omniforge://runs/x/output",
    ] {
        let error = mcp.error("resources/read", read(unknown)).await;
        assert_eq!(error["code"], json!(-32002), "{unknown}: {error}");
        assert_eq!(error["data"], json!({"uri": unknown}), "{unknown}: {error}");
        assert!(
            error["message"].as_str().unwrap().contains(unknown),
            "{error}"
        );
    }

    let prompts = mcp.result("prompts/list", json!({})).await;
    let names: Vec<&str> = prompts["prompts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "test_input_required_result_prompt",
            "test_prompt_with_arguments",
            "test_prompt_with_embedded_resource",
            "test_prompt_with_image",
            "test_simple_prompt"
        ]
    );
    assert_eq!(
        prompts["prompts"][1],
        json!({"name": "test_prompt_with_arguments", "title": "Prompt With Arguments",
               "description": "A prompt with required arguments", "arguments": [
                   {"name": "arg1", "description": "First test argument", "required": true},
                   {"name": "arg2", "description": "Second test argument", "required": true}]})
    );
    let simple = mcp
        .result("prompts/get", json!({"name": "test_simple_prompt"}))
        .await;
    assert_eq!(
        simple,
        json!({"description": "A simple prompt without arguments", "messages": [
            {"role": "user", "content": {"type": "text", "text": "This is a simple prompt for testing."}}]})
    );
    let with_args = mcp
        .result(
            "prompts/get",
            json!({"name": "test_prompt_with_arguments", "arguments": {"arg1": "hello", "arg2": "world"}}),
        )
        .await;
    assert_eq!(
        with_args["messages"],
        json!([{"role": "user", "content": {"type": "text",
                "text": "Prompt with arguments: arg1='hello', arg2='world'"}}])
    );
    let embedded = mcp
        .result(
            "prompts/get",
            json!({"name": "test_prompt_with_embedded_resource", "arguments": {"resourceUri": "test://example-resource"}}),
        )
        .await;
    assert_eq!(
        embedded["messages"],
        json!([
            {"role": "user", "content": {"type": "resource", "resource": {
                "uri": "test://example-resource", "mimeType": "text/plain",
                "text": "Embedded resource content for testing."}}},
            {"role": "user", "content": {"type": "text", "text": "Please process the embedded resource above."}}
        ])
    );
    let image = mcp
        .result("prompts/get", json!({"name": "test_prompt_with_image"}))
        .await;
    assert_eq!(
        image["messages"],
        json!([
            {"role": "user", "content": {"type": "image", "data": PNG_B64, "mimeType": "image/png"}},
            {"role": "user", "content": {"type": "text", "text": "Please analyze the image above."}}
        ])
    );

    // Bad prompts/get calls are -32602 and say what is wrong.
    let missing = mcp
        .error(
            "prompts/get",
            json!({"name": "test_prompt_with_arguments", "arguments": {"arg1": "x"}}),
        )
        .await;
    assert_eq!(missing["code"], json!(-32602));
    assert_eq!(
        missing["message"],
        json!(
            "prompt test_prompt_with_arguments: missing required argument arg2; its arguments: arg1 (required), arg2 (required)"
        )
    );
    let unknown_arg = mcp
        .error(
            "prompts/get",
            json!({"name": "test_simple_prompt", "arguments": {"x": "1"}}),
        )
        .await;
    assert_eq!(unknown_arg["code"], json!(-32602));
    assert!(
        unknown_arg["message"]
            .as_str()
            .unwrap()
            .contains("unknown argument \"x\""),
        "{unknown_arg}"
    );
    let unknown_prompt = mcp.error("prompts/get", json!({"name": "nope"})).await;
    assert_eq!(unknown_prompt["code"], json!(-32602));

    // completion/complete: declared values by prefix, with total and hasMore.
    let complete = |name: &str, value: &str| {
        json!({"ref": {"type": "ref/prompt", "name": "test_prompt_with_arguments"},
               "argument": {"name": name, "value": value}})
    };
    let done = mcp
        .result("completion/complete", complete("arg1", "te"))
        .await;
    assert_eq!(
        done,
        json!({"completion": {"values": ["test", "testValue1"], "total": 2, "hasMore": false}})
    );
    let all = mcp
        .result("completion/complete", complete("arg1", ""))
        .await;
    assert_eq!(
        all["completion"]["values"],
        json!(["test", "testValue1", "hello"])
    );
    let none = mcp
        .result("completion/complete", complete("arg2", "a"))
        .await;
    assert_eq!(
        none,
        json!({"completion": {"values": [], "total": 0, "hasMore": false}})
    );
    let bad = mcp.error("completion/complete", complete("arg9", "")).await;
    assert_eq!(bad["code"], json!(-32602));
    let template_var = mcp
        .result(
            "completion/complete",
            json!({"ref": {"type": "ref/resource", "uri": "test://template/{id}/data"},
                   "argument": {"name": "id", "value": "1"}}),
        )
        .await;
    assert_eq!(template_var["completion"]["values"], json!([]));
}

/// Writes `value` as JSON to `dir/name` and returns the path as text.
fn write_json(dir: &Path, name: &str, value: &Value) -> String {
    let path = dir.join(name);
    std::fs::write(&path, value.to_string()).unwrap();
    path.to_str().unwrap().to_owned()
}

#[tokio::test]
async fn cli_changes_reach_subscribers_and_list_listeners() {
    crate::support::needs_deps!();
    let dir = data_with_pack().await;
    let files = tempfile::tempdir().unwrap();
    let mut mcp = StdioClient::start(dir.path(), &[]).await;
    let unknown = mcp
        .error("resources/subscribe", json!({"uri": "test://not-stored"}))
        .await;
    assert_eq!(unknown["code"], json!(-32002));
    let ok = mcp
        .result(
            "resources/subscribe",
            json!({"uri": "test://watched-resource"}),
        )
        .await;
    assert_eq!(ok, json!({}));

    // Another process (the CLI) changes the watched resource.
    let watched = |text: &str| json!({"uri": "test://watched-resource", "name": "watched-resource", "mimeType": "text/plain", "text": text});
    let file = write_json(files.path(), "w1.json", &watched("changed once"));
    let out = cli_ok(dir.path(), &["resource", "add", &file]).await;
    assert!(
        out.contains("Updated resource test://watched-resource"),
        "{out}"
    );
    let updated = json!({"uri": "test://watched-resource"});
    assert!(
        mcp.wait_for(
            "notifications/resources/updated",
            Some(&updated),
            Duration::from_secs(5)
        )
        .await,
        "no resources/updated within 5 s of the CLI write; seen {:?}",
        mcp.notifications
    );
    let read = mcp
        .result("resources/read", json!({"uri": "test://watched-resource"}))
        .await;
    assert_eq!(read["contents"][0]["text"], json!("changed once"));

    // The same content again changes nothing: no notification.
    cli_ok(dir.path(), &["resource", "add", &file]).await;
    assert!(
        !mcp.wait_for(
            "notifications/resources/updated",
            None,
            Duration::from_secs(3)
        )
        .await,
        "an unchanged write must not notify"
    );

    // After unsubscribe, a change is not reported to this session.
    mcp.result(
        "resources/unsubscribe",
        json!({"uri": "test://watched-resource"}),
    )
    .await;
    let file = write_json(files.path(), "w2.json", &watched("changed twice"));
    cli_ok(dir.path(), &["resource", "add", &file]).await;
    assert!(
        !mcp.wait_for(
            "notifications/resources/updated",
            None,
            Duration::from_secs(3)
        )
        .await,
        "resources/updated after unsubscribe"
    );

    // New prompt: prompts/list_changed; removed resource: resources/list_changed.
    mcp.notifications.clear();
    let prompt = json!({"name": "review", "description": "Review code",
        "arguments": [{"name": "code", "required": true}],
        "messages": [{"role": "user", "content": "Review this:\n{code}"}]});
    let file = write_json(files.path(), "p.json", &prompt);
    let out = cli_ok(dir.path(), &["prompt", "add", &file]).await;
    assert!(out.contains("Created prompt review"), "{out}");
    assert!(
        mcp.wait_for(
            "notifications/prompts/list_changed",
            None,
            Duration::from_secs(5)
        )
        .await,
        "no prompts/list_changed; seen {:?}",
        mcp.notifications
    );
    let got = mcp
        .result(
            "prompts/get",
            json!({"name": "review", "arguments": {"code": "x = 1"}}),
        )
        .await;
    assert_eq!(
        got["messages"],
        json!([{"role": "user", "content": {"type": "text", "text": "Review this:\nx = 1"}}])
    );
    cli_ok(dir.path(), &["resource", "rm", "test://static-text"]).await;
    assert!(
        mcp.wait_for(
            "notifications/resources/list_changed",
            None,
            Duration::from_secs(5)
        )
        .await,
        "no resources/list_changed; seen {:?}",
        mcp.notifications
    );
    let list = mcp.result("resources/list", json!({})).await;
    assert_eq!(list["resources"].as_array().unwrap().len(), 2);
    let gone = mcp
        .error("resources/read", json!({"uri": "test://static-text"}))
        .await;
    assert_eq!(gone["code"], json!(-32002));
}

#[tokio::test]
async fn authoring_builtins_validate_and_serve() {
    crate::support::needs_deps!();
    let dir = tempfile::tempdir().unwrap();
    let mut mcp = StdioClient::start(dir.path(), &[]).await;

    // Each mistake is an isError result that names the field.
    for (args, want) in [
        (
            json!({"uri": "no-scheme", "name": "n", "text": "t"}),
            "uri: \"no-scheme\" is not an absolute URI",
        ),
        (
            json!({"uri": "omniforge://x", "name": "n", "text": "t"}),
            "uri: the omniforge: scheme is reserved",
        ),
        (
            json!({"uri": "doc://a", "name": "n", "text": "t", "blob": "AA=="}),
            "text, blob: give exactly one",
        ),
        (
            json!({"uri": "doc://a", "name": "n", "blob": "***"}),
            "blob: not valid base64",
        ),
        (
            json!({"uri": "doc://a", "name": "n", "text": "t", "mimeType": "plain"}),
            "mimeType: \"plain\" is not a media type",
        ),
    ] {
        let result = mcp.call("omniforge_create_resource", args.clone()).await;
        assert_eq!(result["isError"], json!(true), "{args}: {result}");
        assert!(
            text_of(&result).starts_with(want),
            "{args}: {}",
            text_of(&result)
        );
    }
    let created = mcp
        .call(
            "omniforge_create_resource",
            json!({"uri": "doc://a", "name": "a", "mimeType": "text/markdown", "text": "# A"}),
        )
        .await;
    assert_eq!(created["isError"], json!(false), "{created}");
    assert!(
        mcp.wait_for(
            "notifications/resources/list_changed",
            None,
            Duration::from_secs(5)
        )
        .await
    );
    let again = mcp
        .call(
            "omniforge_create_resource",
            json!({"uri": "doc://a", "name": "a", "text": "x"}),
        )
        .await;
    assert_eq!(again["isError"], json!(true));
    assert!(
        text_of(&again).starts_with("uri: a resource \"doc://a\" already exists"),
        "{again}"
    );
    // An update keeps what it leaves out.
    let updated = mcp
        .call(
            "omniforge_update_resource",
            json!({"uri": "doc://a", "text": "# A2"}),
        )
        .await;
    assert_eq!(updated["isError"], json!(false), "{updated}");
    let read = mcp
        .result("resources/read", json!({"uri": "doc://a"}))
        .await;
    assert_eq!(
        read["contents"],
        json!([{"uri": "doc://a", "mimeType": "text/markdown", "text": "# A2"}])
    );

    // Prompts: message shape checked, placeholders filled in.
    let bad = mcp
        .call(
            "omniforge_create_prompt",
            json!({"name": "p", "messages": [{"role": "user", "content": "ok"}, {"role": "robot", "content": "x"}]}),
        )
        .await;
    assert_eq!(bad["isError"], json!(true));
    assert!(
        text_of(&bad).starts_with("messages[1]: not an MCP PromptMessage"),
        "{bad}"
    );
    let made = mcp
        .call(
            "omniforge_create_prompt",
            json!({"name": "p", "arguments": [{"name": "who", "values": ["Ada", "Alan", "Grace"]}],
                   "messages": [{"role": "assistant", "content": "Hi {who}!"}]}),
        )
        .await;
    assert_eq!(made["isError"], json!(false), "{made}");
    let got = mcp.result("prompts/get", json!({"name": "p"})).await;
    assert_eq!(
        got["messages"][0]["content"]["text"],
        json!("Hi !"),
        "optional argument left out"
    );
    let completed = mcp
        .result(
            "completion/complete",
            json!({"ref": {"type": "ref/prompt", "name": "p"}, "argument": {"name": "who", "value": "a"}}),
        )
        .await;
    assert_eq!(completed["completion"]["values"], json!(["Ada", "Alan"]));

    // A prompt is messages or code, not both; an update to code drops the messages (and back),
    // keeping the arguments; the script gets the given arguments and prints the text.
    let both = mcp
        .call(
            "omniforge_create_prompt",
            json!({"name": "q", "messages": [{"role": "user", "content": "x"}], "code": "print(1)"}),
        )
        .await;
    assert!(
        text_of(&both).starts_with("messages, code: give exactly one"),
        "{both}"
    );
    let to_code = mcp
        .call(
            "omniforge_update_prompt",
            json!({"name": "p", "code": "import json, sys\nprint('Hello ' + json.load(sys.stdin).get('who', 'nobody'))\n"}),
        )
        .await;
    assert_eq!(to_code["isError"], json!(false), "{to_code}");
    let definition = |got: Value| -> Value { serde_json::from_str(&text_of(&got)).unwrap() };
    let stored = definition(
        mcp.call("omniforge_get_definition", json!({"prompt": "p"}))
            .await,
    );
    assert!(
        stored.get("messages").is_none() && stored["code"].is_string(),
        "{stored}"
    );
    assert_eq!(stored["arguments"][0]["name"], "who", "{stored}");
    for (arguments, text) in [
        (json!({"who": "Ada"}), "Hello Ada"),
        (json!({}), "Hello nobody"),
    ] {
        let got = mcp
            .result("prompts/get", json!({"name": "p", "arguments": arguments}))
            .await;
        assert_eq!(
            got["messages"],
            json!([{"role": "user", "content": {"type": "text", "text": text}}])
        );
    }
    let to_messages = mcp
        .call(
            "omniforge_update_prompt",
            json!({"name": "p", "messages": [{"role": "assistant", "content": "Hi {who}!"}]}),
        )
        .await;
    assert_eq!(to_messages["isError"], json!(false), "{to_messages}");
    let stored = definition(
        mcp.call("omniforge_get_definition", json!({"prompt": "p"}))
            .await,
    );
    assert!(
        stored.get("code").is_none() && stored["messages"].is_array(),
        "{stored}"
    );

    // A template backed by a script that runs in the tools' sandbox, completed by a script.
    let template = mcp
        .call(
            "omniforge_create_resource_template",
            json!({"uriTemplate": "items://{id}", "name": "item", "mimeType": "text/plain",
                   "code": "import json, sys\nv = json.load(sys.stdin)\nprint('item ' + v['id'] + ' of ' + str(len(v)), end='')\n",
                   "completion_code": "import json, sys\nreq = json.load(sys.stdin)\nprint(json.dumps([req['argument']['value'] + s for s in ('1', '2')]))\n"}),
        )
        .await;
    assert_eq!(template["isError"], json!(false), "{template}");
    let read = mcp
        .result("resources/read", json!({"uri": "items://42"}))
        .await;
    assert_eq!(
        read["contents"],
        json!([{"uri": "items://42", "mimeType": "text/plain", "text": "item 42 of 1"}])
    );
    let completed = mcp
        .result(
            "completion/complete",
            json!({"ref": {"type": "ref/resource", "uri": "items://{id}"}, "argument": {"name": "id", "value": "4"}}),
        )
        .await;
    assert_eq!(
        completed["completion"],
        json!({"values": ["41", "42"], "total": 2, "hasMore": false})
    );
    // A failing template script is a JSON-RPC error with its output.
    let failing = mcp
        .call(
            "omniforge_create_resource_template",
            json!({"uriTemplate": "fail://{id}", "name": "f",
                   "code": "import sys\nprint('no item ' + sys.stdin.read())\nsys.exit(3)\n"}),
        )
        .await;
    assert_eq!(failing["isError"], json!(false), "{failing}");
    let error = mcp
        .error("resources/read", json!({"uri": "fail://7"}))
        .await;
    assert_eq!(error["code"], json!(-32603), "{error}");
    let message = error["message"].as_str().unwrap();
    assert!(
        message.starts_with(
            "resource template fail://{id} failed for fail://7: no item {\"id\":\"7\"}"
        ) && message.contains("[exit 3]"),
        "{message}"
    );
    let broken = mcp
        .call(
            "omniforge_create_resource_template",
            json!({"uriTemplate": "bad://{id}", "name": "b", "code": "def f(:\n"}),
        )
        .await;
    assert_eq!(broken["isError"], json!(true));
    assert!(
        text_of(&broken).starts_with("code: does not compile"),
        "{broken}"
    );
    let query = mcp
        .call(
            "omniforge_create_resource_template",
            json!({"uriTemplate": "q://search{?q}", "name": "q", "text": "x"}),
        )
        .await;
    assert!(
        text_of(&query).starts_with("uriTemplate: unsupported expression {?q}"),
        "{query}"
    );

    // Deleting.
    let deleted = mcp
        .call("omniforge_delete_resource", json!({"uri": "doc://a"}))
        .await;
    assert_eq!(deleted["isError"], json!(false), "{deleted}");
    let error = mcp.error("resources/read", json!({"uri": "doc://a"})).await;
    assert_eq!(error["code"], json!(-32002));
    let missing = mcp
        .call("omniforge_delete_prompt", json!({"name": "nope"}))
        .await;
    assert_eq!(missing["isError"], json!(true));
    assert_eq!(text_of(&missing), "name: prompt \"nope\" not found");
}

#[tokio::test]
async fn no_authoring_hides_the_content_builtins() {
    crate::support::needs_deps!();
    let dir = tempfile::tempdir().unwrap();
    let mut mcp = StdioClient::start(dir.path(), &["--no-authoring"]).await;
    let tools = mcp.result("tools/list", json!({})).await;
    let names: Vec<&str> = tools["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(
        !names
            .iter()
            .any(|n| n.contains("resource") || n.contains("prompt")),
        "{names:?}"
    );
    let call = mcp
        .call(
            "omniforge_create_resource",
            json!({"uri": "doc://a", "name": "a", "text": "x"}),
        )
        .await;
    assert_eq!(call["isError"], json!(true));
}

/// A pack with one tool (no dependencies), for idempotence and atomicity.
fn tool_pack() -> Value {
    json!({
        "format": 1,
        "name": "tools",
        "tools": [{"name": "shout", "description": "Upper-cases text",
                   "code": "import json, sys\nprint(json.load(sys.stdin)['text'].upper())\n",
                   "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
                   "annotations": {"readOnlyHint": true}}],
        "resources": [{"uri": "doc://readme", "name": "readme", "text": "hello", "mimeType": "text/plain"}],
    })
}

#[tokio::test]
async fn pack_import_is_idempotent_and_all_or_nothing() {
    crate::support::needs_deps!();
    let dir = tempfile::tempdir().unwrap();
    let files = tempfile::tempdir().unwrap();
    let pack = write_json(files.path(), "tools.json", &tool_pack());
    let out = cli_ok(dir.path(), &["pack", "import", &pack]).await;
    assert!(out.contains("tool shout: created (version 1)"), "{out}");
    assert!(out.contains("2 changed, 0 unchanged"), "{out}");
    let conformance = conformance_pack();
    cli_ok(
        dir.path(),
        &["pack", "import", conformance.to_str().unwrap()],
    )
    .await;
    let before = cli_ok(dir.path(), &["pack", "export"]).await;

    // Twice: nothing changes, the tool gets no new version.
    let out = cli_ok(dir.path(), &["pack", "import", &pack]).await;
    assert_eq!(
        out.trim(),
        format!("imported {pack}: 0 changed, 2 unchanged")
    );
    let out = cli_ok(
        dir.path(),
        &["pack", "import", conformance.to_str().unwrap()],
    )
    .await;
    let pack_value: Value =
        toml::from_str(&std::fs::read_to_string(&conformance).unwrap()).unwrap();
    let entries: usize = ["tools", "resources", "resource_templates", "prompts"]
        .iter()
        .map(|k| pack_value[k].as_array().map_or(0, Vec::len))
        .sum();
    assert!(
        out.contains(&format!("0 changed, {entries} unchanged")),
        "{out}"
    );
    let history = cli_ok(dir.path(), &["tool", "history", "shout"]).await;
    assert_eq!(history.lines().count(), 1, "{history}");
    assert_eq!(cli_ok(dir.path(), &["pack", "export"]).await, before);

    // A pack with errors imports nothing and lists every error with its entry.
    let mut broken = tool_pack();
    broken["tools"][0]["description"] = json!("changed, would be version 2");
    broken["tools"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "broken", "description": "d", "code": "def f(:\n"}));
    broken["resources"][0]["text"] = json!("changed");
    broken["resources"]
        .as_array_mut()
        .unwrap()
        .push(json!({"uri": "no scheme", "name": "bad"}));
    broken["prompts"] = json!([{"name": "p", "messages": [{"role": "robot", "content": "x"}]}]);
    broken["resource_templates"] = json!([{"uriTemplate": "t://{id}", "name": "t", "text": "x", "completions": {"nope": ["1"]}}]);
    let file = write_json(files.path(), "broken.json", &broken);
    let (ok, out, err) = omniforge_cli(dir.path(), &["pack", "import", &file], None).await;
    assert!(!ok, "a broken pack must fail: {out}");
    for want in [
        "nothing imported; 4 error(s):",
        "tools[1] (broken): code: does not compile",
        "resources[1] (no scheme): uri: \"no scheme\" is not an absolute URI",
        "resource_templates[0] (t://{id}): completions: \"nope\" is not a variable",
        "prompts[0] (p): messages[0]: not an MCP PromptMessage",
    ] {
        assert!(err.contains(want), "missing {want:?} in:\n{err}");
    }
    assert_eq!(
        cli_ok(dir.path(), &["pack", "export"]).await,
        before,
        "the database changed"
    );
    let history = cli_ok(dir.path(), &["tool", "history", "shout"]).await;
    assert_eq!(history.lines().count(), 1, "{history}");

    // Unknown keys and a wrong format are errors too.
    let file = write_json(files.path(), "f.json", &json!({"format": 2, "tool": []}));
    let (ok, _, err) = omniforge_cli(dir.path(), &["pack", "import", &file], None).await;
    assert!(!ok);
    assert!(
        err.contains("format: this OmniForge reads format = 1, got 2"),
        "{err}"
    );
    assert!(err.contains("tool: unknown key"), "{err}");
}

#[tokio::test]
async fn export_then_import_round_trips() {
    crate::support::needs_deps!();
    let a = tempfile::tempdir().unwrap();
    let files = tempfile::tempdir().unwrap();
    let pack = write_json(files.path(), "tools.json", &tool_pack());
    cli_ok(a.path(), &["pack", "import", &pack]).await;
    let conformance = conformance_pack();
    cli_ok(a.path(), &["pack", "import", conformance.to_str().unwrap()]).await;
    // A prompt with a completion script and a template script travel too.
    let p = write_json(
        files.path(),
        "p.json",
        &json!({"name": "pick", "arguments": [{"name": "x", "required": true, "values": ["a"]}],
                "messages": [{"role": "user", "content": "{x}"}],
                "completion_code": "print('[\"b\"]')", "timeout_s": 5}),
    );
    cli_ok(a.path(), &["prompt", "add", &p]).await;
    let exported = cli_ok(a.path(), &["pack", "export"]).await;
    let value: Value = serde_json::from_str(&exported).unwrap();
    assert_eq!(value["format"], json!(1));
    let tools = value["tools"].as_array().unwrap();
    assert!(tools.iter().any(|t| t["name"] == "shout"), "{exported}");
    assert_eq!(value["resources"].as_array().unwrap().len(), 4);
    // Every entry: the pack's tools, resources, templates and prompts, plus `shout` and `pick`.
    let entries: usize = ["tools", "resources", "resource_templates", "prompts"]
        .iter()
        .map(|k| value[k].as_array().map_or(0, Vec::len))
        .sum();

    for ext in ["json", "toml"] {
        let file = files.path().join(format!("out.{ext}"));
        let file = file.to_str().unwrap();
        cli_ok(a.path(), &["pack", "export", "--output", file]).await;
        let b = tempfile::tempdir().unwrap();
        let out = cli_ok(b.path(), &["pack", "import", file]).await;
        let all_changed = format!("{entries} changed, 0 unchanged");
        assert!(out.contains(&all_changed), "{ext}: {out}");
        assert_eq!(
            cli_ok(b.path(), &["pack", "export"]).await,
            exported,
            "{ext}: a round trip changed the pack"
        );
        // Importing the export into the source changes nothing.
        let out = cli_ok(a.path(), &["pack", "import", file]).await;
        let none_changed = format!("0 changed, {entries} unchanged");
        assert!(out.contains(&none_changed), "{ext}: {out}");
    }
}

#[tokio::test]
async fn python_sdks_read_resources_and_prompts_over_stdio() {
    crate::support::needs_deps!();
    let dir = data_with_pack().await;
    let driver = crate::support::py_driver("read_content.py");
    for sdk in ["py-mcp1", "py-mcp2"] {
        let python = repo_root().join(".deps").join(sdk).join("bin/python");
        assert!(
            python.exists(),
            "{} is missing: run `scripts/bootstrap`",
            python.display()
        );
        let argv = json!([BIN, "--data-dir", dir.path(), "--uv", uv(), "stdio"]).to_string();
        let child = Command::new(&python)
            .arg(&driver)
            .arg(&argv)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let out = tokio::time::timeout(Duration::from_secs(90), child.wait_with_output())
            .await
            .expect("driver did not finish within 90 s")
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{sdk}: driver failed:\n{stderr}");
        let got: Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{sdk}: driver output is not JSON ({e}):\n{stderr}"));
        assert_eq!(
            got["capabilities"]["resources"]["subscribe"],
            json!(true),
            "{sdk}"
        );
        assert_eq!(got["resources"].as_array().unwrap().len(), 3, "{sdk}");
        assert_eq!(
            got["templates"][0]["uriTemplate"],
            json!("test://template/{id}/data"),
            "{sdk}"
        );
        assert_eq!(
            got["text"]["contents"],
            json!([{"uri": "test://static-text", "mimeType": "text/plain",
                    "text": "This is the content of the static text resource."}]),
            "{sdk}"
        );
        assert_eq!(
            got["binary"]["contents"],
            json!([{"uri": "test://static-binary", "mimeType": "image/png", "blob": PNG_B64}]),
            "{sdk}"
        );
        assert_eq!(
            got["templated"]["contents"][0]["text"],
            json!(r#"{"id":"123","templateTest":true,"data":"Data for ID: 123"}"#),
            "{sdk}"
        );
        assert_eq!(got["prompts"].as_array().unwrap().len(), 5, "{sdk}");
        assert_eq!(
            got["simple"]["messages"],
            json!([{"role": "user", "content": {"type": "text", "text": "This is a simple prompt for testing."}}]),
            "{sdk}"
        );
        assert_eq!(
            got["with_args"]["messages"][0]["content"]["text"],
            json!("Prompt with arguments: arg1='hello', arg2='world'"),
            "{sdk}"
        );
        assert_eq!(
            got["embedded"]["messages"][0]["content"]["resource"],
            json!({"uri": "test://x/1", "mimeType": "text/plain", "text": "Embedded resource content for testing."}),
            "{sdk}"
        );
        assert_eq!(
            got["image"]["messages"][0]["content"],
            json!({"type": "image", "data": PNG_B64, "mimeType": "image/png"}),
            "{sdk}"
        );
        assert_eq!(
            got["completion"]["completion"]["values"],
            json!(["test", "testValue1"]),
            "{sdk}"
        );
        let error = got["missing_arg_error"].as_str().unwrap_or("");
        assert!(
            error.contains("missing required argument arg2"),
            "{sdk}: {error}"
        );
    }
}

#[tokio::test]
async fn http_scopes_and_updates_on_the_get_stream() {
    crate::support::needs_deps!();
    let dir = data_with_pack().await;
    let files = tempfile::tempdir().unwrap();
    let tokens = files.path().join("tokens");
    std::fs::write(
        &tokens,
        "reader tok-reader-5f1c2d tools:call\nwriter tok-writer-9a8b7c tools:write\n",
    )
    .unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&tokens, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    let server = crate::support::Serve::start(&[
        "--data-dir".as_ref(),
        dir.path().as_os_str(),
        "--uv".as_ref(),
        uv().as_os_str(),
        "--token-file".as_ref(),
        tokens.as_os_str(),
    ])
    .await;
    let session = async |token: &str| {
        HttpClient::open_as(&server.url, Some(token), "2025-11-25")
            .await
            .unwrap()
    };
    let mut reader = session("tok-reader-5f1c2d").await;
    let mut writer = session("tok-writer-9a8b7c").await;

    // tools:call reads resources and prompts but cannot author them.
    let tools = reader.request("tools/list", json!({})).await.unwrap();
    let names: Vec<&str> = tools["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(
        !names.contains(&"omniforge_create_resource"),
        "tools:call sees an authoring built-in: {names:?}"
    );
    let refused = reader
        .request(
            "tools/call",
            json!({"name": "omniforge_update_resource", "arguments": {"uri": "test://watched-resource", "text": "x"}}),
        )
        .await
        .unwrap();
    assert_eq!(refused["result"]["isError"], json!(true), "{refused}");
    assert_eq!(
        refused["result"]["content"][0]["text"],
        json!("Unknown or inactive tool")
    );
    let prompt = reader
        .request("prompts/get", json!({"name": "test_simple_prompt"}))
        .await
        .unwrap();
    assert_eq!(
        prompt["result"]["messages"][0]["content"]["text"],
        json!("This is a simple prompt for testing.")
    );

    // The reader subscribes; the writer's update reaches the reader's GET stream.
    let subscribed = reader
        .request(
            "resources/subscribe",
            json!({"uri": "test://watched-resource"}),
        )
        .await
        .unwrap();
    assert_eq!(subscribed["result"], json!({}), "{subscribed}");
    let mut stream = reader.notifications().await;
    let updated = writer
        .request(
            "tools/call",
            json!({"name": "omniforge_update_resource", "arguments": {"uri": "test://watched-resource", "text": "new"}}),
        )
        .await
        .unwrap();
    assert_eq!(updated["result"]["isError"], json!(false), "{updated}");
    let want = json!({"uri": "test://watched-resource"});
    wait_message(&mut stream, Duration::from_secs(5), |m| {
        m["method"] == "notifications/resources/updated" && m["params"] == want
    })
    .await
    .unwrap_or_else(|e| {
        panic!(
            "no resources/updated on the GET stream: {e}\nserver:\n{}",
            server.output_tail()
        )
    });
    let read = reader
        .request("resources/read", json!({"uri": "test://watched-resource"}))
        .await
        .unwrap();
    assert_eq!(read["result"]["contents"][0]["text"], json!("new"));
}

#[tokio::test]
async fn resource_and_prompt_lists_are_paginated() {
    crate::support::needs_deps!();
    let dir = data_with_pack().await;
    let mut mcp = StdioClient::start(dir.path(), &["--page-size", "1"]).await;
    for (method, field, want) in [
        (
            "prompts/list",
            "prompts",
            vec![
                "test_input_required_result_prompt",
                "test_prompt_with_arguments",
                "test_prompt_with_embedded_resource",
                "test_prompt_with_image",
                "test_simple_prompt",
            ],
        ),
        (
            "resources/list",
            "resources",
            vec![
                "test://static-binary",
                "test://static-text",
                "test://watched-resource",
            ],
        ),
    ] {
        let mut seen = Vec::new();
        let mut cursor: Option<Value> = None;
        loop {
            let params = match &cursor {
                Some(c) => json!({"cursor": c}),
                None => json!({}),
            };
            let page = mcp.result(method, params).await;
            let items = page[field].as_array().unwrap();
            assert_eq!(items.len(), 1, "{method}: {page}");
            let key = if field == "prompts" { "name" } else { "uri" };
            seen.push(items[0][key].as_str().unwrap().to_owned());
            match page.get("nextCursor") {
                Some(c) => cursor = Some(c.clone()),
                None => break,
            }
            assert!(seen.len() <= want.len(), "{method}: cursor never ends");
        }
        assert_eq!(seen, want, "{method}");
        let bad = mcp.error(method, json!({"cursor": "not-a-cursor"})).await;
        assert_eq!(bad["code"], json!(-32602), "{method}: {bad}");
    }
}

#[tokio::test]
async fn rev_2026_listen_gets_updates_of_accepted_resources() {
    crate::support::needs_deps!();
    let dir = data_with_pack().await;
    let files = tempfile::tempdir().unwrap();
    let server = crate::support::Serve::start(&[
        "--data-dir".as_ref(),
        dir.path().as_os_str(),
        "--uv".as_ref(),
        uv().as_os_str(),
    ])
    .await;
    let meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                      "io.modelcontextprotocol/clientCapabilities": {}});
    let body = json!({"jsonrpc": "2.0", "id": 7, "method": "subscriptions/listen", "params": {
        "_meta": meta,
        "notifications": {"resourceSubscriptions": ["test://watched-resource", "test://unknown"],
                          "promptsListChanged": true}}});
    let headers = [
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
        ("MCP-Protocol-Version", "2026-07-28"),
        ("Mcp-Method", "subscriptions/listen"),
    ]
    .map(|(k, v)| (k.to_owned(), v.to_owned()));
    let (status, _, stream) = open_stream(
        &http_client(),
        reqwest::Method::POST,
        &server.url,
        &headers,
        Some(body),
    )
    .await;
    assert_eq!(status, 200);
    let mut stream = stream.expect("an event stream");
    // Only the stored URI is accepted.
    let (ack, _) = stream
        .wait_for(Duration::from_secs(5), |m| {
            m["method"] == "notifications/subscriptions/acknowledged"
        })
        .await
        .unwrap_or_else(|s| panic!("no acknowledgement: {s}\n{}", server.output_tail()));
    let ack = ack.to_string();
    assert!(
        ack.contains(r#""resourceSubscriptions":["test://watched-resource"]"#),
        "{ack}"
    );
    let file = write_json(
        files.path(),
        "w.json",
        &json!({"uri": "test://watched-resource", "name": "watched-resource", "text": "v2"}),
    );
    cli_ok(dir.path(), &["resource", "add", &file]).await;
    let want = json!({"_meta": {"io.modelcontextprotocol/subscriptionId": 7},
                      "uri": "test://watched-resource"});
    stream
        .wait_for(Duration::from_secs(5), |m| {
            m["method"] == "notifications/resources/updated" && m["params"] == want
        })
        .await
        .unwrap_or_else(|s| panic!("no resources/updated on the listen stream: {s}"));
}

/// The server's own resources (the whole output behind a cut tool result) are still served
/// next to the stored ones, and are not listed.
#[tokio::test]
async fn kept_outputs_of_cut_results_are_still_readable() {
    crate::support::needs_deps!();
    let dir = data_with_pack().await;
    let mut mcp = StdioClient::start(dir.path(), &["--max-result-bytes", "100"]).await;
    let created = mcp
        .call(
            "omniforge_create_tool",
            json!({"name": "long", "description": "Prints 1000 lines",
                   "code": "for i in range(1000):\n    print(f'line {i}')\n"}),
        )
        .await;
    assert_eq!(created["isError"], json!(false), "{created}");
    let result = mcp.call("long", json!({})).await;
    let link = result["content"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == json!("resource_link"))
        .unwrap_or_else(|| panic!("no resource_link in a cut result: {result}"));
    let uri = link["uri"].as_str().unwrap();
    assert!(uri.starts_with("omniforge://runs/"), "{uri}");
    let read = mcp.result("resources/read", json!({"uri": uri})).await;
    let want: String = (0..1000).map(|i| format!("line {i}\n")).collect();
    assert_eq!(
        read["contents"],
        json!([{"uri": uri, "mimeType": "text/plain", "text": want.trim_end()}])
    );
    let list = mcp.result("resources/list", json!({})).await;
    assert!(
        !list.to_string().contains("omniforge://"),
        "kept outputs are not listed: {list}"
    );
}
