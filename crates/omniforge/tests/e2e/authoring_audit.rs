//! Issue 11's authoring side over a real `omniforge serve` with two tokens (`writer`:
//! `tools:write`, `boss`: `admin`) and the command line on the same data directory (as
//! `cli:USER`): the audit log records every authoring and admin action with its principal
//! (and writes it to the log), kept outputs are readable only by their caller and admins
//! (finding 8), the call history is shown with readable times and failure reasons, and the
//! `omniforge_` prefix is reserved (finding 12).

use std::collections::BTreeSet;

use serde_json::{Value, json};

use crate::support::{self, Auth, HttpClient, HttpServer, eventually, omniforge_cli, uv};

const WRITER: &str = "writer-token-0123456789abcdef";
const WRITER2: &str = "writer2-token-0123456789abcdef";
const BOSS: &str = "boss-token-0123456789abcdef";

async fn serve(extra: &[&str]) -> HttpServer {
    let uv = uv();
    let mut args = vec!["--uv", uv.to_str().unwrap()];
    args.extend_from_slice(extra);
    HttpServer::start(
        &args,
        &Auth::TokenFile(format!(
            "writer {WRITER} tools:write\nwriter2 {WRITER2} tools:write\nboss {BOSS} admin\n"
        )),
    )
    .await
}

/// Runs `omniforge ARGS` on `server`'s data directory as the OS user `e2e-user`.
async fn cli(server: &HttpServer, args: &[&str]) -> String {
    let data = server.data_dir();
    let mut cmd = support::omniforge_in(&data);
    cmd.args(args).env("USER", "e2e-user");
    let out = tokio::time::timeout(std::time::Duration::from_secs(180), cmd.output())
        .await
        .expect("the command did not finish within 180 s")
        .unwrap();
    assert!(
        out.status.success(),
        "omniforge {args:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn ok(what: &str, (text, is_error, raw): (String, bool, Value)) -> String {
    assert!(!is_error, "{what}: {raw}");
    text
}

#[tokio::test]
async fn audit_log_records_every_action_with_its_principal() {
    crate::support::needs_deps!();
    let server = serve(&[]).await;
    let mut writer = HttpClient::bearer(server.url(), WRITER).await;
    let mut boss = HttpClient::bearer(server.url(), BOSS).await;
    let code = "print('hi')\n";

    // Tool actions by the writer.
    let create = json!({"name": "t", "description": "T.", "code": code, "secrets": ["K"]});
    ok("create", writer.call("omniforge_create_tool", create).await);
    let update = json!({"name": "t", "code": "print('hi 2')\n"});
    ok("update", writer.call("omniforge_update_tool", update).await);
    let rollback = json!({"name": "t", "version": 1});
    ok(
        "rollback",
        writer.call("omniforge_rollback_tool", rollback).await,
    );
    ok(
        "disable",
        writer
            .call("omniforge_delete_tool", json!({"name": "t"}))
            .await,
    );
    // Content writes by the writer.
    let resource = json!({"uri": "doc://a", "name": "a", "text": "A"});
    ok(
        "resource",
        writer.call("omniforge_create_resource", resource).await,
    );
    let prompt = json!({"name": "p", "messages": [{"role": "user", "content": "hi"}]});
    ok(
        "prompt",
        writer.call("omniforge_create_prompt", prompt).await,
    );
    // Secret actions by the admin.
    let set = json!({"name": "K", "value": "v4lue-never-logged"});
    ok("set", boss.call("omniforge_set_secret", set).await);
    let grant = json!({"secret": "K", "tool": "t", "version": 1});
    ok(
        "grant",
        boss.call("omniforge_grant_secret", grant.clone()).await,
    );
    ok("revoke", boss.call("omniforge_revoke_secret", grant).await);
    ok(
        "delete secret",
        boss.call("omniforge_delete_secret", json!({"name": "K"}))
            .await,
    );
    ok(
        "purge",
        boss.call("omniforge_delete_tool", json!({"name": "t", "purge": true}))
            .await,
    );

    // The command line, as cli:e2e-user: a pack import, then enable/disable.
    let files = tempfile::tempdir().unwrap();
    let pack = files.path().join("p.json");
    let pack_json = json!({"format": 1, "name": "p", "tools": [{"name": "u", "description": "U.", "code": code}]});
    std::fs::write(&pack, pack_json.to_string()).unwrap();
    cli(&server, &["pack", "import", pack.to_str().unwrap()]).await;
    cli(&server, &["tool", "disable", "u"]).await;
    cli(&server, &["tool", "enable", "u"]).await;

    let out = cli(&server, &["audit", "--json", "--since", "1h"]).await;
    let records: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let seen: BTreeSet<(String, String, String, String)> = records
        .iter()
        .map(|r| {
            let s = |k: &str| r[k].as_str().unwrap_or("").to_owned();
            (s("principal"), s("action"), s("object"), s("name"))
        })
        .collect();
    let want = [
        ("token:writer", "create", "tool", "t"),
        ("token:writer", "update", "tool", "t"),
        ("token:writer", "rollback", "tool", "t"),
        ("token:writer", "enable", "tool", "t"),
        ("token:writer", "disable", "tool", "t"),
        ("token:writer", "create", "resource", "doc://a"),
        ("token:writer", "create", "prompt", "p"),
        ("token:boss", "set", "secret", "K"),
        ("token:boss", "grant", "tool", "t"),
        ("token:boss", "revoke", "tool", "t"),
        ("token:boss", "delete", "secret", "K"),
        ("token:boss", "delete", "tool", "t"),
        ("cli:e2e-user", "create", "tool", "u"),
        ("cli:e2e-user", "import", "pack", "pack"),
        ("cli:e2e-user", "disable", "tool", "u"),
        ("cli:e2e-user", "enable", "tool", "u"),
    ];
    for (p, a, o, n) in want {
        let key = (p.to_owned(), a.to_owned(), o.to_owned(), n.to_owned());
        assert!(seen.contains(&key), "no record {key:?} in:\n{out}");
    }
    // Versions and definition hashes where a definition was written.
    let create = records
        .iter()
        .find(|r| r["action"] == "create" && r["name"] == "t")
        .unwrap();
    assert_eq!(create["version"], 1, "{create}");
    assert!(
        create["definitionSha256"]
            .as_str()
            .is_some_and(|h| h.len() == 64),
        "{create}"
    );
    assert!(!out.contains("v4lue-never-logged"), "{out}");

    // Filters: one principal; the text form has readable times.
    let mine = cli(&server, &["audit", "--principal", "token:boss"]).await;
    assert_eq!(mine.lines().count(), 5, "{mine}");
    assert!(
        mine.lines().all(|l| l.contains(" UTC  token:boss")),
        "{mine}"
    );
    let none = cli(
        &server,
        &[
            "audit",
            "--since",
            "2000-01-01T00:00:00Z",
            "--principal",
            "stdio",
        ],
    )
    .await;
    assert_eq!(none, "");

    // Written to the log too, never with a secret value.
    let log = server.stderr_all();
    assert!(
        log.lines()
            .any(|l| l.contains("audit") && l.contains("token:writer") && l.contains("rollback")),
        "no audit line in the log:\n{log}"
    );
    assert!(
        !log.contains("v4lue-never-logged"),
        "the log holds a secret value"
    );
}

/// Finding 8: a kept output (the whole output behind a cut result's link) is read from the
/// store by the principal that made the call and by admins; another token gets the same
/// error as for an unknown id.
#[tokio::test]
async fn kept_output_is_readable_only_by_its_caller_and_admins() {
    crate::support::needs_deps!();
    let server = serve(&["--max-result-bytes", "64"]).await;
    let mut writer = HttpClient::bearer(server.url(), WRITER).await;
    let mut other = HttpClient::bearer(server.url(), WRITER2).await;
    let mut boss = HttpClient::bearer(server.url(), BOSS).await;
    let code = "print('x' * 500 + 'END')\n";
    let create = json!({"name": "long", "description": "Long output.", "code": code});
    ok("create", writer.call("omniforge_create_tool", create).await);
    let (_, _, raw) = writer.call("long", json!({})).await;
    let uri = raw["content"]
        .as_array()
        .unwrap()
        .iter()
        .find_map(|c| (c["type"] == "resource_link").then(|| c["uri"].as_str().unwrap().to_owned()))
        .unwrap_or_else(|| panic!("no resource link: {raw}"));
    let read = |uri: &str| json!({"uri": uri});
    let r = writer.result("resources/read", read(&uri)).await;
    assert!(
        r["contents"][0]["text"].as_str().unwrap().ends_with("END"),
        "{r}"
    );
    let r = boss.result("resources/read", read(&uri)).await;
    assert!(
        r["contents"][0]["text"].as_str().unwrap().ends_with("END"),
        "{r}"
    );
    // Another token: exactly the unknown id's error.
    let theirs = other.error("resources/read", read(&uri)).await;
    let unknown_uri = "omniforge://runs/0123456789abcdef0123456789abcdef/output";
    let unknown = other.error("resources/read", read(unknown_uri)).await;
    assert_eq!(theirs["code"], unknown["code"], "{theirs} vs {unknown}");
    assert_eq!(
        theirs["message"].as_str().unwrap().replace(&uri, "URI"),
        unknown["message"]
            .as_str()
            .unwrap()
            .replace(unknown_uri, "URI"),
    );
}

/// Finding 12: `omniforge tool calls` and `omniforge_get_tool` show the call history (time,
/// principal, version, duration, outcome, the failure's reason); `omniforge_` names are refused
/// for stored tools, over MCP and in a pack.
#[tokio::test]
async fn call_history_is_shown_and_the_builtin_prefix_is_reserved() {
    crate::support::needs_deps!();
    let server = serve(&[]).await;
    let mut writer = HttpClient::bearer(server.url(), WRITER).await;
    let code = "import json, sys\nif json.load(sys.stdin).get('fail'):\n    raise ValueError('bad input 42')\nprint('fine')\n";
    let create = json!({"name": "flaky", "description": "Fails on demand.", "code": code});
    ok("create", writer.call("omniforge_create_tool", create).await);
    writer.call("flaky", json!({})).await;
    let (_, is_error, _) = writer.call("flaky", json!({"fail": true})).await;
    assert!(is_error);

    // The call log is written off the answers' path, a batch at a time: both rows are there
    // within the batch's few milliseconds.
    let out = eventually(
        std::time::Duration::from_secs(5),
        "both calls in `tool calls`",
        async || {
            let out = cli(&server, &["tool", "calls", "flaky", "--limit", "5"]).await;
            (out.lines().count() >= 2).then_some(out)
        },
    )
    .await;
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 2, "{out}");
    // Newest first: the failure, with its reason.
    assert!(
        lines[0].contains(" UTC ")
            && lines[0].contains("v1")
            && lines[0].contains("token:writer")
            && lines[0].contains("exit 1")
            && lines[0].ends_with("ValueError: bad input 42 [exit 1]"),
        "{out}"
    );
    assert!(
        lines[1].contains("ok") && lines[1].contains("token:writer"),
        "{out}"
    );
    let (_, _, raw) = writer
        .call("omniforge_get_tool", json!({"name": "flaky"}))
        .await;
    let calls = &raw["structuredContent"]["recentCalls"];
    assert_eq!(
        calls[0]["error"], "ValueError: bad input 42 [exit 1]",
        "{raw}"
    );
    assert_eq!(calls[0]["principal"], "token:writer", "{raw}");
    assert_eq!(calls[1]["outcome"], "ok", "{raw}");

    // The prefix of built-ins is reserved: over MCP and in a pack.
    let (text, is_error, _) = writer
        .call(
            "omniforge_create_tool",
            json!({"name": "omniforge_helper", "description": "x", "code": "print(1)"}),
        )
        .await;
    assert!(is_error && text.contains("reserved"), "{text}");
    let files = tempfile::tempdir().unwrap();
    let pack = files.path().join("p.json");
    let pack_json = json!({"format": 1, "name": "p", "tools": [{"name": "OMNIFORGE_x", "description": "x", "code": "print(1)"}]});
    std::fs::write(&pack, pack_json.to_string()).unwrap();
    let (ok, out, err) = omniforge_cli(
        &server.data_dir(),
        &["pack", "import", pack.to_str().unwrap()],
        None,
    )
    .await;
    assert!(
        !ok && format!("{out}{err}").contains("reserved"),
        "{out}{err}"
    );
}
