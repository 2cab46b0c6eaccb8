//! Issue 17's approval gate over a real `omniforge serve --require-approval` with three
//! static tokens (`writer` and `writer2`: `tools:write`, `boss`: `admin`), raw JSON-RPC over
//! Streamable HTTP and each session's GET stream for notifications, and the command line on
//! the same data directory (as `cli:e2e-user`).
//!
//! - `pending_version_is_its_authors_alone_until_approved`: a writer's new tool and its later
//!   update are pending: only the author lists and calls them, without secrets (even one an
//!   admin granted to the pending version); a second writer and the admin keep the current
//!   version (or nothing) and get no `list_changed`; a `tools:write` token cannot approve;
//!   approval makes it current for everyone with `list_changed` and grants only the named
//!   secrets; rejection keeps the history with the reason; each step is in the audit log.
//! - `cli_lists_approves_and_rejects_pending_versions` (SQLite) and `..._on_postgres` (a
//!   database on the shared test cluster): `omniforge tool pending|approve|reject` against the
//!   same store, heard by the running server (`list_changed`).

use std::collections::BTreeSet;
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::{
    self, Auth, EventStream, HttpClient, HttpServer, eventually, is_list_changed, open_stream, uv,
};

const WRITER: &str = "writer-token-0123456789abcdef";
const WRITER2: &str = "writer2-token-0123456789abcdef";
const BOSS: &str = "boss-token-0123456789abcdef";

/// How long an awaited notification may take (the CLI's writes reach the server through
/// the change feed, which polls SQLite every second).
const CHANGE_TIMEOUT: Duration = Duration::from_secs(15);

/// Reports which of K1, K2, K3 it received (names only: values would be redacted anyway).
const CODE: &str = "import os\nprint('secrets:' + (','.join(k for k in ('K1', 'K2', 'K3') if os.environ.get(k)) or 'none'))\n";

/// `omniforge serve --require-approval` with the three tokens; `database`: `--database URL`
/// (else the data directory's SQLite file).
async fn serve(database: Option<&str>) -> HttpServer {
    let uv = uv();
    let mut args = vec!["--uv", uv.to_str().unwrap(), "--require-approval"];
    if let Some(url) = database {
        args.extend(["--database", url]);
    }
    HttpServer::start(
        &args,
        &Auth::TokenFile(format!(
            "writer {WRITER} tools:write\nwriter2 {WRITER2} tools:write\nboss {BOSS} admin\n"
        )),
    )
    .await
}

/// The session's GET stream (notifications).
async fn listen(server: &HttpServer, client: &HttpClient) -> EventStream {
    let (status, _, stream) = open_stream(
        &support::http_client(),
        reqwest::Method::GET,
        server.url(),
        &client.stream_headers(),
        None,
    )
    .await;
    assert_eq!(status, 200, "GET stream");
    stream.unwrap_or_else(|body| panic!("GET is not an SSE stream: {body}"))
}

/// The tools `client` lists, name → description.
async fn listed(client: &mut HttpClient) -> Vec<(String, String)> {
    let list = client.result("tools/list", json!({})).await;
    list["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["name"].as_str().unwrap().to_owned(),
                t["description"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect()
}

async fn description_of(client: &mut HttpClient, name: &str) -> Option<String> {
    listed(client)
        .await
        .into_iter()
        .find(|(n, _)| n == name)
        .map(|(_, d)| d)
}

fn ok(what: &str, (text, is_error, raw): (String, bool, Value)) -> String {
    assert!(!is_error, "{what}: {raw}");
    text
}

/// `writer`'s call of `builtin` stores version `number` of `gated` pending, and the writer's
/// own session hears `list_changed`.
async fn write_pending(
    writer: &mut HttpClient,
    events: &mut EventStream,
    builtin: &str,
    arguments: Value,
    number: u32,
) {
    let text = ok(builtin, writer.call(builtin, arguments).await);
    let want = format!("Submitted version {number} of tool gated for approval.");
    assert!(text.starts_with(&want), "{text}");
    events
        .wait_for(CHANGE_TIMEOUT, is_list_changed)
        .await
        .unwrap_or_else(|e| panic!("the author heard no list_changed for version {number}: {e}"));
}

/// The console page at `path` for the principal of `token`: the sign-in form (its stateless
/// anonymous session and CSRF token), the sign-in, then the page.
async fn console_page(server: &HttpServer, token: &str, path: &str) -> String {
    let base = server.base();
    let browser = support::browser_client();
    let cookie_of = |reply: &reqwest::Response| {
        reply
            .headers()
            .get("set-cookie")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.split(';').next())
            .map(str::to_owned)
    };
    let form = browser
        .get(format!("{base}/console/sign-in"))
        .send()
        .await
        .unwrap();
    let cookie = cookie_of(&form).expect("a cookie with the sign-in form");
    let html = form.text().await.unwrap();
    let csrf = html
        .split("name=\"csrf\" value=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .expect("a CSRF field")
        .to_owned();
    let reply = browser
        .post(format!("{base}/console/sign-in"))
        .header("cookie", &cookie)
        .header("origin", base)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("csrf={csrf}&token={token}"))
        .send()
        .await
        .unwrap();
    assert_eq!(reply.status(), 303, "console sign-in");
    let cookie = cookie_of(&reply).expect("a session cookie at sign-in");
    let page = browser
        .get(format!("{base}{path}"))
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), 200, "{path}");
    page.text().await.unwrap()
}

/// No `tools/list_changed` has arrived on `stream` (called after several round trips, long
/// after a notification of the write being checked would have been sent).
fn assert_no_list_changed(stream: &mut EventStream, who: &str, after: &str) {
    let seen = stream.drain_now();
    assert!(
        !seen.iter().any(is_list_changed),
        "{who} got list_changed after {after}: {seen:?}"
    );
}

/// Runs `omniforge [--database URL] ARGS` on `server`'s data directory as the OS user
/// `e2e-user`; (exit success, stdout, stderr).
async fn cli_on(
    server: &HttpServer,
    database: Option<&str>,
    args: &[&str],
) -> (bool, String, String) {
    let mut cmd = support::omniforge_in(&server.data_dir());
    if let Some(url) = database {
        cmd.args(["--database", url]);
    }
    cmd.args(args).env("USER", "e2e-user");
    let out = tokio::time::timeout(Duration::from_secs(180), cmd.output())
        .await
        .expect("the command did not finish within 180 s")
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The audit log as (principal, action, name, version) tuples.
async fn audit(
    server: &HttpServer,
    database: Option<&str>,
) -> (BTreeSet<(String, String, String, u64)>, Vec<Value>) {
    let (success, out, err) = cli_on(server, database, &["audit", "--json", "--since", "1h"]).await;
    assert!(success, "omniforge audit: {out}{err}");
    let records: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let seen = records
        .iter()
        .map(|r| {
            let s = |k: &str| r[k].as_str().unwrap_or("").to_owned();
            (
                s("principal"),
                s("action"),
                s("name"),
                r["version"].as_u64().unwrap_or(0),
            )
        })
        .collect();
    (seen, records)
}

#[tokio::test]
async fn pending_version_is_its_authors_alone_until_approved() {
    crate::support::needs_deps!();
    let server = serve(None).await;
    let mut writer = HttpClient::bearer(server.url(), WRITER).await;
    let mut writer2 = HttpClient::bearer(server.url(), WRITER2).await;
    let mut boss = HttpClient::bearer(server.url(), BOSS).await;
    let mut writer_events = listen(&server, &writer).await;
    let mut writer2_events = listen(&server, &writer2).await;
    let mut boss_events = listen(&server, &boss).await;
    for k in ["K1", "K2", "K3"] {
        let set = json!({"name": k, "value": format!("value-of-{k}-0123456789")});
        ok("set secret", boss.call("omniforge_set_secret", set).await);
    }

    // A writer's new tool: its examples run (a failing one still refuses it), then it waits.
    let bad = json!({"name": "gated", "description": "G1.", "code": CODE,
        "examples": [{"arguments": {}, "expect": {"contains": "nope"}}]});
    let (text, is_error, _) = writer.call("omniforge_create_tool", bad).await;
    assert!(is_error && text.starts_with("Refused"), "{text}");
    // Network access and a hidden character (Trojan Source): the review shows both (issue 30).
    let create = json!({"name": "gated", "description": "G1.", "code": format!("{CODE}# ok\u{202E}\n"),
        "secrets": ["K1", "K2", "K3"], "network": true, "timeout_s": 7,
        "annotations": {"readOnlyHint": true},
        "examples": [{"arguments": {}, "expect": {"text": "secrets:none"}}]});
    // Its author is told its list changed, lists and calls it; nobody else does, directly or
    // through omniforge_call_tool.
    let create_tool = "omniforge_create_tool";
    write_pending(&mut writer, &mut writer_events, create_tool, create, 1).await;
    assert_eq!(
        description_of(&mut writer, "gated").await.as_deref(),
        Some("G1.")
    );
    for (who, client) in [("writer2", &mut writer2), ("boss", &mut boss)] {
        assert_eq!(
            description_of(client, "gated").await,
            None,
            "{who} lists it"
        );
        let (text, is_error, _) = client.call("gated", json!({})).await;
        assert_eq!(
            (text.as_str(), is_error),
            ("Unknown or inactive tool", true),
            "{who}"
        );
        let (text, is_error, _) = client
            .call(
                "omniforge_call_tool",
                json!({"name": "gated", "arguments": {}}),
            )
            .await;
        assert_eq!(
            (text.as_str(), is_error),
            ("Unknown or inactive tool", true),
            "{who}"
        );
    }
    // A pending version gets no secrets, not even one an admin granted to it.
    let grant = json!({"secret": "K1", "tool": "gated", "version": 1});
    ok("grant K1", boss.call("omniforge_grant_secret", grant).await);
    let text = ok("author's call", writer.call("gated", json!({})).await);
    assert_eq!(text.trim(), "secrets:none");

    // tools:write cannot approve: not listed, not callable, not even by the author.
    for (who, client) in [("writer", &mut writer), ("writer2", &mut writer2)] {
        let names: Vec<String> = listed(client).await.into_iter().map(|(n, _)| n).collect();
        assert!(
            names.iter().any(|n| n == "omniforge_list_pending_tools"),
            "{names:?}"
        );
        for t in ["omniforge_approve_tool", "omniforge_reject_tool"] {
            assert!(!names.iter().any(|n| n == t), "{t} listed for {who}");
            let args = json!({"name": "gated", "version": 1, "reason": "x"});
            let (text, is_error, _) = client.call(t, args).await;
            assert_eq!(
                (text.as_str(), is_error),
                ("Unknown or inactive tool", true),
                "{who} {t}"
            );
        }
    }
    // The pending list: the author's own for a writer, all for the admin, with each
    // requested secret listed separately.
    let (_, _, mine) = writer2
        .call("omniforge_list_pending_tools", json!({}))
        .await;
    assert_eq!(mine["structuredContent"]["pending"], json!([]), "{mine}");
    let (all_text, _, all) = boss.call("omniforge_list_pending_tools", json!({})).await;
    assert!(
        all_text.contains("gated version 1 by token:writer (new tool); network access;"),
        "{all_text}"
    );
    let pending = &all["structuredContent"]["pending"];
    assert_eq!(pending[0]["network"], true, "{all}");
    // The console's review of the new tool shows its whole content (issue 30).
    let review = console_page(&server, BOSS, "/console/approvals/gated/1").await;
    for want in [
        "<dt>Network</dt><dd><strong>allowed</strong>",
        "<dt>Timeout</dt><dd>7 s</dd>",
        "readOnlyHint true",
        "taskSupport forbidden",
        "<h3>Examples</h3>",
        "Their results when it was written",
        "secrets:none",
        "Hidden characters.",
        r#"title="RIGHT-TO-LEFT OVERRIDE">U+202E</mark>"#,
    ] {
        assert!(
            review.contains(want),
            "the review lacks {want:?}:\n{review}"
        );
    }
    assert!(
        !review.contains('\u{202E}'),
        "a raw bidi control on the review page"
    );
    assert_eq!(pending.as_array().map(Vec::len), Some(1), "{all}");
    assert_eq!(pending[0]["tool"], "gated");
    assert_eq!(pending[0]["version"], 1);
    assert_eq!(pending[0]["author"], "token:writer");
    assert_eq!(pending[0]["currentVersion"], Value::Null);
    assert_eq!(
        pending[0]["secretRequests"],
        json!([
            {"secret": "K1", "exists": true, "granted": true},
            {"secret": "K2", "exists": true, "granted": false},
            {"secret": "K3", "exists": true, "granted": false},
        ])
    );
    assert_no_list_changed(&mut writer2_events, "writer2", "a pending create");
    assert_no_list_changed(&mut boss_events, "boss", "a pending create");

    // Approval: current for everyone, list_changed to the others, only K2 granted besides
    // the K1 grant made before.
    let approve = json!({"name": "gated", "version": 1, "grants": ["K2"]});
    let text = ok(
        "approve",
        boss.call("omniforge_approve_tool", approve).await,
    );
    assert!(
        text.starts_with("Approved version 1 of tool gated"),
        "{text}"
    );
    assert!(
        text.contains("Not granted") && text.contains("K3"),
        "{text}"
    );
    for (who, events) in [
        ("writer", &mut writer_events),
        ("writer2", &mut writer2_events),
        ("boss", &mut boss_events),
    ] {
        events
            .wait_for(CHANGE_TIMEOUT, is_list_changed)
            .await
            .unwrap_or_else(|e| panic!("{who}: no list_changed after approval: {e}"));
    }
    assert_eq!(
        description_of(&mut writer2, "gated").await.as_deref(),
        Some("G1.")
    );
    let text = ok("writer2's call", writer2.call("gated", json!({})).await);
    assert_eq!(text.trim(), "secrets:K1,K2");

    // An update by the writer is pending too: the others keep version 1.
    let update = json!({"name": "gated", "description": "G2."});
    let update_tool = "omniforge_update_tool";
    write_pending(&mut writer, &mut writer_events, update_tool, update, 2).await;
    assert_eq!(
        description_of(&mut writer, "gated").await.as_deref(),
        Some("G2.")
    );
    assert_eq!(
        description_of(&mut writer2, "gated").await.as_deref(),
        Some("G1.")
    );
    assert_eq!(
        description_of(&mut boss, "gated").await.as_deref(),
        Some("G1.")
    );
    // omniforge_get_tool shows a pending version to its author and admins only.
    for (who, client, shown) in [
        ("writer", &mut writer, 2),
        ("writer2", &mut writer2, 1),
        ("boss", &mut boss, 2),
    ] {
        let (_, _, got) = client
            .call("omniforge_get_tool", json!({"name": "gated"}))
            .await;
        let versions = got["structuredContent"]["versions"]
            .as_array()
            .map(Vec::len);
        assert_eq!(versions, Some(shown), "{who}: {got}");
    }
    let text = ok("author's call of v2", writer.call("gated", json!({})).await);
    assert_eq!(
        text.trim(),
        "secrets:none",
        "the pending v2 ran with secrets"
    );
    assert_no_list_changed(&mut writer2_events, "writer2", "a pending update");
    assert_no_list_changed(&mut boss_events, "boss", "a pending update");

    // Rejection keeps the history with the reason; the author is back on version 1.
    let reject = json!({"name": "gated", "version": 2, "reason": "too chatty"});
    let text = ok("reject", boss.call("omniforge_reject_tool", reject).await);
    assert!(
        text.starts_with("Rejected version 2 of tool gated (too chatty)"),
        "{text}"
    );
    assert_eq!(
        description_of(&mut writer, "gated").await.as_deref(),
        Some("G1.")
    );
    let (_, _, got) = boss
        .call("omniforge_get_tool", json!({"name": "gated"}))
        .await;
    let versions = &got["structuredContent"]["versions"];
    assert_eq!(versions[0]["status"], "current", "{got}");
    assert_eq!(versions[0]["current"], true, "{got}");
    assert_eq!(versions[1]["status"], "rejected", "{got}");
    assert_eq!(versions[1]["statusReason"], "too chatty", "{got}");
    assert_eq!(got["structuredContent"]["currentVersion"], 1);
    assert_no_list_changed(&mut writer2_events, "writer2", "a rejection");

    // Each step is an audit record.
    let (seen, records) = audit(&server, None).await;
    for want in [
        ("token:writer", "create", "gated", 1),
        ("token:boss", "grant", "gated", 1),
        ("token:boss", "approve", "gated", 1),
        ("token:writer", "update", "gated", 2),
        ("token:boss", "reject", "gated", 2),
    ] {
        let want = (
            want.0.to_owned(),
            want.1.to_owned(),
            want.2.to_owned(),
            want.3,
        );
        assert!(
            seen.contains(&want),
            "no audit record {want:?} in {records:#?}"
        );
    }
    // The writes say they were stored pending.
    for action in ["create", "update"] {
        let r = records
            .iter()
            .find(|r| r["action"] == action && r["name"] == "gated")
            .unwrap();
        assert_eq!(r["detail"]["status"], "pending", "{r}");
    }
    let approve = records.iter().find(|r| r["action"] == "approve").unwrap();
    assert_eq!(approve["detail"]["grants"], json!(["K2"]), "{approve}");
    let grants: Vec<&Value> = records
        .iter()
        .filter(|r| r["action"] == "grant" && r["name"] == "gated")
        .collect();
    assert_eq!(
        grants.len(),
        2,
        "K1 before approval, K2 with it: {grants:#?}"
    );
}

#[tokio::test]
async fn cli_lists_approves_and_rejects_pending_versions() {
    crate::support::needs_deps!();
    cli_flow(None).await;
}

#[tokio::test]
async fn cli_lists_approves_and_rejects_pending_versions_on_postgres() {
    crate::support::needs_deps!();
    let db = crate::support::cluster().database("approval").unwrap();
    cli_flow(Some(&db.url())).await;
}

/// The command line's side of the gate on one store (`database`, else SQLite).
async fn cli_flow(database: Option<&str>) {
    let cli = |server, args| cli_on(server, database, args);
    let server = serve(database).await;
    let mut writer = HttpClient::bearer(server.url(), WRITER).await;
    let mut boss = HttpClient::bearer(server.url(), BOSS).await;
    let mut boss_events = listen(&server, &boss).await;
    for name in ["first", "second"] {
        let create = json!({"name": name, "description": "D.", "code": "print('hi')\n"});
        ok("create", writer.call("omniforge_create_tool", create).await);
    }
    let (success, out, err) = cli(&server, &["tool", "pending"]).await;
    assert!(success, "{out}{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines,
        [
            "first version 1 by token:writer (new tool)",
            "second version 1 by token:writer (new tool)"
        ],
        "{out}"
    );
    assert_eq!(description_of(&mut boss, "first").await, None);

    // Approve from the command line: the running server hears it and tells its peers.
    let (success, out, err) = cli(&server, &["tool", "approve", "first", "1"]).await;
    assert!(success, "{out}{err}");
    assert!(out.starts_with("Approved version 1 of tool first"), "{out}");
    boss_events
        .wait_for(CHANGE_TIMEOUT, is_list_changed)
        .await
        .unwrap_or_else(|e| panic!("no list_changed after `tool approve`: {e}"));
    assert_eq!(
        description_of(&mut boss, "first").await.as_deref(),
        Some("D.")
    );
    // Approving again, or a version that does not exist, fails with a message.
    let (success, out, err) = cli(&server, &["tool", "approve", "first", "1"]).await;
    assert!(!success, "approved twice: {out}{err}");
    let (success, out, err) = cli(&server, &["tool", "approve", "first", "7"]).await;
    assert!(!success, "approved a missing version: {out}{err}");

    let (success, out, err) = cli(&server, &["tool", "reject", "second", "1"]).await;
    assert!(!success, "rejected without --reason: {out}{err}");
    let (success, out, err) = cli(
        &server,
        &[
            "tool",
            "reject",
            "second",
            "1",
            "--reason",
            "duplicate of first",
        ],
    )
    .await;
    assert!(success, "{out}{err}");
    assert!(
        out.starts_with("Rejected version 1 of tool second (duplicate of first)"),
        "{out}"
    );
    let (success, out, err) = cli(&server, &["tool", "pending"]).await;
    assert!(success, "{out}{err}");
    assert_eq!(out.trim(), "No version is pending approval.");
    // The writer no longer sees its rejected tool, once the server has read the change.
    eventually(
        CHANGE_TIMEOUT,
        "the writer no longer lists its rejected tool",
        async || {
            description_of(&mut writer, "second")
                .await
                .is_none()
                .then_some(())
        },
    )
    .await;

    let (seen, records) = audit(&server, database).await;
    for want in [
        ("cli:e2e-user", "approve", "first", 1),
        ("cli:e2e-user", "reject", "second", 1),
    ] {
        let want = (
            want.0.to_owned(),
            want.1.to_owned(),
            want.2.to_owned(),
            want.3,
        );
        assert!(
            seen.contains(&want),
            "no audit record {want:?} in {records:#?}"
        );
    }
}
