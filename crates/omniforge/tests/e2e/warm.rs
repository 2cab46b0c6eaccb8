//! Warm templates through the server (issue 15): a real `omniforge serve --sandbox strict
//! --warm-pool 8` over Streamable HTTP, judged from `/healthz`'s `warm` object and from the
//! host's `/proc`.
//!
//! - a version's template is retired (its process gone) when the version stops being current
//!   (update, rollback) and when the tool is disabled or deleted; the new current version's
//!   template is ready before the write answers;
//! - a template killed from the host while a call runs on it: the call still answers, and so
//!   does the next one;
//! - a secret changed between two warm calls of one template: the second sees only the new
//!   value, and the template's own environment and command line hold neither;
//! - a change made by another process (the command line on the same data directory), heard
//!   through the change feed, retires the template too.
//!
//! The escape suite's warm mode (`escape/`, `NAME::warm`) attacks through the same path.

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::{self, Auth, HttpClient, HttpServer, eventually, omniforge_cli, uv};

const WRITER: &str = "writer-token-0123456789abcdef";
const BOSS: &str = "boss-token-0123456789abcdef";

/// A server with a strict sandbox and an 8-template warm pool, and the two tokens.
async fn warm_server() -> HttpServer {
    let uv = uv();
    HttpServer::start(
        &[
            "--uv",
            uv.to_str().unwrap(),
            "--sandbox",
            "strict",
            "--warm-pool",
            "8",
        ],
        &Auth::TokenFile(format!("writer {WRITER} tools:write\nboss {BOSS} admin\n")),
    )
    .await
}

/// `/healthz`'s `warm` object, as an `admin` sees it (with each template's key and pid).
async fn warm(server: &HttpServer) -> Value {
    let health: Value = support::http_client()
        .get(format!("{}/healthz", server.base()))
        .bearer_auth(BOSS)
        .timeout(Duration::from_secs(10))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(health["warm"]["on"], true, "the pool is off: {health}");
    health["warm"].clone()
}

/// The templates of `tool` (every version and principal) in `/healthz`.
async fn templates(server: &HttpServer, tool: &str) -> Vec<Value> {
    let prefix = format!("{tool}@");
    warm(server).await["templates"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["version"].as_str().unwrap().starts_with(&prefix))
        .cloned()
        .collect()
}

/// The one template of `tool` `/healthz` shows: its version must be `version` and it must
/// be ready; returns (pid, calls).
async fn only_template(server: &HttpServer, tool: &str, version: u32) -> (u32, u64) {
    let found = templates(server, tool).await;
    assert_eq!(found.len(), 1, "templates of {tool}: {found:?}");
    let t = &found[0];
    assert_eq!(t["version"], format!("{tool}@{version}"), "{t}");
    assert_eq!(t["state"], "ready", "{t}");
    assert_eq!(t["principal"], "token:writer", "{t}");
    let pid = u32::try_from(t["pid"].as_u64().unwrap()).unwrap();
    assert!(
        alive(pid),
        "template {pid} of {tool}@{version} is not running: {t}"
    );
    (pid, t["calls"].as_u64().unwrap())
}

/// Whether `pid` is a live (not zombie) process on the host.
fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

/// Waits (up to 15 s) until `pid` is gone; panics with `what` otherwise.
async fn gone(pid: u32, what: &str) {
    let what = format!("{what}: template process {pid} gone");
    eventually(Duration::from_secs(15), &what, async || {
        (!alive(pid)).then_some(())
    })
    .await;
}

async fn ok(c: &mut HttpClient, tool: &str, arguments: Value) -> String {
    let (text, is_error, raw) = c.call(tool, arguments).await;
    assert!(!is_error, "{tool}: {raw}");
    text
}

#[tokio::test]
async fn warm_templates_retire_on_update_rollback_disable_and_delete() {
    crate::support::needs_deps!();
    let server = warm_server().await;
    let mut writer = HttpClient::bearer(server.url(), WRITER).await;
    let code = |v: &str| format!("print('{v}')\n");
    let create = json!({"name": "echo", "description": "Says its version.", "code": code("one")});
    ok(&mut writer, "omniforge_create_tool", create).await;
    // Prepared before the create answered: the first call is warm.
    let (p1, calls) = only_template(&server, "echo", 1).await;
    assert_eq!(calls, 0);
    // Without `admin` (a `tools:write` token, or none), `/healthz` gives the pool's totals
    // only: no tool, principal or pid.
    for token in [Some(WRITER), None] {
        let mut get = support::http_client().get(format!("{}/healthz", server.base()));
        if let Some(token) = token {
            get = get.bearer_auth(token);
        }
        let health: Value = get.send().await.unwrap().json().await.unwrap();
        let warm = &health["warm"];
        assert_eq!(
            (warm["on"].clone(), warm["ready"].clone()),
            (json!(true), json!(1)),
            "{health}"
        );
        assert!(warm.get("templates").is_none(), "{token:?}: {health}");
        let text = health.to_string();
        assert!(!text.contains("echo") && !text.contains("writer"), "{text}");
    }
    assert_eq!(ok(&mut writer, "echo", json!({})).await, "one");
    assert_eq!(
        only_template(&server, "echo", 1).await,
        (p1, 1),
        "the call ran warm"
    );

    let update = json!({"name": "echo", "description": "Says its version.", "code": code("two")});
    ok(&mut writer, "omniforge_update_tool", update).await;
    gone(p1, "update").await;
    let (p2, _) = only_template(&server, "echo", 2).await;
    assert_eq!(ok(&mut writer, "echo", json!({})).await, "two");
    assert_eq!(only_template(&server, "echo", 2).await, (p2, 1));

    let back = json!({"name": "echo", "version": 1});
    ok(&mut writer, "omniforge_rollback_tool", back.clone()).await;
    gone(p2, "rollback").await;
    let (p3, _) = only_template(&server, "echo", 1).await;
    assert_ne!(p3, p1);
    assert_eq!(ok(&mut writer, "echo", json!({})).await, "one");
    assert_eq!(only_template(&server, "echo", 1).await, (p3, 1));

    ok(
        &mut writer,
        "omniforge_delete_tool",
        json!({"name": "echo"}),
    )
    .await;
    gone(p3, "disable").await;
    assert_eq!(templates(&server, "echo").await, Vec::<Value>::new());

    // Enabled again by a rollback, then deleted with its history.
    ok(&mut writer, "omniforge_rollback_tool", back).await;
    let (p4, _) = only_template(&server, "echo", 1).await;
    ok(
        &mut writer,
        "omniforge_delete_tool",
        json!({"name": "echo", "purge": true}),
    )
    .await;
    gone(p4, "delete").await;
    assert_eq!(templates(&server, "echo").await, Vec::<Value>::new());
    assert!(
        !server.stderr_all().contains("panicked"),
        "{}",
        server.output_text()
    );
}

#[tokio::test]
async fn a_warm_template_killed_while_a_call_runs_still_answers() {
    crate::support::needs_deps!();
    let server = warm_server().await;
    let mut writer = HttpClient::bearer(server.url(), WRITER).await;
    let code = "import time\ntime.sleep(1.5)\nprint('done')\n";
    let create = json!({"name": "slow", "description": "Sleeps, then answers.", "code": code});
    ok(&mut writer, "omniforge_create_tool", create).await;
    let (pid, _) = only_template(&server, "slow", 1).await;
    let mut caller = HttpClient::bearer(server.url(), WRITER).await;
    let call = tokio::spawn(async move { caller.call("slow", json!({})).await });
    // Wait until the call runs on the template, then kill the template from the host.
    eventually(
        Duration::from_secs(10),
        "the call runs on the template",
        async || {
            let t = templates(&server, "slow").await;
            if t.first().is_some_and(|t| t["running"] == 1) {
                Ok(())
            } else {
                Err(format!("templates: {t:?}"))
            }
        },
    )
    .await;
    let status = std::process::Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success(), "kill -KILL {pid}");
    gone(pid, "kill").await;
    let (text, is_error, raw) = call.await.unwrap();
    assert_eq!((text.as_str(), is_error), ("done", false), "{raw}");
    // And the next call answers too (cold, or on a new template).
    assert_eq!(ok(&mut writer, "slow", json!({})).await, "done");
    assert!(
        !server.stderr_all().contains("panicked"),
        "{}",
        server.output_text()
    );
}

#[tokio::test]
async fn a_secret_changed_between_two_warm_calls_reaches_only_the_second() {
    crate::support::needs_deps!();
    let server = warm_server().await;
    let mut boss = HttpClient::bearer(server.url(), BOSS).await;
    let mut writer = HttpClient::bearer(server.url(), WRITER).await;
    let first = format!("first-{}-{}", std::process::id(), line!());
    let second = format!("second-{}-{}", std::process::id(), line!());
    let rev = |s: &str| s.chars().rev().collect::<String>();
    let set = |v: &str| json!({"name": "E2E_WARM_KEY", "value": v});
    ok(&mut boss, "omniforge_set_secret", set(&first)).await;
    // Prints the value reversed (not redacted: proves the real value arrived), and every
    // other environment value reversed, so a stale value anywhere in the child would show.
    let code = "import os\nprint(os.environ.get('E2E_WARM_KEY', 'unset')[::-1])\n\
                print(sorted(v[::-1] for k, v in os.environ.items() if k != 'E2E_WARM_KEY'))\n";
    let create = json!({"name": "use_key", "description": "Uses E2E_WARM_KEY.", "code": code,
                        "secrets": ["E2E_WARM_KEY"]});
    ok(&mut writer, "omniforge_create_tool", create).await;
    // A writer's declaration is a request (issue 11): the admin grants it to version 1.
    let grant = json!({"secret": "E2E_WARM_KEY", "tool": "use_key", "version": 1});
    ok(&mut boss, "omniforge_grant_secret", grant).await;
    let (pid, _) = only_template(&server, "use_key", 1).await;

    let text = ok(&mut writer, "use_key", json!({})).await;
    assert!(text.starts_with(&format!("{}\n", rev(&first))), "{text}");
    ok(&mut boss, "omniforge_set_secret", set(&second)).await;
    let text = ok(&mut writer, "use_key", json!({})).await;
    assert!(text.starts_with(&format!("{}\n", rev(&second))), "{text}");
    assert!(
        !text.contains(&rev(&first)) && !text.contains(&first),
        "{text}"
    );
    // Both calls ran on the one template.
    assert_eq!(only_template(&server, "use_key", 1).await, (pid, 2));
    // The template never held either value in its environment or command line.
    for file in ["environ", "cmdline"] {
        let bytes = std::fs::read(format!("/proc/{pid}/{file}")).unwrap();
        let text = String::from_utf8_lossy(&bytes);
        for v in [&first, &second] {
            assert!(
                !text.contains(v.as_str()),
                "the template's {file} holds a secret value"
            );
        }
    }
    assert!(!server.stderr_all().contains(&first) && !server.stderr_all().contains(&second));
}

#[tokio::test]
async fn a_change_from_another_process_retires_the_template() {
    crate::support::needs_deps!();
    let server = warm_server().await;
    let mut writer = HttpClient::bearer(server.url(), WRITER).await;
    let create = json!({"name": "echo", "description": "Says one.", "code": "print('one')\n"});
    ok(&mut writer, "omniforge_create_tool", create).await;
    let (pid, _) = only_template(&server, "echo", 1).await;
    // `omniforge tool disable` is another process on the same store: the server hears of it
    // through the change feed (within its polling interval).
    let data = server.data_dir();
    let (done, out, err) = omniforge_cli(&data, &["tool", "disable", "echo"], None).await;
    assert!(done, "{out}{err}");
    gone(pid, "disabled by another process").await;
    assert_eq!(templates(&server, "echo").await, Vec::<Value>::new());
    // Enabled again there: the first call runs cold and starts the template; the next is warm.
    let (done, out, err) = omniforge_cli(&data, &["tool", "enable", "echo"], None).await;
    assert!(done, "{out}{err}");
    eventually(Duration::from_secs(15), "echo comes back", async || {
        let (text, is_error, _) = writer.call("echo", json!({})).await;
        if !is_error && text == "one" {
            Ok(())
        } else {
            Err(format!("echo answered {text:?}"))
        }
    })
    .await;
    eventually(
        Duration::from_secs(30),
        "a ready template after a cold call",
        async || {
            let t = templates(&server, "echo").await;
            t.first()
                .is_some_and(|t| t["state"] == "ready")
                .then_some(())
        },
    )
    .await;
    let (p2, before) = only_template(&server, "echo", 1).await;
    assert_ne!(p2, pid);
    assert_eq!(ok(&mut writer, "echo", json!({})).await, "one");
    assert_eq!(only_template(&server, "echo", 1).await, (p2, before + 1));
}
