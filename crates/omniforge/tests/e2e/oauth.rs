//! OAuth 2.1 resource server (issue 16), against a real authorization server: `oidc-provider`
//! (`tests/fixtures/oidc/server.mjs`, started per test on loopback) issuing real JWT access
//! tokens for OmniForge's resource URL, and the official Python SDK's OAuth client
//! (`support/py/oauth_client.py`) for the discovery flows.
//!
//! The server under test runs with `--oauth-issuer ISSUER` (its audience defaults to its own
//! loopback URL), and the provider is told that URL once the server is listening
//! (`POST /_fixture/resources`).

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::{
    ANY_TOOL, BearerReply as Reply, Serve, Setup, bearer_post as post,
    bearer_session as open_session, browser_client, call_message as call, eventually, http_client,
    initialize_request, no_proxy, param, py_driver, python_driver, python2, repo_root, require,
    text_of,
};

const ALL_SCOPES: &str = "tools:call tools:write admin";

fn list(id: u64) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/list", "params": {}})
}

fn add_vat_args() -> Value {
    let path = repo_root().join("examples/tools/add_vat.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// The JWT payload of `token` (unverified; for assertions only).
fn claims(token: &str) -> Value {
    use base64::Engine as _;
    let payload = token.split('.').nth(1).expect("a JWT");
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload)
        .unwrap();
    serde_json::from_slice(&bytes).unwrap()
}

/// Runs `support/py/oauth_client.py ARGS` (the Python SDK's OAuth client) and returns its stdout
/// lines by tag.
async fn sdk_driver(args: &[&str]) -> Vec<(String, Value)> {
    require(&[python2()]);
    let mut cmd = python_driver(&python2(), &py_driver("oauth_client.py"));
    no_proxy(cmd.args(args));
    let output = tokio::time::timeout(Duration::from_secs(90), cmd.output())
        .await
        .expect("the OAuth driver finished within 90 s")
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "oauth_client.py {args:?} failed ({:?}):\nstdout:\n{stdout}\nstderr:\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
        .lines()
        .map(|line| match line.split_once(' ') {
            Some((tag, rest)) => (
                tag.to_owned(),
                serde_json::from_str(rest).unwrap_or(Value::Null),
            ),
            None => (line.to_owned(), Value::Null),
        })
        .collect()
}

fn tagged<'a>(lines: &'a [(String, Value)], tag: &str) -> Vec<&'a Value> {
    lines
        .iter()
        .filter(|(t, _)| t == tag)
        .map(|(_, v)| v)
        .collect()
}

/// What both SDK flows must show: discovery from the 401 through the path-form metadata to the
/// provider, a token for this server, and a working tool call.
fn check_sdk_flow(setup: &Setup, lines: &[(String, Value)]) {
    let http = tagged(lines, "HTTP");
    let first = http.first().expect("HTTP lines");
    assert_eq!(first["status"], 401, "first exchange: {first}");
    let challenge = first["www_authenticate"].as_str().unwrap();
    let metadata = format!(
        "{}/.well-known/oauth-protected-resource/mcp",
        setup.server.base
    );
    assert_eq!(
        param(challenge, "resource_metadata"),
        Some(metadata.as_str())
    );
    assert_eq!(param(challenge, "scope"), Some("tools:call"));
    assert!(
        http.iter()
            .any(|h| h["url"] == metadata.as_str() && h["status"] == 200),
        "the SDK fetched the metadata: {http:?}"
    );
    assert!(
        http.iter().any(|h| h["url"]
            .as_str()
            .is_some_and(|u| u.starts_with(&setup.provider.issuer) && u.ends_with("/token"))
            && h["status"] == 200),
        "the SDK got a token from the provider: {http:?}"
    );
    let token = tagged(lines, "TOKEN");
    assert_eq!(token[0]["claims"]["aud"], setup.url(), "{:?}", token[0]);
    let calls = tagged(lines, "CALL");
    assert_eq!(calls.len(), 1, "{lines:?}");
    assert_ne!(calls[0]["result"]["isError"], true, "{:?}", calls[0]);
}

#[tokio::test]
async fn sdk_client_credentials_discovers_the_server_and_calls_a_tool() {
    crate::support::needs_deps!();
    let setup = Setup::start(&[], &[]).await;
    let lines = sdk_driver(&[
        "client-credentials",
        setup.url(),
        "--issuer",
        &setup.provider.issuer,
        "--client-id",
        "cc-admin",
        "--client-secret",
        "cc-admin-secret",
        "--call",
        ANY_TOOL,
        "{}",
    ])
    .await;
    check_sdk_flow(&setup, &lines);
}

#[tokio::test]
async fn sdk_authorization_code_with_pkce_signs_in_and_calls_a_tool() {
    crate::support::needs_deps!();
    let setup = Setup::start(&[], &[]).await;
    let lines = sdk_driver(&[
        "authorization-code",
        setup.url(),
        "--issuer",
        &setup.provider.issuer,
        "--client-id",
        "pkce-app",
        "--login",
        "alice",
        "--call",
        ANY_TOOL,
        "{}",
    ])
    .await;
    check_sdk_flow(&setup, &lines);
    let authorize = tagged(&lines, "AUTHORIZE");
    assert_eq!(authorize[0]["pages"], json!(["login", "consent"]));
    let url = authorize[0]["url"].as_str().unwrap();
    assert!(
        url.contains("code_challenge_method=S256") && url.contains("resource="),
        "{url}"
    );
    assert_eq!(tagged(&lines, "TOKEN")[0]["claims"]["sub"], "alice");
}

#[tokio::test]
async fn protected_resource_metadata_and_challenges() {
    crate::support::needs_deps!();
    let setup = Setup::start(&[], &[]).await;
    let base = &setup.server.base;
    let expected = json!({
        "resource": setup.url(),
        "authorization_servers": [setup.provider.issuer],
        "scopes_supported": ["tools:call", "tools:write", "admin"],
        "bearer_methods_supported": ["header"],
        "resource_name": "OmniForge",
    });
    for path in [
        "/.well-known/oauth-protected-resource/mcp",
        "/.well-known/oauth-protected-resource",
    ] {
        let reply = http_client()
            .get(format!("{base}{path}"))
            .send()
            .await
            .unwrap();
        assert_eq!(reply.status(), 200, "{path}");
        let body: Value = reply.json().await.unwrap();
        assert_eq!(body, expected, "{path}");
    }
    // No token: 401 pointing to the metadata, with the scope to ask for, and no error code.
    let reply = post(setup.url(), None, None, initialize_request(1, "2025-11-25")).await;
    assert_eq!(reply.status, 401);
    let challenge = reply.challenge.unwrap();
    assert!(challenge.starts_with("Bearer "), "{challenge}");
    assert_eq!(
        param(&challenge, "resource_metadata"),
        Some(format!("{base}/.well-known/oauth-protected-resource/mcp").as_str())
    );
    assert_eq!(param(&challenge, "scope"), Some("tools:call"));
    assert_eq!(param(&challenge, "error"), None);
    // Garbage: invalid_token.
    let reply = post(setup.url(), Some("not-a-token"), None, list(2)).await;
    assert_eq!(reply.status, 401);
    let challenge = reply.challenge.unwrap();
    assert_eq!(
        param(&challenge, "error"),
        Some("invalid_token"),
        "{challenge}"
    );
    assert!(param(&challenge, "resource_metadata").is_some());
}

#[tokio::test]
async fn static_tokens_alone_keep_their_challenge_and_serve_no_metadata() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens");
    std::fs::write(&tokens, "alice s3cret tools:call\n").unwrap();
    let server = Serve::start(&[
        "--data-dir".as_ref(),
        dir.path().as_os_str(),
        "--token-file".as_ref(),
        tokens.as_os_str(),
    ])
    .await;
    for path in [
        "/.well-known/oauth-protected-resource/mcp",
        "/.well-known/oauth-protected-resource",
    ] {
        let reply = http_client()
            .get(format!("{}{path}", server.base))
            .send()
            .await
            .unwrap();
        assert_eq!(reply.status(), 404, "{path}");
    }
    let reply = post(&server.url, None, None, list(1)).await;
    assert_eq!(reply.status, 401);
    assert_eq!(
        reply.challenge.as_deref(),
        Some(r#"Bearer realm="omniforge""#)
    );
    let reply = post(&server.url, Some("wrong"), None, list(1)).await;
    assert_eq!(
        reply.challenge.as_deref(),
        Some(
            r#"Bearer realm="omniforge", error="invalid_token", error_description="the token is not valid""#
        )
    );
}

/// RFC 6750 §2.3 (`?access_token=`) is not supported: the token must travel in the header, so
/// a query token gets 400 `invalid_request` (not 401), even when it is a valid token, and the
/// server answers nothing else for it.
#[tokio::test]
async fn access_token_in_the_query_gets_400() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens");
    std::fs::write(&tokens, "alice s3cret tools:call\n").unwrap();
    let server = Serve::start(&[
        "--data-dir".as_ref(),
        dir.path().as_os_str(),
        "--token-file".as_ref(),
        tokens.as_os_str(),
    ])
    .await;
    for query in ["access_token=s3cret", "x=1&access%5Ftoken=s3cret"] {
        let reply = post(&format!("{}?{query}", server.url), None, None, list(1)).await;
        assert_eq!(reply.status, 400, "{query}: {:?}", reply.messages);
        let challenge = reply.challenge.unwrap_or_default();
        assert_eq!(
            param(&challenge, "error"),
            Some("invalid_request"),
            "{challenge}"
        );
        assert!(
            reply.messages[0]["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("query string"))
        );
        // Even with the header as well: the query token is refused, not ignored.
        let reply = post(
            &format!("{}?{query}", server.url),
            Some("s3cret"),
            None,
            list(1),
        )
        .await;
        assert_eq!(reply.status, 400, "{query} with the header");
    }
    // The header alone works, and another query parameter is no reason to refuse.
    let reply = post(
        &format!("{}?x=1", server.url),
        Some("s3cret"),
        None,
        initialize_request(1, "2025-11-25"),
    )
    .await;
    assert_eq!(reply.status, 200, "{:?}", reply.messages);
}

#[tokio::test]
async fn token_for_another_resource_is_refused() {
    crate::support::needs_deps!();
    let other = "http://127.0.0.1:2/other";
    let setup = Setup::start(&["--resource", other], &["--log-level", "trace"]).await;
    let token = setup
        .provider
        .token("cc-admin", other, Some(ALL_SCOPES))
        .await;
    assert_eq!(claims(&token)["aud"], other);
    let reply = post(
        setup.url(),
        Some(&token),
        None,
        initialize_request(1, "2025-11-25"),
    )
    .await;
    assert_eq!(reply.status, 401, "{}", setup.logs());
    let challenge = reply.challenge.unwrap();
    assert_eq!(param(&challenge, "error"), Some("invalid_token"));
    assert_eq!(
        param(&challenge, "error_description"),
        Some("the access token was not issued for this resource")
    );
    // The same client's token for this server works.
    let good = setup.token("cc-admin", Some(ALL_SCOPES)).await;
    open_session(setup.url(), &good).await;
    // Neither token reaches the log, even at trace level.
    let stderr = setup.server.stderr();
    assert!(stderr.contains("refused an OAuth access token"), "{stderr}");
    for t in [&token, &good] {
        let signature = t.rsplit('.').next().unwrap();
        assert!(!stderr.contains(signature), "a token reached the log");
    }
}

#[tokio::test]
async fn expired_token_is_refused() {
    crate::support::needs_deps!();
    let setup = Setup::start(&["--short-ttl", "2"], &["--oauth-leeway", "0s"]).await;
    let token = setup.token("cc-short", Some(ALL_SCOPES)).await;
    let exp = claims(&token)["exp"].as_u64().unwrap();
    let reply = post(
        setup.url(),
        Some(&token),
        None,
        initialize_request(1, "2025-11-25"),
    )
    .await;
    assert_eq!(reply.status, 200, "{}", setup.logs());
    // Wait for the token's own clock, not a fixed sleep.
    eventually(
        Duration::from_secs(10),
        "the token's exp passed",
        async || {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_secs();
            (now > exp).then_some(())
        },
    )
    .await;
    let reply = post(
        setup.url(),
        Some(&token),
        None,
        initialize_request(1, "2025-11-25"),
    )
    .await;
    assert_eq!(reply.status, 401);
    assert_eq!(
        param(&reply.challenge.unwrap(), "error_description"),
        Some("the access token expired")
    );
}

#[tokio::test]
async fn token_without_tools_write_cannot_author() {
    crate::support::needs_deps!();
    let setup = Setup::start(&[], &[]).await;
    let caller = setup.token("cc-call", Some(ALL_SCOPES)).await;
    assert_eq!(claims(&caller)["scope"], "tools:call");
    let session = open_session(setup.url(), &caller).await;
    let tools = post(setup.url(), Some(&caller), Some(&session), list(2)).await;
    let names: Vec<&str> = tools.result()["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(names.contains(&ANY_TOOL), "{names:?}");
    assert!(!names.contains(&"omniforge_create_tool"), "{names:?}");
    let reply = post(
        setup.url(),
        Some(&caller),
        Some(&session),
        call(3, "omniforge_create_tool", add_vat_args()),
    )
    .await;
    let result = reply.result();
    assert_eq!(result["isError"], true);
    assert!(
        text_of(result).contains("Unknown or inactive tool"),
        "{result}"
    );
    // An admin token creates it, and the version's author is the OAuth principal.
    let admin = setup.token("cc-admin", Some(ALL_SCOPES)).await;
    let session = open_session(setup.url(), &admin).await;
    let reply = post(
        setup.url(),
        Some(&admin),
        Some(&session),
        call(4, "omniforge_create_tool", add_vat_args()),
    )
    .await;
    assert_ne!(
        reply.result()["isError"],
        true,
        "{:?}\n{}",
        reply.messages,
        setup.logs()
    );
    let reply = post(
        setup.url(),
        Some(&admin),
        Some(&session),
        call(5, "omniforge_get_tool", json!({"name": "add_vat"})),
    )
    .await;
    let text = text_of(reply.result());
    let principal = format!("oauth:{}|cc-admin", setup.provider.issuer);
    assert!(text.contains(&principal), "author {principal} in {text}");
}

#[tokio::test]
async fn valid_token_without_omniforge_scope_gets_403() {
    crate::support::needs_deps!();
    let setup = Setup::start(&[], &[]).await;
    let token = setup.token("cc-admin", None).await;
    assert!(
        claims(&token).get("scope").is_none_or(|s| s == ""),
        "{}",
        claims(&token)
    );
    let reply = post(
        setup.url(),
        Some(&token),
        None,
        initialize_request(1, "2025-11-25"),
    )
    .await;
    assert_eq!(reply.status, 403, "{}", setup.logs());
    let challenge = reply.challenge.unwrap();
    assert_eq!(param(&challenge, "error"), Some("insufficient_scope"));
    assert_eq!(param(&challenge, "scope"), Some("tools:call"));
}

#[tokio::test]
async fn scope_map_translates_provider_scopes() {
    crate::support::needs_deps!();
    let setup = Setup::start(
        &[
            "--scope-name",
            "call=mcp.read",
            "--scope-name",
            "write=mcp.write",
            "--scope-name",
            "admin=mcp.admin",
        ],
        &[
            "--oauth-scope",
            "mcp.read=tools:call",
            "--oauth-scope",
            "mcp.write=tools:write",
            "--oauth-scope",
            "mcp.admin=admin",
        ],
    )
    .await;
    let reply = post(setup.url(), None, None, list(1)).await;
    assert_eq!(param(&reply.challenge.unwrap(), "scope"), Some("mcp.read"));
    let metadata: Value = http_client()
        .get(format!(
            "{}/.well-known/oauth-protected-resource/mcp",
            setup.server.base
        ))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        metadata["scopes_supported"],
        json!(["mcp.read", "mcp.write", "mcp.admin"])
    );
    let token = setup
        .token("cc-call", Some("mcp.read mcp.write mcp.admin"))
        .await;
    assert_eq!(claims(&token)["scope"], "mcp.read");
    let session = open_session(setup.url(), &token).await;
    let reply = post(
        setup.url(),
        Some(&token),
        Some(&session),
        call(2, ANY_TOOL, json!({})),
    )
    .await;
    assert_ne!(reply.result()["isError"], true);
    let tools = post(setup.url(), Some(&token), Some(&session), list(3)).await;
    assert!(!tools.result().to_string().contains("omniforge_create_tool"));
}

#[tokio::test]
async fn jwks_rotation_is_picked_up() {
    crate::support::needs_deps!();
    let setup = Setup::start(&[], &["--oauth-jwks-min-refresh", "0s"]).await;
    let old = setup.token("cc-admin", Some(ALL_SCOPES)).await;
    open_session(setup.url(), &old).await;
    setup.provider.rotate(false).await;
    let new = setup.token("cc-admin", Some(ALL_SCOPES)).await;
    let kid = |t: &str| {
        use base64::Engine as _;
        let header = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(t.split('.').next().unwrap())
            .unwrap();
        serde_json::from_slice::<Value>(&header).unwrap()["kid"].clone()
    };
    assert_ne!(kid(&old), kid(&new), "the provider rotated its signing key");
    open_session(setup.url(), &new).await;
    // The refresh that found the new key dropped the withdrawn one.
    let reply = post(
        setup.url(),
        Some(&old),
        None,
        initialize_request(1, "2025-11-25"),
    )
    .await;
    assert_eq!(reply.status, 401, "{}", setup.logs());
    assert_eq!(
        param(&reply.challenge.unwrap(), "error_description"),
        Some("the access token is signed with an unknown key")
    );
}

/// Issue 30: with the default `--oauth-jwks-min-refresh` (10 s), a key rotated in right after
/// the first fetch verifies its first token at once: only fetches caused by an unknown `kid`
/// hold the next one back.
#[tokio::test]
async fn a_key_rotated_in_just_after_a_fetch_verifies_at_once() {
    let setup = Setup::start(&[], &[]).await;
    let old = setup.token("cc-admin", Some(ALL_SCOPES)).await;
    open_session(setup.url(), &old).await;
    setup.provider.rotate(true).await;
    let new = setup.token("cc-admin", Some(ALL_SCOPES)).await;
    let started = std::time::Instant::now();
    open_session(setup.url(), &new).await;
    assert!(
        started.elapsed() < std::time::Duration::from_secs(5),
        "{}",
        setup.logs()
    );
    assert!(setup.logs().contains("unknown_kid"), "{}", setup.logs());
}

#[tokio::test]
async fn es256_tokens_are_verified() {
    crate::support::needs_deps!();
    let setup = Setup::start(&["--alg", "ES256"], &[]).await;
    let token = setup.token("cc-admin", Some(ALL_SCOPES)).await;
    use base64::Engine as _;
    let header: Value = serde_json::from_slice(
        &base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(token.split('.').next().unwrap())
            .unwrap(),
    )
    .unwrap();
    assert_eq!(header["alg"], "ES256");
    open_session(setup.url(), &token).await;
}

#[tokio::test]
async fn opaque_token_is_checked_by_introspection() {
    crate::support::needs_deps!();
    let dir = tempfile::tempdir().unwrap();
    let secret = dir.path().join("secret");
    std::fs::write(&secret, "omniforge-rs-secret\n").unwrap();
    let secret = secret.to_str().unwrap();
    let setup = Setup::start(
        &[],
        &[
            "--oauth-client-id",
            "omniforge-rs",
            "--oauth-client-secret-file",
            secret,
        ],
    )
    .await;
    let token = setup.token("cc-opaque", Some(ALL_SCOPES)).await;
    assert_eq!(token.split('.').count(), 1, "an opaque token");
    let session = open_session(setup.url(), &token).await;
    // An admin action (no environment build): its log line and audit record name the principal.
    let reply = post(
        setup.url(),
        Some(&token),
        Some(&session),
        call(
            2,
            "omniforge_set_secret",
            json!({"name": "OAUTH_E2E", "value": "v"}),
        ),
    )
    .await;
    assert_ne!(
        reply.result()["isError"],
        true,
        "{:?}\n{}",
        reply.messages,
        setup.logs()
    );
    let principal = format!("oauth:{}|cc-opaque", setup.provider.issuer);
    assert!(
        setup.server.stderr().contains(&principal),
        "{principal} in the log: {}",
        setup.logs()
    );
    assert_eq!(setup.audit_principals("OAUTH_E2E").await, [principal]);
    // A revoked token (never used, so not cached) and garbage are not active.
    let revoked = setup.token("cc-opaque", Some(ALL_SCOPES)).await;
    setup.provider.revoke("cc-opaque", &revoked).await;
    for bad in [revoked.as_str(), "garbage"] {
        let reply = post(
            setup.url(),
            Some(bad),
            None,
            initialize_request(1, "2025-11-25"),
        )
        .await;
        assert_eq!(reply.status, 401, "{bad}");
        assert_eq!(
            param(&reply.challenge.unwrap(), "error_description"),
            Some("the access token is not active")
        );
    }
}

#[tokio::test]
async fn static_tokens_and_oauth_together_and_sessions_follow_the_principal() {
    crate::support::needs_deps!();
    let setup = Setup::start_with(&[], &[], "alice s3cret admin\n").await;
    let alice = open_session(setup.url(), "s3cret").await;
    let token = setup.token("cc-admin", Some(ALL_SCOPES)).await;
    let session = open_session(setup.url(), &token).await;
    // A session belongs to its principal, not to a token value: a second token of the same
    // client (a refresh) continues it; the static token's owner and another subject cannot.
    let refreshed = setup.token("cc-admin", Some(ALL_SCOPES)).await;
    assert_ne!(refreshed, token);
    let reply = post(setup.url(), Some(&refreshed), Some(&session), list(2)).await;
    assert_eq!(reply.status, 200, "{:?}", reply.messages);
    let reply = post(setup.url(), Some("s3cret"), Some(&session), list(3)).await;
    assert_eq!(reply.status, 403);
    let other = setup.token("cc-call", Some(ALL_SCOPES)).await;
    let reply = post(setup.url(), Some(&other), Some(&session), list(4)).await;
    assert_eq!(reply.status, 403);
    let reply = post(setup.url(), Some(&token), Some(&alice), list(5)).await;
    assert_eq!(reply.status, 403);
}

/// A cut result's kept output belongs to the OAuth principal that made it: a refreshed token
/// of the same subject reads it; another subject gets the answer an unknown URI gets.
#[tokio::test]
async fn kept_outputs_belong_to_the_oauth_principal() {
    crate::support::needs_deps!();
    let setup = Setup::start(&[], &["--max-result-bytes", "64"]).await;
    let token = setup.token("cc-admin", Some(ALL_SCOPES)).await;
    let session = open_session(setup.url(), &token).await;
    let create = json!({"name": "long", "description": "Long output.",
                        "code": "print('x' * 500 + 'END')\n"});
    let reply = post(
        setup.url(),
        Some(&token),
        Some(&session),
        call(2, "omniforge_create_tool", create),
    )
    .await;
    assert_ne!(reply.result()["isError"], true, "{:?}", reply.messages);
    let reply = post(
        setup.url(),
        Some(&token),
        Some(&session),
        call(3, "long", json!({})),
    )
    .await;
    let uri = reply.result()["content"]
        .as_array()
        .into_iter()
        .flatten()
        .find_map(|c| (c["type"] == "resource_link").then(|| c["uri"].as_str().unwrap().to_owned()))
        .unwrap_or_else(|| panic!("no resource_link in {:?}", reply.messages));
    let read = |id: u64, uri: &str| json!({"jsonrpc": "2.0", "id": id, "method": "resources/read", "params": {"uri": uri}});
    // The same subject with a fresh token (a refresh), in a new session.
    let refreshed = setup.token("cc-admin", Some(ALL_SCOPES)).await;
    assert_ne!(refreshed, token);
    let session = open_session(setup.url(), &refreshed).await;
    let reply = post(setup.url(), Some(&refreshed), Some(&session), read(4, &uri)).await;
    assert!(
        reply.result().to_string().contains("END"),
        "{:?}",
        reply.messages
    );
    // Another subject: the same error as a URI that never existed.
    let other = setup.token("cc-call", Some(ALL_SCOPES)).await;
    let session = open_session(setup.url(), &other).await;
    let error = |reply: &Reply| {
        reply
            .messages
            .iter()
            .find_map(|m| m.get("error").cloned())
            .unwrap_or_else(|| panic!("no error in {:?}", reply.messages))
    };
    let theirs = error(&post(setup.url(), Some(&other), Some(&session), read(5, &uri)).await);
    let unknown_uri = "omniforge://runs/0123456789abcdef0123456789abcdef/output";
    let unknown = error(
        &post(
            setup.url(),
            Some(&other),
            Some(&session),
            read(6, unknown_uri),
        )
        .await,
    );
    assert_eq!(theirs["code"], unknown["code"], "{theirs} vs {unknown}");
    assert_eq!(
        theirs["message"].as_str().unwrap().replace(&uri, "URI"),
        unknown["message"]
            .as_str()
            .unwrap()
            .replace(unknown_uri, "URI"),
    );
}

/// The console's sign-in form takes an OAuth access token and checks it as `/mcp` does: a
/// token for this server signs in as its `oauth:` principal; a token for another resource or
/// one without an OmniForge scope does not.
#[tokio::test]
async fn console_signs_in_with_an_oauth_access_token() {
    crate::support::needs_deps!();
    let other = "http://127.0.0.1:2/other";
    let setup = Setup::start(&["--resource", other], &[]).await;
    let base = setup.url().trim_end_matches("/mcp").to_owned();
    let browser = browser_client();
    let cookie_of = |reply: &reqwest::Response| {
        reply
            .headers()
            .get("set-cookie")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.split(';').next())
            .map(str::to_owned)
    };
    // Each attempt: the form (an anonymous session and its CSRF token), then the token.
    let sign_in = |token: String| {
        let browser = browser.clone();
        let base = base.clone();
        async move {
            let form = browser
                .get(format!("{base}/console/sign-in"))
                .send()
                .await
                .unwrap();
            assert_eq!(form.status(), 200);
            let cookie = cookie_of(&form).expect("a session cookie with the form");
            let html = form.text().await.unwrap();
            let csrf = html
                .split("name=\"csrf\" value=\"")
                .nth(1)
                .and_then(|rest| rest.split('"').next())
                .expect("a CSRF field")
                .to_owned();
            let body = format!("csrf={csrf}&token={token}");
            let reply = browser
                .post(format!("{base}/console/sign-in"))
                .header("cookie", &cookie)
                .header("origin", &base)
                .header("content-type", "application/x-www-form-urlencoded")
                .body(body)
                .send()
                .await
                .unwrap();
            let status = reply.status().as_u16();
            let signed_in = cookie_of(&reply);
            (status, signed_in, reply.text().await.unwrap())
        }
    };
    let token = setup.token("cc-admin", Some(ALL_SCOPES)).await;
    let (status, cookie, _) = sign_in(token.clone()).await;
    assert_eq!(status, 303, "{}", setup.logs());
    let cookie = cookie.expect("a new session cookie at sign-in");
    let audit = browser
        .get(format!("{base}/console/audit"))
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(audit.status(), 200, "an admin page for an admin token");
    let page = audit.text().await.unwrap();
    assert!(
        page.contains("cc-admin"),
        "the principal on the page: {page}"
    );
    assert!(!page.contains(&token), "the token on a page");

    let foreign = setup
        .provider
        .token("cc-admin", other, Some(ALL_SCOPES))
        .await;
    let (status, cookie, page) = sign_in(foreign).await;
    assert_eq!(status, 401, "a token for another resource");
    assert!(cookie.is_none(), "no session for a refused token");
    assert!(page.contains("That token is not valid."), "{page}");

    let scopeless = setup.token("cc-admin", None).await;
    let (status, _, page) = sign_in(scopeless).await;
    assert_eq!(status, 401, "a token without an OmniForge scope");
    assert!(page.contains("grants no OmniForge scope"), "{page}");
}

#[tokio::test]
async fn unreachable_issuer_answers_503_and_static_tokens_keep_working() {
    // Port 9 (discard) on loopback: nothing listens, so discovery fails at once.
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens");
    std::fs::write(&tokens, "alice s3cret tools:call\n").unwrap();
    let mut command = Serve::command().args(&[
        "--data-dir".as_ref(),
        dir.path().as_os_str(),
        "--token-file".as_ref(),
        tokens.as_os_str(),
        "--oauth-issuer".as_ref(),
        "http://127.0.0.1:9".as_ref(),
    ]);
    no_proxy(command.cmd());
    let server = command.start().await;
    let reply = post(
        &server.url,
        Some("eyJhbGciOiJSUzI1NiJ9.e30.c2ln"),
        None,
        initialize_request(1, "2025-11-25"),
    )
    .await;
    assert_eq!(reply.status, 503, "{:?}", reply.messages);
    open_session(&server.url, "s3cret").await;
}
