//! `tools/list` pagination (`--page-size`).

use super::*;

/// `--page-size 1` over stdio: following nextCursor yields every tool once, in catalog
/// order, and the last page has no nextCursor; a bad cursor is -32602.
#[tokio::test]
async fn tools_list_pagination_over_stdio() {
    let (_m, path) = manifest_dir(&[("t1", "d"), ("t2", "d"), ("t3", "d")]);
    let mut server =
        StdioServer::start(&["--page-size", "1", "--manifest", path.to_str().unwrap()]);
    let rev = init_stdio(&mut server, V2025).await.unwrap();
    assert_eq!(rev, V2025);

    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    let mut id = 10;
    loop {
        id += 1;
        let params = cursor.as_ref().map(|c| json!({"cursor": c}));
        let reply = stdio_call(&mut server, &rev, rpc(id, "tools/list", params)).await;
        let result = &reply["result"];
        let names = tool_names(result);
        assert_eq!(names.len(), 1, "page {} of size 1: {reply}", seen.len() + 1);
        seen.extend(names);
        match result.get("nextCursor") {
            None => break,
            Some(Value::String(c)) => cursor = Some(c.clone()),
            Some(other) => panic!("nextCursor is not a string: {other}"),
        }
        assert!(
            seen.len() < BUILTINS.len() + 10,
            "nextCursor never ends: {seen:?}"
        );
    }
    assert_eq!(seen, with_builtins(&["t1", "t2", "t3"]));

    for bad in ["not-a-cursor", "", "bzo5OTk"] {
        let reply = stdio_call(
            &mut server,
            &rev,
            rpc(99, "tools/list", Some(json!({"cursor": bad}))),
        )
        .await;
        assert_eq!(
            reply["error"]["code"],
            json!(-32602),
            "cursor {bad:?}: {reply}"
        );
        assert!(reply.get("result").is_none(), "{reply}");
    }
}
