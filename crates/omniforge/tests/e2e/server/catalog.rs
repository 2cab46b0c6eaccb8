//! The tool catalog: name collisions and call errors.

use super::*;

/// A manifest tool named like a built-in is skipped with a warning; manifest tools have no
/// upstream; unknown tools, `null` arguments and schema mismatches are tool errors.
#[tokio::test]
async fn manifest_name_collision_and_call_errors() {
    let (_m, path) = manifest_dir(&[
        (ANY_TOOL, "manifest copy that must be skipped"),
        ("t1", "d"),
    ]);
    let mut server = StdioServer::start(&["--manifest", path.to_str().unwrap()]);
    let rev = init_stdio(&mut server, V2025).await.unwrap();

    let reply = stdio_call(&mut server, &rev, rpc(1, "tools/list", None)).await;
    let tools = reply["result"]["tools"].as_array().unwrap().clone();
    let named: Vec<&Value> = tools
        .iter()
        .filter(|t| t["name"] == json!(ANY_TOOL))
        .collect();
    assert_eq!(
        named.len(),
        1,
        "{ANY_TOOL} listed {} times: {reply}",
        named.len()
    );
    let description = named[0]["description"].as_str().unwrap_or("");
    assert!(
        description.contains("OmniForge") && !description.contains("manifest copy"),
        "{ANY_TOOL} is not the built-in: {}",
        named[0]
    );
    assert_eq!(tool_names(&reply["result"]), with_builtins(&["t1"]));
    eventually_contains(
        &format!("a collision warning naming {ANY_TOOL} on stderr"),
        || server.stderr_text(),
        &["collision", ANY_TOOL],
        Duration::from_secs(5),
    )
    .await;

    let call = |id: u64, params: Value| rpc(id, "tools/call", Some(params));
    let text_of = |reply: &Value| -> String {
        assert_eq!(reply["result"]["isError"], json!(true), "{reply}");
        reply["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_else(|| panic!("no text content: {reply}"))
            .to_owned()
    };

    let reply = stdio_call(
        &mut server,
        &rev,
        call(2, json!({"name": "t1", "arguments": {}})),
    )
    .await;
    let text = text_of(&reply);
    assert!(text.contains("no upstream"), "manifest tool call: {text:?}");

    let reply = stdio_call(
        &mut server,
        &rev,
        call(3, json!({"name": "no_such_tool", "arguments": {}})),
    )
    .await;
    assert_eq!(text_of(&reply), "Unknown or inactive tool");

    let reply = stdio_call(
        &mut server,
        &rev,
        call(4, json!({"name": ANY_TOOL, "arguments": null})),
    )
    .await;
    assert_eq!(text_of(&reply), "arguments must be a JSON object");

    let reply = stdio_call(
        &mut server,
        &rev,
        call(5, json!({"name": ANY_TOOL, "arguments": {"x": 1}})),
    )
    .await;
    let text = text_of(&reply);
    assert!(
        text.starts_with("Arguments do not match inputSchema"),
        "{{\"x\":1}} against additionalProperties:false: {text:?}"
    );

    // And the built-in itself still works.
    let reply = stdio_call(&mut server, &rev, call(6, json!({"name": ANY_TOOL}))).await;
    assert_ne!(reply["result"]["isError"], json!(true), "{reply}");
}
