//! 4. Auth: upstream credentials, idempotency keys, the client's token never forwarded.

use super::*;

/// Without --upstream-auth, the auth-required RPC is refused upstream.
#[tokio::test]
async fn whoami_without_upstream_auth_is_unauthenticated() {
    crate::support::needs_deps!();
    let started = Instant::now();
    let (_fixture, omni, mut repl) = fixture_scene(&[]).await;
    let result = repl.result("fixture_whoami", json!({})).await;
    show("fixture_whoami", &result);
    let text = text_of(&result);
    assert!(
        is_error(&result) && text.starts_with("unauthenticated: missing token"),
        "fixture_whoami without --upstream-auth: want isError `unauthenticated: missing token`, \
         got {result}"
    );
    repl.quit().await;
    finish(
        "whoami_without_upstream_auth_is_unauthenticated",
        started,
        &omni,
    );
}

/// With --upstream-auth the header goes upstream verbatim; each call carries a fresh UUID
/// Idempotency-Key (the manifest sets `idempotency_key: true`).
#[tokio::test]
async fn whoami_with_upstream_auth_and_fresh_idempotency_keys() {
    crate::support::needs_deps!();
    let started = Instant::now();
    let (_fixture, omni, mut repl) =
        fixture_scene(&["--upstream-auth", "Bearer fixture-token"]).await;
    let uuid = Regex::new(
        r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$",
    )
    .unwrap();
    let mut keys = Vec::new();
    for _ in 0..2 {
        let result = repl.result("fixture_whoami", json!({})).await;
        assert_eq!(
            result["isError"], false,
            "fixture_whoami with --upstream-auth \"Bearer fixture-token\": {result}"
        );
        let content = &result["structuredContent"];
        assert_eq!(content["subject"], "fixture-user", "{result}");
        let key = content["idempotencyKey"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        assert!(
            uuid.is_match(&key),
            "idempotencyKey must be a UUID, got {key:?}: {result}"
        );
        keys.push(key);
    }
    assert_ne!(keys[0], keys[1], "each call needs its own Idempotency-Key");
    repl.quit().await;
    finish(
        "whoami_with_upstream_auth_and_fresh_idempotency_keys",
        started,
        &omni,
    );
}

/// The MCP client's own bearer token (which happens to be the upstream's valid token) passes
/// OmniForge's auth but is never forwarded upstream.
#[tokio::test]
async fn client_token_is_not_forwarded_upstream() {
    crate::support::needs_deps!();
    let started = Instant::now();
    let fixture = Fixture::start().await;
    let tokens = tempfile::tempdir().unwrap();
    let token_file = tokens.path().join("tokens.txt");
    std::fs::write(&token_file, "client fixture-token admin\n").unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&token_file, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    let manifest = fixture_manifest();
    let omni = serve(&[
        "--token-file",
        token_file.to_str().unwrap(),
        "--manifest",
        manifest.to_str().unwrap(),
        "--upstream",
        &fixture.url,
    ])
    .await;

    // The token file is in force: no token, no MCP.
    let client = support::http_client();
    let body = serde_json::to_vec(&support::initialize_request(1, "2025-11-25")).unwrap();
    let reply = support::http_send(
        &client,
        "POST",
        &omni.url,
        &support::post_headers(None, None),
        Some(body),
        &[json!(1)],
    )
    .await
    .unwrap();
    assert_eq!(
        reply.status, 401,
        "initialize without a token must be refused when --token-file is set: {reply:?}"
    );

    let mut repl = Repl::start(
        Sdk::Py2,
        "http",
        &omni.url,
        &["Authorization=Bearer fixture-token"],
    )
    .await;
    let result = repl.result("fixture_whoami", json!({})).await;
    show("fixture_whoami", &result);
    let text = text_of(&result);
    assert!(
        is_error(&result) && text.starts_with("unauthenticated: missing token"),
        "the MCP client authenticated with `Bearer fixture-token` and OmniForge has no \
         --upstream-auth: fixture_whoami must be `unauthenticated: missing token` (the client's \
         token must not be forwarded), got {result}"
    );
    repl.quit().await;
    drop(fixture);
    finish("client_token_is_not_forwarded_upstream", started, &omni);
}
