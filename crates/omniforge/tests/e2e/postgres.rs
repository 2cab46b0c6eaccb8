//! OmniForge on PostgreSQL (issue 14): `--database`, `--secret-key-file`, `secret rotate-key`,
//! `omniforge migrate`, and a server whose data directory has none of the environments of the
//! tools it serves (they were made elsewhere) installing them from the stored locks.
//!
//! A real PostgreSQL cluster (`omniforge-testpg`: Debian's binaries, one database per test),
//! the real binary, raw JSON-RPC over Streamable HTTP.

use std::path::Path;

use serde_json::{Value, json};

use crate::support::{HttpClient, Serve, cluster, omniforge_cli, repo_root, uv};

/// What a store answers through a server, for comparing two stores.
async fn answers(mcp: &mut HttpClient) -> Vec<(String, Value)> {
    let asks = [
        ("tools/list", json!({})),
        (
            "tools/call",
            json!({"name": "add_vat", "arguments": {"net": 10}}),
        ),
        (
            "tools/call",
            json!({"name": "test_simple_text", "arguments": {}}),
        ),
        ("resources/list", json!({})),
        ("resources/templates/list", json!({})),
        ("resources/read", json!({"uri": "test://static-text"})),
        ("resources/read", json!({"uri": "test://template/7/data"})),
        ("prompts/list", json!({})),
        ("prompts/get", json!({"name": "test_simple_prompt"})),
    ];
    let mut out = Vec::new();
    for (method, params) in asks {
        let result = mcp.result(method, params.clone()).await;
        out.push((format!("{method} {params}"), result));
    }
    out
}

/// The first key id of a keyring file (`ID BASE64` lines, `#` comments).
fn first_key_id(file: &Path) -> String {
    let text = std::fs::read_to_string(file).unwrap();
    text.lines()
        .map(str::trim)
        .find(|l| !l.is_empty() && !l.starts_with('#'))
        .and_then(|l| l.split_whitespace().next())
        .unwrap()
        .to_owned()
}

/// `omniforge migrate` copies a SQLite store into PostgreSQL, and a server on the copy, in a
/// data directory without any environment, answers every tool, resource and prompt request
/// exactly as the original did (the environments installed from the stored locks); secrets
/// are sealed under the target keyring, and `secret rotate-key` works on PostgreSQL.
#[tokio::test]
async fn a_migrated_store_answers_like_the_original() {
    crate::support::needs_deps!();
    let db = cluster().database("migrate").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a");
    let pack = repo_root().join("packs/conformance.toml");
    let vat = repo_root().join("examples/tools/add_vat.json");
    for args in [
        vec!["pack", "import", pack.to_str().unwrap()],
        vec!["tool", "add", vat.to_str().unwrap()],
        vec!["tool", "run", "add_vat", r#"{"net": 7}"#],
    ] {
        let (ok, out, err) = omniforge_cli(&a, &args, None).await;
        assert!(ok, "{args:?}: {out}\n{err}");
    }
    let (ok, _, err) = omniforge_cli(&a, &["secret", "set", "API_KEY"], Some("v-1234\n")).await;
    assert!(ok, "{err}");

    let original = {
        let server = Serve::start(&[
            "--data-dir".as_ref(),
            a.as_os_str(),
            "--uv".as_ref(),
            uv().as_os_str(),
        ])
        .await;
        let mut mcp = HttpClient::open(&server.url).await.unwrap();
        answers(&mut mcp).await
    };

    // The target's own keyring, made by `secret rotate-key` (on a scratch SQLite store).
    let key = dir.path().join("pg.key");
    let scratch = dir.path().join("scratch");
    let key_arg = key.to_str().unwrap();
    let (ok, out, err) = omniforge_cli(
        &scratch,
        &["--secret-key-file", key_arg, "secret", "rotate-key"],
        None,
    )
    .await;
    assert!(ok && out.contains("sealed 0 secret(s)"), "{out}\n{err}");

    let url = db.url();
    let (ok, out, err) = omniforge_cli(
        &a,
        &["migrate", "--to", &url, "--to-secret-key-file", key_arg],
        None,
    )
    .await;
    assert!(ok, "{out}\n{err}");
    // The pack's tools (it grows with the conformance fixtures) and add_vat.
    let tools = std::fs::read_to_string(&pack)
        .unwrap()
        .lines()
        .filter(|line| line.trim() == "[[tools]]")
        .count()
        + 1;
    assert!(
        out.contains(&format!("copied {tools} tool(s)")) && out.contains("1 secret(s)"),
        "{out}"
    );
    // The target is no longer empty: a second copy is refused, and nothing changes.
    let (ok, out, err) = omniforge_cli(
        &a,
        &["migrate", "--to", &url, "--to-secret-key-file", key_arg],
        None,
    )
    .await;
    assert!(!ok && err.contains("not empty"), "{out}\n{err}");

    let stored_key = db
        .sql("SELECT key_id FROM secret WHERE name = 'API_KEY'")
        .unwrap();
    assert_eq!(
        stored_key,
        first_key_id(&key),
        "sealed under the target keyring"
    );

    // A replica: its own (empty) data directory, the shared database and keyring.
    let b = dir.path().join("b");
    std::fs::create_dir(&b).unwrap();
    let uv = uv();
    let pg = [
        "--data-dir",
        b.to_str().unwrap(),
        "--database",
        &url,
        "--secret-key-file",
        key_arg,
    ];
    let copied = {
        let server = Serve::start(&[&pg[..], &["--uv", uv.to_str().unwrap()]].concat()).await;
        let mut mcp = HttpClient::open(&server.url).await.unwrap();
        answers(&mut mcp).await
    };
    for ((what, want), (_, got)) in original.iter().zip(&copied) {
        assert_eq!(want, got, "{what}");
    }
    assert_eq!(original.len(), copied.len());

    // The command line on the PostgreSQL store: secrets, the tool list, a key rotation.
    let (ok, out, err) = omniforge_cli(
        &b,
        &pg[2..]
            .iter()
            .copied()
            .chain(["secret", "list"])
            .collect::<Vec<_>>(),
        None,
    )
    .await;
    assert!(ok && out.trim() == "API_KEY", "{out}\n{err}");
    let (ok, out, err) = omniforge_cli(
        &b,
        &pg[2..]
            .iter()
            .copied()
            .chain(["secret", "rotate-key"])
            .collect::<Vec<_>>(),
        None,
    )
    .await;
    assert!(ok && out.contains("sealed 1 secret(s)"), "{out}\n{err}");
    let stored_key = db
        .sql("SELECT key_id FROM secret WHERE name = 'API_KEY'")
        .unwrap();
    assert_eq!(
        stored_key,
        first_key_id(&key),
        "sealed under the new first key"
    );
    // Without the keyring, PostgreSQL secrets are refused with a clear error.
    let (ok, out, err) = omniforge_cli(
        &b,
        &["--database", &url, "secret", "set", "OTHER"],
        Some("x\n"),
    )
    .await;
    assert!(!ok && err.contains("key"), "{out}\n{err}");
    // A backup needs no key (the sealed values are copied as stored: the store test
    // `a_postgres_backup_needs_no_key_and_copies_sealed_values` opens them), and it is a store.
    let copy = dir.path().join("pg-backup.db");
    let (ok, out, err) = omniforge_cli(
        &b,
        &["--database", &url, "backup", copy.to_str().unwrap()],
        None,
    )
    .await;
    assert!(ok && copy.exists(), "{out}\n{err}");
    let copy_url = format!("sqlite:{}", copy.display());
    let (ok, out, err) = omniforge_cli(
        &b,
        &[
            "--database",
            &copy_url,
            "--secret-key-file",
            key_arg,
            "tool",
            "run",
            "add_vat",
            r#"{"net": 1}"#,
        ],
        None,
    )
    .await;
    assert!(ok, "{out}\n{err}");
}

/// Issue 30: read-only commands on PostgreSQL without `--secret-key-file` do not warn about
/// it, and a second start (the migrations table exists) logs no PostgreSQL notice.
#[tokio::test]
async fn read_only_commands_on_postgres_are_quiet() {
    let db = cluster().database("quiet_cli").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let url = db.url();
    for round in 0..2 {
        let (ok, _, stderr) =
            omniforge_cli(dir.path(), &["--database", &url, "tool", "list"], None).await;
        assert!(ok, "{stderr}");
        assert!(
            !stderr.contains("secret-key-file") && !stderr.contains("_sqlx_migrations"),
            "round {round}: {stderr}"
        );
    }
    // What a serving command logs at its default level: no notice from PostgreSQL.
    let (ok, _, stderr) = omniforge_cli(
        dir.path(),
        &[
            "--database",
            &url,
            "--log-level",
            "info,rmcp=error,sqlx::postgres::notice=warn",
            "tool",
            "list",
        ],
        None,
    )
    .await;
    assert!(ok, "{stderr}");
    assert!(!stderr.contains("_sqlx_migrations"), "{stderr}");
}
