//! The web console (issue 17) in a real browser: Debian's Chromium, driven by
//! `tests/console/driver.mjs` (playwright-core, axe-core) against a real `omniforge serve`.
//!
//! The Rust side does what an agent does over MCP (creates a tool with examples, updates it,
//! calls a tool whose texts are hostile markup); the driver signs in, finds the tool in the
//! catalog, opens the diff of its two versions, rolls it back, shows that a change without its
//! CSRF token or from another Origin is refused and that `/mcp` refuses the console cookie,
//! visits every page (each checked at 1280 and 390 px: status, security headers, zero serious
//! or critical axe violations, no CSP violation, no script error, no request leaving the
//! server, no agent text turned into markup, no sideways scroll), signs out, and signs in as a
//! `tools:call` user who sees no edit control and whose forged change is refused. Afterwards
//! the store says what the browser did (and did not) change.
//!
//! Screenshots of every page go to `target/console-screenshots/`; with
//! `OMNIFORGE_CONSOLE_DOCS=1` the curated set for the book is written to `docs/src/console/`.

use std::time::Duration;

use serde_json::{Value, json};
use tokio::process::Command;

use crate::support::{Auth, HttpServer, http_client, no_proxy, node22, repo_root, require};

const ADMIN: &str = "adm-console-e2e-7f3a";
const WRITER: &str = "wri-console-e2e-5d0e";
const CALLER: &str = "cal-console-e2e-91c2";
/// Agent-written text that must never become markup in a page.
const HOSTILE: &str = r#"<img src=x onerror="document.body.dataset.xss=1"><script>document.body.dataset.xss=1</script>"#;

/// One MCP request (JSON-only answers) with `token`; the session, once open, rides along.
async fn rpc(
    server: &HttpServer,
    token: &str,
    session: Option<&str>,
    body: Value,
) -> (Option<String>, Value) {
    let mut request = http_client()
        .post(server.url())
        .header("authorization", format!("Bearer {token}"))
        .header("content-type", "application/json")
        .header("accept", "application/json")
        .header("mcp-protocol-version", "2025-06-18")
        .json(&body);
    if let Some(session) = session {
        request = request.header("mcp-session-id", session);
    }
    let reply = tokio::time::timeout(Duration::from_secs(120), request.send())
        .await
        .expect("an answer within 120 s")
        .expect("the request is sent");
    let session = reply
        .headers()
        .get("mcp-session-id")
        .map(|v| v.to_str().unwrap().to_owned());
    let text = reply.text().await.unwrap();
    (session, serde_json::from_str(&text).unwrap_or(Value::Null))
}

/// Calls tool `name` over a fresh MCP session as `token`; returns the result.
async fn call(server: &HttpServer, token: &str, name: &str, arguments: Value) -> Value {
    let (session, answer) = rpc(server, token, None, initialize()).await;
    let session = session.unwrap_or_else(|| panic!("no session: {answer}"));
    rpc(
        server,
        token,
        Some(&session),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    )
    .await;
    let request = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": name, "arguments": arguments}});
    let (_, answer) = rpc(server, token, Some(&session), request).await;
    answer["result"].clone()
}

fn ok(result: &Value) -> &Value {
    assert_ne!(result["isError"], json!(true), "{result}");
    assert!(result.is_object(), "no result: {result}");
    result
}

const VAT_V1: &str =
    "import json, sys\na = json.load(sys.stdin)\nprint(round(a['net'] * 0.2, 2))\n";
const VAT_V2: &str = "import json, sys\na = json.load(sys.stdin)\nrate = a.get('rate', 20)\nprint(round(a['net'] * rate / 100, 2))\n";

/// Two progress messages, then a PNG, an SVG that would run script, and that SVG sent as a PNG:
/// the console shows the PNG only.
const PICTURE: &str = r#"import base64, omniforge
PNG = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==")
SVG = b"<svg xmlns='http://www.w3.org/2000/svg' onload='document.body.dataset.xss=1'><script>document.body.dataset.xss=1</script></svg>"
omniforge.progress(1, 2, "drawing")
omniforge.progress(2, 2, "done drawing")
omniforge.result(content=[omniforge.text("three images"), omniforge.image(PNG, "image/png"),
                          omniforge.image(SVG, "image/svg+xml"), omniforge.image(SVG, "image/png")])
"#;

#[tokio::test]
async fn the_console_in_a_real_browser() {
    crate::support::needs_deps!();
    let chromium = std::env::var_os("OMNIFORGE_CHROMIUM")
        .map_or("/usr/bin/chromium".into(), std::path::PathBuf::from);
    require(&[
        node22(),
        repo_root().join("tests/console/node_modules/playwright-core"),
        chromium,
    ]);
    let tokens =
        format!("admin {ADMIN} admin\nwriter {WRITER} tools:write\ncaller {CALLER} tools:call\n");
    // A real Connect service behind a forge manifest: the server page shows its upstream.
    let connect = crate::support::Fixture::start().await;
    let manifest = crate::support::fixture_manifest();
    let server = HttpServer::start(
        &[
            "--require-approval",
            "--manifest",
            manifest.to_str().unwrap(),
            "--upstream",
            &connect.url,
        ],
        &Auth::TokenFile(tokens),
    )
    .await;
    ok(&call(&server, CALLER, "fixture_echo", json!({"text": "hi"})).await);

    // What an agent does over MCP.
    let schema = json!({"type": "object", "properties": {
        "net": {"type": "number", "description": "Net amount"},
        "rate": {"type": "integer", "description": "VAT rate in percent"}}, "required": ["net"]});
    ok(&call(&server, ADMIN, "omniforge_create_tool", json!({
        "name": "add_vat", "description": "Adds VAT to a net amount.", "code": VAT_V1, "inputSchema": schema,
        "examples": [{"arguments": {"net": 10}, "expect": {"text": "2.0"}}]})).await);
    ok(&call(
        &server,
        ADMIN,
        "omniforge_update_tool",
        json!({"name": "add_vat", "code": VAT_V2}),
    )
    .await);
    ok(&call(&server, ADMIN, "omniforge_create_tool", json!({
        "name": "hostile", "description": HOSTILE, "title": HOSTILE,
        "code": format!("print({HOSTILE:?})"),
        "inputSchema": {"type": "object", "properties": {"q": {"type": "string", "description": HOSTILE}}}})).await);
    ok(&call(&server, CALLER, "hostile", json!({"q": HOSTILE})).await);
    ok(&call(&server, ADMIN, "omniforge_create_tool", json!({
        "name": "picture", "description": "Draws, reporting progress; one image is SVG, one lies about its type.",
        "code": PICTURE, "inputSchema": {"type": "object", "properties": {
            "mode": {"enum": ["all", "png"]}, "large": {"type": "boolean"}}}})).await);
    ok(&call(&server, ADMIN, "add_vat", json!({"net": 100})).await);
    // A writer's new tool waits for approval (under --require-approval) and asks for a secret.
    ok(&call(
        &server,
        ADMIN,
        "omniforge_set_secret",
        json!({"name": "SLUG_KEY", "value": "slug-secret-value"}),
    )
    .await);
    let submitted = call(
        &server,
        WRITER,
        "omniforge_create_tool",
        json!({
        "name": "slugify", "description": "Says whether it got its key.", "secrets": ["SLUG_KEY"],
        "code": "import os\nprint('key' if os.environ.get('SLUG_KEY') else 'no key')\n",
        "inputSchema": {"type": "object"}}),
    )
    .await;
    ok(&submitted);

    let mut steps = vec![
        json!({"do": "signInRefused"}),
        json!({"do": "signIn"}),
        json!({"do": "findTool", "name": "add_vat"}),
        json!({"do": "diff", "tool": "add_vat", "from": 1, "to": 2}),
        json!({"do": "tryIt", "tool": "add_vat", "arguments": {"net": 100, "rate": 7}, "contains": ["7.0", "isError: false"], "shoot": "tool-try-it"}),
        json!({"do": "tryIt", "tool": "picture", "arguments": {"mode": "all", "large": false},
               "contains": ["drawing", "done drawing", "image/svg+xml", "is not shown"], "images": 1}),
        json!({"do": "rollback", "tool": "add_vat", "version": 1}),
        json!({"do": "csrfRefused", "tool": "add_vat"}),
        json!({"do": "originRefused", "tool": "add_vat"}),
        json!({"do": "mcpRefusesCookie"}),
        json!({"do": "tour"}),
    ];
    let docs = std::env::var_os("OMNIFORGE_CONSOLE_DOCS").is_some();
    if docs {
        for (path, name, height) in [
            ("/console/tools", "catalog", 800),
            ("/console/tools/add_vat", "tool", 1300),
            ("/console/tools/add_vat?from=1&to=2#diff", "tool-diff", 1300),
            ("/console/tools/add_vat#activity", "tool-charts", 800),
            ("/console/calls", "calls", 800),
            ("/console/audit", "audit", 800),
            ("/console/approvals", "approvals", 800),
            ("/console/secrets", "secrets", 900),
            ("/console/content", "content", 800),
        ] {
            steps.push(json!({"do": "shoot", "path": path, "name": name, "height": height}));
        }
        // The server page's environments, upstreams and warm pool (below the sandbox layers).
        steps.push(json!({"do": "shoot", "path": "/console/server", "name": "server", "selector": "#runtime"}));
        steps.push(json!({"do": "shoot", "path": "/console/tools", "name": "catalog-phone", "width": 390, "height": 844}));
    }
    steps.extend([
        json!({"do": "signOut"}),
        json!({"do": "signIn", "tokenEnv": "OMNIFORGE_CONSOLE_CALLER_TOKEN"}),
        json!({"do": "readOnly", "tool": "add_vat"}),
        json!({"do": "tour"}),
    ]);
    run_driver(&server, "tour", steps, docs).await;

    // What the browser changed, read back over MCP: the rollback made version 1 current; the
    // refused changes (no CSRF token, foreign Origin, the tools:call user's) left it enabled.
    let tool = call(
        &server,
        ADMIN,
        "omniforge_get_tool",
        json!({"name": "add_vat"}),
    )
    .await;
    let view = &ok(&tool)["structuredContent"];
    assert_eq!(view["currentVersion"], json!(1), "{view}");
    assert_eq!(view["enabled"], json!(true), "{view}");

    // The approval: a tools:call client listening on its session hears list_changed only
    // once an admin approves in the browser, and then lists and runs the tool with the
    // ticked secret.
    let mut listener = Listener::open(&server, CALLER).await;
    assert!(
        !tool_names(&server, CALLER)
            .await
            .contains(&"slugify".to_owned())
    );
    let mut steps = vec![json!({"do": "signIn"})];
    if docs {
        steps.push(json!({"do": "shoot", "path": "/console/approvals/slugify/1", "name": "approval-review", "height": 1100}));
    }
    steps.push(json!({"do": "approve", "tool": "slugify", "version": 1, "grants": ["SLUG_KEY"]}));
    run_driver(&server, "approve", steps, docs).await;
    listener.wait_for("notifications/tools/list_changed").await;
    assert!(
        tool_names(&server, CALLER)
            .await
            .contains(&"slugify".to_owned())
    );
    let ran = call(&server, CALLER, "slugify", json!({})).await;
    assert_eq!(ok(&ran)["content"][0]["text"], json!("key"), "{ran}");
}

/// The names `tools/list` gives `token`.
async fn tool_names(server: &HttpServer, token: &str) -> Vec<String> {
    let (session, _) = rpc(server, token, None, initialize()).await;
    let session = session.unwrap();
    rpc(
        server,
        token,
        Some(&session),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    )
    .await;
    let (_, list) = rpc(
        server,
        token,
        Some(&session),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
    )
    .await;
    list["result"]["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["name"].as_str().map(str::to_owned))
        .collect()
}

fn initialize() -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "console-e2e", "version": "0"}}})
}

/// An MCP session's standalone SSE stream (`GET` on the endpoint), read as it arrives.
struct Listener {
    response: reqwest::Response,
    seen: String,
}

impl Listener {
    async fn open(server: &HttpServer, token: &str) -> Listener {
        let (session, answer) = rpc(server, token, None, initialize()).await;
        let session = session.unwrap_or_else(|| panic!("no session: {answer}"));
        rpc(
            server,
            token,
            Some(&session),
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        )
        .await;
        let response = http_client()
            .get(server.url())
            .header("authorization", format!("Bearer {token}"))
            .header("accept", "text/event-stream")
            .header("mcp-session-id", &session)
            .header("mcp-protocol-version", "2025-06-18")
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        Listener {
            response,
            seen: String::new(),
        }
    }

    /// Waits (at most 30 s) until a message with `method` arrived.
    async fn wait_for(&mut self, method: &str) {
        let wait = async {
            while !self.seen.contains(method) {
                match self.response.chunk().await {
                    Ok(Some(bytes)) => self.seen.push_str(&String::from_utf8_lossy(&bytes)),
                    _ => panic!("the stream ended before {method}: {}", self.seen),
                }
            }
        };
        if tokio::time::timeout(Duration::from_secs(30), wait)
            .await
            .is_err()
        {
            panic!("no {method} within 30 s; the stream said: {}", self.seen);
        }
    }
}

/// Runs `tests/console/driver.mjs` against `server` with `steps`; fails with every problem the
/// driver found.
async fn run_driver(server: &HttpServer, out: &str, steps: Vec<Value>, docs: bool) {
    let out = repo_root().join("target/console-screenshots").join(out);
    let mut driver = Command::new(node22());
    driver
        .arg(repo_root().join("tests/console/driver.mjs"))
        .arg("--url")
        .arg(server.base())
        .arg("--out")
        .arg(&out)
        .arg("--steps")
        .arg(Value::Array(steps).to_string())
        .env("OMNIFORGE_CONSOLE_TOKEN", ADMIN)
        .env("OMNIFORGE_CONSOLE_CALLER_TOKEN", CALLER)
        .kill_on_drop(true);
    if docs {
        driver
            .arg("--curated")
            .arg(repo_root().join("docs/src/console"));
    }
    no_proxy(&mut driver);
    let output = tokio::time::timeout(Duration::from_secs(300), driver.output())
        .await
        .expect("the driver finishes within 300 s")
        .expect("node22 runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let verdict: Value = stdout
        .find("\n{")
        .or(stdout.starts_with('{').then_some(0))
        .and_then(|at| {
            let end = stdout.rfind('}')?;
            serde_json::from_str(&stdout[at..=end]).ok()
        })
        .unwrap_or(Value::Null);
    let problems: Vec<String> = verdict["steps"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|s| s["ok"] != json!(true))
        .map(|s| format!("{}: {}", s["step"]["do"], s["problems"]))
        .collect();
    assert!(
        output.status.success() && verdict["ok"] == json!(true),
        "the browser run failed:\n{}\nlast line: {}\nstderr: {}\nserver: {}",
        problems.join("\n"),
        stdout.lines().last().unwrap_or(""),
        String::from_utf8_lossy(&output.stderr),
        server.output_text(),
    );
    eprintln!(
        "console driver: {} ({} s; Chromium {}, screenshots in {})",
        stdout.lines().last().unwrap_or(""),
        verdict["seconds"],
        verdict["chromium"],
        out.display()
    );
}
