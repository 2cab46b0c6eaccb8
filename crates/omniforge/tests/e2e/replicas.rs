//! Three replicas on one PostgreSQL database behind HAProxy, configured with
//! `deploy/haproxy.cfg` as it is (issue 14): a tool created through the balancer is announced
//! (`list_changed`) on sessions of all three and callable on each (each installs its
//! environment from the stored lock in its own data directory); a secret set through one
//! replica reaches a tool run by another; `kill -9` of replica 1 during a burst of 50 creates
//! and updates loses no acknowledged write, and its sessions get 404 and initialize again
//! elsewhere (the official Python and TypeScript clients' sessions too, which initialize
//! again), while the Python SDK's stateless (2026-07-28) client goes on through the balancer
//! with only its request in flight on the dead replica allowed to fail; after a database
//! restart the replicas reconnect, `list_changed` resumes and nothing acknowledged is lost.
//! Apart, on two replicas with tokens: a cut result's kept output made through one is read
//! through the other by its owner and an admin, and refused to another principal.
//!
//! Everything is started here and ended here by pid: a private PostgreSQL cluster
//! (`omniforge-testpg`), three `omniforge serve` processes, one `haproxy` (Debian's).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::support::{
    Auth, Driver, HttpClient, HttpServer, Sdk, Serve, balancer, counts_with_a_success, eventually,
    omniforge_cli, session_on, uv,
};

/// How long a change may take to reach another replica in these tests (the target is well
/// under a second; the machine is shared).
const PROPAGATION: Duration = Duration::from_secs(20);

/// Waits for a `notifications/tools/list_changed` on `rx`.
async fn list_changed(rx: &mut mpsc::UnboundedReceiver<Value>) -> bool {
    tokio::time::timeout(PROPAGATION, async {
        while let Some(m) = rx.recv().await {
            if m["method"] == "notifications/tools/list_changed" {
                return true;
            }
        }
        false
    })
    .await
    .unwrap_or(false)
}

/// Forgets the notifications received so far.
fn drain_notes(rx: &mut mpsc::UnboundedReceiver<Value>) {
    while rx.try_recv().is_ok() {}
}

/// A tool's arguments for `omniforge_create_tool`: prints its own name.
fn tool(name: &str, description: &str) -> Value {
    json!({
        "name": name,
        "description": description,
        "code": format!("print({name:?})"),
        "inputSchema": {"type": "object", "properties": {}},
    })
}

/// Calls a tool; `Ok((text, is_error))`, or why no result came.
async fn call(
    mcp: &mut HttpClient,
    name: &str,
    arguments: Value,
) -> Result<(String, bool), String> {
    let m = mcp
        .request("tools/call", json!({"name": name, "arguments": arguments}))
        .await?;
    if let Some(e) = m.get("error") {
        return Err(e.to_string());
    }
    let r = &m["result"];
    Ok((
        r["content"][0]["text"].as_str().unwrap_or("").to_owned(),
        r["isError"] == true,
    ))
}

/// Tools listed by a session: name → description.
async fn listed(mcp: &mut HttpClient) -> BTreeMap<String, String> {
    let r = mcp.result("tools/list", json!({})).await;
    r["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["name"].as_str().unwrap().to_owned(),
                t["description"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect()
}

/// Polls `mcp`'s tool list until every tool of `want` is there with one of its accepted
/// descriptions; panics with the missing or different ones (as `what`) otherwise.
async fn converged(what: &str, mcp: &mut HttpClient, want: &BTreeMap<String, BTreeSet<String>>) {
    eventually(PROPAGATION, what, async || {
        let have = listed(mcp).await;
        let wrong: Vec<String> = want
            .iter()
            .filter(|(name, ok)| !have.get(*name).is_some_and(|d| ok.contains(d)))
            .map(|(name, ok)| format!("{name}: have {:?}, want one of {ok:?}", have.get(name)))
            .collect();
        if wrong.is_empty() {
            Ok(())
        } else {
            Err(format!("{wrong:#?}"))
        }
    })
    .await;
}

/// One writer of the burst: `writes` creates and updates through the balancer, in its own
/// session, initializing a new one whenever its session is gone (its replica died). Returns
/// the accepted descriptions of every tool it touched (an acknowledged write: exactly its
/// description; an unanswered one: either), and whether it saw a 404.
async fn writer(
    lb: String,
    who: usize,
    writes: usize,
    acked: Arc<AtomicUsize>,
) -> (BTreeMap<String, BTreeSet<String>>, bool) {
    let mut mcp = HttpClient::open(&lb).await.unwrap();
    let mut want: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut created: Vec<String> = Vec::new();
    let mut saw_404 = false;
    for i in 0..writes {
        let (built_in, args, name, description) = match created.last() {
            Some(last) if i % 3 == 2 => {
                let d = format!("updated by {who} at {i}");
                (
                    "omniforge_update_tool",
                    json!({"name": last, "description": d}),
                    last.clone(),
                    d,
                )
            }
            _ => {
                let name = format!("burst_{who}_{i}");
                let d = format!("created by {who} at {i}");
                ("omniforge_create_tool", tool(&name, &d), name, d)
            }
        };
        match call(&mut mcp, built_in, args).await {
            Ok((text, false)) => {
                let _ = text;
                if built_in == "omniforge_create_tool" {
                    created.push(name.clone());
                }
                want.insert(name, BTreeSet::from([description]));
                acked.fetch_add(1, Ordering::SeqCst);
            }
            Ok((text, true)) => panic!("{built_in} {name}: refused: {text}"),
            Err(error) => {
                // Not acknowledged: it may or may not have committed.
                saw_404 |= error == "HTTP 404";
                if built_in == "omniforge_update_tool" {
                    want.entry(name).or_default().insert(description);
                }
                // The session's replica is gone: a new session, on a survivor.
                mcp = eventually(
                    Duration::from_secs(10),
                    "a new session through the balancer",
                    async || HttpClient::open(&lb).await,
                )
                .await;
            }
        }
    }
    (want, saw_404)
}

#[tokio::test]
async fn three_replicas_behind_haproxy_lose_nothing() {
    crate::support::needs_deps!();
    tokio::time::timeout(Duration::from_secs(300), replicas_scenario())
        .await
        .expect("the replica scenario did not finish within 300 s");
}

async fn replicas_scenario() {
    let cluster =
        omniforge_testpg::Cluster::private(Path::new(env!("CARGO_TARGET_TMPDIR"))).unwrap();
    let db = cluster.database("replicas").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("replicas.key");
    let key_arg = key.to_str().unwrap().to_owned();
    let (ok, out, err) = omniforge_cli(
        &dir.path().join("scratch"),
        &["--secret-key-file", &key_arg, "secret", "rotate-key"],
        None,
    )
    .await;
    assert!(ok, "{out}\n{err}");
    let url = db.url();
    let uv = uv();
    let mut replicas = Vec::new();
    for i in 1..=3 {
        let data = dir.path().join(format!("replica{i}"));
        std::fs::create_dir(&data).unwrap();
        let data = data.to_str().unwrap().to_owned();
        let args = [
            "--data-dir",
            &data,
            "--database",
            &url,
            "--secret-key-file",
            &key_arg,
            "--uv",
            uv.to_str().unwrap(),
        ];
        replicas.push(Serve::start(&args).await);
    }
    let lb = balancer(&replicas.iter().collect::<Vec<_>>()).await;
    eprintln!("replicas: 3 replicas and haproxy up");

    // Sessions on each replica, with their notification streams.
    let mut direct = Vec::new();
    let mut notes = Vec::new();
    for r in &replicas {
        let mcp = HttpClient::open(&r.url).await.unwrap();
        notes.push(mcp.notifications().await);
        direct.push(mcp);
    }

    // A secret set through replica 1; a tool that reads it, created through the balancer.
    let value = format!("pg-secret-{}", std::process::id());
    let (text, is_error) = call(
        &mut direct[0],
        "omniforge_set_secret",
        json!({"name": "REPLICA_KEY", "value": value}),
    )
    .await
    .unwrap();
    assert!(!is_error, "{text}");
    let mut through_lb = HttpClient::open(&lb.url).await.unwrap();
    let mut spy = tool("spy", "shows a secret, reversed");
    spy["code"] = json!("import os\nprint(os.environ['REPLICA_KEY'][::-1])");
    spy["secrets"] = json!(["REPLICA_KEY"]);
    let (text, is_error) = call(&mut through_lb, "omniforge_create_tool", spy)
        .await
        .unwrap();
    assert!(!is_error, "{text}");
    for (i, rx) in notes.iter_mut().enumerate() {
        assert!(
            list_changed(rx).await,
            "no list_changed on replica {}",
            i + 1
        );
    }
    let reversed: String = value.chars().rev().collect();
    for (i, mcp) in direct.iter_mut().enumerate() {
        let (text, is_error) = call(mcp, "spy", json!({})).await.unwrap();
        assert_eq!(
            (text.trim(), is_error),
            (reversed.as_str(), false),
            "spy on replica {}",
            i + 1
        );
    }

    eprintln!("replicas: propagation, list_changed and the secret checked");

    // A session that lives on replica 1, learned by the balancer.
    let mut on_replica_1 = None;
    for _ in 0..30 {
        let mcp = HttpClient::open(&lb.url).await.unwrap();
        let mut probe = mcp.same_session_at(&replicas[0].url);
        if probe
            .request("ping", json!({}))
            .await
            .is_ok_and(|m| m.get("result").is_some())
        {
            on_replica_1 = Some(mcp);
            break;
        }
    }
    let on_replica_1 = on_replica_1.expect("no balanced session landed on replica 1");
    // The official clients: Python and TypeScript sessions that live on replica 1, and the
    // Python SDK without a session (2026-07-28), calling through the balancer all along.
    let mut sessions = Vec::new();
    for sdk in [Sdk::Python, Sdk::TypeScript] {
        sessions.push(session_on(sdk, &lb.url, &replicas[0].url).await);
    }
    let mut stateless = Driver::start(Sdk::Python, "stateless", &lb.url);
    stateless.expect("READY").await;
    let before = counts_with_a_success(&mut stateless).await;
    assert!(
        before["ok"].as_u64() > Some(0) && before["failed"] == 0,
        "stateless Python client before the kill: {before}\n{}",
        stateless.stderr_tail()
    );

    // The burst: 5 writers x 10 writes through the balancer; replica 1 is killed after 15
    // acknowledged writes.
    for rx in &mut notes {
        drain_notes(rx);
    }
    // The writers run as local tasks of this (current-thread) runtime: a writer waits with
    // `eventually`, whose attempts borrow, so its future is not `Send`.
    let mut want = tokio::task::LocalSet::new()
        .run_until(async {
            let acked = Arc::new(AtomicUsize::new(0));
            let tasks: Vec<_> = (0..5)
                .map(|who| tokio::task::spawn_local(writer(lb.url.clone(), who, 10, acked.clone())))
                .collect();
            eventually(
                Duration::from_secs(240),
                "15 acknowledged writes (or the writers done)",
                async || {
                    (acked.load(Ordering::SeqCst) >= 15 || tasks.iter().all(|t| t.is_finished()))
                        .then_some(())
                },
            )
            .await;
            replicas[0].kill();
            eprintln!(
                "replicas: replica 1 killed after {} acknowledged writes",
                acked.load(Ordering::SeqCst)
            );
            let mut want = BTreeMap::new();
            for task in tasks {
                let (w, _) = task.await.unwrap();
                want.extend(w);
            }
            want
        })
        .await;
    assert!(want.len() >= 15, "{want:?}");
    for i in [1, 2] {
        let mut fresh = HttpClient::open(&replicas[i].url).await.unwrap();
        converged(&format!("replica {}", i + 1), &mut fresh, &want).await;
    }
    // Every acknowledged tool runs on the survivors.
    for (n, name) in want.keys().enumerate() {
        let mcp = &mut direct[1 + n % 2];
        let (text, is_error) = call(mcp, name, json!({})).await.unwrap();
        assert_eq!((text.trim(), is_error), (name.as_str(), false));
    }

    eprintln!(
        "replicas: {} tools present and callable on the survivors",
        want.len()
    );
    // The session of the dead replica: 404 through the balancer, then a new one works.
    let mut dead = on_replica_1;
    eventually(
        Duration::from_secs(10),
        "HTTP 404 for the dead replica's session",
        async || match dead.request("ping", json!({})).await {
            Err(e) if e == "HTTP 404" => Ok(()),
            other => Err(format!("{other:?}\n{}", lb.log.tail(3000))),
        },
    )
    .await;
    let mut again = HttpClient::open(&lb.url).await.unwrap();
    assert!(listed(&mut again).await.contains_key("spy"));

    eprintln!("replicas: dead session answered 404");
    // The stateless client went on through the balancer: at most its one request in flight
    // on replica 1 when it died failed, and every request since works.
    stateless.send("report").await;
    let during = stateless.expect("COUNTS").await;
    assert!(
        during["ok"].as_u64() > Some(0) && during["failed"].as_u64() <= Some(1),
        "stateless Python client while replica 1 died: {during}\n{}",
        stateless.stderr_tail()
    );
    // The official clients' sessions of replica 1: 404, then a new session on a survivor.
    for (driver, id) in &mut sessions {
        driver.send("call").await;
        let lost = driver.expect("LOST").await;
        assert_eq!(
            (lost["id"].as_str(), lost["status"].as_u64()),
            (Some(id.as_str()), Some(404)),
            "{:?}: {lost}",
            driver.sdk
        );
        let again = driver.expect("OK").await;
        let new_id = again["id"].as_str().unwrap();
        assert_ne!(new_id, id, "{:?}", driver.sdk);
        driver.send("call").await;
        assert_eq!(driver.expect("OK").await["id"], new_id, "{:?}", driver.sdk);
    }
    let after = counts_with_a_success(&mut stateless).await;
    assert!(
        after["ok"].as_u64() > Some(0) && after["failed"] == 0,
        "stateless Python client after the kill: {after}\n{}",
        stateless.stderr_tail()
    );
    stateless.send("quit").await;
    for (driver, _) in &mut sessions {
        driver.send("quit").await;
    }
    eprintln!(
        "replicas: the official clients re-initialized; the stateless one went on \
         (before the kill {before}, around it {during}, after it {after})"
    );
    // A database restart: the survivors reconnect, nothing acknowledged is lost, and
    // list_changed resumes.
    cluster.restart().unwrap();
    for rx in &mut notes {
        drain_notes(rx);
    }
    // The first statements after a restart may meet connections the restart cut.
    eventually(
        Duration::from_secs(10),
        "a tool created after the database restart",
        async || match call(
            &mut direct[1],
            "omniforge_create_tool",
            tool("after_restart", "made after the database restarted"),
        )
        .await
        {
            Ok((_, false)) => Ok(()),
            other => Err(format!("{other:?}\n{}", replicas[1].output_tail())),
        },
    )
    .await;
    assert!(
        list_changed(&mut notes[2]).await,
        "no list_changed on replica 3 after the restart"
    );
    want.insert(
        "after_restart".into(),
        BTreeSet::from(["made after the database restarted".to_owned()]),
    );
    converged("replica 3 after the restart", &mut direct[2], &want).await;
    let (text, is_error) = call(&mut direct[2], "after_restart", json!({}))
        .await
        .unwrap();
    assert_eq!((text.trim(), is_error), ("after_restart", false));
}

/// A cut result's kept output, made by a call on replica A, is read through replica B by the
/// principal that made the call and by an admin; another principal gets exactly the answer
/// of an unknown id there.
#[tokio::test]
async fn a_kept_output_is_read_through_another_replica_by_its_owner_only() {
    crate::support::needs_deps!();
    const WRITER: &str = "writer-token-0123456789abcdef";
    const WRITER2: &str = "writer2-token-0123456789abcdef";
    const BOSS: &str = "boss-token-0123456789abcdef";
    let db = crate::support::cluster().database("kept").unwrap();
    let url = db.url();
    let uv = uv();
    let tokens = Auth::TokenFile(format!(
        "writer {WRITER} tools:write\nwriter2 {WRITER2} tools:write\nboss {BOSS} admin\n"
    ));
    let args = [
        "--database",
        &url,
        "--uv",
        uv.to_str().unwrap(),
        "--max-result-bytes",
        "64",
    ];
    let a = HttpServer::start(&args, &tokens).await;
    let b = HttpServer::start(&args, &tokens).await;

    let mut writer_a = HttpClient::bearer(a.url(), WRITER).await;
    let create = json!({"name": "long", "description": "Long output.", "code": "print('x' * 500 + 'END')\n"});
    let (text, is_error, _) = writer_a.call("omniforge_create_tool", create).await;
    assert!(!is_error, "{text}");
    let (_, _, raw) = writer_a.call("long", json!({})).await;
    let uri = raw["content"]
        .as_array()
        .unwrap()
        .iter()
        .find_map(|c| (c["type"] == "resource_link").then(|| c["uri"].as_str().unwrap().to_owned()))
        .unwrap_or_else(|| panic!("no resource link: {raw}"));
    let read = json!({"uri": uri});
    for token in [WRITER, BOSS] {
        let mut on_b = HttpClient::bearer(b.url(), token).await;
        let r = on_b.result("resources/read", read.clone()).await;
        assert!(
            r["contents"][0]["text"]
                .as_str()
                .is_some_and(|t| t.ends_with("END")),
            "{r}"
        );
    }
    let mut other = HttpClient::bearer(b.url(), WRITER2).await;
    let theirs = other.error("resources/read", read).await;
    let unknown_uri = "omniforge://runs/0123456789abcdef0123456789abcdef/output";
    let unknown = other
        .error("resources/read", json!({"uri": unknown_uri}))
        .await;
    assert_eq!(theirs["code"], unknown["code"], "{theirs} vs {unknown}");
    assert_eq!(
        theirs["message"].as_str().unwrap().replace(&uri, "URI"),
        unknown["message"]
            .as_str()
            .unwrap()
            .replace(unknown_uri, "URI"),
    );
}
