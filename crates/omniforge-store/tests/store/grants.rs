//! Secret grants (issue 11 finding 1): a run gets a secret only through a grant made for that
//! exact tool version; requests, revocation, deletion with the secret, packs, and the feed.

// The test bodies live in `each_backend!` modules, which see these imports through
// `use super::*`; rustc counts such uses only partly.
#![allow(unused_imports)]

use std::collections::HashMap;

use omniforge_store::{
    ChangeKind, ContentStore as _, ImportBatch, NameKind, NewStatus, SecretStore, StoreError,
    ToolStore,
};

use crate::util::{Kind, LIVE, TestStore, actor, each_backend, spec_with_secrets, who};

/// The granted values of `tool`@`version` as plain strings.
async fn granted(s: &dyn SecretStore, tool: &str, version: u32) -> HashMap<String, String> {
    s.granted_secrets(tool, version)
        .await
        .unwrap()
        .into_iter()
        .map(|(k, v)| (k, v.into_inner()))
        .collect()
}

fn values(pairs: &[(&str, &str)]) -> HashMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

each_backend! {
    async fn a_grant_is_for_one_exact_version(kind) {
    let t = TestStore::new(kind).await;
    let s = &*t.store;
    s.set_secret(&who(), "API_KEY", "k-1").await.unwrap();
    s.set_secret(&who(), "DB_URL", "postgres://x")
        .await
        .unwrap();
    let tools = spec_with_secrets("v1", &["API_KEY", "DB_URL"]);
    s.create_tool(&who(), "fetch", tools, LIVE).await.unwrap();

    // Declared but not granted: a pending request, and a run gets nothing.
    assert!(granted(s, "fetch", 1).await.is_empty());
    let requests = s.secret_requests("fetch", 1).await.unwrap();
    assert_eq!(requests.len(), 2);
    assert!(requests.iter().all(|r| r.exists && r.grant.is_none()));

    assert!(
        s.grant_secret(&actor("token:admin"), "API_KEY", "fetch", 1)
            .await
            .unwrap()
    );
    assert_eq!(granted(s, "fetch", 1).await, values(&[("API_KEY", "k-1")]));
    let requests = s.secret_requests("fetch", 1).await.unwrap();
    let api = &requests[0];
    assert_eq!(api.secret, "API_KEY");
    let grant = api.grant.as_ref().unwrap();
    assert_eq!(
        (
            grant.tool.as_str(),
            grant.version,
            grant.granted_by.as_str()
        ),
        ("fetch", 1, "token:admin")
    );
    assert!(requests[1].grant.is_none(), "DB_URL is still pending");

    // A new version starts without grants, even with the same declaration.
    let v2 = spec_with_secrets("v2", &["API_KEY", "DB_URL"]);
    s.add_version(&who(), "fetch", v2, LIVE).await.unwrap();
    assert!(granted(s, "fetch", 2).await.is_empty());
    assert!(
        s.secret_requests("fetch", 2)
            .await
            .unwrap()
            .iter()
            .all(|r| r.grant.is_none())
    );
    s.grant_secret(&who(), "DB_URL", "fetch", 2).await.unwrap();
    assert_eq!(
        granted(s, "fetch", 2).await,
        values(&[("DB_URL", "postgres://x")])
    );

    // A rollback uses the target version's own grants.
    s.rollback(&who(), "fetch", 1).await.unwrap();
    let current = s.get("fetch").await.unwrap().unwrap().current.number;
    assert_eq!(
        granted(s, "fetch", current).await,
        values(&[("API_KEY", "k-1")])
    );

    // A new value of a granted secret reaches the grant; the grant stays.
    s.set_secret(&who(), "API_KEY", "k-2").await.unwrap();
    assert_eq!(granted(s, "fetch", 1).await, values(&[("API_KEY", "k-2")]));

    // Listing by secret and by tool.
    let by_secret = s.grants(Some("API_KEY"), None).await.unwrap();
    assert_eq!(by_secret.len(), 1);
    assert_eq!(
        (by_secret[0].tool.as_str(), by_secret[0].version),
        ("fetch", 1)
    );
    let by_tool: Vec<(String, u32)> = s
        .grants(None, Some("fetch"))
        .await
        .unwrap()
        .into_iter()
        .map(|g| (g.secret, g.version))
        .collect();
    assert_eq!(by_tool, [("API_KEY".into(), 1), ("DB_URL".into(), 2)]);
    assert_eq!(s.grants(None, None).await.unwrap().len(), 2);
    }
}

each_backend! {
    async fn grants_need_a_declaration_a_secret_and_a_version(kind) {
    let t = TestStore::new(kind).await;
    let s = &*t.store;
    s.set_secret(&who(), "API_KEY", "k").await.unwrap();
    s.set_secret(&who(), "OTHER", "o").await.unwrap();
    s.create_tool(
        &who(),
        "t",
        spec_with_secrets("1", &["API_KEY", "MISSING"]),
        LIVE,
    )
    .await
    .unwrap();
    let before = s.current_seq().await.unwrap();
    // Not declared by the version: refused, whatever the admin wants.
    let e = s.grant_secret(&who(), "OTHER", "t", 1).await.unwrap_err();
    assert!(
        matches!(&e, StoreError::Invalid { field, .. } if field == "secret"),
        "{e:?}"
    );
    // Declared but not set.
    assert!(matches!(
        s.grant_secret(&who(), "MISSING", "t", 1).await,
        Err(StoreError::NotFound {
            kind: NameKind::Secret,
            ..
        })
    ));
    // No such version or tool.
    assert!(matches!(
        s.grant_secret(&who(), "API_KEY", "t", 2).await,
        Err(StoreError::NotFound {
            version: Some(2),
            ..
        })
    ));
    assert!(matches!(
        s.grant_secret(&who(), "API_KEY", "ghost", 1).await,
        Err(StoreError::NotFound { .. })
    ));
    assert!(matches!(
        s.secret_requests("t", 9).await,
        Err(StoreError::NotFound {
            version: Some(9),
            ..
        })
    ));
    assert!(matches!(
        s.granted_secrets("t", 9).await,
        Err(StoreError::NotFound {
            version: Some(9),
            ..
        })
    ));
    let requests = s.secret_requests("t", 1).await.unwrap();
    assert_eq!(
        requests
            .iter()
            .map(|r| (r.secret.as_str(), r.exists))
            .collect::<Vec<_>>(),
        [("API_KEY", true), ("MISSING", false)]
    );
    assert_eq!(
        s.current_seq().await.unwrap(),
        before,
        "failed grants change nothing"
    );
    assert!(s.grants(None, None).await.unwrap().is_empty());

    // Granting twice is one grant; the second changes nothing.
    assert!(s.grant_secret(&who(), "API_KEY", "t", 1).await.unwrap());
    let seq = s.current_seq().await.unwrap();
    assert!(!s.grant_secret(&who(), "API_KEY", "t", 1).await.unwrap());
    assert_eq!(s.current_seq().await.unwrap(), seq);

    // Revoking: once, then not found.
    s.revoke_secret(&who(), "API_KEY", "t", 1).await.unwrap();
    assert!(granted(s, "t", 1).await.is_empty());
    let e = s
        .revoke_secret(&who(), "API_KEY", "t", 1)
        .await
        .unwrap_err();
    assert!(
        matches!(
            &e,
            StoreError::NotFound {
                kind: NameKind::Grant,
                version: Some(1),
                ..
            }
        ),
        "{e:?}"
    );
    assert_eq!(
        e.to_string(),
        "secret grant \"API_KEY for t\" version 1 not found"
    );
    }
}

each_backend! {
    async fn versions_that_are_not_live_get_no_secrets(kind) {
    let t = TestStore::new(kind).await;
    let s = &*t.store;
    s.set_secret(&who(), "API_KEY", "k").await.unwrap();
    s.create_tool(&who(), "t", spec_with_secrets("1", &["API_KEY"]), LIVE)
        .await
        .unwrap();
    let pending = spec_with_secrets("2", &["API_KEY"]);
    s.add_version(&actor("token:writer"), "t", pending, NewStatus::Pending)
        .await
        .unwrap();
    // An admin may grant a pending version ahead of approval; it still gets nothing.
    s.grant_secret(&who(), "API_KEY", "t", 2).await.unwrap();
    assert!(granted(s, "t", 2).await.is_empty());
    let draft = NewStatus::Draft {
        reason: "example 0 failed".into(),
    };
    s.add_version(&who(), "t", spec_with_secrets("3", &["API_KEY"]), draft)
        .await
        .unwrap();
    s.grant_secret(&who(), "API_KEY", "t", 3).await.unwrap();
    assert!(granted(s, "t", 3).await.is_empty());
    // Once approved, the grant applies.
    s.approve(&who(), "t", 2, &[]).await.unwrap();
    assert_eq!(granted(s, "t", 2).await, values(&[("API_KEY", "k")]));
    // Rejected: nothing again.
    s.reject(&who(), "t", 3, "no").await.unwrap();
    assert!(granted(s, "t", 3).await.is_empty());
    }
}

each_backend! {
    async fn deleting_a_secret_deletes_its_grants_and_purging_a_tool_its_versions_grants(kind) {
    let t = TestStore::new(kind).await;
    let s = &*t.store;
    s.set_secret(&who(), "API_KEY", "k").await.unwrap();
    for tool in ["a", "b"] {
        s.create_tool(&who(), tool, spec_with_secrets(tool, &["API_KEY"]), LIVE)
            .await
            .unwrap();
        s.grant_secret(&who(), "API_KEY", tool, 1).await.unwrap();
    }
    let seen = s.current_seq().await.unwrap();
    s.delete_secret(&who(), "API_KEY").await.unwrap();
    assert!(s.grants(None, None).await.unwrap().is_empty());
    // The secret's change and a grant change per tool that lost one.
    let set = s.changes_since(seen).await.unwrap();
    let keys: Vec<(ChangeKind, &str)> = set
        .changes
        .iter()
        .map(|c| (c.kind, c.key.as_str()))
        .collect();
    assert_eq!(
        keys,
        [
            (ChangeKind::Secret, "API_KEY"),
            (ChangeKind::Grant, "a"),
            (ChangeKind::Grant, "b")
        ]
    );
    // A secret set again under the same name is not granted to anyone.
    s.set_secret(&who(), "API_KEY", "k2").await.unwrap();
    assert!(granted(s, "a", 1).await.is_empty());

    s.grant_secret(&who(), "API_KEY", "a", 1).await.unwrap();
    let seen = s.current_seq().await.unwrap();
    s.purge(&who(), "a").await.unwrap();
    assert!(s.grants(None, None).await.unwrap().is_empty());
    let set = s.changes_since(seen).await.unwrap();
    let keys: Vec<(ChangeKind, &str)> = set
        .changes
        .iter()
        .map(|c| (c.kind, c.key.as_str()))
        .collect();
    assert_eq!(keys, [(ChangeKind::Tool, "a"), (ChangeKind::Grant, "a")]);
    // A tool created again under the name starts without grants.
    s.create_tool(&who(), "a", spec_with_secrets("again", &["API_KEY"]), LIVE)
        .await
        .unwrap();
    assert!(granted(s, "a", 1).await.is_empty());
    }
}

each_backend! {
    async fn grants_are_changes_of_their_own_kind_keyed_by_tool(kind) {
    let t = TestStore::new(kind).await;
    let s = &*t.store;
    s.set_secret(&who(), "API_KEY", "k").await.unwrap();
    s.create_tool(&who(), "t", spec_with_secrets("1", &["API_KEY"]), LIVE)
        .await
        .unwrap();
    let seen = s.current_seq().await.unwrap();
    s.grant_secret(&who(), "API_KEY", "t", 1).await.unwrap();
    let set = s.changes_since(seen).await.unwrap();
    assert_eq!(set.keys(ChangeKind::Grant).collect::<Vec<_>>(), ["t"]);
    assert!(!set.touches(ChangeKind::Tool) && !set.touches(ChangeKind::Secret));
    let seen = set.seq;
    s.revoke_secret(&who(), "API_KEY", "t", 1).await.unwrap();
    let set = s.changes_since(seen).await.unwrap();
    assert_eq!(set.keys(ChangeKind::Grant).collect::<Vec<_>>(), ["t"]);
    // Reading grants and requests changes nothing.
    let seen = set.seq;
    s.grants(None, None).await.unwrap();
    s.secret_requests("t", 1).await.unwrap();
    s.granted_secrets("t", 1).await.unwrap();
    assert!(s.changes_since(seen).await.unwrap().is_empty());
    }
}

each_backend! {
    async fn a_pack_import_makes_no_grants(kind) {
    let t = TestStore::new(kind).await;
    let s = &*t.store;
    s.set_secret(&who(), "API_KEY", "k").await.unwrap();
    let batch = ImportBatch {
        tools: vec![("packed".into(), spec_with_secrets("p", &["API_KEY"]))],
        ..ImportBatch::default()
    };
    s.import(&who(), batch).await.unwrap();
    assert!(s.grants(None, None).await.unwrap().is_empty());
    assert!(granted(s, "packed", 1).await.is_empty());
    let requests = s.secret_requests("packed", 1).await.unwrap();
    assert_eq!(requests.len(), 1);
    assert!(requests[0].exists && requests[0].grant.is_none());
    }
}
