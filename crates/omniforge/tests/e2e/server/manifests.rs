//! Manifests: start-up errors and hot reload.

use super::*;

/// A malformed manifest at start-up ends the process with an error naming the file, the
/// tool and the field, for both transports.
#[tokio::test]
async fn malformed_manifest_at_startup_is_fatal() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("broken-manifest.json");
    let text = json!({"project": "p", "tools": [
        {"name": "good_tool", "inputSchema": {"type": "object"}, "procedure": "/p.v1.S/Good"},
        {"name": "bad_tool", "inputSchema": {"type": "string"}, "procedure": "/p.v1.S/Bad"},
    ]});
    std::fs::write(&path, text.to_string()).unwrap();
    let manifest = path.to_str().unwrap();
    let data = dir.path().join("data");
    let data = data.to_str().unwrap();
    let runs: [&[&str]; 2] = [
        &["stdio", "--data-dir", data, "--manifest", manifest],
        &[
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--data-dir",
            data,
            "--insecure-no-auth",
            "--manifest",
            manifest,
        ],
    ];
    for args in runs {
        let out = omniforge_run(args, START_TIMEOUT)
            .await
            .unwrap_or_else(|| panic!("{args:?} kept running with a malformed manifest"));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success(),
            "{args:?}: exit {}; stderr:\n{stderr}",
            out.status
        );
        for needle in [manifest, "bad_tool", "inputSchema"] {
            assert!(
                stderr.contains(needle),
                "{args:?}: stderr does not name {needle:?}:\n{stderr}"
            );
        }
        assert!(
            out.stdout.is_empty(),
            "{args:?}: stdout {:?}",
            String::from_utf8_lossy(&out.stdout)
        );
    }
}

/// Over an HTTP session with its GET stream open, replacing the manifest (temp + rename)
/// delivers list_changed on the GET stream and tools/list shows the new tools; a broken
/// rewrite keeps the previous tools.
#[tokio::test]
async fn manifest_hot_reload_over_http_get_stream() {
    let (_m, path) = manifest_dir(&[("t1", "d"), ("t2", "d"), ("t3", "d")]);
    let server = HttpServer::start(&["--manifest", path.to_str().unwrap()], &Auth::None).await;
    let client = http_client();
    let session = init_http(&client, &server, V2025, true).await.unwrap();
    let headers = post_headers(Some(&session.id), Some(&session.version));
    let list = |id: u64| {
        let client = &client;
        let headers = &headers;
        let url = server.url().to_owned();
        async move {
            let reply = post(client, &url, headers, &rpc(id, "tools/list", None)).await;
            tool_names(&answer(&reply, V2025, "tools/list", id)["result"])
        }
    };
    assert_eq!(list(2).await, with_builtins(&["t1", "t2", "t3"]));

    let (status, _, stream) = open_stream(
        &client,
        reqwest::Method::GET,
        server.url(),
        &get_headers(&session.id, &session.version),
        None,
    )
    .await;
    assert_eq!(
        status,
        200,
        "GET stream: {stream:?}",
        stream = stream.as_ref().err()
    );
    let mut stream = stream.unwrap_or_else(|body| panic!("GET is not an SSE stream: {body}"));

    let started = Instant::now();
    replace_file(&path, &manifest(&[("t1", "d"), ("t4", "new")]));
    let (note, before) = stream
        .wait_for(CHANGE_TIMEOUT, is_list_changed)
        .await
        .unwrap_or_else(|e| {
            panic!(
                "GET stream after the rewrite: {e}; server output:\n{}",
                server.output_text()
            )
        });
    eprintln!("list_changed after {:?}", started.elapsed());
    assert_valid(V2025, None, &before);
    assert_valid(V2025, None, std::slice::from_ref(&note));
    assert_eq!(list(3).await, with_builtins(&["t1", "t4"]));

    // A broken rewrite: the server says so on stderr and keeps the tools it had.
    replace_file(
        &path,
        r#"{"project": "p", "tools": [{"name": "t5", "inputSchema": "#,
    );
    eventually_contains(
        "a log line about the invalid manifest",
        || server.output_text(),
        &["not valid"],
        CHANGE_TIMEOUT,
    )
    .await;
    assert_eq!(list(4).await, with_builtins(&["t1", "t4"]));
    let late = stream.drain_now();
    assert!(
        !late.iter().any(is_list_changed),
        "a broken rewrite announced list_changed: {late:?}"
    );
    assert_valid(V2025, None, &late);
}
