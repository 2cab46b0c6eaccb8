//! 3. Error mappings: Connect errors, refused connections, an HTML 502 page, a reply that is not JSON, a missing upstream.

use super::*;

/// A Connect error (not_found with a detail), a bad argument caught by the inputSchema check,
/// and the streaming RPC called by name: each an isError result, the server still serving.
#[tokio::test]
async fn connect_error_bad_arguments_and_streaming_call() {
    crate::support::needs_deps!();
    let started = Instant::now();
    let (_fixture, omni, mut repl) = fixture_scene(&[]).await;

    // Connect error envelope: code, message, then the details array as JSON.
    let result = repl.result("fixture_lookup", json!({"id": "nope"})).await;
    show("fixture_lookup nope", &result);
    let text = text_of(&result);
    assert!(
        is_error(&result),
        "fixture_lookup nope must be isError: {result}"
    );
    assert!(
        text.starts_with("not_found: no item with id nope"),
        "fixture_lookup {{\"id\":\"nope\"}}: want text starting `not_found: no item with id nope`, got {text:?}"
    );
    let details_text = text
        .strip_prefix("not_found: no item with id nope")
        .unwrap_or("")
        .trim();
    let details: Value = serde_json::from_str(details_text).unwrap_or_else(|e| {
        panic!("the text after the message must be the details JSON ({e}): {text:?}")
    });
    let detail = details
        .as_array()
        .and_then(|d| d.first())
        .unwrap_or_else(|| panic!("details must be a non-empty array: {details}"));
    assert_eq!(
        detail["type"], "fixture.v1.LookupErrorDetail",
        "details: {details}"
    );
    assert!(
        result.get("structuredContent").is_none(),
        "an error result must not carry structuredContent (it would have to match the \
         outputSchema): {result}"
    );

    // The same tool succeeds for the one id that exists.
    let result = repl.result("fixture_lookup", json!({"id": "known"})).await;
    assert_eq!(result["isError"], false, "fixture_lookup known: {result}");
    assert_eq!(
        result["structuredContent"],
        json!({"id": "known", "name": "Known item"}),
        "{result}"
    );

    // A wrong argument type never reaches the upstream.
    let result = repl.result("fixture_lookup", json!({"id": 5})).await;
    show("fixture_lookup id=5", &result);
    let text = text_of(&result);
    assert!(
        is_error(&result) && text.starts_with("Arguments do not match inputSchema"),
        "fixture_lookup {{\"id\":5}}: want isError `Arguments do not match inputSchema...`, got {result}"
    );

    // An argument the schema forbids (additionalProperties: false).
    let result = repl
        .result("fixture_echo", json!({"text": "x", "bogus": 1}))
        .await;
    assert!(
        is_error(&result) && text_of(&result).starts_with("Arguments do not match inputSchema"),
        "fixture_echo with an unknown argument: want isError `Arguments do not match \
         inputSchema...`, got {result}"
    );

    // The server-streaming RPC is not a tool, even when called by name.
    let result = repl.result("fixture_watch", json!({"count": 2})).await;
    show("fixture_watch", &result);
    let text = text_of(&result);
    assert!(
        is_error(&result) && text.contains("streaming RPCs are not supported"),
        "fixture_watch by name: want isError saying streaming RPCs are not supported, got {result}"
    );

    // Still serving.
    let result = repl
        .result("fixture_echo", json!({"text": "still here"}))
        .await;
    assert_eq!(result["isError"], false, "{result}");
    repl.quit().await;
    finish(
        "connect_error_bad_arguments_and_streaming_call",
        started,
        &omni,
    );
}

/// An upstream port with nothing listening: isError saying it cannot connect, without the
/// configured upstream credential.
#[tokio::test]
async fn connection_refused_is_an_error_result() {
    crate::support::needs_deps!();
    let started = Instant::now();
    let manifest = fixture_manifest();
    let upstream = format!("http://127.0.0.1:{}", closed_port());
    let omni = serve(&[
        "--manifest",
        manifest.to_str().unwrap(),
        "--upstream",
        &upstream,
        "--upstream-auth",
        "Bearer e2e-upstream-secret",
    ])
    .await;
    let mut repl = Repl::start(Sdk::Py2, "http", &omni.url, &[]).await;
    let result = repl.result("fixture_echo", json!({"text": "hi"})).await;
    show("fixture_echo", &result);
    let text = text_of(&result);
    assert!(
        is_error(&result) && text.contains("cannot connect"),
        "fixture_echo with --upstream {upstream} (closed port): want isError mentioning \
         `cannot connect`, got {result}"
    );
    assert!(
        !text.contains("e2e-upstream-secret"),
        "the error text leaks the upstream credential: {text}"
    );
    assert!(result.get("structuredContent").is_none(), "{result}");
    repl.quit().await;
    finish("connection_refused_is_an_error_result", started, &omni);
}

/// An upstream that answers 502 with an HTML page (as a proxy in front of a dead service
/// does): isError with the status and a short excerpt of the page.
#[tokio::test]
async fn http_502_html_page_is_an_error_result() {
    crate::support::needs_deps!();
    let started = Instant::now();
    let page = format!(
        "<html>\n<head><title>502 Bad Gateway</title></head>\n<body>\n<center><h1>502 Bad \
         Gateway</h1></center>\n<!-- {} -->\n</body>\n</html>\n",
        "padding ".repeat(600)
    );
    let stub = StubHttp::start(http_response(
        "HTTP/1.1 502 Bad Gateway",
        "text/html",
        &page,
    ));
    let manifest = fixture_manifest();
    let omni = serve(&[
        "--manifest",
        manifest.to_str().unwrap(),
        "--upstream",
        &stub.url,
    ])
    .await;
    let mut repl = Repl::start(Sdk::Py2, "http", &omni.url, &[]).await;
    let result = repl.result("fixture_echo", json!({"text": "hi"})).await;
    show("fixture_echo", &result);
    let text = text_of(&result);
    assert!(
        is_error(&result) && text.contains("502") && text.contains("Bad Gateway"),
        "fixture_echo against an HTTP 502 HTML page: want isError with the status and an \
         excerpt, got {result}"
    );
    assert!(
        text.len() < 600,
        "the excerpt of a {}-byte page must be short; the text is {} bytes: {text:?}",
        page.len(),
        text.len()
    );
    assert!(result.get("structuredContent").is_none(), "{result}");

    // What OmniForge sent: a Connect unary call with JSON.
    let requests = stub.requests();
    let request = requests
        .first()
        .unwrap_or_else(|| panic!("the stub upstream received no request"));
    let head = request.head.to_ascii_lowercase();
    assert!(
        head.starts_with("post /fixture.v1.fixtureservice/echo http/1.1"),
        "request line: {}",
        request.head
    );
    for header in [
        "content-type: application/json",
        "connect-protocol-version: 1",
    ] {
        assert!(
            head.contains(header),
            "the request lacks `{header}`: {}",
            request.head
        );
    }
    assert!(
        !head.contains("\nauthorization:"),
        "no Authorization may be sent without --upstream-auth: {}",
        request.head
    );
    assert_eq!(
        serde_json::from_str::<Value>(&request.body).ok(),
        Some(json!({"text": "hi"})),
        "request body: {:?}",
        request.body
    );
    repl.quit().await;
    finish("http_502_html_page_is_an_error_result", started, &omni);
}

/// An upstream that answers 200 with a body that is not JSON: isError with the status and
/// the body.
#[tokio::test]
async fn invalid_json_reply_is_an_error_result() {
    crate::support::needs_deps!();
    let started = Instant::now();
    let stub = StubHttp::start(http_response(
        "HTTP/1.1 200 OK",
        "application/json",
        "not json",
    ));
    let manifest = fixture_manifest();
    let omni = serve(&[
        "--manifest",
        manifest.to_str().unwrap(),
        "--upstream",
        &stub.url,
    ])
    .await;
    let mut repl = Repl::start(Sdk::Py2, "http", &omni.url, &[]).await;
    let result = repl.result("fixture_echo", json!({"text": "hi"})).await;
    show("fixture_echo", &result);
    let text = text_of(&result);
    assert!(
        is_error(&result) && text.contains("200") && text.contains("not json"),
        "fixture_echo against a 200 `not json` reply: want isError with the status and the \
         body excerpt, got {result}"
    );
    assert!(result.get("structuredContent").is_none(), "{result}");
    repl.quit().await;
    finish("invalid_json_reply_is_an_error_result", started, &omni);
}

/// A manifest without `--upstream`: the tools are listed, and each call is an isError
/// result with a clear configuration message.
#[tokio::test]
async fn missing_upstream_is_a_configuration_error() {
    crate::support::needs_deps!();
    let started = Instant::now();
    let manifest = fixture_manifest();
    let omni = serve(&["--manifest", manifest.to_str().unwrap()]).await;
    let mut repl = Repl::start(Sdk::Py2, "http", &omni.url, &[]).await;
    let names = repl.names().await;
    assert!(
        names.iter().any(|n| n == "fixture_echo"),
        "the manifest's tools are listed even without an upstream: {names:?}"
    );
    let result = repl.result("fixture_echo", json!({"text": "hi"})).await;
    show("fixture_echo", &result);
    let text = text_of(&result);
    assert!(
        is_error(&result)
            && text.contains("no upstream address is configured")
            && text.contains("--upstream"),
        "fixture_echo without --upstream: want isError naming the missing upstream and the \
         --upstream flag, got {result}"
    );
    repl.quit().await;
    finish("missing_upstream_is_a_configuration_error", started, &omni);
}
