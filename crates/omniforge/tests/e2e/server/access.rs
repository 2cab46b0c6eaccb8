//! Access control: bearer tokens, the session owner, and public binds.

use super::*;

const TOKEN_A: &str = "tok-alice-7d1e0c55a9b34f21";
const TOKEN_B: &str = "tok-bob-2b94f0e6c1d84a73";

fn bearer(token: &str) -> (String, String) {
    ("Authorization".to_owned(), format!("Bearer {token}"))
}

/// `serve --token-file F`: no token and a wrong token get 401 with a Bearer challenge and a
/// JSON-RPC body; a listed token opens a session; another listed token cannot use it (403),
/// and the owner still can.
#[tokio::test]
async fn access_control_bearer_tokens_and_session_owner() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens");
    std::fs::write(
        &tokens,
        format!("# name token scopes\nalice {TOKEN_A} tools:call\nbob {TOKEN_B} tools:call,tools:write\n"),
    )
    .unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&tokens, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    let tokens = tokens.to_str().unwrap().to_owned();
    let server = serve_in(&dir, "127.0.0.1:0", &["--token-file", &tokens]).await;
    let client = http_client();
    let init = initialize_request(1, V2025);
    let ctx = || format!("stderr:\n{}", server.stderr());

    // No token.
    let reply = post(&client, &server.url, &post_headers(None, None), &init).await;
    assert_rpc_error(&reply, 401, "initialize without a token");
    let challenge = reply
        .header("www-authenticate")
        .unwrap_or_else(|| panic!("401 without WWW-Authenticate: {:?}", reply.headers));
    assert!(challenge.starts_with("Bearer"), "challenge {challenge:?}");
    assert!(
        reply.header("mcp-session-id").is_none(),
        "401 opened a session"
    );

    // A token that is not in the file (and a non-Bearer scheme).
    let reply = post(
        &client,
        &server.url,
        &with_header(
            post_headers(None, None),
            "Authorization",
            "Bearer not-a-listed-token",
        ),
        &init,
    )
    .await;
    assert_rpc_error(&reply, 401, "initialize with a wrong token");
    let challenge = reply.header("www-authenticate").unwrap_or("");
    assert!(
        challenge.starts_with("Bearer") && challenge.contains("invalid_token"),
        "a wrong token's challenge should say error=\"invalid_token\" (RFC 6750 §3.1): {challenge:?}"
    );
    let reply = post(
        &client,
        &server.url,
        &with_header(
            post_headers(None, None),
            "Authorization",
            &format!("Basic {TOKEN_A}"),
        ),
        &init,
    )
    .await;
    assert_rpc_error(&reply, 401, "initialize with Basic instead of Bearer");
    assert!(
        reply
            .header("www-authenticate")
            .is_some_and(|c| c.starts_with("Bearer"))
    );

    // GET and DELETE need a token too.
    for method in ["GET", "DELETE"] {
        let reply = http_send(
            &client,
            method,
            &server.url,
            &[("Accept".to_owned(), "text/event-stream".to_owned())],
            None,
            &[],
        )
        .await
        .unwrap();
        assert_rpc_error(&reply, 401, &format!("{method} without a token"));
        assert!(
            reply
                .header("www-authenticate")
                .is_some_and(|c| c.starts_with("Bearer"))
        );
    }

    // Alice opens a session.
    let mut headers_a = post_headers(None, None);
    headers_a.push(bearer(TOKEN_A));
    let reply = post(&client, &server.url, &headers_a, &init).await;
    let result = answer(&reply, V2025, "initialize", 1);
    assert_eq!(
        result["result"]["protocolVersion"],
        json!(V2025),
        "{}",
        ctx()
    );
    let session = reply
        .header("mcp-session-id")
        .unwrap_or_else(|| panic!("no Mcp-Session-Id; {}", ctx()))
        .to_owned();
    let mut in_a = post_headers(Some(&session), Some(V2025));
    in_a.push(bearer(TOKEN_A));
    let reply = post(
        &client,
        &server.url,
        &in_a,
        &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    )
    .await;
    assert_eq!(reply.status, 202, "notifications/initialized: {reply:?}");
    let reply = post(&client, &server.url, &in_a, &rpc(2, "tools/list", None)).await;
    let list = answer(&reply, V2025, "tools/list", 2);
    assert!(
        tool_names(&list["result"]).contains(&ANY_TOOL.to_owned()),
        "{list}"
    );

    // Bob, with a valid token of his own, cannot use Alice's session.
    let mut in_a_as_b = post_headers(Some(&session), Some(V2025));
    in_a_as_b.push(bearer(TOKEN_B));
    let reply = post(
        &client,
        &server.url,
        &in_a_as_b,
        &rpc(3, "tools/list", None),
    )
    .await;
    let err = assert_rpc_error(&reply, 403, "tools/list in another token's session");
    assert!(
        reply.messages.iter().all(|m| m.get("result").is_none()),
        "403 must not carry a result: {err}"
    );
    let reply = post(
        &client,
        &server.url,
        &in_a_as_b,
        &json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": ANY_TOOL}}),
    )
    .await;
    assert_rpc_error(&reply, 403, "tools/call in another token's session");
    let mut get_as_b = get_headers(&session, V2025);
    get_as_b.push(bearer(TOKEN_B));
    let reply = http_send(&client, "GET", &server.url, &get_as_b, None, &[])
        .await
        .unwrap();
    assert_rpc_error(&reply, 403, "GET stream of another token's session");
    let mut delete_as_b = vec![
        ("Mcp-Session-Id".to_owned(), session.clone()),
        ("MCP-Protocol-Version".to_owned(), V2025.to_owned()),
    ];
    delete_as_b.push(bearer(TOKEN_B));
    let reply = http_send(&client, "DELETE", &server.url, &delete_as_b, None, &[])
        .await
        .unwrap();
    assert_rpc_error(&reply, 403, "DELETE of another token's session");

    // The refusals did not harm the session: Alice still uses it.
    let reply = post(
        &client,
        &server.url,
        &in_a,
        &json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": ANY_TOOL, "arguments": {}}}),
    )
    .await;
    let call = answer(&reply, V2025, "tools/call", 5);
    assert_ne!(call["result"]["isError"], json!(true), "{call}");
}

/// A non-loopback bind without tokens is refused with a message that names the ways out.
#[tokio::test]
async fn public_bind_without_tokens_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_str().unwrap();
    let out = omniforge_run(
        &["serve", "--listen", "0.0.0.0:0", "--data-dir", data],
        START_TIMEOUT,
    )
    .await
    .expect("serve --listen 0.0.0.0:0 without tokens kept running (it must refuse to start)");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "exit status {}; stderr:\n{stderr}",
        out.status
    );
    assert!(
        stderr.contains("--token-file") && stderr.contains("--insecure-no-auth"),
        "stderr should name --token-file and --insecure-no-auth:\n{stderr}"
    );
    assert!(
        !stderr.contains("listening"),
        "it said it was listening:\n{stderr}"
    );
    assert!(
        out.stdout.is_empty(),
        "stdout: {:?}",
        String::from_utf8_lossy(&out.stdout)
    );
}

/// With `--insecure-no-auth` the same bind starts (and is reachable without a token). The
/// server is killed as soon as that is established.
#[tokio::test]
async fn public_bind_with_insecure_no_auth_starts() {
    let dir = tempfile::tempdir().unwrap();
    let server = serve_in(&dir, "0.0.0.0:0", &["--insecure-no-auth"]).await;
    let client = http_client();
    let reply = post(
        &client,
        &server.url,
        &post_headers(None, None),
        &initialize_request(1, V2025),
    )
    .await;
    answer(&reply, V2025, "initialize", 1);
}
