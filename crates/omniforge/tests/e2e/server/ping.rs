//! `logging/setLevel` and `ping` under every revision.

use super::*;

/// Over stdio, under every handshake revision: logging/setLevel and ping answer `{}`.
#[tokio::test]
async fn logging_set_level_and_ping_over_stdio() {
    for version in HANDSHAKE_VERSIONS {
        let mut server = StdioServer::start(&[]);
        let init = stdio_call(&mut server, version, initialize_request(0, version)).await;
        assert_eq!(init["result"]["protocolVersion"], json!(version), "{init}");
        server
            .send_line(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)
            .await
            .unwrap();
        let reply = stdio_call(
            &mut server,
            version,
            rpc(1, "logging/setLevel", Some(json!({"level": "debug"}))),
        )
        .await;
        assert_eq!(reply["result"], json!({}), "{version}: {reply}");
        let reply = stdio_call(&mut server, version, rpc(2, "ping", None)).await;
        assert_eq!(reply["result"], json!({}), "{version}: {reply}");
    }
}

/// Over HTTP, in a session of every handshake revision: logging/setLevel and ping answer `{}`.
#[tokio::test]
async fn logging_set_level_and_ping_over_http() {
    let server = HttpServer::start(&[], &Auth::None).await;
    let client = http_client();
    for version in HANDSHAKE_VERSIONS {
        let session = init_http(&client, &server, version, true).await.unwrap();
        assert_eq!(session.version, version);
        let header = (version >= "2025-06-18").then_some(version);
        let headers = post_headers(Some(&session.id), header);
        let reply = post(
            &client,
            server.url(),
            &headers,
            &rpc(1, "logging/setLevel", Some(json!({"level": "warning"}))),
        )
        .await;
        let set = answer(&reply, version, "logging/setLevel", 1);
        assert_eq!(set["result"], json!({}), "{version}: {set}");
        let reply = post(&client, server.url(), &headers, &rpc(2, "ping", None)).await;
        let pong = answer(&reply, version, "ping", 2);
        assert_eq!(pong["result"], json!({}), "{version}: {pong}");
    }
}
