//! `--stateless`: serving without sessions.

use super::*;

/// `--stateless`: initialize has no session id; tools/list and tools/call work in separate
/// POSTs without a session; GET is 405 with an Allow header.
#[tokio::test]
async fn stateless_mode_serves_without_sessions() {
    let server = HttpServer::start(&["--stateless"], &Auth::None).await;
    let client = http_client();
    let ctx = || format!("server output:\n{}", server.output_text());

    let reply = post(
        &client,
        server.url(),
        &post_headers(None, None),
        &initialize_request(1, V2025),
    )
    .await;
    let init = answer(&reply, V2025, "initialize", 1);
    assert_eq!(init["result"]["protocolVersion"], json!(V2025));
    assert!(
        reply.header("mcp-session-id").is_none(),
        "stateless initialize answered with Mcp-Session-Id {:?}; {}",
        reply.header("mcp-session-id"),
        ctx()
    );

    let headers = post_headers(None, Some(V2025));
    let reply = post(&client, server.url(), &headers, &rpc(2, "tools/list", None)).await;
    let list = answer(&reply, V2025, "tools/list", 2);
    assert!(
        tool_names(&list["result"]).contains(&ANY_TOOL.to_owned()),
        "{list}"
    );
    assert!(reply.header("mcp-session-id").is_none());

    let reply = post(
        &client,
        server.url(),
        &headers,
        &rpc(
            3,
            "tools/call",
            Some(json!({"name": ANY_TOOL, "arguments": {}})),
        ),
    )
    .await;
    let call = answer(&reply, V2025, "tools/call", 3);
    assert_ne!(call["result"]["isError"], json!(true), "{call}");
    let text = call["result"]["content"][0]["text"].as_str().unwrap_or("");
    assert!(text.contains("OmniForge"), "instructions text: {call}");

    // Accept: application/json only also works without a session.
    let json_only = vec![
        ("Content-Type".to_owned(), "application/json".to_owned()),
        ("Accept".to_owned(), "application/json".to_owned()),
        ("MCP-Protocol-Version".to_owned(), V2025.to_owned()),
    ];
    let reply = post(
        &client,
        server.url(),
        &json_only,
        &rpc(4, "tools/list", None),
    )
    .await;
    assert_eq!(
        reply.content_type().as_deref(),
        Some("application/json"),
        "{reply:?}"
    );
    answer(&reply, V2025, "tools/list", 4);

    let reply = http_send(
        &client,
        "GET",
        server.url(),
        &[("Accept".to_owned(), "text/event-stream".to_owned())],
        None,
        &[],
    )
    .await
    .unwrap();
    assert_rpc_error(&reply, 405, "GET in stateless mode");
    let allow = reply
        .header("allow")
        .unwrap_or_else(|| panic!("405 without Allow: {:?}", reply.headers));
    let allowed: Vec<String> = allow
        .split(',')
        .map(|m| m.trim().to_ascii_uppercase())
        .collect();
    assert!(allowed.contains(&"POST".to_owned()), "Allow: {allow}");
    assert!(
        !allowed.contains(&"GET".to_owned()),
        "Allow lists the refused GET: {allow}"
    );
}
