//! The 2026-07-28 revision over HTTP: `server/discover`, `tools/list`, `subscriptions/listen`.

use super::*;

/// The `_meta` every 2026-07-28 request carries.
fn meta_2026() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": V2026,
        "io.modelcontextprotocol/clientCapabilities": {}
    })
}

/// POST headers of a 2026-07-28 request: the version header, and `Mcp-Method`, which
/// 2026-07-28 clients must send (SEP-2243).
fn headers_2026(method: &str) -> Vec<(String, String)> {
    with_header(post_headers(None, Some(V2026)), "Mcp-Method", method)
}

/// Without a session: server/discover lists the supported versions, tools/list works, and
/// subscriptions/listen keeps a stream open that receives list_changed after a rewrite.
#[tokio::test]
async fn rev_2026_discover_tools_list_and_subscriptions_listen() {
    let (_m, path) = manifest_dir(&[("t1", "d")]);
    let server = HttpServer::start(&["--manifest", path.to_str().unwrap()], &Auth::None).await;
    let client = http_client();
    let ctx = || format!("server output:\n{}", server.output_text());

    let reply = post(
        &client,
        server.url(),
        &headers_2026("server/discover"),
        &rpc(1, "server/discover", Some(json!({"_meta": meta_2026()}))),
    )
    .await;
    let discover = answer(&reply, V2026, "server/discover", 1);
    assert!(
        reply.header("mcp-session-id").is_none(),
        "discover opened a session"
    );
    let versions: Vec<&str> = discover["result"]["supportedVersions"]
        .as_array()
        .unwrap_or_else(|| panic!("no supportedVersions: {discover}; {}", ctx()))
        .iter()
        .filter_map(Value::as_str)
        .collect();
    for v in ALL_VERSIONS {
        assert!(
            versions.contains(&v),
            "supportedVersions {versions:?} lacks {v}"
        );
    }

    let reply = post(
        &client,
        server.url(),
        &headers_2026("tools/list"),
        &rpc(2, "tools/list", Some(json!({"_meta": meta_2026()}))),
    )
    .await;
    let list = answer(&reply, V2026, "tools/list", 2);
    assert_eq!(tool_names(&list["result"]), with_builtins(&["t1"]));
    assert!(
        reply.header("mcp-session-id").is_none(),
        "tools/list opened a session"
    );

    // The same request without `Mcp-Method` is refused: 400 with a HeaderMismatchError
    // (-32020), which is why the requests above carry the header.
    let reply = post(
        &client,
        server.url(),
        &post_headers(None, Some(V2026)),
        &rpc(9, "tools/list", Some(json!({"_meta": meta_2026()}))),
    )
    .await;
    let body = String::from_utf8_lossy(&reply.body);
    assert_eq!(reply.status, 400, "tools/list without Mcp-Method: {body}");
    assert_eq!(reply.messages.len(), 1, "{body}");
    let err = &reply.messages[0];
    assert_eq!(err["error"]["code"], json!(-32020), "{err}");
    schema::check(V2026, "HeaderMismatchError", err).unwrap();

    let listen_id = 3;
    let (status, headers, stream) = open_stream(
        &client,
        reqwest::Method::POST,
        server.url(),
        &headers_2026("subscriptions/listen"),
        Some(rpc(
            listen_id,
            "subscriptions/listen",
            Some(json!({"_meta": meta_2026(), "notifications": {"toolsListChanged": true}})),
        )),
    )
    .await;
    let mut stream = stream.unwrap_or_else(|body| {
        panic!(
            "subscriptions/listen: HTTP {status} {headers:?} is not an SSE stream: {body}; {}",
            ctx()
        )
    });
    assert_eq!(status, 200);
    let subscribed = |m: &Value| {
        m.pointer("/params/_meta/io.modelcontextprotocol~1subscriptionId")
            == Some(&json!(listen_id))
    };
    let (ack, before) = stream
        .wait_for(CHANGE_TIMEOUT, |m| {
            m["method"] == json!("notifications/subscriptions/acknowledged")
        })
        .await
        .unwrap_or_else(|e| panic!("no acknowledgement: {e}; {}", ctx()));
    assert!(
        before.is_empty(),
        "messages before the acknowledgement: {before:?}"
    );
    assert_valid(V2026, None, std::slice::from_ref(&ack));
    assert!(
        subscribed(&ack),
        "acknowledgement without the subscription id: {ack}"
    );
    assert_eq!(
        ack["params"]["notifications"]["toolsListChanged"],
        json!(true),
        "{ack}"
    );

    replace_file(&path, &manifest(&[("t1", "d"), ("t2", "d")]));
    let (note, before) = stream
        .wait_for(CHANGE_TIMEOUT, is_list_changed)
        .await
        .unwrap_or_else(|e| panic!("subscriptions/listen after the rewrite: {e}; {}", ctx()));
    assert_valid(V2026, None, &before);
    assert_valid(V2026, None, std::slice::from_ref(&note));
    assert!(
        subscribed(&note),
        "list_changed without the subscription id: {note}"
    );

    let reply = post(
        &client,
        server.url(),
        &headers_2026("tools/list"),
        &rpc(4, "tools/list", Some(json!({"_meta": meta_2026()}))),
    )
    .await;
    let list = answer(&reply, V2026, "tools/list", 4);
    assert_eq!(tool_names(&list["result"]), with_builtins(&["t1", "t2"]));
}
