//! Secrets encrypted at rest (issue 14): sealed in the file, bound to their names, readable
//! through any key of the ring, re-encrypted by rotation, sealed at open when an older build
//! stored them in plain text, refused with a typed error without a key, and never with their
//! key in a backup.

use std::collections::HashMap;
use std::path::Path;

use base64::Engine as _;
use omniforge_store::{
    AuditAction, AuditFilter, AuditLog as _, Engine, Keyring, STORE_PRINCIPAL, SecretStore,
    SqliteStore, StoreConfig, StoreError, ToolStore as _,
};

use crate::util::{Kind, LIVE, TestStore, config, raw, spec_with_secrets, who};

/// A keyring of `ids`, each key filled with a byte derived from its id.
fn ring(ids: &[&str]) -> Keyring {
    Keyring::from_keys(
        ids.iter()
            .map(|id| (id.to_string(), [id.len() as u8 * 17 + id.as_bytes()[0]; 32]))
            .collect(),
    )
    .unwrap()
}

async fn open_with_ring(path: &Path, keyring: Option<Keyring>) -> Engine {
    SqliteStore::open_with(
        path,
        &StoreConfig {
            keyring,
            ..config()
        },
    )
    .await
    .unwrap()
}

async fn read_all(s: &Engine) -> Result<HashMap<String, String>, StoreError> {
    let names = s.secret_names().await?;
    Ok(s.secret_values(&names)
        .await?
        .into_iter()
        .map(|(k, v)| (k, v.into_inner()))
        .collect())
}

/// The database file and its WAL, as bytes.
fn file_bytes(path: &Path) -> Vec<u8> {
    let mut bytes = std::fs::read(path).unwrap();
    let wal = path.with_file_name(format!(
        "{}-wal",
        path.file_name().unwrap().to_string_lossy()
    ));
    if let Ok(more) = std::fs::read(wal) {
        bytes.extend(more);
    }
    bytes
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

#[tokio::test]
async fn values_are_sealed_in_the_file() {
    let t = TestStore::new(Kind::Sqlite).await;
    let s = &*t.store;
    let value = "sk-live-7f3a9c1e5b2d4f6a8c0e";
    s.set_secret(&who(), "API_KEY", value).await.unwrap();
    assert_eq!(read_all(s).await.unwrap()["API_KEY"], value);
    let info = &s.secrets().await.unwrap()[0];
    assert_eq!(info.key_id.as_deref(), Some("test-key-1"));
    s.close().await;
    let bytes = file_bytes(&t.path);
    assert!(!bytes.is_empty());
    assert!(
        !contains(&bytes, value.as_bytes()),
        "the plain value is in the file"
    );
    assert!(!contains(&bytes, &[7u8; 32]), "the key is in the file");
    let pool = raw(&t.path).await;
    let (plain, sealed, key_id): (Option<String>, Option<Vec<u8>>, Option<String>) =
        sqlx::query_as("SELECT value, sealed, key_id FROM secret WHERE name = 'API_KEY'")
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(plain, None);
    assert_eq!(key_id.as_deref(), Some("test-key-1"));
    // Format byte, 24-byte nonce, ciphertext as long as the value, 16-byte tag.
    assert_eq!(sealed.unwrap().len(), 1 + 24 + value.len() + 16);
    pool.close().await;
}

#[tokio::test]
async fn a_tampered_value_or_a_row_copied_to_another_name_fails_to_decrypt() {
    let t = TestStore::new(Kind::Sqlite).await;
    let s = &*t.store;
    s.set_secret(&who(), "REAL", "the real value")
        .await
        .unwrap();
    s.set_secret(&who(), "DECOY", "decoy").await.unwrap();
    s.create_tool(&who(), "t", spec_with_secrets("1", &["DECOY"]), LIVE)
        .await
        .unwrap();
    s.grant_secret(&who(), "DECOY", "t", 1).await.unwrap();
    let pool = raw(&t.path).await;
    // Copy REAL's sealed bytes into DECOY's row: a tool granted DECOY must not learn REAL.
    sqlx::query(
        "UPDATE secret SET sealed = (SELECT sealed FROM secret WHERE name = 'REAL'), \
         key_id = (SELECT key_id FROM secret WHERE name = 'REAL') WHERE name = 'DECOY'",
    )
    .execute(&pool)
    .await
    .unwrap();
    let e = s.granted_secrets("t", 1).await.unwrap_err();
    assert!(
        matches!(&e, StoreError::SecretUnreadable { name } if name == "DECOY"),
        "{e:?}"
    );
    assert!(!e.to_string().contains("the real value"));
    assert_eq!(
        s.secret_values(&["REAL".into()]).await.unwrap()["REAL"].expose(),
        "the real value"
    );
    // Flip one bit of REAL's ciphertext.
    let mut sealed: Vec<u8> = sqlx::query_scalar("SELECT sealed FROM secret WHERE name = 'REAL'")
        .fetch_one(&pool)
        .await
        .unwrap();
    sealed[30] ^= 1;
    sqlx::query("UPDATE secret SET sealed = ? WHERE name = 'REAL'")
        .bind(&sealed)
        .execute(&pool)
        .await
        .unwrap();
    let e = s.secret_values(&["REAL".into()]).await.unwrap_err();
    assert!(
        matches!(&e, StoreError::SecretUnreadable { name } if name == "REAL"),
        "{e:?}"
    );
    // Relabelled with a key id the ring lacks.
    sqlx::query("UPDATE secret SET key_id = 'k-elsewhere' WHERE name = 'REAL'")
        .execute(&pool)
        .await
        .unwrap();
    let e = s.secret_values(&["REAL".into()]).await.unwrap_err();
    assert!(
        matches!(&e, StoreError::SecretKeyMissing { name, key_id } if name == "REAL" && key_id == "k-elsewhere"),
        "{e:?}"
    );
    pool.close().await;
}

#[tokio::test]
async fn rotation_keeps_every_value_readable_under_the_new_key() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.db");
    let old = open_with_ring(&path, Some(ring(&["old"]))).await;
    let want: HashMap<String, String> = (0..5)
        .map(|i| (format!("S{i}"), format!("value {i} ünï")))
        .collect();
    for (name, value) in &want {
        old.set_secret(&who(), name, value).await.unwrap();
    }
    old.close().await;

    // A new key rolled in first; the old one still opens what it sealed.
    let both = open_with_ring(&path, Some(ring(&["new", "old"]))).await;
    assert_eq!(read_all(&both).await.unwrap(), want);
    both.set_secret(&who(), "S0", "value 0 ünï").await.unwrap();
    let keys: Vec<Option<String>> = both
        .secrets()
        .await
        .unwrap()
        .into_iter()
        .map(|i| i.key_id)
        .collect();
    assert_eq!(
        keys.iter().filter(|k| k.as_deref() == Some("new")).count(),
        1
    );
    assert_eq!(both.rotate_key(&who()).await.unwrap(), 4);
    assert!(
        both.secrets()
            .await
            .unwrap()
            .iter()
            .all(|i| i.key_id.as_deref() == Some("new"))
    );
    assert_eq!(read_all(&both).await.unwrap(), want);
    assert_eq!(
        both.rotate_key(&who()).await.unwrap(),
        0,
        "nothing left to move"
    );
    let record = &both
        .audit(&AuditFilter {
            limit: 2,
            ..AuditFilter::default()
        })
        .await
        .unwrap()[1];
    assert_eq!(record.action, AuditAction::RotateKey);
    assert_eq!(record.name, "new");
    assert_eq!(record.detail["resealed"], serde_json::json!(4));
    assert_eq!(record.detail["from_keys"], serde_json::json!(["old"]));
    both.close().await;

    // The old key can go: the new one alone reads everything; the old one alone nothing.
    let new_only = open_with_ring(&path, Some(ring(&["new"]))).await;
    assert_eq!(read_all(&new_only).await.unwrap(), want);
    new_only.close().await;
    let old_only = open_with_ring(&path, Some(ring(&["old"]))).await;
    assert!(matches!(
        read_all(&old_only).await,
        Err(StoreError::SecretKeyMissing { .. })
    ));
    // Rotating with a ring that cannot open a value changes nothing.
    assert!(matches!(
        old_only.rotate_key(&who()).await,
        Err(StoreError::SecretKeyMissing { .. })
    ));
    old_only.close().await;
    let new_only = open_with_ring(&path, Some(ring(&["new"]))).await;
    assert_eq!(read_all(&new_only).await.unwrap(), want);
    new_only.close().await;
}

#[tokio::test]
async fn without_a_key_values_are_refused_with_a_typed_error() {
    let t = TestStore::new(Kind::Sqlite).await;
    let s = &*t.store;
    s.set_secret(&who(), "API_KEY", "k").await.unwrap();
    s.create_tool(&who(), "uses", spec_with_secrets("1", &["API_KEY"]), LIVE)
        .await
        .unwrap();
    s.grant_secret(&who(), "API_KEY", "uses", 1).await.unwrap();
    s.create_tool(&who(), "none", spec_with_secrets("2", &[]), LIVE)
        .await
        .unwrap();
    let keyless = open_with_ring(&t.path, None).await;
    let e = keyless.set_secret(&who(), "OTHER", "v").await.unwrap_err();
    assert!(matches!(e, StoreError::NoSecretKey), "{e:?}");
    assert_eq!(
        e.to_string(),
        "secret values are unavailable: this store has no secret key"
    );
    assert!(matches!(
        read_all(&keyless).await,
        Err(StoreError::NoSecretKey)
    ));
    assert!(matches!(
        keyless.granted_secrets("uses", 1).await,
        Err(StoreError::NoSecretKey)
    ));
    assert!(matches!(
        keyless.rotate_key(&who()).await,
        Err(StoreError::NoSecretKey)
    ));
    // What needs no value keeps working.
    assert!(keyless.granted_secrets("none", 1).await.unwrap().is_empty());
    assert_eq!(keyless.secret_names().await.unwrap(), ["API_KEY"]);
    assert_eq!(keyless.grants(None, None).await.unwrap().len(), 1);
    assert_eq!(keyless.secret_requests("uses", 1).await.unwrap().len(), 1);
    keyless.delete_secret(&who(), "API_KEY").await.unwrap();
    assert!(keyless.secret_names().await.unwrap().is_empty());
    keyless.close().await;
}

#[tokio::test]
async fn plain_text_values_of_an_older_build_are_sealed_at_open_with_a_key() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("old.db");
    // Migrations 1 to 4 and plain-text secrets, as an older build wrote them.
    let url = format!("sqlite://{}?mode=rwc", path.display());
    let pool = sqlx::SqlitePool::connect(&url).await.unwrap();
    let migrator = sqlx::migrate::Migrator::new(Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/migrations"
    )))
    .await
    .unwrap();
    migrator.run_to(4, &pool).await.unwrap();
    for (name, value) in [("A", "alpha-plain-value"), ("B", "beta-plain-value")] {
        sqlx::query("INSERT INTO secret (name, value, updated_at_ms) VALUES (?, ?, 1)")
            .bind(name)
            .bind(value)
            .execute(&pool)
            .await
            .unwrap();
    }
    pool.close().await;

    // Without a key: migrated, still plain, and refused.
    let keyless = open_with_ring(&path, None).await;
    let infos = keyless.secrets().await.unwrap();
    assert!(infos.iter().all(|i| i.key_id.is_none()), "{infos:?}");
    assert!(matches!(
        read_all(&keyless).await,
        Err(StoreError::NoSecretKey)
    ));
    keyless.close().await;

    // With a key: sealed in one transaction, recorded once, readable.
    let keyed = open_with_ring(&path, Some(ring(&["k1"]))).await;
    let want = HashMap::from([
        ("A".to_owned(), "alpha-plain-value".to_owned()),
        ("B".to_owned(), "beta-plain-value".to_owned()),
    ]);
    assert_eq!(read_all(&keyed).await.unwrap(), want);
    assert!(
        keyed
            .secrets()
            .await
            .unwrap()
            .iter()
            .all(|i| i.key_id.as_deref() == Some("k1"))
    );
    let records = keyed
        .audit(&AuditFilter {
            limit: 10,
            ..AuditFilter::default()
        })
        .await
        .unwrap();
    assert_eq!(records.len(), 1);
    assert_eq!(records[0].action, AuditAction::Encrypt);
    assert_eq!(records[0].principal, STORE_PRINCIPAL);
    assert_eq!(records[0].detail["secrets"], serde_json::json!(2));
    keyed.close().await;
    let again = open_with_ring(&path, Some(ring(&["k1"]))).await;
    assert_eq!(
        again
            .audit(&AuditFilter {
                limit: 10,
                ..AuditFilter::default()
            })
            .await
            .unwrap()
            .len(),
        1,
        "nothing left to seal"
    );
    again.close().await;
    let pool = raw(&path).await;
    let plain: i64 = sqlx::query_scalar("SELECT count(*) FROM secret WHERE value IS NOT NULL")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(plain, 0);
    pool.close().await;
    let bytes = file_bytes(&path);
    assert!(
        !contains(&bytes, b"alpha-plain-value"),
        "the plain value is left in the file"
    );
}

#[tokio::test]
async fn a_backup_holds_sealed_values_and_never_the_key() {
    let t = TestStore::new(Kind::Sqlite).await;
    let s = &*t.store;
    let value = "backup-me-4d1c7e9a";
    s.set_secret(&who(), "TOKEN", value).await.unwrap();
    let dest = t.dir.path().join("backup.db");
    s.backup(&dest).await.unwrap();
    let bytes = std::fs::read(&dest).unwrap();
    assert!(!contains(&bytes, value.as_bytes()));
    assert!(!contains(&bytes, &[7u8; 32]));
    let key_b64 = base64::engine::general_purpose::STANDARD.encode([7u8; 32]);
    assert!(!contains(&bytes, key_b64.as_bytes()));
    // The copy needs the key to be of any use.
    let keyless = open_with_ring(&dest, None).await;
    assert!(matches!(
        read_all(&keyless).await,
        Err(StoreError::NoSecretKey)
    ));
    keyless.close().await;
    let keyed = crate::util::open(&dest).await;
    assert_eq!(read_all(&keyed).await.unwrap()["TOKEN"], value);
    keyed.close().await;
}

#[tokio::test]
async fn a_generated_key_file_opens_its_store_again() {
    let dir = tempfile::tempdir().unwrap();
    let key_file = dir.path().join("secret.key");
    let db = dir.path().join("s.db");
    let first = Keyring::load_or_generate(&key_file).unwrap();
    let s = open_with_ring(&db, Some(first)).await;
    s.set_secret(&who(), "S", "v").await.unwrap();
    s.close().await;
    let s = open_with_ring(&db, Some(Keyring::load(&key_file).unwrap())).await;
    assert_eq!(read_all(&s).await.unwrap()["S"], "v");
    s.close().await;
    // A second key put first: old values still read, new ones use it.
    let new_id = Keyring::add_key_to_file(&key_file).unwrap();
    let s = open_with_ring(&db, Some(Keyring::load(&key_file).unwrap())).await;
    assert_eq!(read_all(&s).await.unwrap()["S"], "v");
    s.set_secret(&who(), "T", "w").await.unwrap();
    let infos = s.secrets().await.unwrap();
    assert_eq!(infos[1].key_id.as_deref(), Some(new_id.as_str()));
    assert_ne!(infos[0].key_id, infos[1].key_id);
    s.close().await;
}

/// A PostgreSQL store opened without the keyring (an operator's backup job holds no key) still
/// backs up: the sealed values are copied as they are, and the keyring opens them in the copy.
#[tokio::test]
async fn a_postgres_backup_needs_no_key_and_copies_sealed_values() {
    let t = TestStore::new(Kind::Postgres).await;
    let value = "pg-backup-me-81f0";
    t.store.set_secret(&who(), "TOKEN", value).await.unwrap();
    let keyless = t
        .open_with(&StoreConfig {
            keyring: None,
            ..config()
        })
        .await;
    let dest = t.dir.path().join("backup.db");
    keyless.backup(&dest).await.unwrap();
    let bytes = std::fs::read(&dest).unwrap();
    assert!(!contains(&bytes, value.as_bytes()));
    let copy = open_with_ring(&dest, Some(crate::util::keyring())).await;
    assert_eq!(read_all(&copy).await.unwrap()["TOKEN"], value);
    assert_eq!(
        copy.secrets().await.unwrap()[0].key_id,
        t.store.secrets().await.unwrap()[0].key_id,
        "sealed under the same key, as stored"
    );
    copy.close().await;
}
