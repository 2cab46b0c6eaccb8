//! The change feed across PostgreSQL replicas: a commit through one store instance wakes a
//! waiter on another (`NOTIFY` → `LISTEN`), and a lost `LISTEN` connection (its backend
//! terminated by `pg_terminate_backend`) loses no change: the listener connects again and
//! re-reads by seq.

use std::time::Duration;

use omniforge_store::{ChangeKind, LISTENER_APPLICATION_NAME};
use omniforge_store::{SecretStore as _, ToolStore as _};

use crate::util::{Kind, LIVE, TestStore, spec, who};

/// Long enough that only a wake-up, never the poll, can end a wait within the test.
const NEVER: Duration = Duration::from_secs(3600);

/// Generous: these machines are shared and slow; the point is "woken", not "how fast".
const WOKEN_WITHIN: Duration = Duration::from_secs(60);

/// The backend pids of the store's `LISTEN` connections on this test's database.
fn listener_pids(t: &TestStore) -> Vec<String> {
    let db = t.db.as_ref().unwrap();
    let out = db
        .sql(&format!(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() \
             AND application_name = '{LISTENER_APPLICATION_NAME}' ORDER BY pid"
        ))
        .unwrap();
    out.lines().map(str::to_owned).collect()
}

/// Waits until the instance's listener is connected (its first wait starts it).
async fn listening(t: &TestStore) -> Vec<String> {
    for _ in 0..600 {
        let pids = listener_pids(t);
        if !pids.is_empty() {
            return pids;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("no LISTEN connection appeared");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_on_one_replica_wakes_a_waiter_on_another() {
    let t = TestStore::new(Kind::Postgres).await;
    let writer = &*t.store;
    let reader = t.second().await;
    writer
        .create_tool(&who(), "before", spec("0"), LIVE)
        .await
        .unwrap();
    for round in 0..3 {
        let seen = reader.current_seq().await.unwrap();
        let waiter = {
            let reader = reader.clone();
            tokio::spawn(async move { reader.wait_for_change(seen, NEVER).await })
        };
        if round == 0 {
            listening(&t).await;
        }
        let name = format!("tool{round}");
        writer
            .create_tool(&who(), &name, spec(&name), LIVE)
            .await
            .unwrap();
        tokio::time::timeout(WOKEN_WITHIN, waiter)
            .await
            .expect("woken by the other instance's commit")
            .unwrap();
        let set = reader.changes_since(seen).await.unwrap();
        assert_eq!(set.changes.len(), 1, "{set:?}");
        assert_eq!(
            (set.changes[0].kind, set.changes[0].key.as_str()),
            (ChangeKind::Tool, name.as_str())
        );
    }
    // Call log writes are no changes and wake no one.
    let seen = reader.current_seq().await.unwrap();
    writer
        .record_call(crate::calls::call("before", 1, 1))
        .await
        .unwrap();
    assert!(
        tokio::time::timeout(
            Duration::from_millis(300),
            reader.wait_for_change(seen, NEVER)
        )
        .await
        .is_err()
    );
    reader.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_terminated_listen_connection_loses_no_change() {
    let t = TestStore::new(Kind::Postgres).await;
    let writer = t.second().await;
    let reader = t.second().await;
    let mut seen = reader.current_seq().await.unwrap();
    // Start listening.
    reader.wait_for_change(seen, Duration::from_millis(1)).await;
    let mut pids = listening(&t).await;
    for round in 0..5 {
        // Cut the listener off, then commit at once: the NOTIFY of this commit may reach no
        // one, so only the re-read after reconnecting can wake the waiter.
        let db = t.db.as_ref().unwrap();
        db.sql(&format!("SELECT pg_terminate_backend({})", pids[0]))
            .unwrap();
        let name = format!("while_cut{round}");
        writer
            .create_tool(&who(), &name, spec(&name), LIVE)
            .await
            .unwrap();
        let waiter = {
            let reader = reader.clone();
            tokio::spawn(async move { reader.wait_for_change(seen, NEVER).await })
        };
        tokio::time::timeout(WOKEN_WITHIN, waiter)
            .await
            .expect("woken after the listener came back")
            .unwrap();
        let set = reader.changes_since(seen).await.unwrap();
        assert!(
            set.changes.iter().any(|c| c.key == name),
            "round {round}: {set:?}"
        );
        seen = set.seq;
        // A new LISTEN connection replaced the terminated one.
        let new_pids = listening(&t).await;
        assert_ne!(new_pids, pids, "round {round}");
        pids = new_pids;
    }
    // And notifications flow again on the new connection.
    let waiter = {
        let reader = reader.clone();
        tokio::spawn(async move { reader.wait_for_change(seen, NEVER).await })
    };
    writer.set_secret(&who(), "AFTER", "v").await.unwrap();
    tokio::time::timeout(WOKEN_WITHIN, waiter)
        .await
        .expect("woken by a notification on the new connection")
        .unwrap();
    reader.close().await;
    writer.close().await;
}
