//! Rolling a new secret key into running replicas (issue 14): two `omniforge serve` processes
//! on one store and one keyring file; `secret rotate-key` and `secret new-key` from the command
//! line while they run; a granted tool still gets its secret through both, without a restart.
//! And the keyring `migrate` opens a SQLite source with.
//!
//! The real binary, a real SQLite store file shared by the two processes (the keyring logic is
//! the same on PostgreSQL), raw JSON-RPC over Streamable HTTP, `.deps/bin/uv`.

use std::path::Path;

use serde_json::json;

use crate::support::{HttpClient, Serve, omniforge_cli, uv};

/// The secret's value; the tool prints it reversed (its output is redacted, the reversal is
/// not, so the text proves the tool got the real value).
const VALUE: &str = "rotate-me-0123456789";

/// Calls `use_key` through `mcp`: its text, or the tool error.
async fn use_key(mcp: &mut HttpClient) -> Result<String, String> {
    let m = mcp
        .request("tools/call", json!({"name": "use_key", "arguments": {}}))
        .await?;
    let text = m["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or("")
        .to_owned();
    if m.get("error").is_some() || m["result"]["isError"] == true {
        return Err(format!("{m}"));
    }
    Ok(text)
}

/// Runs the CLI on the shared store; its stdout (panics on failure).
async fn cli(data_dir: &Path, common: &[&str], args: &[&str], stdin: Option<&str>) -> String {
    let all: Vec<&str> = common.iter().chain(args).copied().collect();
    let (ok, out, err) = omniforge_cli(data_dir, &all, stdin).await;
    assert!(ok, "{all:?}: {out}\n{err}");
    out
}

#[tokio::test]
async fn running_replicas_follow_a_key_rotation() {
    crate::support::needs_deps!();
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("ring.key");
    let key_arg = key.to_str().unwrap();
    let db = format!("sqlite:{}", dir.path().join("store.db").display());
    let (a, b, admin) = (
        dir.path().join("a"),
        dir.path().join("b"),
        dir.path().join("admin"),
    );
    for d in [&a, &b, &admin] {
        std::fs::create_dir(d).unwrap();
    }

    // `secret new-key` makes the keyring and opens no store.
    let out = cli(
        &admin,
        &["--secret-key-file", key_arg],
        &["secret", "new-key"],
        None,
    )
    .await;
    assert!(out.starts_with("new key k"), "{out}");
    assert_eq!(
        std::fs::read_dir(&admin).unwrap().count(),
        0,
        "a store was made"
    );
    assert!(!dir.path().join("store.db").exists());

    let common = ["--database", db.as_str(), "--secret-key-file", key_arg];
    let tool = dir.path().join("use_key.json");
    std::fs::write(
        &tool,
        json!({
            "name": "use_key",
            "description": "Prints API_KEY reversed.",
            "code": "import os\nprint(os.environ.get('API_KEY', 'unset')[::-1])\n",
            "inputSchema": {"type": "object", "properties": {}},
            "secrets": ["API_KEY"],
        })
        .to_string(),
    )
    .unwrap();
    cli(
        &admin,
        &common,
        &["tool", "add", tool.to_str().unwrap()],
        None,
    )
    .await;
    cli(&admin, &common, &["secret", "set", "API_KEY"], Some(VALUE)).await;
    cli(
        &admin,
        &common,
        &["secret", "grant", "API_KEY", "use_key"],
        None,
    )
    .await;

    let uv = uv();
    let serve = |data: &Path| {
        let args: Vec<String> = ["--data-dir", data.to_str().unwrap(), "--uv"]
            .iter()
            .map(|s| (*s).to_owned())
            .chain([uv.to_str().unwrap().to_owned()])
            .chain(common.iter().map(|s| (*s).to_owned()))
            .collect();
        async move { Serve::start(&args).await }
    };
    let (ra, rb) = (serve(&a).await, serve(&b).await);
    let mut replicas = [
        HttpClient::open(&ra.url).await.unwrap(),
        HttpClient::open(&rb.url).await.unwrap(),
    ];
    let want: String = VALUE.chars().rev().collect();
    for mcp in &mut replicas {
        assert_eq!(use_key(mcp).await.unwrap().trim(), want);
    }

    // One host, one file: `rotate-key` while both run.
    let out = cli(&admin, &common, &["secret", "rotate-key"], None).await;
    assert!(out.contains("sealed 1 secret(s) under key"), "{out}");
    for (i, mcp) in replicas.iter_mut().enumerate() {
        let got = use_key(mcp).await;
        assert_eq!(
            got.as_deref().map(str::trim),
            Ok(want.as_str()),
            "replica {i} after rotate-key:\n{}",
            [&ra, &rb][i].stderr()
        );
    }

    // Each host its own copy: a new key into the file first, then a reseal under it.
    let out = cli(
        &admin,
        &["--secret-key-file", key_arg],
        &["secret", "new-key"],
        None,
    )
    .await;
    let new_id = out
        .strip_prefix("new key ")
        .and_then(|s| s.split_whitespace().next())
        .unwrap()
        .to_owned();
    let out = cli(
        &admin,
        &common,
        &["secret", "rotate-key", "--no-new-key"],
        None,
    )
    .await;
    assert!(
        out.trim() == format!("sealed 1 secret(s) under key {new_id}"),
        "{out}"
    );
    for (i, mcp) in replicas.iter_mut().enumerate() {
        let got = use_key(mcp).await;
        assert_eq!(
            got.as_deref().map(str::trim),
            Ok(want.as_str()),
            "replica {i} after new-key and rotate-key --no-new-key"
        );
    }
    // A secret set through the command line now is sealed under the new key, which both
    // replicas hold already.
    cli(
        &admin,
        &common,
        &["secret", "set", "API_KEY"],
        Some("second-value"),
    )
    .await;
    for mcp in &mut replicas {
        assert_eq!(use_key(mcp).await.unwrap().trim(), "eulav-dnoces");
    }
}

/// `migrate --from sqlite:PATH` opens the source's secrets with the `secret.key` beside PATH
/// (not the keyring of the data directory it runs in); when the keyring it used cannot open
/// them, the error names that file and the flags that give the keyrings.
#[tokio::test]
async fn migrate_reads_the_keyring_beside_a_sqlite_source() {
    crate::support::needs_deps!();
    let dir = tempfile::tempdir().unwrap();
    let (src, other) = (dir.path().join("src"), dir.path().join("other"));
    std::fs::create_dir(&other).unwrap();
    cli(&src, &[], &["secret", "set", "API_KEY"], Some(VALUE)).await;
    let from = format!("sqlite:{}", src.join("omniforge.db").display());

    let to = format!("sqlite:{}", dir.path().join("copy.db").display());
    let out = cli(
        &other,
        &[],
        &["migrate", "--from", &from, "--to", &to],
        None,
    )
    .await;
    assert!(out.contains("1 secret(s)"), "{out}");

    // The source's key moved away: the error says which keyring was used and how to give one.
    let moved = dir.path().join("src.key");
    std::fs::rename(src.join("secret.key"), &moved).unwrap();
    let to = format!("sqlite:{}", dir.path().join("copy2.db").display());
    let (ok, out, err) =
        omniforge_cli(&other, &["migrate", "--from", &from, "--to", &to], None).await;
    let used = other.join("secret.key");
    assert!(
        !ok && err.contains(&used.display().to_string())
            && err.contains("--secret-key-file")
            && err.contains("--to-secret-key-file")
            && !err.contains(VALUE),
        "{out}\n{err}"
    );
    let key = moved.to_str().unwrap();
    let out = cli(
        &other,
        &["--secret-key-file", key],
        &["migrate", "--from", &from, "--to", &to],
        None,
    )
    .await;
    assert!(out.contains("1 secret(s)"), "{out}");
}
