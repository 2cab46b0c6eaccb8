//! Tools and their versions: round trips, rollback, enable/disable, purge, ordering, names.

// The test bodies live in `each_backend!` modules, which see these imports through
// `use super::*`; rustc counts such uses only partly.
#![allow(unused_imports)]

use std::collections::HashSet;

use omniforge_store::{
    CallLog as _, NameKind, SecretStore as _, SqliteStore, StoreError, ToolStore,
};

use crate::util::{Kind, LIVE, TestStore, each_backend, enabled, spec, who};

#[tokio::test]
async fn create_and_read_back_every_field() {
    let t = TestStore::new(Kind::Sqlite).await;
    let created = t
        .store
        .create_tool(&who(), "weather", spec("a"), LIVE)
        .await
        .unwrap();
    assert_eq!((created.tool.as_str(), created.number), ("weather", 1));
    assert_eq!(created.spec, spec("a"));

    let got = t.store.get("weather").await.unwrap().unwrap();
    assert_eq!(got.current, created);
    assert_eq!(got.tool.name, "weather");
    assert!(got.tool.enabled);
    assert_eq!(got.tool.current_version, Some(1));
    assert_eq!(got.tool.created_at_ms, created.created_at_ms);
    assert_eq!(got.tool.updated_at_ms, created.created_at_ms);
    assert_eq!(t.store.version("weather", 1).await.unwrap(), created);

    // The same after closing and reopening the file.
    t.store.close().await;
    let reopened = SqliteStore::open(&t.path).await.unwrap();
    assert_eq!(reopened.get("weather").await.unwrap().unwrap(), got);
}

each_backend! {
    async fn optional_fields_stay_absent(kind) {
    let t = TestStore::new(kind).await;
    let mut s = spec("a");
    s.title = None;
    s.output_schema = None;
    s.annotations = Default::default();
    s.dependencies.clear();
    s.secrets.clear();
    s.lock.clear();
    t.store
        .create_tool(&who(), "bare", s.clone(), LIVE)
        .await
        .unwrap();
    assert_eq!(t.store.get("bare").await.unwrap().unwrap().current.spec, s);
    }
}

each_backend! {
    async fn versions_rollback_and_numbering(kind) {
    let t = TestStore::new(kind).await;
    let s = &*t.store;
    let v1 = s
        .create_tool(&who(), "calc", spec("v1"), LIVE)
        .await
        .unwrap();
    let v2 = s
        .add_version(&who(), "calc", spec("v2"), LIVE)
        .await
        .unwrap();
    let v3 = s
        .add_version(&who(), "calc", spec("v3"), LIVE)
        .await
        .unwrap();
    assert_eq!((v2.number, v3.number), (2, 3));
    assert_eq!(s.get("calc").await.unwrap().unwrap().current, v3);

    let back = s.rollback(&who(), "calc", 1).await.unwrap();
    assert_eq!(back, v1);
    let now = s.get("calc").await.unwrap().unwrap();
    assert_eq!(now.current, v1);
    assert_eq!(now.tool.current_version, Some(1));
    assert!(now.tool.updated_at_ms >= v3.created_at_ms);
    assert_eq!(now.tool.created_at_ms, v1.created_at_ms);

    // A new version after a rollback takes the next free number, not current + 1.
    let v4 = s
        .add_version(&who(), "calc", spec("v4"), LIVE)
        .await
        .unwrap();
    assert_eq!(v4.number, 4);
    // Rolling forward is allowed too.
    assert_eq!(s.rollback(&who(), "calc", 3).await.unwrap(), v3);

    let all = s.versions("calc").await.unwrap();
    assert_eq!(all, vec![v1, v2, v3, v4]);

    assert!(matches!(
        s.version("calc", 9).await,
        Err(StoreError::NotFound {
            kind: NameKind::Tool,
            version: Some(9),
            ..
        })
    ));
    assert!(matches!(
        s.rollback(&who(), "calc", 9).await,
        Err(StoreError::NotFound {
            version: Some(9),
            ..
        })
    ));
    assert_eq!(
        s.get("calc").await.unwrap().unwrap().current.number,
        3,
        "failed rollback changed nothing"
    );
    }
}

each_backend! {
    async fn missing_tools(kind) {
    let t = TestStore::new(kind).await;
    let s = &*t.store;
    let not_found = |r: Result<(), StoreError>| {
        assert!(
            matches!(r, Err(StoreError::NotFound { kind: NameKind::Tool, ref name, version: None }) if name == "nope"),
            "{r:?}"
        );
    };
    assert!(s.get("nope").await.unwrap().is_none());
    not_found(
        s.add_version(&who(), "nope", spec("x"), LIVE)
            .await
            .map(drop),
    );
    not_found(s.versions("nope").await.map(drop));
    not_found(s.set_enabled(&who(), "nope", false).await);
    not_found(s.purge(&who(), "nope").await);
    not_found(s.recent_calls("nope", 10).await.map(drop));
    assert!(matches!(
        s.version("nope", 1).await,
        Err(StoreError::NotFound {
            version: Some(1),
            ..
        })
    ));
    assert!(matches!(
        s.rollback(&who(), "nope", 1).await,
        Err(StoreError::NotFound {
            version: Some(1),
            ..
        })
    ));
    // Names that cannot exist are simply not found by reads.
    assert!(s.get("no such/tool").await.unwrap().is_none());
    }
}

each_backend! {
    async fn disable_hides_from_listing_but_keeps_everything(kind) {
    let t = TestStore::new(kind).await;
    let s = &*t.store;
    s.create_tool(&who(), "a", spec("a"), LIVE).await.unwrap();
    s.create_tool(&who(), "b", spec("b"), LIVE).await.unwrap();
    s.set_enabled(&who(), "a", false).await.unwrap();
    assert_eq!(enabled(s).await, ["b@1"]);

    let a = s.get("a").await.unwrap().unwrap();
    assert!(!a.tool.enabled);

    // A new version keeps the tool disabled; a rollback too.
    s.add_version(&who(), "a", spec("a2"), LIVE).await.unwrap();
    s.rollback(&who(), "a", 1).await.unwrap();
    assert!(!s.get("a").await.unwrap().unwrap().tool.enabled);
    assert_eq!(enabled(s).await, ["b@1"]);

    s.set_enabled(&who(), "a", true).await.unwrap();
    assert_eq!(enabled(s).await, ["a@1", "b@1"]);
    assert_eq!(s.versions("a").await.unwrap().len(), 2);
    }
}

each_backend! {
    async fn list_enabled_is_most_recently_updated_first(kind) {
    let t = TestStore::new(kind).await;
    let s = &*t.store;
    for name in ["a", "b", "c"] {
        s.create_tool(&who(), name, spec(name), LIVE).await.unwrap();
    }
    // Created within the same millisecond or not, the order is the commit order.
    assert_eq!(enabled(s).await, ["c@1", "b@1", "a@1"]);
    s.add_version(&who(), "a", spec("a2"), LIVE).await.unwrap();
    assert_eq!(enabled(s).await, ["a@2", "c@1", "b@1"]);
    s.rollback(&who(), "b", 1).await.unwrap();
    assert_eq!(enabled(s).await, ["b@1", "a@2", "c@1"]);
    s.set_enabled(&who(), "c", false).await.unwrap();
    assert_eq!(enabled(s).await, ["b@1", "a@2"]);
    s.set_enabled(&who(), "c", true).await.unwrap();
    assert_eq!(enabled(s).await, ["c@1", "b@1", "a@2"]);
    // Reads do not reorder.
    s.get("a").await.unwrap();
    s.versions("b").await.unwrap();
    assert_eq!(enabled(s).await, ["c@1", "b@1", "a@2"]);
    }
}

#[tokio::test]
async fn purge_removes_tool_versions_and_calls() {
    let t = TestStore::new(Kind::Sqlite).await;
    let s = &*t.store;
    s.create_tool(&who(), "gone", spec("g1"), LIVE)
        .await
        .unwrap();
    s.add_version(&who(), "gone", spec("g2"), LIVE)
        .await
        .unwrap();
    s.create_tool(&who(), "kept", spec("k"), LIVE)
        .await
        .unwrap();
    s.record_call(crate::calls::call("gone", 2, 1))
        .await
        .unwrap();
    s.record_call(crate::calls::call("kept", 1, 2))
        .await
        .unwrap();

    s.purge(&who(), "gone").await.unwrap();
    assert!(s.get("gone").await.unwrap().is_none());
    assert!(matches!(
        s.versions("gone").await,
        Err(StoreError::NotFound { .. })
    ));
    assert_eq!(enabled(s).await, ["kept@1"]);
    assert_eq!(s.recent_calls("kept", 10).await.unwrap().len(), 1);

    // No row of the purged tool is left anywhere.
    let pool = sqlx::SqlitePool::connect(&format!("sqlite://{}", t.path.display()))
        .await
        .unwrap();
    for q in [
        "SELECT count(*) FROM tool WHERE name = 'gone'",
        "SELECT count(*) FROM tool_version WHERE tool = 'gone'",
        "SELECT count(*) FROM call_log WHERE tool = 'gone'",
    ] {
        let n: i64 = sqlx::query_scalar(q).fetch_one(&pool).await.unwrap();
        assert_eq!(n, 0, "{q}");
    }
    pool.close().await;

    // The name is free again and starts over at version 1.
    let again = s
        .create_tool(&who(), "gone", spec("g3"), LIVE)
        .await
        .unwrap();
    assert_eq!(again.number, 1);
    assert_eq!(s.versions("gone").await.unwrap(), vec![again]);
}

each_backend! {
    async fn already_exists_even_when_disabled(kind) {
    let t = TestStore::new(kind).await;
    let s = &*t.store;
    s.create_tool(&who(), "dup", spec("1"), LIVE).await.unwrap();
    let e = s
        .create_tool(&who(), "dup", spec("2"), LIVE)
        .await
        .unwrap_err();
    assert!(
        matches!(&e, StoreError::AlreadyExists { name } if name == "dup"),
        "{e:?}"
    );
    assert_eq!(e.to_string(), "tool \"dup\" already exists");

    s.set_enabled(&who(), "dup", false).await.unwrap();
    assert!(matches!(
        s.create_tool(&who(), "dup", spec("3"), LIVE).await,
        Err(StoreError::AlreadyExists { .. })
    ));
    // The failed creates changed nothing.
    assert_eq!(s.versions("dup").await.unwrap().len(), 1);
    assert_eq!(s.get("dup").await.unwrap().unwrap().current.spec, spec("1"));
    }
}

each_backend! {
    async fn tool_names_are_validated(kind) {
    let t = TestStore::new(kind).await;
    let long = "n".repeat(64);
    let too_long = "n".repeat(65);
    // (name, accepted)
    let cases: &[(&str, bool)] = &[
        ("fetch_weather", true),
        ("Fetch-Weather-2", true),
        ("_", true),
        (&long, true),
        ("", false),
        (&too_long, false),
        ("has space", false),
        ("dot.ted", false),
        ("slash/ed", false),
        ("ünïcode", false),
        ("new\nline", false),
        ("quote'", false),
    ];
    for &(name, accepted) in cases {
        let r = t.store.create_tool(&who(), name, spec("x"), LIVE).await;
        match (accepted, &r) {
            (true, Ok(v)) => assert_eq!(v.tool, name),
            (
                false,
                Err(StoreError::InvalidName {
                    kind: NameKind::Tool,
                    name: n,
                }),
            ) => assert_eq!(n, name),
            _ => panic!("{name:?}: {r:?}"),
        }
    }
    // Case matters: these are two tools.
    t.store
        .create_tool(&who(), "fetch_Weather", spec("x"), LIVE)
        .await
        .unwrap();
    let names: HashSet<String> = t
        .store
        .list_enabled()
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.tool.name)
        .collect();
    assert_eq!(names.len(), 5);

    let e = t
        .store
        .create_tool(&who(), "a b", spec("x"), LIVE)
        .await
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "invalid tool name \"a b\": expected 1 to 64 characters from [a-zA-Z0-9_-]"
    );
    }
}

each_backend! {
    async fn version_fields_are_validated(kind) {
    let t = TestStore::new(kind).await;
    let s = &*t.store;
    let mut bad_secret = spec("x");
    bad_secret.secrets = vec!["OK".into(), "not-env-safe".into()];
    assert!(matches!(
        s.create_tool(&who(), "t", bad_secret, LIVE).await,
        Err(StoreError::InvalidName { kind: NameKind::Secret, ref name }) if name == "not-env-safe"
    ));

    let mut bad_dep = spec("x");
    bad_dep.dependencies.push("httpx\nevil".into());
    let e = s.create_tool(&who(), "t", bad_dep, LIVE).await.unwrap_err();
    assert!(
        matches!(&e, StoreError::Invalid { field, .. } if field == "dependencies[2]"),
        "{e:?}"
    );

    let mut huge = spec("x");
    huge.limits.memory_bytes = u64::MAX;
    let e = s.create_tool(&who(), "t", huge, LIVE).await.unwrap_err();
    assert!(
        matches!(&e, StoreError::Invalid { field, .. } if field == "limits.memory_bytes"),
        "{e:?}"
    );

    let mut no_env = spec("x");
    no_env.env_id.clear();
    assert!(matches!(
        s.create_tool(&who(), "t", no_env, LIVE).await,
        Err(StoreError::Invalid { .. })
    ));

    // None of them was written.
    assert!(s.get("t").await.unwrap().is_none());
    assert_eq!(s.data_version().await.unwrap(), 0);
    }
}

each_backend! {
    async fn env_ids_in_use_cover_all_versions_of_existing_tools(kind) {
    let t = TestStore::new(kind).await;
    let s = &*t.store;
    let ids = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<HashSet<_>>();
    assert!(s.env_ids_in_use().await.unwrap().is_empty());

    s.create_tool(&who(), "a", spec("shared"), LIVE)
        .await
        .unwrap();
    s.add_version(&who(), "a", spec("a2"), LIVE).await.unwrap();
    s.create_tool(&who(), "b", spec("shared"), LIVE)
        .await
        .unwrap();
    s.create_tool(&who(), "c", spec("c1"), LIVE).await.unwrap();
    s.rollback(&who(), "a", 1).await.unwrap();
    s.set_enabled(&who(), "c", false).await.unwrap();
    // Old versions and disabled tools still hold their environments.
    assert_eq!(
        s.env_ids_in_use().await.unwrap(),
        ids(&["env-shared", "env-a2", "env-c1"])
    );

    s.purge(&who(), "a").await.unwrap();
    assert_eq!(
        s.env_ids_in_use().await.unwrap(),
        ids(&["env-shared", "env-c1"])
    );
    s.purge(&who(), "b").await.unwrap();
    assert_eq!(s.env_ids_in_use().await.unwrap(), ids(&["env-c1"]));
    }
}

#[tokio::test]
async fn stored_versions_are_immutable() {
    let t = TestStore::new(Kind::Sqlite).await;
    t.store
        .create_tool(&who(), "frozen", spec("1"), LIVE)
        .await
        .unwrap();
    let pool = sqlx::SqlitePool::connect(&format!("sqlite://{}", t.path.display()))
        .await
        .unwrap();
    let e = sqlx::query("UPDATE tool_version SET code = 'evil' WHERE tool = 'frozen'")
        .execute(&pool)
        .await
        .unwrap_err();
    assert!(e.to_string().contains("tool versions are immutable"), "{e}");
    // The schema also refuses names the API would refuse.
    let e = sqlx::query("UPDATE tool SET name = 'bad name' WHERE name = 'frozen'")
        .execute(&pool)
        .await
        .unwrap_err();
    assert!(e.to_string().contains("CHECK constraint failed"), "{e}");
    pool.close().await;
    assert_eq!(
        t.store.get("frozen").await.unwrap().unwrap().current.spec,
        spec("1")
    );
}

#[tokio::test]
async fn in_memory_store_works_the_same() {
    let s = SqliteStore::open_in_memory_with(&crate::util::config())
        .await
        .unwrap();
    s.create_tool(&who(), "m", spec("1"), LIVE).await.unwrap();
    s.add_version(&who(), "m", spec("2"), LIVE).await.unwrap();
    s.record_call(crate::calls::call("m", 2, 1)).await.unwrap();
    s.set_secret(&who(), "K", "v").await.unwrap();
    assert_eq!(enabled(&s).await, ["m@2"]);
    assert_eq!(s.recent_calls("m", 5).await.unwrap().len(), 1);
    assert_eq!(s.data_version().await.unwrap(), 3);

    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("copy.db");
    s.backup(&dest).await.unwrap();
    let copy = SqliteStore::open(&dest).await.unwrap();
    assert_eq!(enabled(&copy).await, ["m@2"]);
    s.close().await;
}
