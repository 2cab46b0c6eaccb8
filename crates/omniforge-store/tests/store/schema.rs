//! The schema's own rules, the same on both backends: what the triggers and checks refuse when
//! another program writes the database directly, and text with a NUL character, which both
//! backends refuse alike with a typed error.

use omniforge_store::{ContentStore as _, SecretStore as _, ToolStore as _};
use omniforge_store::{NewResource, NewVersion, ResourceBody, StoreError, WriteMode};

use crate::util::{LIVE, TestStore, each_backend, spec, who};

each_backend! {
    async fn direct_writes_break_no_rule(kind) {
        let t = TestStore::new(kind).await;
        let s = &t.store;
        s.create_tool(&who(), "t", spec("1"), LIVE).await.unwrap();
        s.add_version(&who(), "t", spec("2"), omniforge_store::NewStatus::Pending)
            .await
            .unwrap();
        let refused = [
            // Versions are immutable but for their status.
            "UPDATE tool_version SET code = 'x' WHERE tool = 't' AND number = 1",
            // Status only goes pending -> live | rejected, with who and when.
            "UPDATE tool_version SET status = 'draft' WHERE tool = 't' AND number = 2",
            "UPDATE tool_version SET status = 'live' WHERE tool = 't' AND number = 2",
            // The current version is a live one.
            "UPDATE tool SET current_version = 2 WHERE name = 't'",
            // The audit log is append-only, and its cut only moves forward.
            "UPDATE audit_log SET principal = 'someone else'",
            "DELETE FROM audit_log",
            "UPDATE meta SET value = -1 WHERE key = 'audit_pruned_before_ms'",
            "DELETE FROM meta WHERE key = 'audit_pruned_before_ms'",
        ];
        for sql in refused {
            assert!(t.exec(sql).await.is_err(), "{kind:?} allowed {sql}");
        }
        assert_eq!(t.count("SELECT count(*) FROM audit_log").await, 2);
        // What the rules allow still works.
        t.exec(
            "UPDATE tool_version SET status = 'rejected', status_by = 'x', status_at_ms = 1 \
             WHERE tool = 't' AND number = 2",
        )
        .await
        .unwrap();
    }
}

each_backend! {
    async fn text_with_nul_is_refused_alike(kind) {
        let t = TestStore::new(kind).await;
        let s = &t.store;
        let bad = NewVersion {
            code: "print(1)\u{0}".into(),
            ..spec("1")
        };
        let e = s.create_tool(&who(), "t", bad, LIVE).await.unwrap_err();
        assert!(
            matches!(&e, StoreError::Invalid { reason, .. } if reason.contains("NUL")),
            "{e:?}"
        );
        let e = s
            .put_resource(
                &who(),
                NewResource {
                    uri: "test://x".into(),
                    name: "x".into(),
                    title: None,
                    description: Some("a\u{0}b".into()),
                    mime_type: None,
                    body: ResourceBody::Text("t".into()),
                },
                WriteMode::Upsert,
            )
            .await
            .unwrap_err();
        assert!(matches!(e, StoreError::Invalid { .. }), "{e:?}");
        // Nothing was written, and NUL inside JSON (escaped as \u0000) and in secret values
        // (sealed bytes) is fine on both.
        assert!(s.tools().await.unwrap().is_empty());
        assert_eq!(s.current_seq().await.unwrap(), 0);
        let json_nul = NewVersion {
            description: "schema with a NUL in a string".into(),
            input_schema: crate::util::object(serde_json::json!({"type": "object", "description": "a\u{0}b"})),
            ..spec("2")
        };
        s.create_tool(&who(), "t", json_nul.clone(), LIVE).await.unwrap();
        assert_eq!(s.get("t").await.unwrap().unwrap().current.spec, json_nul);
        s.set_secret(&who(), "S", "a\u{0}b").await.unwrap();
        let values = s.secret_values(&["S".into()]).await.unwrap();
        assert_eq!(values["S"].expose(), "a\u{0}b");
    }
}
