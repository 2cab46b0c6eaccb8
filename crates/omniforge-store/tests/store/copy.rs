//! Whole-store copies between backends (`copy_store`, what `omniforge migrate` uses): the copy
//! answers every trait method exactly as the original, SQLite → PostgreSQL and back; a copy
//! into a store that is not empty is refused.

use std::collections::BTreeMap;

use omniforge_store::{
    Backend, CallOutcome, CallRecord, ImportBatch, NewPrompt, NewResource, NewTemplate,
    PromptArgumentSpec, ResourceBody, ScriptSpec, StoreConfig, StoreError, TemplateBody, WriteMode,
    copy_store,
};
use serde_json::json;

use crate::calls::call;
use crate::util::{Kind, TestStore, config, spec};

/// A store with something in every table: versions, a rollback, a disabled and a purged tool,
/// calls of every outcome, secrets (one with odd characters), text and blob resources,
/// templates with scripts, prompts, and a change log pruned to 5 rows (floors set).
async fn fill(s: &dyn Backend) {
    s.create_tool("alpha", spec("a1")).await.unwrap();
    s.add_version("alpha", spec("a2")).await.unwrap();
    s.add_version("alpha", spec("a3")).await.unwrap();
    s.rollback("alpha", 2).await.unwrap();
    s.create_tool("beta", spec("b1")).await.unwrap();
    s.set_enabled("beta", false).await.unwrap();
    s.create_tool("gone", spec("g1")).await.unwrap();
    s.purge("gone").await.unwrap();
    for (i, outcome) in [CallOutcome::Ok, CallOutcome::Exit(3), CallOutcome::Timeout]
        .into_iter()
        .enumerate()
    {
        s.record_call(CallRecord {
            outcome,
            ..call("alpha", 2, i as u64)
        })
        .await
        .unwrap();
    }
    s.record_call(call("beta", 1, 9)).await.unwrap();
    s.set_secret("API_TOKEN", "t0ken").await.unwrap();
    s.set_secret("ODD", "line1\nline2 ' \" ünï \u{0} end")
        .await
        .unwrap();
    let text = NewResource {
        uri: "test://readme".into(),
        name: "readme".into(),
        title: Some("Read me".into()),
        description: None,
        mime_type: Some("text/markdown".into()),
        body: ResourceBody::Text("# hi".into()),
    };
    let blob = NewResource {
        uri: "test://bytes".into(),
        body: ResourceBody::Blob((0..=255).collect()),
        ..text.clone()
    };
    let script = ScriptSpec {
        code: "print(1)".into(),
        dependencies: vec!["httpx".into()],
        lock: "httpx==1 --hash=sha256:x\n".into(),
        env_id: "env-template".into(),
        timeout_ms: 1000,
        memory_bytes: 1 << 20,
        network: false,
    };
    let template = NewTemplate {
        uri_template: "test://t/{id}".into(),
        name: "tpl".into(),
        title: None,
        description: Some("d".into()),
        mime_type: None,
        body: TemplateBody::Script(script.clone()),
        completions: BTreeMap::from([("id".into(), vec!["1".into()])]),
        completion_script: Some(ScriptSpec {
            env_id: "env-completion".into(),
            ..script
        }),
    };
    let prompt = NewPrompt {
        name: "greet".into(),
        title: Some("Greet".into()),
        description: None,
        arguments: vec![PromptArgumentSpec {
            name: "who".into(),
            title: None,
            description: None,
            required: true,
            values: vec!["world".into()],
        }],
        messages: vec![json!({"role": "user", "content": {"type": "text", "text": "Hi {who}"}})],
        completion_script: None,
    };
    s.import(ImportBatch {
        tools: vec![("gamma".into(), spec("c1"))],
        resources: vec![text, blob],
        templates: vec![template],
        prompts: vec![prompt],
    })
    .await
    .unwrap();
    s.put_resource(
        NewResource {
            uri: "test://later".into(),
            name: "later".into(),
            title: None,
            description: None,
            mime_type: None,
            body: ResourceBody::Text("x".into()),
        },
        WriteMode::Create,
    )
    .await
    .unwrap();
}

/// Everything the traits answer about a store, as one comparable text.
async fn answers(s: &dyn Backend) -> String {
    let mut out = String::new();
    let mut line = |what: &str, value: String| out.push_str(&format!("{what}: {value}\n"));
    line(
        "list_enabled",
        format!("{:?}", s.list_enabled().await.unwrap()),
    );
    for name in ["alpha", "beta", "gamma", "gone"] {
        line("get", format!("{:?}", s.get(name).await.unwrap()));
        line(
            "versions",
            format!("{:?}", s.versions(name).await.map_err(|e| e.to_string())),
        );
        line(
            "calls",
            format!(
                "{:?}",
                s.recent_calls(name, 100).await.map_err(|e| e.to_string())
            ),
        );
    }
    let mut env_ids: Vec<_> = s.env_ids_in_use().await.unwrap().into_iter().collect();
    env_ids.sort();
    line("env_ids", format!("{env_ids:?}"));
    line(
        "secret_names",
        format!("{:?}", s.secret_names().await.unwrap()),
    );
    line("secrets", format!("{:?}", s.secrets().await.unwrap()));
    let values = s
        .secret_values(&["API_TOKEN".into(), "ODD".into(), "NONE".into()])
        .await
        .unwrap();
    let mut values: Vec<_> = values
        .iter()
        .map(|(k, v)| (k.clone(), v.expose().to_owned()))
        .collect();
    values.sort();
    line("secret_values", format!("{values:?}"));
    line(
        "resources",
        format!("{:?}", s.list_resources().await.unwrap()),
    );
    for uri in ["test://readme", "test://bytes", "test://later"] {
        line(
            "resource",
            format!("{:?}", s.get_resource(uri).await.unwrap()),
        );
    }
    line(
        "templates",
        format!("{:?}", s.list_templates().await.unwrap()),
    );
    line("prompts", format!("{:?}", s.list_prompts().await.unwrap()));
    line(
        "current_seq",
        format!("{:?}", s.current_seq().await.unwrap()),
    );
    line(
        "data_version",
        format!("{:?}", s.data_version().await.unwrap()),
    );
    for seq in 0..=s.current_seq().await.unwrap() + 1 {
        line(
            "changes_since",
            format!("{seq} {:?}", s.changes_since(seq).await.unwrap()),
        );
    }
    out
}

fn small_feed() -> StoreConfig {
    StoreConfig {
        change_log_max_rows: 5,
        ..config()
    }
}

async fn round_trip(from: Kind, to: Kind) {
    let source = TestStore::with(from, small_feed()).await;
    fill(&*source.store).await;
    let target = TestStore::with(to, small_feed()).await;
    let report = copy_store(&*source.store, &*target.store).await.unwrap();
    assert_eq!(
        (
            report.tools,
            report.versions,
            report.calls,
            report.secrets,
            report.content
        ),
        (3, 5, 4, 2, 5)
    );
    let want = answers(&*source.store).await;
    assert_eq!(answers(&*target.store).await, want);
    // Reopened, the copy still answers the same (nothing lived only in the instance).
    let reopened = target.open_with(&small_feed()).await;
    assert_eq!(answers(&*reopened).await, want);

    // Both go on alike: the next change takes the same seq and number, the next call is kept
    // after the copied ones (only the new rows' times differ).
    let seq = source.store.current_seq().await.unwrap();
    let mut after = vec![];
    for s in [&source.store, &target.store] {
        let v = s.add_version("gamma", spec("c2")).await.unwrap();
        s.record_call(call("gamma", 2, 7)).await.unwrap();
        after.push((
            v.number,
            s.current_seq().await.unwrap(),
            s.changes_since(seq).await.unwrap().changes[0].key.clone(),
            s.recent_calls("gamma", 10).await.unwrap(),
            s.recent_calls("alpha", 10).await.unwrap(),
        ));
    }
    assert_eq!(after[0], after[1]);
    assert_eq!(after[1].1, seq + 1);

    // A copy only goes into an empty store.
    let e = copy_store(&*source.store, &*target.store)
        .await
        .unwrap_err();
    assert!(matches!(e, StoreError::Conflict { .. }), "{e:?}");
}

#[tokio::test]
async fn sqlite_to_postgres_answers_exactly_like_the_original() {
    round_trip(Kind::Sqlite, Kind::Postgres).await;
}

#[tokio::test]
async fn postgres_to_sqlite_answers_exactly_like_the_original() {
    round_trip(Kind::Postgres, Kind::Sqlite).await;
}

#[tokio::test]
async fn a_postgres_backup_is_a_sqlite_file_that_answers_the_same() {
    let t = TestStore::new(Kind::Postgres).await;
    fill(&*t.store).await;
    let dest = t.dir.path().join("backup.db");
    t.store.backup(&dest).await.unwrap();
    let copy = crate::util::open(&format!("sqlite:{}", dest.display()), &config()).await;
    assert_eq!(answers(&*copy).await, answers(&*t.store).await);
}
