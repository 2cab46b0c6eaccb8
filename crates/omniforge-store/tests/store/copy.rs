//! Whole-store copies between backends (`copy_store`, what `omniforge migrate` uses): the copy
//! answers every trait method exactly as the original, SQLite → PostgreSQL and back; a copy
//! into a store that is not empty is refused.

use std::collections::BTreeMap;

use std::time::Duration;

use omniforge_store::{
    ArgumentsDigest, AuditFilter, CallFilter, CallOutcome, CallRecord, CallSource, CapturedText,
    ExampleResult, ExampleTrigger, ImportBatch, Keyring, NewKeptOutput, NewPrompt, NewResource,
    NewStatus, NewTask, NewTemplate, NewVersion, OutputReader, PromptArgumentSpec, ResourceBody,
    ScriptSpec, StoreConfig, StoreError, TaskEnd, TemplateBody, VersionStatus, WriteMode,
    copy_store,
};
use omniforge_store::{
    AuditLog as _, CallLog as _, ContentStore as _, Engine, OutputStore as _, SecretStore as _,
    TaskStore as _, ToolStore as _,
};
use serde_json::json;

use crate::calls::call;
use crate::util::{Kind, LIVE, TestStore, config, object, spec, spec_with_secrets, who};

fn now_ms() -> i64 {
    i64::try_from(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis(),
    )
    .unwrap()
}

/// A store with something in every table: versions in every status, a rollback, a disabled
/// and a purged tool, example results, calls of every source and outcome (some in the hours
/// kept), secrets (one with odd characters) and grants, audit records and a retention cut, kept
/// outputs, text and blob resources, templates with scripts, prompts, and a change log pruned
/// to 5 rows (floors set).
async fn fill(s: &Engine) {
    let w = who();
    s.create_tool(
        &w,
        "alpha",
        spec_with_secrets("a1", &["API_TOKEN", "ODD"]),
        LIVE,
    )
    .await
    .unwrap();
    let with_example = NewVersion {
        examples: vec![object(json!({"arguments": {"q": "x"}, "expect": "ok"}))],
        ..spec("a2")
    };
    s.add_version(&w, "alpha", with_example, LIVE)
        .await
        .unwrap();
    s.add_version(&w, "alpha", spec("a3"), LIVE).await.unwrap();
    s.rollback(&w, "alpha", 2).await.unwrap();
    s.add_version(&w, "alpha", spec("a4"), NewStatus::Pending)
        .await
        .unwrap();
    s.add_version(
        &w,
        "alpha",
        spec("a5"),
        NewStatus::Draft {
            reason: "no".into(),
        },
    )
    .await
    .unwrap();
    s.create_tool(&w, "beta", spec("b1"), LIVE).await.unwrap();
    s.set_enabled(&w, "beta", false).await.unwrap();
    s.create_tool(&w, "waiting", spec("w1"), NewStatus::Pending)
        .await
        .unwrap();
    s.create_tool(&w, "gone", spec("g1"), LIVE).await.unwrap();
    s.purge(&w, "gone").await.unwrap();
    let result = ExampleResult {
        index: 0,
        passed: false,
        actual: "nope".into(),
        failure: Some("expected ok".into()),
        trigger: ExampleTrigger::Update,
        ran_by: "tester".into(),
        ran_at_ms: 1_700_000_000_000,
    };
    s.record_example_results("alpha", 2, vec![result])
        .await
        .unwrap();
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
    let now = now_ms();
    for (source, tool, version) in [
        (CallSource::BuiltIn, "omniforge_list", None),
        (CallSource::Manifest, "svc.Get", None),
        (CallSource::Stored, "alpha", Some(2)),
    ] {
        s.record_call(CallRecord {
            source,
            tool: tool.into(),
            version,
            started_at_ms: now - 1000,
            arguments: Some(ArgumentsDigest {
                sha256: "ab".repeat(32),
                bytes: 12,
            }),
            arguments_text: Some(CapturedText {
                text: "{\"q\":1}".into(),
                total_bytes: 7,
            }),
            ..call(tool, 1, 4)
        })
        .await
        .unwrap();
    }
    s.set_secret(&w, "API_TOKEN", "t0ken").await.unwrap();
    s.set_secret(&w, "ODD", "line1\nline2 ' \" ünï \u{0} end")
        .await
        .unwrap();
    s.grant_secret(&w, "API_TOKEN", "alpha", 1).await.unwrap();
    s.grant_secret(&w, "ODD", "alpha", 1).await.unwrap();
    s.keep_output(NewKeptOutput {
        run_id: "run-1".into(),
        owner: "tester".into(),
        tool: "alpha".into(),
        stdout: "out ünï".into(),
        stderr: "err".into(),
        ttl: Duration::from_secs(3600),
    })
    .await
    .unwrap();
    for (id, source, tool, version) in [
        ("task-done", CallSource::Stored, "alpha", Some(1)),
        ("task-asking", CallSource::Manifest, "svc_Echo", None),
    ] {
        s.create_task(NewTask {
            task_id: id.into(),
            owner: "tester".into(),
            source,
            tool: tool.into(),
            version,
            replica: "replica-a".into(),
            ttl: Some(Duration::from_secs(3600)),
            poll_interval: Duration::from_millis(500),
            lease: Duration::from_secs(30),
        })
        .await
        .unwrap();
    }
    let result =
        object(json!({"content": [{"type": "text", "text": "done ünï"}], "isError": false}));
    s.finish_task("task-done", "replica-a", TaskEnd::Completed(result), None)
        .await
        .unwrap();
    let ask = object(json!({"confirm": {"method": "elicitation/create", "params": {}}}));
    s.require_task_input("task-asking", "replica-a", ask, Some("waits"))
        .await
        .unwrap();
    s.prune_audit(&w, 1).await.unwrap();
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
            ..script.clone()
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
        script: None,
        completion_script: None,
    };
    s.import(
        &w,
        ImportBatch {
            tools: vec![("gamma".into(), spec("c1"))],
            resources: vec![text, blob],
            templates: vec![template],
            prompts: vec![
                prompt.clone(),
                NewPrompt {
                    name: "ask".into(),
                    messages: vec![],
                    script: Some(ScriptSpec {
                        env_id: "env-prompt".into(),
                        ..script.clone()
                    }),
                    ..prompt.clone()
                },
            ],
        },
    )
    .await
    .unwrap();
    s.put_resource(
        &w,
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

/// Everything the traits answer about a store, as one comparable text: every read method of
/// every trait. `secrets()` differs in its key ids only when the keyrings do; `mask` blanks
/// them.
async fn answers(s: &Engine) -> String {
    let mut out = String::new();
    let mut line = |what: &str, value: String| out.push_str(&format!("{what}: {value}\n"));
    line(
        "list_enabled",
        format!("{:?}", s.list_enabled().await.unwrap()),
    );
    line("tools", format!("{:?}", s.tools().await.unwrap()));
    for status in [
        VersionStatus::Live,
        VersionStatus::Pending,
        VersionStatus::Draft,
        VersionStatus::Rejected,
    ] {
        line(
            "versions_with_status",
            format!("{:?}", s.versions_with_status(status, None).await.unwrap()),
        );
    }
    for name in ["alpha", "beta", "gamma", "gone", "waiting"] {
        line("get", format!("{:?}", s.get(name).await.unwrap()));
        line("tool", format!("{:?}", s.tool(name).await.unwrap()));
        line(
            "versions",
            format!("{:?}", s.versions(name).await.map_err(|e| e.to_string())),
        );
        for v in 1..=6 {
            line(
                "version",
                format!("{:?}", s.version(name, v).await.map_err(|e| e.to_string())),
            );
            line(
                "example_results",
                format!(
                    "{:?}",
                    s.example_results(name, v).await.map_err(|e| e.to_string())
                ),
            );
            line(
                "secret_requests",
                format!(
                    "{:?}",
                    s.secret_requests(name, v).await.map_err(|e| e.to_string())
                ),
            );
            let granted = s.granted_secrets(name, v).await.map(|m| {
                let mut v: Vec<_> = m
                    .iter()
                    .map(|(k, v)| (k.clone(), v.expose().to_owned()))
                    .collect();
                v.sort();
                v
            });
            line(
                "granted_secrets",
                format!("{:?}", granted.map_err(|e| e.to_string())),
            );
        }
        line(
            "recent_calls",
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
    let infos: Vec<_> = s
        .secrets()
        .await
        .unwrap()
        .into_iter()
        .map(|i| (i.name, i.updated_at_ms, i.key_id.is_some()))
        .collect();
    line("secrets", format!("{infos:?}"));
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
        "grants",
        format!("{:?}", s.grants(None, None).await.unwrap()),
    );
    line(
        "calls",
        format!(
            "{:?}",
            s.calls(&CallFilter {
                limit: 100,
                ..CallFilter::default()
            })
            .await
            .unwrap()
        ),
    );
    for id in 0..12 {
        line("call", format!("{:?}", s.call(id).await.unwrap()));
    }
    line(
        "call_hours",
        format!("{:?}", s.call_hours(None, 0).await.unwrap()),
    );
    line(
        "call_hours alpha",
        format!(
            "{:?}",
            s.call_hours(Some((CallSource::Stored, "alpha")), 0)
                .await
                .unwrap()
        ),
    );
    line(
        "call_activity",
        format!("{:?}", s.call_activity(0).await.unwrap()),
    );
    line(
        "audit",
        format!(
            "{:?}",
            s.audit(&AuditFilter {
                limit: 1000,
                ..AuditFilter::default()
            })
            .await
            .unwrap()
        ),
    );
    for principal in ["tester", "other"] {
        let reader = OutputReader {
            principal,
            read_all: false,
        };
        line(
            "kept_output",
            format!("{:?}", s.kept_output("run-1", reader).await.unwrap()),
        );
    }
    for id in ["task-done", "task-asking"] {
        line("task", format!("{:?}", s.task(id, "tester").await.unwrap()));
    }
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
    line(
        "template",
        format!("{:?}", s.get_template("test://t/{id}").await.unwrap()),
    );
    line("prompts", format!("{:?}", s.list_prompts().await.unwrap()));
    line(
        "prompt",
        format!("{:?}", s.get_prompt("greet").await.unwrap()),
    );
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

/// The target's settings: another keyring, so the copy must open and seal again.
fn other_ring() -> StoreConfig {
    StoreConfig {
        keyring: Some(Keyring::from_keys(vec![("target-key".into(), [9; 32])]).unwrap()),
        ..small_feed()
    }
}

async fn round_trip(from: Kind, to: Kind) {
    let source = TestStore::with(from, small_feed()).await;
    fill(&source.store).await;
    let target = TestStore::with(to, other_ring()).await;
    let report = copy_store(&*source.store, &*target.store).await.unwrap();
    assert_eq!(
        (
            report.tools,
            report.versions,
            report.calls,
            report.secrets,
            report.grants,
            report.outputs,
            report.tasks,
            report.content
        ),
        (4, 8, 7, 2, 2, 1, 2, 6)
    );
    assert!(report.audit > 10 && report.hours == 3, "{report:?}");
    // Sealed again under the target's key: its key ids name the target's key.
    for info in target.store.secrets().await.unwrap() {
        assert_eq!(info.key_id.as_deref(), Some("target-key"));
    }
    let want = answers(&source.store).await;
    assert_eq!(answers(&target.store).await, want);
    // Reopened, the copy still answers the same (nothing lived only in the instance).
    let reopened = target.open_with(&other_ring()).await;
    assert_eq!(answers(&reopened).await, want);

    // Both go on alike: the next change takes the same seq and number, the next call is kept
    // after the copied ones (only the new rows' times differ).
    let seq = source.store.current_seq().await.unwrap();
    let mut after = vec![];
    for s in [&source.store, &target.store] {
        let v = s
            .add_version(&who(), "gamma", spec("c2"), LIVE)
            .await
            .unwrap();
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
    fill(&t.store).await;
    let dest = t.dir.path().join("backup.db");
    t.store.backup(&dest).await.unwrap();
    let copy = crate::util::open_url(&format!("sqlite:{}", dest.display()), &config()).await;
    assert_eq!(answers(&copy).await, answers(&t.store).await);
}
