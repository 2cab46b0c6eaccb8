//! `--max-body-bytes`: an oversized body gets 413 and the server keeps serving.

use super::*;

/// `--max-body-bytes 1000`: a 5000-byte POST gets 413 with a JSON-RPC error; the session
/// and the server keep serving.
#[tokio::test]
async fn oversized_body_gets_413_and_server_keeps_serving() {
    let server = HttpServer::start(&["--max-body-bytes", "1000"], &Auth::None).await;
    let client = http_client();
    let session = init_http(&client, &server, V2025, true).await.unwrap();
    let headers = post_headers(Some(&session.id), Some(&session.version));

    let mut big =
        json!({"jsonrpc": "2.0", "id": 7, "method": "ping", "params": {"_meta": {"pad": ""}}});
    let pad = 5000 - big.to_string().len();
    big["params"]["_meta"]["pad"] = json!("x".repeat(pad));
    let body = big.to_string().into_bytes();
    assert_eq!(body.len(), 5000);
    let reply = http_send(&client, "POST", server.url(), &headers, Some(body), &[])
        .await
        .unwrap();
    let err = assert_rpc_error(&reply, 413, "5000-byte POST");
    assert!(
        err.get("id").is_none() || err["id"] == Value::Null || err["id"] == json!(7),
        "{err}"
    );

    // The same session still answers, and so does a new one.
    let reply = post(&client, server.url(), &headers, &rpc(8, "ping", None)).await;
    let pong = answer(&reply, V2025, "ping", 8);
    assert_eq!(pong["result"], json!({}));
    init_http(&client, &server, V2025, true)
        .await
        .unwrap_or_else(|e| panic!("{e}; server output:\n{}", server.output_text()));
}
