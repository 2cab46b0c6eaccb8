//! Kept outputs (issues 11 finding 8 and 14): whole outputs of cut results, readable by their
//! owner only (or a reader allowed to read all), until they expire; extended, never shortened;
//! purged when expired.

// The test bodies live in `each_backend!` modules, which see these imports through
// `use super::*`; rustc counts such uses only partly.
#![allow(unused_imports)]

use std::time::Duration;

use omniforge_store::{
    MAX_KEPT_STREAM_BYTES, NameKind, NewKeptOutput, OutputReader, OutputStore, StoreError,
    ToolStore as _,
};

use crate::util::{Kind, TestStore, each_backend, raw};

fn output(run_id: &str, owner: &str, ttl: Duration) -> NewKeptOutput {
    NewKeptOutput {
        run_id: run_id.into(),
        owner: owner.into(),
        tool: "big_report".into(),
        stdout: format!("{run_id} stdout ").repeat(1000),
        stderr: "warning: long\n".into(),
        ttl,
    }
}

const HOUR: Duration = Duration::from_secs(3600);

each_backend! {
    async fn only_the_owner_reads_an_output(kind) {
    let t = TestStore::new(kind).await;
    let s = &*t.store;
    let kept = s
        .keep_output(output("run-1", "token:alice", HOUR))
        .await
        .unwrap();
    assert_eq!(kept.expires_at_ms - kept.created_at_ms, 3_600_000);
    let read = s
        .kept_output("run-1", OutputReader::owner("token:alice"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(read, kept);
    assert_eq!(read.stdout, output("run-1", "token:alice", HOUR).stdout);
    // Another principal gets exactly what an unknown id gets.
    for reader in ["token:bob", "token:ALICE", "token:alice ", "anonymous", ""] {
        assert_eq!(
            s.kept_output("run-1", OutputReader::owner(reader))
                .await
                .unwrap(),
            None,
            "{reader:?}"
        );
    }
    assert_eq!(
        s.kept_output("run-404", OutputReader::owner("token:alice"))
            .await
            .unwrap(),
        None
    );
    // A reader allowed to read all (the server's admin) reads it.
    let admin = OutputReader {
        principal: "token:admin",
        read_all: true,
    };
    assert_eq!(s.kept_output("run-1", admin).await.unwrap(), Some(kept));
    // Another instance (replica) serves it the same way.
    let other = t.second().await;
    assert!(
        other
            .kept_output("run-1", OutputReader::owner("token:alice"))
            .await
            .unwrap()
            .is_some()
    );
    assert!(
        other
            .kept_output("run-1", OutputReader::owner("token:bob"))
            .await
            .unwrap()
            .is_none()
    );
    other.close().await;
    // Debug output shows sizes, never the text.
    let debug = format!("{:?}", output("run-1", "x", HOUR));
    assert!(
        !debug.contains("stdout run-1") && debug.contains("stdout_bytes"),
        "{debug}"
    );
    }
}

#[tokio::test]
async fn expired_outputs_are_gone_and_purged() {
    let t = TestStore::new(Kind::Sqlite).await;
    let s = &*t.store;
    s.keep_output(output("short", "token:a", Duration::from_millis(1)))
        .await
        .unwrap();
    s.keep_output(output("long", "token:a", HOUR))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(20)).await;
    let owner = OutputReader::owner("token:a");
    assert_eq!(s.kept_output("short", owner).await.unwrap(), None);
    assert!(s.kept_output("long", owner).await.unwrap().is_some());
    let seq = s.current_seq().await.unwrap();
    assert_eq!(s.purge_expired_outputs().await.unwrap(), 1);
    assert_eq!(s.purge_expired_outputs().await.unwrap(), 0);
    assert_eq!(
        s.current_seq().await.unwrap(),
        seq,
        "outputs are not changes"
    );
    let pool = raw(&t.path).await;
    let ids: Vec<String> = sqlx::query_scalar("SELECT run_id FROM kept_output")
        .fetch_all(&pool)
        .await
        .unwrap();
    assert_eq!(ids, ["long"]);
    pool.close().await;
    // An expired id can be kept again.
    s.keep_output(output("short", "token:b", HOUR))
        .await
        .unwrap();
    assert!(
        s.kept_output("short", OutputReader::owner("token:b"))
            .await
            .unwrap()
            .is_some()
    );
}

each_backend! {
    async fn expiry_is_extended_never_shortened(kind) {
    let t = TestStore::new(kind).await;
    let s = &*t.store;
    let kept = s.keep_output(output("r", "token:a", HOUR)).await.unwrap();
    let later = kept.expires_at_ms + 86_400_000;
    assert_eq!(s.extend_output_expiry("r", later).await.unwrap(), later);
    assert_eq!(
        s.extend_output_expiry("r", kept.expires_at_ms)
            .await
            .unwrap(),
        later,
        "an earlier time leaves it"
    );
    let read = s
        .kept_output("r", OutputReader::owner("token:a"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(read.expires_at_ms, later);
    let e = s.extend_output_expiry("nope", later).await.unwrap_err();
    assert!(
        matches!(
            e,
            StoreError::NotFound {
                kind: NameKind::Output,
                ..
            }
        ),
        "{e:?}"
    );
    // An expired output cannot be brought back.
    s.keep_output(output("gone", "token:a", Duration::from_millis(1)))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert!(matches!(
        s.extend_output_expiry("gone", later).await,
        Err(StoreError::NotFound { .. })
    ));
    }
}

each_backend! {
    async fn outputs_are_checked_before_they_are_kept(kind) {
    let t = TestStore::new(kind).await;
    let s = &*t.store;
    s.keep_output(output("dup", "token:a", HOUR)).await.unwrap();
    assert!(matches!(
        s.keep_output(output("dup", "token:b", HOUR)).await,
        Err(StoreError::Duplicate {
            kind: NameKind::Output,
            ..
        })
    ));
    // The first owner keeps it.
    assert!(
        s.kept_output("dup", OutputReader::owner("token:b"))
            .await
            .unwrap()
            .is_none()
    );
    for bad in ["", "has space", "../etc", &"x".repeat(129)] {
        assert!(
            matches!(
                s.keep_output(output(bad, "token:a", HOUR)).await,
                Err(StoreError::InvalidName {
                    kind: NameKind::Output,
                    ..
                })
            ),
            "{bad:?}"
        );
    }
    assert!(matches!(
        s.keep_output(output("r2", "", HOUR)).await,
        Err(StoreError::Invalid { .. })
    ));
    let mut big = output("r3", "token:a", HOUR);
    big.stdout = "x".repeat(MAX_KEPT_STREAM_BYTES);
    s.keep_output(big.clone()).await.unwrap();
    big.run_id = "r4".into();
    big.stderr = "y".repeat(MAX_KEPT_STREAM_BYTES + 1);
    let e = s.keep_output(big).await.unwrap_err();
    assert!(
        matches!(&e, StoreError::Invalid { field, .. } if field == "stderr"),
        "{e:?}"
    );
    assert!(matches!(
        s.keep_output(output("r5", "token:a", Duration::MAX)).await,
        Err(StoreError::Invalid { .. })
    ));
    // A whole MiB comes back byte for byte.
    let read = s
        .kept_output("r3", OutputReader::owner("token:a"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(read.stdout.len(), MAX_KEPT_STREAM_BYTES);
    }
}
