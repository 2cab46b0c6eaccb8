//! Secrets over MCP: `omniforge_set_secret`, `omniforge_delete_secret` and
//! `omniforge_list_secrets` exist only for principals with the `admin` scope, and a value set
//! through them reaches a tool as an environment variable and nothing else: not the tool
//! list, not the listing, not the logs, not the tool's result (redacted).
//!
//! A real `omniforge serve` with a token file (`writer`: `tools:write`, `boss`: `admin`),
//! raw JSON-RPC over Streamable HTTP, `.deps/bin/uv` for the tool's environment.

use serde_json::{Value, json};

use crate::support::{self, Auth, HttpClient, HttpServer, uv};

const WRITER: &str = "writer-token-0123456789abcdef";
const BOSS: &str = "boss-token-0123456789abcdef";

const SECRET_TOOLS: [&str; 6] = [
    "omniforge_set_secret",
    "omniforge_delete_secret",
    "omniforge_list_secrets",
    "omniforge_grant_secret",
    "omniforge_revoke_secret",
    "omniforge_list_secret_requests",
];

#[tokio::test]
async fn secrets_over_mcp_need_admin_reach_tools_and_never_show() {
    crate::support::needs_deps!();
    let uv = uv();
    let server = HttpServer::start(
        &["--uv", uv.to_str().unwrap()],
        &Auth::TokenFile(format!("writer {WRITER} tools:write\nboss {BOSS} admin\n")),
    )
    .await;
    let value = format!("s3cr3t-{}-{}", std::process::id(), line!());
    // What the tool prints besides the value: the value reversed, which is not the exact
    // value (so not redacted) and proves the tool saw the real one.
    let reversed: String = value.chars().rev().collect();

    // Without `admin`: not listed, and not callable, directly or through omniforge_call_tool.
    let mut writer = HttpClient::bearer(server.url(), WRITER).await;
    let names = writer.tool_names().await;
    assert!(
        names.iter().any(|n| n == "omniforge_create_tool"),
        "{names:?}"
    );
    for t in SECRET_TOOLS {
        assert!(
            !names.iter().any(|n| n == t),
            "{t} listed for tools:write: {names:?}"
        );
    }
    let args = json!({"name": "E2E_API_KEY", "value": value});
    let (text, is_error, _) = writer.call("omniforge_set_secret", args.clone()).await;
    assert_eq!(
        (text.as_str(), is_error),
        ("Unknown or inactive tool", true)
    );
    let (text, is_error, _) = writer
        .call(
            "omniforge_call_tool",
            json!({"name": "omniforge_set_secret", "arguments": args}),
        )
        .await;
    assert_eq!(
        (text.as_str(), is_error),
        ("Unknown or inactive tool", true)
    );
    let (text, is_error, _) = writer.call("omniforge_list_secrets", json!({})).await;
    assert_eq!(
        (text.as_str(), is_error),
        ("Unknown or inactive tool", true)
    );

    // With `admin`: listed, and setting works without echoing the value.
    let mut boss = HttpClient::bearer(server.url(), BOSS).await;
    let names = boss.tool_names().await;
    for t in SECRET_TOOLS {
        assert!(
            names.iter().any(|n| n == t),
            "{t} not listed for admin: {names:?}"
        );
    }
    let (text, is_error, raw) = boss.call("omniforge_set_secret", args.clone()).await;
    assert!(!is_error, "{raw}");
    assert!(
        text.contains("E2E_API_KEY") && !raw.to_string().contains(&value),
        "{raw}"
    );
    let (_, is_error, raw) = boss.call("omniforge_list_secrets", json!({})).await;
    assert!(!is_error, "{raw}");
    let listed = &raw["structuredContent"]["secrets"];
    assert_eq!(listed.as_array().map(Vec::len), Some(1), "{raw}");
    assert_eq!(listed[0]["name"], "E2E_API_KEY");
    assert!(
        listed[0]["updatedAtMs"]
            .as_i64()
            .is_some_and(|t| t > 1_600_000_000_000),
        "{raw}"
    );
    assert!(
        !raw.to_string().contains(&value),
        "the listing shows the value: {raw}"
    );

    // A tool that declares the secret gets it as an environment variable; its output shows
    // the value redacted (and reversed, which proves it saw the real value).
    let code = "import os\nv = os.environ.get('E2E_API_KEY', 'unset')\nprint('key=' + v)\nprint(v[::-1])\n";
    let (text, is_error, raw) = writer
        .call(
            "omniforge_create_tool",
            json!({"name": "use_key", "description": "Uses E2E_API_KEY.", "code": code, "secrets": ["E2E_API_KEY"]}),
        )
        .await;
    assert!(!is_error, "{text}");
    assert!(!raw.to_string().contains(&value));
    // A writer's declaration is a request: the admin grants it to version 1.
    let (text, is_error, _) = boss
        .call(
            "omniforge_grant_secret",
            json!({"secret": "E2E_API_KEY", "tool": "use_key"}),
        )
        .await;
    assert!(!is_error, "{text}");
    let (text, is_error, raw) = writer.call("use_key", json!({})).await;
    assert!(!is_error, "{raw}");
    assert_eq!(text, format!("key=[redacted]\n{reversed}"), "{raw}");
    assert!(!raw.to_string().contains(&value), "{raw}");
    let (_, _, raw) = writer
        .call("omniforge_get_tool", json!({"name": "use_key"}))
        .await;
    assert!(!raw.to_string().contains(&value), "{raw}");

    // Deleting it: gone from the listing; the tool no longer gets it.
    let (text, is_error, _) = boss
        .call("omniforge_delete_secret", json!({"name": "E2E_API_KEY"}))
        .await;
    assert!(!is_error, "{text}");
    let (_, _, raw) = boss.call("omniforge_list_secrets", json!({})).await;
    assert_eq!(raw["structuredContent"]["secrets"], json!([]), "{raw}");
    let (text, _, raw) = writer.call("use_key", json!({})).await;
    assert!(!raw.to_string().contains(&reversed), "{raw}");
    assert!(
        text.starts_with("key=unset") || text.contains("E2E_API_KEY"),
        "{text}"
    );

    let log = server.stderr_all();
    assert!(
        !log.contains(&value),
        "the server logged the secret's value"
    );
    assert!(!log.contains("panicked"), "{}", server.output_text());
}

/// A script that prints the secret `STOLEN` transformed (base64, reversed, split in two), which
/// exact-value redaction cannot catch, or `absent` when its run did not get it.
const EXFILTRATE: &str = "import base64, os\nv = os.environ.get('STOLEN')\nif v is None:\n    print('absent')\nelse:\n    print(base64.b64encode(v.encode()).decode())\n    print(v[::-1])\n    print(v[:len(v) // 2])\n    print(v[len(v) // 2:])\n";

/// Issue 11, finding 1: a `tools:write` token cannot reach a secret by declaring it. Its tool
/// runs without the secret until an admin grants it to that exact version; an update by the
/// writer (new code) loses the grant; a rollback uses that version's own grant; test runs get
/// nothing; the writer cannot grant; the CLI revokes.
#[tokio::test]
async fn writer_gets_no_secret_without_an_admin_grant_for_that_exact_version() {
    crate::support::needs_deps!();
    let uv = uv();
    let server = HttpServer::start(
        &["--uv", uv.to_str().unwrap()],
        &Auth::TokenFile(format!("writer {WRITER} tools:write\nboss {BOSS} admin\n")),
    )
    .await;
    let value = format!("pw-{}-{}-topsecret", std::process::id(), line!());
    let reversed: String = value.chars().rev().collect();
    let (head, tail) = value.split_at(value.len() / 2);
    let mut boss = HttpClient::bearer(server.url(), BOSS).await;
    let mut writer = HttpClient::bearer(server.url(), WRITER).await;
    let (text, is_error, _) = boss
        .call(
            "omniforge_set_secret",
            json!({"name": "STOLEN", "value": value}),
        )
        .await;
    assert!(!is_error, "{text}");

    // The writer declares the secret: the create says it is only requested, and the run
    // gets nothing, in any form.
    let (text, is_error, _) = writer
        .call(
            "omniforge_create_tool",
            json!({"name": "exfil", "description": "Prints STOLEN.", "code": EXFILTRATE, "secrets": ["STOLEN"]}),
        )
        .await;
    assert!(!is_error, "{text}");
    assert!(
        text.contains("STOLEN") && text.contains("not granted"),
        "{text}"
    );
    let leaked = |raw: &Value| {
        let raw = raw.to_string();
        [value.as_str(), reversed.as_str(), head, tail]
            .iter()
            .any(|part| raw.contains(part))
    };
    let (text, _, raw) = writer.call("exfil", json!({})).await;
    assert_eq!(
        text, "absent",
        "an ungranted declaration reached the run: {raw}"
    );
    assert!(!leaked(&raw), "{raw}");
    // omniforge_test_tool runs with no secret either.
    let (text, _, raw) = writer
        .call("omniforge_test_tool", json!({"code": EXFILTRATE}))
        .await;
    assert_eq!(text, "absent", "a test run got a secret: {raw}");
    // The writer cannot grant (the grant built-ins are admin's).
    let (text, is_error, _) = writer
        .call(
            "omniforge_grant_secret",
            json!({"secret": "STOLEN", "tool": "exfil"}),
        )
        .await;
    assert_eq!(
        (text.as_str(), is_error),
        ("Unknown or inactive tool", true)
    );

    // The admin sees the pending request, and grants it to version 1.
    let (_, _, raw) = boss
        .call("omniforge_list_secret_requests", json!({"tool": "exfil"}))
        .await;
    assert_eq!(
        raw["structuredContent"]["requests"],
        json!([{"tool": "exfil", "version": 1, "secret": "STOLEN", "secretSet": true, "granted": null}]),
        "{raw}"
    );
    let (text, is_error, _) = boss
        .call(
            "omniforge_grant_secret",
            json!({"secret": "STOLEN", "tool": "exfil", "version": 1}),
        )
        .await;
    assert!(!is_error && text.contains("Granted"), "{text}");
    let (text, _, raw) = writer.call("exfil", json!({})).await;
    assert!(
        text.lines().nth(1) == Some(reversed.as_str()),
        "the granted version did not get the secret: {raw}"
    );

    // The writer changes the code: version 2 has no grant.
    let (text, is_error, _) = writer
        .call(
            "omniforge_update_tool",
            json!({"name": "exfil", "code": format!("# v2\n{EXFILTRATE}")}),
        )
        .await;
    assert!(!is_error && text.contains("version 2"), "{text}");
    let (text, _, raw) = writer.call("exfil", json!({})).await;
    assert_eq!(text, "absent", "a new version carried the grant: {raw}");
    assert!(!leaked(&raw), "{raw}");

    // Rollback to version 1 uses version 1's own grant.
    let (text, is_error, _) = writer
        .call(
            "omniforge_rollback_tool",
            json!({"name": "exfil", "version": 1}),
        )
        .await;
    assert!(!is_error, "{text}");
    let (text, _, _) = writer.call("exfil", json!({})).await;
    assert_eq!(text.lines().nth(1), Some(reversed.as_str()));

    // The CLI revokes it (as cli:USER); the next run has nothing.
    let data = server.data_dir();
    let (ok, out, err) =
        support::omniforge_cli(&data, &["secret", "revoke", "STOLEN", "exfil", "1"], None).await;
    assert!(
        ok && out.trim() == "Revoked secret STOLEN from tool exfil version 1.",
        "{out}{err}"
    );
    let (text, _, _) = writer.call("exfil", json!({})).await;
    assert_eq!(text, "absent");
    let (ok, out, err) =
        support::omniforge_cli(&data, &["secret", "requests", "exfil"], None).await;
    assert!(ok && out.trim() == "exfil v1 STOLEN pending", "{out}{err}");

    let log = server.stderr_all();
    assert!(
        !log.contains(&value),
        "the server logged the secret's value"
    );
}

/// Issue 11, finding 6: at `--log-level trace`, over HTTP and over stdio, a secret is set
/// and a tool declaring it is created and called; the server's whole stderr never holds the
/// secret's value nor the bearer token (rmcp's own "received request" lines included).
#[tokio::test]
async fn trace_logs_never_hold_secret_values_or_tokens() {
    crate::support::needs_deps!();
    let uv = uv();
    let value = format!("tr4ce-s3cr3t-{}-{}", std::process::id(), line!());
    let code = "import os\nprint(len(os.environ.get('E2E_TRACE_KEY', '')))\n";
    let create = json!({"name": "trace_key", "description": "Uses E2E_TRACE_KEY.",
                        "code": code, "secrets": ["E2E_TRACE_KEY"]});

    let server = HttpServer::start(
        &["--uv", uv.to_str().unwrap(), "--log-level", "trace"],
        &Auth::TokenFile(format!("boss {BOSS} admin\n")),
    )
    .await;
    let mut boss = HttpClient::bearer(server.url(), BOSS).await;
    let (_, is_error, raw) = boss
        .call(
            "omniforge_set_secret",
            json!({"name": "E2E_TRACE_KEY", "value": value}),
        )
        .await;
    assert!(!is_error, "{raw}");
    let (_, is_error, raw) = boss.call("omniforge_create_tool", create.clone()).await;
    assert!(!is_error, "{raw}");
    let (_, is_error, raw) = boss.call("trace_key", json!({})).await;
    assert!(!is_error, "{raw}");
    let log = server.stderr_all();
    assert!(
        log.contains("TRACE") || log.contains("DEBUG"),
        "--log-level trace wrote no debug or trace lines: {}",
        server.output_text()
    );
    assert!(
        !log.contains(&value),
        "HTTP at trace level: the server's stderr holds the secret's value"
    );
    assert!(
        !log.contains(BOSS),
        "HTTP at trace level: the server's stderr holds the bearer token"
    );

    let mut stdio =
        support::StdioServer::start(&["--uv", uv.to_str().unwrap(), "--log-level", "trace"]);
    support::init_stdio(&mut stdio, "2025-06-18").await.unwrap();
    let m = stdio_call(
        &mut stdio,
        11,
        "omniforge_set_secret",
        json!({"name": "E2E_TRACE_KEY", "value": value}),
    )
    .await;
    assert_eq!(m["result"]["isError"], false, "{m}");
    let m = stdio_call(&mut stdio, 12, "omniforge_create_tool", create).await;
    assert_eq!(m["result"]["isError"], false, "{m}");
    let m = stdio_call(&mut stdio, 13, "trace_key", json!({})).await;
    assert_eq!(m["result"]["isError"], false, "{m}");
    let log = stdio.stderr_all();
    assert!(
        log.contains("TRACE") || log.contains("DEBUG"),
        "--log-level trace wrote no debug or trace lines over stdio"
    );
    assert!(
        !log.contains(&value),
        "stdio at trace level: the server's stderr holds the secret's value"
    );
}

/// One `tools/call` over stdio; its response (notifications before it are skipped).
async fn stdio_call(
    stdio: &mut support::StdioServer,
    id: u64,
    name: &str,
    arguments: Value,
) -> Value {
    let request = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                         "params": {"name": name, "arguments": arguments}});
    stdio.send_line(&request.to_string()).await.unwrap();
    loop {
        let m = stdio
            .read_message(std::time::Duration::from_secs(120))
            .await
            .unwrap();
        if m["id"] == id {
            return m;
        }
    }
}
