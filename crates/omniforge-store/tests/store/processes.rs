//! Several store instances and processes on one file, as the server and the CLI are: change
//! counter, backup under writes, concurrent writers, busy timeouts, and `kill -9` durability.

// The test bodies live in `each_backend!` modules, which see these imports through
// `use super::*`; rustc counts such uses only partly.
#![allow(unused_imports)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use omniforge_store::{
    CallLog as _, SecretStore as _, SqliteStore, StoreConfig, StoreError, ToolStore,
};

use crate::util::{Kind, LIVE, TestStore, config, each_backend, enabled, spec, who};

async fn raw_pool(path: &std::path::Path) -> sqlx::SqlitePool {
    sqlx::SqlitePool::connect(&format!("sqlite://{}", path.display()))
        .await
        .unwrap()
}

async fn integrity_ok(path: &std::path::Path) {
    let pool = raw_pool(path).await;
    let check: String = sqlx::query_scalar("PRAGMA integrity_check")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(check, "ok");
    let fk_problems = sqlx::query("PRAGMA foreign_key_check")
        .fetch_all(&pool)
        .await
        .unwrap();
    assert!(
        fk_problems.is_empty(),
        "{} foreign key problems",
        fk_problems.len()
    );
    pool.close().await;
}

each_backend! {
    async fn data_version_counts_writes_of_another_instance(kind) {
    let t = TestStore::new(kind).await;
    let server = &*t.store;
    let cli = t.second().await;
    let mut last = server.data_version().await.unwrap();
    let mut changed = |now: i64, what: &str| {
        assert!(now > last, "{what}: {now} after {last}");
        last = now;
    };
    cli.create_tool(&who(), "x", spec("1"), LIVE).await.unwrap();
    changed(server.data_version().await.unwrap(), "create_tool");
    cli.add_version(&who(), "x", spec("2"), LIVE).await.unwrap();
    changed(server.data_version().await.unwrap(), "add_version");
    cli.rollback(&who(), "x", 1).await.unwrap();
    changed(server.data_version().await.unwrap(), "rollback");
    cli.set_enabled(&who(), "x", false).await.unwrap();
    changed(server.data_version().await.unwrap(), "set_enabled");
    cli.set_secret(&who(), "S", "v").await.unwrap();
    changed(server.data_version().await.unwrap(), "set_secret");
    cli.delete_secret(&who(), "S").await.unwrap();
    changed(server.data_version().await.unwrap(), "delete_secret");
    cli.purge(&who(), "x").await.unwrap();
    changed(server.data_version().await.unwrap(), "purge");
    // And the other way round, with the data itself visible at once.
    server
        .create_tool(&who(), "y", spec("1"), LIVE)
        .await
        .unwrap();
    assert_eq!(
        cli.data_version().await.unwrap(),
        server.data_version().await.unwrap()
    );
    assert_eq!(enabled(&*cli).await, ["y@1"]);
    // No reader connection keeps a stale snapshot: after every kind of read, the next write of
    // the other instance is visible at once.
    for i in 0..20 {
        let name = format!("z{i}");
        server.get("y").await.unwrap();
        server.list_enabled().await.unwrap();
        server.versions("y").await.unwrap();
        server.recent_calls("y", 5).await.unwrap();
        server.env_ids_in_use().await.unwrap();
        server.secret_names().await.unwrap();
        let before = server.data_version().await.unwrap();
        cli.create_tool(&who(), &name, spec("z"), LIVE)
            .await
            .unwrap();
        assert_eq!(server.data_version().await.unwrap(), before + 1);
        assert!(server.get(&name).await.unwrap().is_some());
    }
    // Reads do not count.
    let before = server.data_version().await.unwrap();
    cli.list_enabled().await.unwrap();
    cli.env_ids_in_use().await.unwrap();
    assert_eq!(server.data_version().await.unwrap(), before);
    cli.close().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fifty_concurrent_creates_across_instances_all_succeed() {
    let t = TestStore::new(Kind::Sqlite).await;
    // Five instances: writes of one instance queue for its writer connection; the five writers
    // contend for SQLite's write lock through the busy timeout, as separate processes would.
    let mut stores = vec![];
    for _ in 0..5 {
        stores.push(Arc::new(
            SqliteStore::open_with(&t.path, &config()).await.unwrap(),
        ));
    }
    let started = Instant::now();
    let tasks: Vec<_> = (0..50)
        .map(|i| {
            let store = stores[i % stores.len()].clone();
            tokio::spawn(async move {
                store
                    .create_tool(&who(), &format!("c{i}"), spec(&i.to_string()), LIVE)
                    .await
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap().unwrap();
    }
    eprintln!("50 creates over 5 instances: {:?}", started.elapsed());
    assert_eq!(t.store.list_enabled().await.unwrap().len(), 50);
    // One counter step per write, none lost to a race.
    assert_eq!(t.store.data_version().await.unwrap(), 50);
    for s in stores {
        s.close().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_first_opens_migrate_once() {
    // The race is over in well under a second, and most rounds miss it: several new files.
    for round in 0..6 {
        first_opens_of_a_new_file(&format!("fresh{round}.db")).await;
    }
}

async fn first_opens_of_a_new_file(name: &str) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    let opens: Vec<_> = (0..8)
        .map(|_| {
            let path = path.clone();
            tokio::spawn(async move { SqliteStore::open_with(&path, &config()).await })
        })
        .collect();
    let mut stores = vec![];
    for open in opens {
        stores.push(open.await.unwrap().unwrap());
    }
    stores[3]
        .create_tool(&who(), "t", spec("1"), LIVE)
        .await
        .unwrap();
    assert_eq!(enabled(&stores[5]).await, ["t@1"]);
    let pool = raw_pool(&path).await;
    let applied: i64 = sqlx::query_scalar("SELECT count(*) FROM _sqlx_migrations")
        .fetch_one(&pool)
        .await
        .unwrap();
    // Each migration once, however many processes opened the new file at the same time.
    let migrations = std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/migrations"))
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .is_ok_and(|e| e.path().extension().is_some_and(|x| x == "sql"))
        })
        .count();
    assert_eq!(applied, i64::try_from(migrations).unwrap());
    pool.close().await;
    for s in stores {
        s.close().await;
    }
}

#[tokio::test]
async fn busy_timeout_bounds_the_wait_for_another_writer() {
    let t = TestStore::with(
        Kind::Sqlite,
        StoreConfig {
            busy_timeout: Duration::from_millis(300),
            ..config()
        },
    )
    .await;
    t.store
        .create_tool(&who(), "before", spec("1"), LIVE)
        .await
        .unwrap();

    // Another "process" holds the write lock.
    let pool = raw_pool(&t.path).await;
    let mut other = pool.begin_with("BEGIN IMMEDIATE").await.unwrap();
    sqlx::query("UPDATE meta SET value = value WHERE key = 'data_version'")
        .execute(&mut *other)
        .await
        .unwrap();

    // Reads go on (WAL).
    assert!(t.store.get("before").await.unwrap().is_some());
    // A write waits for the busy timeout, then fails with a busy error.
    let started = Instant::now();
    let e = t
        .store
        .create_tool(&who(), "during", spec("2"), LIVE)
        .await
        .unwrap_err();
    let waited = started.elapsed();
    match &e {
        StoreError::Database(d) => assert!(d.is_busy(), "{e}"),
        other => panic!("{other:?}"),
    }
    assert!(waited >= Duration::from_millis(250), "{waited:?}");

    // Once the lock is released the same write succeeds.
    other.rollback().await.unwrap();
    pool.close().await;
    t.store
        .create_tool(&who(), "during", spec("2"), LIVE)
        .await
        .unwrap();
}

/// A spec large enough that each version spans several database pages.
fn bulky(name: &str, version: u32) -> omniforge_store::NewVersion {
    let mut s = spec(&format!("{name}-v{version}"));
    s.code = format!(
        "# {name} v{version}\n{}",
        format!("print({name:?})\n").repeat(400)
    );
    s
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backup_is_a_consistent_snapshot_while_another_instance_writes() {
    let t = TestStore::new(Kind::Sqlite).await;
    for i in 0..100 {
        t.store
            .create_tool(&who(), &format!("pre{i}"), bulky("pre", i), LIVE)
            .await
            .unwrap();
    }
    t.store.set_secret(&who(), "TOKEN", "s3cret").await.unwrap();

    // A second instance (the CLI) writes tools live0, live1, ... in order until told to stop.
    let writer = Arc::new(t.second().await);
    let written = Arc::new(AtomicU32::new(0));
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let task = {
        let (writer, written, stop) = (writer.clone(), written.clone(), stop.clone());
        tokio::spawn(async move {
            let mut i = 0;
            while !stop.load(Ordering::SeqCst) && i < 2000 {
                writer
                    .create_tool(&who(), &format!("live{i}"), bulky("live", i), LIVE)
                    .await
                    .unwrap();
                i += 1;
                written.store(i, Ordering::SeqCst);
            }
        })
    };
    while written.load(Ordering::SeqCst) < 5 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let dest = t.dir.path().join("backup.db");
    let before = written.load(Ordering::SeqCst);
    let started = Instant::now();
    t.store.backup(&dest).await.unwrap();
    let took = started.elapsed();
    let after = written.load(Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(50)).await;
    stop.store(true, Ordering::SeqCst);
    task.await.unwrap();
    let total = written.load(Ordering::SeqCst);
    eprintln!("backup took {took:?}; live writes: {before} before, {after} after, {total} total");
    assert!(total > after, "the writer kept going after the backup");

    integrity_ok(&dest).await;
    let copy = crate::util::open(&dest).await;
    for i in 0..100 {
        let name = format!("pre{i}");
        assert_eq!(
            copy.get(&name).await.unwrap().unwrap().current.spec,
            bulky("pre", i),
            "{name}"
        );
    }
    // The live tools in the copy are exactly live0..liveK: one moment, no gaps, no torn rows.
    let mut live: Vec<u32> = copy
        .list_enabled()
        .await
        .unwrap()
        .iter()
        .filter_map(|t| t.tool.name.strip_prefix("live").map(|n| n.parse().unwrap()))
        .collect();
    live.sort();
    assert!(
        live.len() as u32 >= before && live.len() as u32 <= after,
        "{} live tools",
        live.len()
    );
    assert_eq!(live, (0..live.len() as u32).collect::<Vec<_>>());
    for &i in &live {
        assert_eq!(
            copy.version(&format!("live{i}"), 1).await.unwrap().spec,
            bulky("live", i)
        );
    }
    // The change counter matches the rows (no half-copied transaction).
    assert_eq!(copy.data_version().await.unwrap(), 101 + live.len() as i64);
    assert_eq!(
        copy.secret_values(&["TOKEN".into()]).await.unwrap()["TOKEN"].expose(),
        "s3cret"
    );
    copy.close().await;

    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&dest).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }
    // An existing destination is never overwritten.
    let e = t.store.backup(&dest).await.unwrap_err();
    assert!(matches!(e, StoreError::Conflict { .. }), "{e:?}");
    writer.close().await;
}

/// Set in the child process of [`acknowledged_writes_survive_kill_9`]: the database path.
const CHILD_DB_ENV: &str = "OMNIFORGE_STORE_CRASH_CHILD_DB";

/// The child half of [`acknowledged_writes_survive_kill_9`]; without its environment variable it
/// does nothing. It creates tools (and a second version of every other one) as fast as it can,
/// printing `ACK name version` to stdout after each write returns, until it is killed.
#[tokio::test]
#[ignore = "child process of acknowledged_writes_survive_kill_9"]
async fn crash_child() {
    use std::io::Write;
    let Ok(path) = std::env::var(CHILD_DB_ENV) else {
        return;
    };
    let store = SqliteStore::open(&path).await.unwrap();
    // Raw stdout, not `println!`: libtest's output capture does not apply to it.
    let mut out = std::io::stdout();
    for i in 0..100_000u32 {
        let name = format!("crash{i}");
        store
            .create_tool(&who(), &name, bulky(&name, 1), LIVE)
            .await
            .unwrap();
        writeln!(out, "ACK {name} 1").unwrap();
        out.flush().unwrap();
        if i % 2 == 0 {
            store
                .add_version(&who(), &name, bulky(&name, 2), LIVE)
                .await
                .unwrap();
            writeln!(out, "ACK {name} 2").unwrap();
            out.flush().unwrap();
        }
    }
}

/// Every write the child acknowledged is in the database after `kill -9`, intact.
///
/// The child is this same test binary, run again with libtest's own arguments to select
/// `crash_child` (`--exact --ignored`): no extra binary to build, and it works under both
/// `cargo test` and `cargo nextest`, which run test binaries the same way.
#[cfg(unix)]
#[test]
fn acknowledged_writes_survive_kill_9() {
    use std::io::BufRead;
    use std::os::unix::process::ExitStatusExt;
    use std::process::{Command, Stdio};

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("crash.db");
    let stderr_path = dir.path().join("child.stderr");
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "processes::crash_child",
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_DB_ENV, &path)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&stderr_path).unwrap())
        .spawn()
        .unwrap();

    // Lines go to a channel so the main thread can decide when to kill.
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<(String, u32)>();
    let reader = std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if let Some(ack) = line.strip_prefix("ACK ") {
                let (name, v) = ack.split_once(' ').unwrap();
                let _ = tx.send((name.to_owned(), v.parse().unwrap()));
            }
        }
    });

    let rt = tokio::runtime::Runtime::new().unwrap();
    let child_failed = |e: &dyn std::fmt::Display| -> ! {
        panic!(
            "child stopped early ({e}): {}",
            std::fs::read_to_string(&stderr_path).unwrap()
        )
    };
    let mut acked = vec![];
    match rx.recv_timeout(Duration::from_secs(60)) {
        Ok(ack) => acked.push(ack),
        Err(e) => child_failed(&e),
    }
    // Meanwhile, this process watches the child's writes through the change counter, as the
    // server watches the CLI's.
    let watcher = rt.block_on(SqliteStore::open(&path)).unwrap();
    let receive_until = |acked: &mut Vec<(String, u32)>, count: usize| {
        let deadline = Instant::now() + Duration::from_secs(60);
        while acked.len() < count {
            match rx.recv_timeout(Duration::from_millis(100)) {
                Ok(ack) => acked.push(ack),
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) if Instant::now() < deadline => {}
                Err(e) => child_failed(&e),
            }
        }
    };
    // Each acknowledged write bumped the counter once, so the counter another process reads is
    // at least the number of acknowledgements received so far; and once more acknowledgements
    // arrive than it counted, it must have moved.
    let seen_first = rt.block_on(watcher.data_version()).unwrap();
    assert!(
        seen_first >= acked.len() as i64,
        "{seen_first} < {}",
        acked.len()
    );
    receive_until(&mut acked, 80.max(seen_first as usize + 5));
    let seen_then = rt.block_on(watcher.data_version()).unwrap();
    assert!(
        seen_then >= acked.len() as i64 && seen_then > seen_first,
        "{seen_first} then {seen_then}"
    );

    // Mid-burst: the child is writing as fast as it can.
    child.kill().unwrap(); // SIGKILL
    let status = child.wait().unwrap();
    assert_eq!(status.signal(), Some(9), "{status:?}");
    reader.join().unwrap();
    // Acknowledgements printed before the kill but not yet read count too.
    acked.extend(rx.try_iter());
    rt.block_on(async {
        watcher.close().await;
        integrity_ok(&path).await;
        let store = SqliteStore::open(&path).await.unwrap();
        for (name, version) in &acked {
            let v = store.version(name, *version).await.unwrap();
            assert_eq!(v.spec, bulky(name, *version), "{name} v{version}");
            let current = store.get(name).await.unwrap().unwrap().current.number;
            assert!(
                current >= *version,
                "{name}: current {current} < acknowledged {version}"
            );
        }
        eprintln!(
            "{} acknowledged writes, all present after kill -9",
            acked.len()
        );
        store.close().await;
    });
}

#[tokio::test]
async fn database_from_a_newer_build_is_refused() {
    let t = TestStore::new(Kind::Sqlite).await;
    t.store
        .create_tool(&who(), "t", spec("1"), LIVE)
        .await
        .unwrap();
    t.store.close().await;
    let pool = raw_pool(&t.path).await;
    sqlx::query(
        "INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time) \
         VALUES (99990101000000, 'from the future', 1, x'00', 0)",
    )
    .execute(&pool)
    .await
    .unwrap();
    pool.close().await;
    let e = SqliteStore::open(&t.path).await.unwrap_err();
    assert!(matches!(e, StoreError::Database(_)), "{e:?}");
    assert!(e.to_string().contains("99990101000000"), "{e}");
}
