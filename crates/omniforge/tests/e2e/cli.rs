//! The command line for people (`omniforge tool ...`, `secret`, `backup`, `gc`, `doctor`)
//! against a running server on the same data directory.

use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use crate::util::{omniforge_cli, omniforge_in, repo_root};

#[tokio::test]
async fn tool_commands_reach_a_running_server() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = omniforge_in(dir.path())
        .arg("stdio")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdin = server.stdin.take().unwrap();
    let mut lines = BufReader::new(server.stdout.take().unwrap()).lines();
    let init = json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{
        "protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"cli-test","version":"0"}}});
    stdin
        .write_all(format!("{init}\n").as_bytes())
        .await
        .unwrap();
    let answer: Value = serde_json::from_str(&lines.next_line().await.unwrap().unwrap()).unwrap();
    assert_eq!(answer["result"]["protocolVersion"], json!("2025-06-18"));
    stdin
        .write_all(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n")
        .await
        .unwrap();

    let example = repo_root().join("examples/tools/add_vat.json");
    let (ok, out, err) = omniforge_cli(
        dir.path(),
        &["tool", "add", example.to_str().unwrap()],
        None,
    )
    .await;
    assert!(ok, "tool add failed: {out}\n{err}");
    assert!(out.contains("Created tool add_vat (version 1)"), "{out}");

    // The running server notices the other process's write and tells its peer.
    let changed = tokio::time::timeout(Duration::from_secs(5), async {
        while let Some(line) = lines.next_line().await.unwrap() {
            let message: Value = serde_json::from_str(&line).unwrap();
            if message["method"] == json!("notifications/tools/list_changed") {
                return true;
            }
        }
        false
    })
    .await;
    assert_eq!(
        changed,
        Ok(true),
        "no list_changed within 5 s of `tool add`"
    );
    let list = json!({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"add_vat","arguments":{"net":10}}});
    stdin
        .write_all(format!("{list}\n").as_bytes())
        .await
        .unwrap();
    let answer: Value = loop {
        let m: Value = serde_json::from_str(&lines.next_line().await.unwrap().unwrap()).unwrap();
        if m["id"] == json!(2) {
            break m;
        }
    };
    assert_eq!(
        answer["result"]["content"][0]["text"],
        json!("{\"net\": \"10\", \"rate\": \"20\", \"vat\": \"2.00\", \"gross\": \"12.00\"}")
    );

    let (ok, out, _) = omniforge_cli(
        dir.path(),
        &["tool", "run", "add_vat", r#"{"net": 7}"#],
        None,
    )
    .await;
    assert!(ok && out.contains("\"gross\": \"8.40\""), "{out}");
    let (ok, out, _) = omniforge_cli(
        dir.path(),
        &["tool", "run", "add_vat", r#"{"net": "x"}"#],
        None,
    )
    .await;
    assert!(
        !ok && out.contains("Arguments do not match inputSchema"),
        "{out}"
    );
    let (ok, out, _) = omniforge_cli(dir.path(), &["tool", "list"], None).await;
    assert!(ok && out.starts_with("add_vat"), "{out}");

    // An edit that gives only a new description keeps the code and everything else.
    let edit = dir.path().join("edit.json");
    std::fs::write(
        &edit,
        json!({"name": "add_vat", "description": "UK VAT at 20%, as decimal strings"}).to_string(),
    )
    .unwrap();
    let (ok, out, err) = omniforge_cli(
        dir.path(),
        &["tool", "edit", "add_vat", edit.to_str().unwrap()],
        None,
    )
    .await;
    assert!(ok && out.contains("version 2"), "{out}\n{err}");
    let (ok, out, _) = omniforge_cli(
        dir.path(),
        &["tool", "run", "add_vat", r#"{"net": 10}"#],
        None,
    )
    .await;
    assert!(ok && out.contains("\"gross\": \"12.00\""), "{out}");
    let (ok, out, _) = omniforge_cli(dir.path(), &["tool", "show", "add_vat"], None).await;
    assert!(
        ok && out.contains("UK VAT at 20%, as decimal strings"),
        "{out}"
    );

    let (ok, _, _) = omniforge_cli(dir.path(), &["tool", "disable", "add_vat"], None).await;
    assert!(ok);
    let (ok, out, _) = omniforge_cli(dir.path(), &["tool", "list"], None).await;
    assert!(
        ok && out.trim().is_empty(),
        "a disabled tool is listed: {out}"
    );
    // A disabled tool does not run from the command line either.
    let (ok, out, _) = omniforge_cli(
        dir.path(),
        &["tool", "run", "add_vat", r#"{"net": 1}"#],
        None,
    )
    .await;
    assert!(!ok && out.contains("is disabled"), "{out}");

    let (ok, _, err) = omniforge_cli(
        dir.path(),
        &["secret", "set", "API_KEY"],
        Some("s3cret-value\n"),
    )
    .await;
    assert!(ok, "{err}");
    let (ok, out, _) = omniforge_cli(dir.path(), &["secret", "list"], None).await;
    assert!(
        ok && out.trim() == "API_KEY" && !out.contains("s3cret"),
        "{out}"
    );

    let backup = dir.path().join("backup.db");
    let (ok, _, err) = omniforge_cli(dir.path(), &["backup", backup.to_str().unwrap()], None).await;
    assert!(ok && backup.exists(), "{err}");
    let (ok, out, err) = omniforge_cli(dir.path(), &["doctor", "--json"], None).await;
    assert!(ok, "{err}");
    let doctor: Value = serde_json::from_str(&out).unwrap();
    assert!(
        doctor["layers"].as_array().is_some_and(|l| !l.is_empty()),
        "{doctor}"
    );
    let (ok, out, _) = omniforge_cli(dir.path(), &["gc"], None).await;
    assert!(ok && out.contains("unused environment"), "{out}");
}

/// Boolean flags take a value only with `=`, so a flag written before the subcommand (as
/// `omniforge [OPTIONS] stdio`) does not swallow the subcommand's name.
#[tokio::test]
async fn boolean_flags_before_the_subcommand() {
    let dir = tempfile::tempdir().unwrap();
    for flag in [
        "--no-authoring",
        "--allow-source-builds",
        "--inline-schema-refs",
        "--no-authoring=true",
    ] {
        let (ok, out, err) = omniforge_cli(dir.path(), &[flag, "tool", "list"], None).await;
        assert!(ok, "{flag} tool list: {out}\n{err}");
    }
    let (ok, _, err) =
        omniforge_cli(dir.path(), &["--no-authoring=maybe", "tool", "list"], None).await;
    assert!(!ok && err.contains("invalid value"), "{err}");
}
