//! Secrets: set, overwrite, delete, and that only `secret_values` reveals values.

// The test bodies live in `each_backend!` modules, which see these imports through
// `use super::*`; rustc counts such uses only partly.
#![allow(unused_imports)]

use std::collections::HashMap;

use omniforge_store::{NameKind, SecretStore as _, StoreError, ToolStore};

use crate::util::{Kind, TestStore, each_backend, who};

each_backend! {
    async fn set_list_read_delete(kind) {
    let t = TestStore::new(kind).await;
    let s = &*t.store;
    assert!(s.secret_names().await.unwrap().is_empty());
    s.set_secret(&who(), "ZED", "z").await.unwrap();
    s.set_secret(&who(), "API_TOKEN", "first").await.unwrap();
    s.set_secret(&who(), "API_TOKEN", "second").await.unwrap();
    s.set_secret(&who(), "EMPTY", "").await.unwrap();
    assert_eq!(
        s.secret_names().await.unwrap(),
        ["API_TOKEN", "EMPTY", "ZED"]
    );

    let want = |names: &[&str]| names.iter().map(|n| n.to_string()).collect::<Vec<_>>();
    let values: HashMap<String, String> = s
        .secret_values(&want(&["API_TOKEN", "EMPTY", "MISSING"]))
        .await
        .unwrap()
        .into_iter()
        .map(|(k, v)| (k, v.into_inner()))
        .collect();
    assert_eq!(
        values,
        HashMap::from([
            ("API_TOKEN".into(), "second".into()),
            ("EMPTY".into(), String::new())
        ])
    );
    assert!(s.secret_values(&[]).await.unwrap().is_empty());

    // `secrets` lists names with when each was last set: an overwrite moves the time on.
    let before = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let first = s.secrets().await.unwrap();
    assert_eq!(
        first.iter().map(|i| i.name.as_str()).collect::<Vec<_>>(),
        ["API_TOKEN", "EMPTY", "ZED"]
    );
    assert!(
        first
            .iter()
            .all(|i| i.updated_at_ms <= before && i.updated_at_ms > before - 60_000)
    );
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    s.set_secret(&who(), "EMPTY", "now set").await.unwrap();
    let second = s.secrets().await.unwrap();
    assert!(
        second[1].updated_at_ms > first[1].updated_at_ms,
        "{second:?}"
    );
    assert_eq!(second[0], first[0]);

    s.delete_secret(&who(), "ZED").await.unwrap();
    assert_eq!(s.secret_names().await.unwrap(), ["API_TOKEN", "EMPTY"]);
    assert!(matches!(
        s.delete_secret(&who(), "ZED").await,
        Err(StoreError::NotFound {
            kind: NameKind::Secret,
            ..
        })
    ));
    }
}

each_backend! {
    async fn odd_values_survive_and_stay_redacted_in_debug(kind) {
    let t = TestStore::new(kind).await;
    let value = "line1\nline2 ' \" ; DROP TABLE secret; -- ünï \u{0}";
    t.store.set_secret(&who(), "WEIRD", value).await.unwrap();
    let got = t.store.secret_values(&["WEIRD".into()]).await.unwrap();
    assert_eq!(got["WEIRD"].expose(), value);
    assert!(!format!("{got:?}").contains("line1"));
    }
}

each_backend! {
    async fn secret_names_are_validated(kind) {
    let t = TestStore::new(kind).await;
    for bad in ["", "1ST", "has-dash", "has space", "dot.ted"] {
        assert!(
            matches!(
                t.store.set_secret(&who(), bad, "v").await,
                Err(StoreError::InvalidName {
                    kind: NameKind::Secret,
                    ..
                })
            ),
            "{bad:?}"
        );
    }
    assert!(t.store.secret_names().await.unwrap().is_empty());
    }
}

each_backend! {
    async fn secret_changes_bump_data_version(kind) {
    let t = TestStore::new(kind).await;
    let s = &*t.store;
    let v0 = s.data_version().await.unwrap();
    s.set_secret(&who(), "A", "1").await.unwrap();
    let v1 = s.data_version().await.unwrap();
    s.delete_secret(&who(), "A").await.unwrap();
    let v2 = s.data_version().await.unwrap();
    assert!(v0 < v1 && v1 < v2, "{v0} {v1} {v2}");
    // A failed delete is rolled back, counter included.
    let _ = s.delete_secret(&who(), "A").await;
    assert_eq!(s.data_version().await.unwrap(), v2);
    }
}
