//! 1. tools/list: the unary RPCs with the manifest's schemas and only MCP fields.

use super::*;

/// The unary fixture RPCs are listed with the manifest's schemas and only MCP fields; the
/// server-streaming `fixture_watch` is not. Checked on what the Python SDK parsed and on the
/// raw JSON of a tools/list over plain HTTP.
#[tokio::test]
async fn list_shows_unary_rpcs_with_mcp_fields_only() {
    crate::support::needs_deps!();
    let started = Instant::now();
    let (_fixture, omni, mut repl) = fixture_scene(&[]).await;

    let sdk_tools = repl.list().await;
    let problems = listing_problems(&sdk_tools, true);
    assert!(
        problems.is_empty(),
        "tools/list through the Python SDK:\n  - {}\nlisted: {}",
        problems.join("\n  - "),
        Value::Array(sdk_tools)
    );

    let raw = raw_http_tools(&omni.url, None).await;
    let problems = listing_problems(&raw, true);
    assert!(
        problems.is_empty(),
        "raw tools/list JSON (POST {}):\n  - {}\nlisted: {}",
        omni.url,
        problems.join("\n  - "),
        Value::Array(raw)
    );
    repl.quit().await;
    finish("list_shows_unary_rpcs_with_mcp_fields_only", started, &omni);
}
