//! 7. Hot reload of the manifest file.

use super::*;

/// Removing a tool from the manifest (temp file + rename) announces list_changed and the
/// new list lacks it; an invalid rewrite keeps the previous tools and announces nothing.
#[tokio::test]
async fn hot_reload_removes_a_tool_and_ignores_invalid_json() {
    crate::support::needs_deps!();
    let started = Instant::now();
    let fixture = Fixture::start().await;
    let (_dir, manifest) = manifest_copy();
    let omni = serve(&[
        "--manifest",
        manifest.to_str().unwrap(),
        "--upstream",
        &fixture.url,
    ])
    .await;
    let mut repl = Repl::start(Sdk::Py2, "http", &omni.url, &[]).await;

    let before = repl.names().await;
    assert!(before.iter().any(|n| n == "fixture_lookup"), "{before:?}");
    let baseline = repl.cmd(json!({"op": "changes"})).await["count"]
        .as_i64()
        .unwrap();

    let mut doc: Value = serde_json::from_slice(&std::fs::read(&manifest).unwrap()).unwrap();
    doc["tools"]
        .as_array_mut()
        .unwrap()
        .retain(|t| t["name"] != "fixture_lookup");
    let rewritten = Instant::now();
    write_atomically(&manifest, &serde_json::to_vec_pretty(&doc).unwrap());
    let reply = repl
        .cmd(json!({"op": "wait_changes", "count": baseline + 1, "timeout": 10}))
        .await;
    assert_eq!(
        reply["ok"],
        true,
        "no notifications/tools/list_changed within 10 s of removing fixture_lookup from the \
         manifest (temp file + rename): {reply}\nserver stderr:\n{}",
        omni.stderr_captured().tail(4000)
    );
    let notified_after = rewritten.elapsed();
    let after = repl.names().await;
    assert!(
        !after.iter().any(|n| n == "fixture_lookup"),
        "tools/list after list_changed still has fixture_lookup: {after:?}"
    );
    for want in ["omniforge_instructions", "fixture_echo", "fixture_stats"] {
        assert!(
            after.iter().any(|n| n == want),
            "{want} missing after reload: {after:?}"
        );
    }
    let result = repl.result("fixture_lookup", json!({"id": "known"})).await;
    assert!(
        is_error(&result),
        "calling the removed fixture_lookup must be an error: {result}"
    );
    let count = repl.cmd(json!({"op": "changes"})).await["count"]
        .as_i64()
        .unwrap();

    // A broken rewrite: the previous manifest stays, nothing is announced.
    write_atomically(&manifest, b"{\"tools\": [ this is not json");
    let reply = repl
        .cmd(json!({"op": "wait_changes", "count": count + 1, "timeout": 2}))
        .await;
    assert_eq!(
        reply["ok"], false,
        "an invalid manifest rewrite must not announce list_changed: {reply}"
    );
    let still = repl.names().await;
    assert_eq!(
        still, after,
        "tools/list changed after an invalid manifest rewrite"
    );
    let result = repl.result("fixture_echo", json!({"text": "still"})).await;
    assert_eq!(result["isError"], false, "{result}");
    repl.quit().await;
    eprintln!("  list_changed arrived {notified_after:?} after the rewrite");
    finish(
        "hot_reload_removes_a_tool_and_ignores_invalid_json",
        started,
        &omni,
    );
}
