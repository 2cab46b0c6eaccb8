//! 8. `omniforge bridge` over stdio: the TypeScript SDK and raw lines.

use super::*;

/// `omniforge bridge` over stdio with the TypeScript SDK: only the manifest's unary tools
/// (no built-ins), and a working fixture_echo call (the SDK checks structuredContent against
/// the outputSchema).
#[tokio::test]
async fn bridge_stdio_typescript_client() {
    crate::support::needs_deps!();
    let started = Instant::now();
    let fixture = Fixture::start().await;
    let data = tempfile::tempdir().unwrap();
    let argv = json!([
        BIN,
        "bridge",
        "--data-dir",
        data.path(),
        "--manifest",
        fixture_manifest(),
        "--addr",
        fixture.url
    ])
    .to_string();
    let mut repl = Repl::start(Sdk::Ts, "stdio", &argv, &[]).await;
    let tools = repl.list().await;
    let problems = listing_problems(&tools, false);
    assert!(
        problems.is_empty(),
        "omniforge bridge tools/list through the TypeScript SDK:\n  - {}\nlisted: {}",
        problems.join("\n  - "),
        Value::Array(tools.clone())
    );
    assert_eq!(
        tools.len(),
        UNARY_TOOLS.len(),
        "bridge lists exactly the unary fixture RPCs: {}",
        Value::Array(tools)
    );
    let args = json!({"text": "hello world", "shout": true});
    let result = repl.result("fixture_echo", args.clone()).await;
    assert_eq!(
        result["isError"], false,
        "bridge fixture_echo {args}: {result}"
    );
    assert_eq!(
        result["structuredContent"],
        json!({"text": "HELLO WORLD", "length": 11, "shouted": true, "words": ["HELLO", "WORLD"]}),
        "{result}"
    );
    let stderr = repl.stderr.text();
    repl.quit().await;
    let panics = panic_lines(&stderr);
    assert!(
        panics.is_empty(),
        "the bridge (or driver) panicked: {panics:?}"
    );
    eprintln!(
        "manifest_tools::bridge_stdio_typescript_client: {:.2} s",
        started.elapsed().as_secs_f64()
    );
}

/// The bridge's raw tools/list JSON over stdio: the unary fixture RPCs, MCP fields only,
/// no built-in tools.
#[tokio::test]
async fn bridge_raw_stdio_listing() {
    let started = Instant::now();
    let manifest = fixture_manifest();
    let mut bridge = RawBridge::start(&["--manifest", manifest.to_str().unwrap()]).await;
    bridge.initialize().await;
    bridge
        .send(json!({"jsonrpc":"2.0","id":1,"method":"tools/list"}))
        .await;
    let (m, _) = bridge.response(1, Duration::from_secs(10)).await;
    let tools = m["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("bridge tools/list: {m}"))
        .clone();
    let problems = listing_problems(&tools, false);
    assert!(
        problems.is_empty(),
        "omniforge bridge raw tools/list JSON:\n  - {}\nlisted: {}",
        problems.join("\n  - "),
        Value::Array(tools)
    );
    eprintln!(
        "manifest_tools::bridge_raw_stdio_listing: {:.2} s",
        started.elapsed().as_secs_f64()
    );
}
