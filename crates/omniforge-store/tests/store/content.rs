//! Resources, resource templates and prompts, and pack imports: create/update/delete rules,
//! the change counter, idempotence and all-or-nothing imports.

// The test bodies live in `each_backend!` modules, which see these imports through
// `use super::*`; rustc counts such uses only partly.
#![allow(unused_imports)]

use std::collections::BTreeMap;

use omniforge_store::{
    ContentStore, ImportBatch, NameKind, NewPrompt, NewResource, NewTemplate, PromptArgumentSpec,
    ResourceBody, ScriptSpec, StoreError, TemplateBody, ToolStore, WriteMode,
};
use serde_json::json;

use crate::util::{Kind, TestStore, each_backend, enabled, spec, who};

fn resource(uri: &str, text: &str) -> NewResource {
    NewResource {
        uri: uri.into(),
        name: uri.rsplit('/').next().unwrap_or(uri).into(),
        title: Some("T".into()),
        description: None,
        mime_type: Some("text/plain".into()),
        body: ResourceBody::Text(text.into()),
    }
}

fn template(uri_template: &str) -> NewTemplate {
    NewTemplate {
        uri_template: uri_template.into(),
        name: "tpl".into(),
        title: None,
        description: Some("d".into()),
        mime_type: Some("application/json".into()),
        body: TemplateBody::Script(ScriptSpec {
            code: "print(1)".into(),
            dependencies: vec![],
            lock: String::new(),
            env_id: "env-template".into(),
            timeout_ms: 1000,
            memory_bytes: 1 << 20,
            network: false,
        }),
        completions: BTreeMap::from([("id".into(), vec!["1".into(), "2".into()])]),
        completion_script: None,
    }
}

fn prompt(name: &str, text: &str) -> NewPrompt {
    NewPrompt {
        name: name.into(),
        title: None,
        description: Some("p".into()),
        arguments: vec![PromptArgumentSpec {
            name: "a".into(),
            title: None,
            description: None,
            required: true,
            values: vec!["x".into()],
        }],
        messages: vec![json!({"role": "user", "content": {"type": "text", "text": text}})],
        script: None,
        completion_script: None,
    }
}

each_backend! {
    async fn writes_follow_their_mode_and_bump_the_counter_only_on_change(kind) {
    let t = TestStore::new(kind).await;
    let s = &*t.store;
    let v0 = s.data_version().await.unwrap();
    assert!(
        s.put_resource(&who(), resource("test://a", "one"), WriteMode::Create)
            .await
            .unwrap()
    );
    let v1 = s.data_version().await.unwrap();
    assert!(v1 > v0);
    let err = s
        .put_resource(&who(), resource("test://a", "two"), WriteMode::Create)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, StoreError::Duplicate { kind: NameKind::Resource, name } if name == "test://a"),
        "{err:?}"
    );
    let err = s
        .put_resource(&who(), resource("test://missing", "x"), WriteMode::Update)
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            StoreError::NotFound {
                kind: NameKind::Resource,
                ..
            }
        ),
        "{err:?}"
    );
    // The same content again: nothing changes, the counter stays.
    assert!(
        !s.put_resource(&who(), resource("test://a", "one"), WriteMode::Upsert)
            .await
            .unwrap()
    );
    assert_eq!(s.data_version().await.unwrap(), v1);
    let before = s.list_resources().await.unwrap()[0].state;
    assert!(
        s.put_resource(&who(), resource("test://a", "two!"), WriteMode::Update)
            .await
            .unwrap()
    );
    let after = s.list_resources().await.unwrap()[0].clone();
    assert!(after.state.updated_seq > before.updated_seq);
    assert_eq!(after.state.created_at_ms, before.created_at_ms);
    assert_eq!(after.size, 4);
    let stored = s.get_resource("test://a").await.unwrap().unwrap();
    assert_eq!(stored.spec.body, ResourceBody::Text("two!".into()));

    // Blobs keep their bytes exactly.
    let bytes: Vec<u8> = (0..=255).collect();
    let mut blob = resource("test://b", "");
    blob.body = ResourceBody::Blob(bytes.clone());
    s.put_resource(&who(), blob, WriteMode::Create)
        .await
        .unwrap();
    let stored = s.get_resource("test://b").await.unwrap().unwrap();
    assert_eq!(stored.spec.body, ResourceBody::Blob(bytes));
    assert!(!s.list_resources().await.unwrap()[1].is_text);

    s.delete_resource(&who(), "test://a").await.unwrap();
    assert!(s.get_resource("test://a").await.unwrap().is_none());
    let err = s.delete_resource(&who(), "test://a").await.unwrap_err();
    assert!(matches!(err, StoreError::NotFound { .. }), "{err:?}");
    }
}

each_backend! {
    async fn templates_and_prompts_round_trip_and_count_their_envs(kind) {
    let t = TestStore::new(kind).await;
    let s = &*t.store;
    let tpl = template("test://t/{id}");
    s.put_template(&who(), tpl.clone(), WriteMode::Create)
        .await
        .unwrap();
    let listed = s.list_templates().await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].spec, tpl);
    assert!(s.env_ids_in_use().await.unwrap().contains("env-template"));

    let p = prompt("greet", "Hello {a}");
    s.put_prompt(&who(), p.clone(), WriteMode::Create)
        .await
        .unwrap();
    assert_eq!(s.list_prompts().await.unwrap()[0].spec, p);
    // A script prompt keeps its script (and no messages); its environment counts as in use.
    let scripted = NewPrompt {
        name: "ask".into(),
        messages: vec![],
        script: Some(ScriptSpec {
            code: "print('[]')".into(),
            dependencies: vec!["httpx".into()],
            lock: "httpx==1 --hash=sha256:x\n".into(),
            env_id: "env-prompt".into(),
            timeout_ms: 2000,
            memory_bytes: 1 << 20,
            network: true,
        }),
        ..p.clone()
    };
    s.put_prompt(&who(), scripted.clone(), WriteMode::Create)
        .await
        .unwrap();
    assert_eq!(s.get_prompt("ask").await.unwrap().unwrap().spec, scripted);
    assert!(s.env_ids_in_use().await.unwrap().contains("env-prompt"));
    assert_ne!(
        omniforge_store::digest::prompt_sha256(&scripted),
        omniforge_store::digest::prompt_sha256(&NewPrompt { script: None, ..scripted.clone() }),
        "the script is part of the digest"
    );
    s.delete_prompt(&who(), "ask").await.unwrap();
    assert!(!s.env_ids_in_use().await.unwrap().contains("env-prompt"));
    let err = s
        .put_prompt(&who(), prompt("bad name", "x"), WriteMode::Create)
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            StoreError::InvalidName {
                kind: NameKind::Prompt,
                ..
            }
        ),
        "{err:?}"
    );
    s.delete_template(&who(), "test://t/{id}").await.unwrap();
    s.delete_prompt(&who(), "greet").await.unwrap();
    assert!(s.list_templates().await.unwrap().is_empty());
    assert!(s.list_prompts().await.unwrap().is_empty());
    }
}

each_backend! {
    async fn another_instance_sees_writes_through_the_counter(kind) {
    let t = TestStore::new(kind).await;
    let other = t.second().await;
    let seen = t.store.data_version().await.unwrap();
    other
        .put_prompt(&who(), prompt("p1", "x"), WriteMode::Create)
        .await
        .unwrap();
    assert!(t.store.data_version().await.unwrap() > seen);
    assert_eq!(t.store.list_prompts().await.unwrap()[0].spec.name, "p1");
    }
}

fn batch(tag: &str) -> ImportBatch {
    ImportBatch {
        tools: vec![("t1".into(), spec(tag)), ("t2".into(), spec("fixed"))],
        resources: vec![resource("test://r", tag)],
        templates: vec![template("test://t/{id}")],
        prompts: vec![prompt("p", tag)],
    }
}

each_backend! {
    async fn imports_are_idempotent_and_version_only_what_changed(kind) {
    let t = TestStore::new(kind).await;
    let s = &*t.store;
    let report = s.import(&who(), batch("a")).await.unwrap();
    assert_eq!(report.changed.len(), 5, "{report:?}");
    assert_eq!(enabled(s).await.len(), 2);
    let v = s.data_version().await.unwrap();

    let mut again = batch("a");
    // Another author is not a change.
    again.tools[0].1.author = "bob".into();
    let report = s.import(&who(), again).await.unwrap();
    assert_eq!(report.changed, Vec::<String>::new());
    assert_eq!(report.unchanged, 5);
    assert_eq!(
        s.data_version().await.unwrap(),
        v,
        "nothing changed, no bump"
    );

    let report = s.import(&who(), batch("b")).await.unwrap();
    assert_eq!(
        report.changed,
        ["tool t1: version 2", "resource test://r", "prompt p"],
        "t2 and the template are unchanged"
    );
    assert_eq!(s.versions("t2").await.unwrap().len(), 1);
    assert_eq!(s.versions("t1").await.unwrap().len(), 2);

    // A disabled tool is enabled again by an import, without a new version.
    s.set_enabled(&who(), "t2", false).await.unwrap();
    let report = s.import(&who(), batch("b")).await.unwrap();
    assert_eq!(report.changed, ["tool t2: enabled"]);
    assert_eq!(s.versions("t2").await.unwrap().len(), 1);
    }
}

each_backend! {
    async fn a_failing_import_writes_nothing(kind) {
    let t = TestStore::new(kind).await;
    let s = &*t.store;
    s.import(&who(), batch("a")).await.unwrap();
    let v = s.data_version().await.unwrap();
    let mut broken = batch("b");
    // The last entry is invalid: everything before it must be rolled back.
    broken.prompts.push(prompt("no spaces allowed", "x"));
    let err = s.import(&who(), broken).await.unwrap_err();
    assert!(
        matches!(
            err,
            StoreError::InvalidName {
                kind: NameKind::Prompt,
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(s.data_version().await.unwrap(), v);
    assert_eq!(s.versions("t1").await.unwrap().len(), 1);
    let r = s.get_resource("test://r").await.unwrap().unwrap();
    assert_eq!(r.spec.body, ResourceBody::Text("a".into()));
    assert_eq!(s.list_prompts().await.unwrap().len(), 1);
    }
}

each_backend! {
    async fn one_template_or_prompt_reads_by_its_key(kind) {
    let t = TestStore::new(kind).await;
    let s = &*t.store;
    assert_eq!(s.get_template("test://t/{id}").await.unwrap(), None);
    assert_eq!(s.get_prompt("greet").await.unwrap(), None);
    s.put_template(&who(), template("test://t/{id}"), WriteMode::Create)
        .await
        .unwrap();
    s.put_template(&who(), template("test://other/{id}"), WriteMode::Create)
        .await
        .unwrap();
    s.put_prompt(&who(), prompt("greet", "hi {a}"), WriteMode::Create)
        .await
        .unwrap();
    let got = s.get_template("test://t/{id}").await.unwrap().unwrap();
    assert_eq!(got.spec, template("test://t/{id}"));
    assert_eq!(
        Some(&got),
        s.list_templates()
            .await
            .unwrap()
            .iter()
            .find(|t| t.spec.uri_template == "test://t/{id}")
    );
    let got = s.get_prompt("greet").await.unwrap().unwrap();
    assert_eq!(got.spec, prompt("greet", "hi {a}"));
    assert!(got.state.enabled);
    s.delete_prompt(&who(), "greet").await.unwrap();
    assert_eq!(s.get_prompt("greet").await.unwrap(), None);
    }
}
