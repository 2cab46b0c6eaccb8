//! `GET /healthz`: status, version and tool counts.

use super::*;

/// `GET /healthz`: 200 JSON with status "ok", the version, and tool counts per source.
#[tokio::test]
async fn healthz_reports_status_version_and_tool_counts() {
    let (_m, path) = manifest_dir(&[("t1", "d"), ("t2", "d"), ("t3", "d")]);
    let server = HttpServer::start(&["--manifest", path.to_str().unwrap()], &Auth::None).await;
    let client = http_client();
    let reply = http_send(
        &client,
        "GET",
        &format!("{}/healthz", server.base()),
        &[],
        None,
        &[],
    )
    .await
    .unwrap();
    assert_eq!(reply.status, 200, "{reply:?}");
    assert_eq!(reply.content_type().as_deref(), Some("application/json"));
    let body: Value = serde_json::from_slice(&reply.body).expect("healthz body is JSON");
    assert_eq!(body["status"], json!("ok"), "{body}");
    assert_eq!(body["version"], json!(env!("CARGO_PKG_VERSION")), "{body}");
    assert_eq!(
        body["tools"],
        json!({"builtin": BUILTINS.len(), "manifest": 3, "stored": 0}),
        "{body}"
    );
}
