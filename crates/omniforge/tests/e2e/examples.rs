//! Self-testing tools (issue 17) end to end: a version's `examples` run in the real sandbox
//! before it goes live, through MCP (`omniforge_create_tool`, `omniforge_update_tool`,
//! `omniforge_check_tool`, `omniforge_rollback_tool` over stdio) and through the command line
//! (`tool add|edit [--keep-failed-drafts]`, `tool check`, `tool rollback [--force]`,
//! `pack import`). A failing example refuses the version with expected and actual, or keeps it
//! as a draft; a passing one lets it go live; a rollback re-runs the target's examples; example
//! runs get no secrets.
//!
//! Each test has its own temporary data directory (uv from `.deps/bin/uv`; no dependencies
//! are installed, so no package index is needed); servers are children killed by their pid.

use std::path::Path;

use serde_json::{Value, json};

use crate::support::{StdioClient, cli_ok, omniforge_cli, text_of};

const DOUBLE: &str = "import json, sys\nn = json.load(sys.stdin)[\"n\"]\nprint(n * 2)\n";
const TRIPLE: &str = "import json, sys\nn = json.load(sys.stdin)[\"n\"]\nprint(n * 3)\n";
const TWICE: &str = "import json, sys\nn = json.load(sys.stdin)[\"n\"]\nprint(n + n)\n";

fn double_tool(code: &str, examples: Value) -> Value {
    json!({
        "name": "double",
        "description": "Doubles n.",
        "code": code,
        "inputSchema": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
        "examples": examples,
    })
}

fn two_examples() -> Value {
    json!([
        {"arguments": {"n": 2}, "expect": {"text": "4"}},
        {"arguments": {"n": -1}, "expect": {"contains": "-2"}},
    ])
}

fn is_error(result: &Value) -> bool {
    result["isError"] == json!(true)
}

#[tokio::test]
async fn examples_decide_whether_a_version_goes_live_over_mcp() {
    crate::support::needs_deps!();
    let dir = tempfile::tempdir().unwrap();
    let mut mcp = StdioClient::start(dir.path(), &[]).await;

    let created = mcp
        .call("omniforge_create_tool", double_tool(DOUBLE, two_examples()))
        .await;
    assert!(!is_error(&created), "{created}");
    assert!(
        text_of(&created).contains("Created tool double (version 1). 2 of 2 examples passed."),
        "{created}"
    );
    assert_eq!(text_of(&mcp.call("double", json!({"n": 5})).await), "10");

    // A failing example refuses the version: each failure with expected and actual.
    let refused = mcp
        .call(
            "omniforge_update_tool",
            json!({"name": "double", "code": TRIPLE}),
        )
        .await;
    assert!(is_error(&refused), "{refused}");
    let text = text_of(&refused);
    assert!(
        text.starts_with("Refused: 2 of the tool's examples failed (0 of 2 examples passed)"),
        "{text}"
    );
    assert!(text.contains("examples[0] failed: the text differs\n  arguments: {\"n\":2}\n  expected: {\"text\":\"4\"}\n  actual: isError false, text \"6\""), "{text}");
    assert!(
        text.contains("examples[1] failed: the text does not contain \"-2\""),
        "{text}"
    );
    assert!(
        text.contains("actual: isError false, text \"-3\""),
        "{text}"
    );
    assert_eq!(text_of(&mcp.call("double", json!({"n": 5})).await), "10");
    let tool = mcp
        .call("omniforge_get_tool", json!({"name": "double"}))
        .await;
    let view = &tool["structuredContent"];
    assert_eq!(view["currentVersion"], json!(1), "{view}");
    assert_eq!(view["versions"].as_array().unwrap().len(), 1, "{view}");
    assert_eq!(view["examples"], two_examples());

    // keepFailedDrafts keeps it, as a draft that is never current.
    let kept = mcp
        .call(
            "omniforge_update_tool",
            json!({"name": "double", "code": TRIPLE, "keepFailedDrafts": true}),
        )
        .await;
    assert!(is_error(&kept), "{kept}");
    assert!(
        text_of(&kept)
            .starts_with("Kept as draft version 2 of tool double: 0 of 2 examples passed"),
        "{kept}"
    );
    let tool = mcp
        .call("omniforge_get_tool", json!({"name": "double"}))
        .await;
    let view = &tool["structuredContent"];
    assert_eq!(view["currentVersion"], json!(1), "{view}");
    assert_eq!(view["versions"][1]["status"], json!("draft"), "{view}");
    assert!(
        view["versions"][1]["statusReason"]
            .as_str()
            .unwrap()
            .contains("examples[0] failed"),
        "{view}"
    );
    assert_eq!(text_of(&mcp.call("double", json!({"n": 5})).await), "10");

    // On demand: the current version passes, the draft does not.
    let check = mcp
        .call("omniforge_check_tool", json!({"name": "double"}))
        .await;
    assert!(!is_error(&check), "{check}");
    assert_eq!(
        text_of(&check),
        "Tool double version 1: 2 of 2 examples passed.\nexamples[0]: passed\nexamples[1]: passed\n"
    );
    let check = mcp
        .call(
            "omniforge_check_tool",
            json!({"name": "double", "version": 2}),
        )
        .await;
    assert!(is_error(&check), "{check}");
    assert!(
        text_of(&check).contains("examples[0]: FAILED: the text differs\n"),
        "{check}"
    );

    // An example a client could not send is refused before anything runs.
    let bad = mcp
        .call(
            "omniforge_update_tool",
            json!({"name": "double", "examples": [{"arguments": {"n": "x"}, "expect": {"text": "4"}}]}),
        )
        .await;
    assert!(is_error(&bad), "{bad}");
    assert!(
        text_of(&bad).starts_with("examples[0].arguments: do not match the inputSchema"),
        "{bad}"
    );

    // A passing update goes live; a rollback re-runs the target's examples.
    let updated = mcp
        .call(
            "omniforge_update_tool",
            json!({"name": "double", "code": TWICE}),
        )
        .await;
    assert!(
        text_of(&updated).starts_with("Updated tool double (version 3). 2 of 2 examples passed."),
        "{updated}"
    );
    let rolled = mcp
        .call(
            "omniforge_rollback_tool",
            json!({"name": "double", "version": 1}),
        )
        .await;
    assert_eq!(
        text_of(&rolled),
        "Tool double now runs version 1 and is enabled. 2 of 2 examples passed.",
        "{rolled}"
    );
}

#[tokio::test]
async fn example_runs_get_no_secrets() {
    crate::support::needs_deps!();
    let dir = tempfile::tempdir().unwrap();
    let mut mcp = StdioClient::start(dir.path(), &[]).await;
    let secret = "s3cr3t-example-value-42";
    let set = mcp
        .call(
            "omniforge_set_secret",
            json!({"name": "TOKEN", "value": secret}),
        )
        .await;
    assert!(!is_error(&set), "{set}");
    let peek = |name: &str, expect: Value| {
        json!({
            "name": name,
            "description": "Shows whether TOKEN is set.",
            "code": "import os\nprint(os.environ.get('TOKEN', '(none)'))\n",
            "secrets": ["TOKEN"],
            "examples": [{"arguments": {}, "expect": expect}],
        })
    };
    // The example sees no TOKEN...
    let created = mcp
        .call(
            "omniforge_create_tool",
            peek("peek", json!({"text": "(none)"})),
        )
        .await;
    assert!(!is_error(&created), "{created}");
    // ...while an ordinary call gets it (and its value is redacted from the result), so the
    // example's "(none)" is the example run's doing, not a missing secret.
    let called = mcp.call("peek", json!({})).await;
    assert_ne!(text_of(&called), "(none)", "{called}");
    assert!(!called.to_string().contains(secret), "{called}");
    // The version holds a grant now (an admin wrote it): its examples still run without it.
    let checked = mcp
        .call("omniforge_check_tool", json!({"name": "peek"}))
        .await;
    assert!(!is_error(&checked), "{checked}");
    assert!(!checked.to_string().contains(secret), "{checked}");
    // A failing example's report shows the actual output: without the secret.
    let refused = mcp
        .call(
            "omniforge_create_tool",
            peek("peek2", json!({"contains": "s3cr3t"})),
        )
        .await;
    assert!(is_error(&refused), "{refused}");
    assert!(
        text_of(&refused).contains("actual: isError false, text \"(none)\""),
        "{refused}"
    );
    assert!(!refused.to_string().contains(secret), "{refused}");
}

fn write_json(dir: &Path, name: &str, value: &Value) -> String {
    let path = dir.join(name);
    std::fs::write(&path, value.to_string()).unwrap();
    path.to_str().unwrap().to_owned()
}

/// Every built environment of the data directory, removed (as a lost or broken environment
/// would be): every version's runs then fail.
fn remove_environments(data: &Path) {
    for entry in std::fs::read_dir(data.join("envs")).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            std::fs::remove_dir_all(&path).unwrap();
        }
    }
}

#[tokio::test]
async fn cli_checks_and_rollbacks_run_the_examples() {
    crate::support::needs_deps!();
    let data = tempfile::tempdir().unwrap();
    let files = tempfile::tempdir().unwrap();
    let d = data.path();
    let one = json!([{"arguments": {"n": 2}, "expect": {"text": "4"}}]);
    let v1 = write_json(files.path(), "v1.json", &double_tool(DOUBLE, one.clone()));
    let out = cli_ok(d, &["tool", "add", &v1]).await;
    assert!(
        out.contains("Created tool double (version 1). 1 of 1 example passed."),
        "{out}"
    );

    let bad = write_json(files.path(), "bad.json", &json!({"code": TRIPLE}));
    let (ok, out, _) = omniforge_cli(d, &["tool", "edit", "double", &bad], None).await;
    assert!(
        !ok && out.contains("examples[0] failed: the text differs"),
        "{out}"
    );
    let (ok, out, _) = omniforge_cli(
        d,
        &["tool", "edit", "double", "--keep-failed-drafts", &bad],
        None,
    )
    .await;
    assert!(!ok && out.starts_with("Kept as draft version 2"), "{out}");
    let good = write_json(files.path(), "good.json", &json!({"code": TWICE}));
    let out = cli_ok(d, &["tool", "edit", "double", &good]).await;
    assert!(
        out.starts_with("Updated tool double (version 3). 1 of 1 example passed."),
        "{out}"
    );

    let out = cli_ok(d, &["tool", "check", "double"]).await;
    assert_eq!(
        out,
        "Tool double version 3: 1 of 1 example passed.\nexamples[0]: passed\n\n"
    );
    let (ok, out, _) = omniforge_cli(d, &["tool", "check", "double", "2"], None).await;
    assert!(!ok && out.contains("examples[0]: FAILED"), "{out}");
    let out = cli_ok(d, &["tool", "rollback", "double", "1"]).await;
    assert!(
        out.contains("now runs version 1 and is enabled. 1 of 1 example passed."),
        "{out}"
    );

    // With its environment gone, version 3 no longer behaves: check says so, a rollback to it
    // is refused, and --force rolls back without running the examples.
    remove_environments(d);
    let (ok, out, _) = omniforge_cli(d, &["tool", "check", "double", "3"], None).await;
    assert!(!ok && out.contains("examples[0]: FAILED"), "{out}");
    let (ok, out, _) = omniforge_cli(d, &["tool", "rollback", "double", "3"], None).await;
    assert!(
        !ok && out.starts_with("Rollback refused: version 3 of tool double"),
        "{out}"
    );
    let history = cli_ok(d, &["tool", "history", "double"]).await;
    assert!(history.lines().any(|l| l.starts_with("*v1 ")), "{history}");
    let out = cli_ok(d, &["tool", "rollback", "double", "3", "--force"]).await;
    assert!(out.contains("now runs version 3"), "{out}");
    let history = cli_ok(d, &["tool", "history", "double"]).await;
    assert!(history.lines().any(|l| l.starts_with("*v3 ")), "{history}");
}

#[tokio::test]
async fn a_pack_with_a_failing_example_imports_nothing() {
    crate::support::needs_deps!();
    let data = tempfile::tempdir().unwrap();
    let files = tempfile::tempdir().unwrap();
    let d = data.path();
    let mut failing = double_tool(
        TRIPLE,
        json!([{"arguments": {"n": 2}, "expect": {"text": "4"}}]),
    );
    failing["name"] = json!("triple");
    let pack = json!({"format": 1, "tools": [double_tool(DOUBLE, two_examples()), failing],
        "resources": [{"uri": "test://note", "name": "note", "text": "hi"}]});
    let path = write_json(files.path(), "pack.json", &pack);
    let (ok, out, err) = omniforge_cli(d, &["pack", "import", &path], None).await;
    assert!(!ok, "{out}");
    assert!(
        err.contains("tools[1] (triple): examples: 0 of 1 example passed"),
        "{out}\n{err}"
    );
    let list = cli_ok(d, &["tool", "list"]).await;
    assert_eq!(list, "", "nothing is imported");

    let mut pack = pack;
    pack["tools"].as_array_mut().unwrap().pop();
    let path = write_json(files.path(), "pack.json", &pack);
    cli_ok(d, &["pack", "import", &path]).await;
    let list = cli_ok(d, &["tool", "list"]).await;
    assert!(list.starts_with("double "), "{list}");
    // An export keeps the examples, and imports back without a new version.
    let exported: Value = serde_json::from_str(&cli_ok(d, &["pack", "export"]).await).unwrap();
    assert_eq!(
        exported["tools"][0]["examples"],
        two_examples(),
        "{exported}"
    );
    let path = write_json(files.path(), "export.json", &exported);
    cli_ok(d, &["pack", "import", &path]).await;
    let history = cli_ok(d, &["tool", "history", "double"]).await;
    assert_eq!(history.lines().count(), 1, "{history}");
}
