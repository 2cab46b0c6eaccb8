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
//! `OMNIFORGE_CONSOLE_DOCS=1` the curated set for the README is written to `docs/console/`.

use std::time::Duration;

use serde_json::{Value, json};
use tokio::process::Command;

use crate::util::{Auth, HttpServer, http_client, no_proxy, node22, repo_root, require};

const ADMIN: &str = "adm-console-e2e-7f3a";
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
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "console-e2e", "version": "0"}}});
    let (session, answer) = rpc(server, token, None, init).await;
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

#[tokio::test]
async fn the_console_in_a_real_browser() {
    let chromium = std::env::var_os("OMNIFORGE_CHROMIUM")
        .map_or("/usr/bin/chromium".into(), std::path::PathBuf::from);
    require(&[
        node22(),
        repo_root().join("tests/console/node_modules/playwright-core"),
        chromium,
    ]);
    let tokens = format!("admin {ADMIN} admin\ncaller {CALLER} tools:call\n");
    let server = HttpServer::start(&[], &Auth::TokenFile(tokens)).await;

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
    ok(&call(&server, ADMIN, "add_vat", json!({"net": 100})).await);

    let mut steps = vec![
        json!({"do": "signInRefused"}),
        json!({"do": "signIn"}),
        json!({"do": "findTool", "name": "add_vat"}),
        json!({"do": "diff", "tool": "add_vat", "from": 1, "to": 2}),
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
            ("/console/calls", "calls", 800),
            ("/console/audit", "audit", 800),
        ] {
            steps.push(json!({"do": "shoot", "path": path, "name": name, "height": height}));
        }
        steps.push(json!({"do": "shoot", "path": "/console/tools", "name": "catalog-phone", "width": 390, "height": 844}));
    }
    steps.extend([
        json!({"do": "signOut"}),
        json!({"do": "signIn", "tokenEnv": "OMNIFORGE_CONSOLE_CALLER_TOKEN"}),
        json!({"do": "readOnly", "tool": "add_vat"}),
        json!({"do": "tour"}),
    ]);
    let out = repo_root().join("target/console-screenshots");
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
            .arg(repo_root().join("docs/console"));
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
}
