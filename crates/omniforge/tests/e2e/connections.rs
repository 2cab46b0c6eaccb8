//! HTTP connection limits against the real binary (issue 11, finding 11): slow-loris
//! connections are dropped after `--header-read-timeout`, idle keep-alive connections after
//! `--keep-alive-timeout`, and past `--max-connections` new connections wait while the open
//! ones go on.

use std::time::{Duration, Instant};

use tempfile::TempDir;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::support::{self, Serve, http_client};

async fn serve(args: &[&str]) -> (Serve, TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir(&data).unwrap();
    let mut command = Serve::command()
        .args(&["--data-dir".as_ref(), data.as_os_str()])
        .args(&["--insecure-no-auth"])
        .args(args);
    support::no_proxy(command.cmd());
    (command.start().await, dir)
}

fn addr(server: &Serve) -> String {
    server.base.trim_start_matches("http://").to_owned()
}

/// Whether the server closed `stream` (a read sees EOF or a reset) within `within`.
async fn closed_within(stream: &mut TcpStream, within: Duration) -> bool {
    let mut buf = [0u8; 1024];
    let deadline = Instant::now() + within;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, stream.read(&mut buf)).await {
            Err(_) => return false,
            Ok(Ok(0) | Err(_)) => return true,
            Ok(Ok(_)) => {}
        }
    }
}

const HEALTHZ: &[u8] = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";

/// Sends `GET /healthz` on an open connection and asserts a 200 within 5 s.
async fn healthz_on(stream: &mut TcpStream) {
    stream.write_all(HEALTHZ).await.unwrap();
    let mut buf = [0u8; 4096];
    let n = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut buf))
        .await
        .expect("an open connection must still be served")
        .unwrap();
    assert!(
        buf[..n].starts_with(b"HTTP/1.1 200"),
        "{:?}",
        String::from_utf8_lossy(&buf[..n])
    );
}

/// 20 connections that send a request head one byte every 200 ms are closed once the 1 s
/// header read timeout passes, while `/healthz` keeps answering; a keep-alive connection left
/// idle after its answer is closed after the 2 s keep-alive timeout, not before.
#[tokio::test]
async fn slow_clients_are_dropped_after_the_header_read_timeout() {
    let (server, _dir) =
        serve(&["--header-read-timeout", "1s", "--keep-alive-timeout", "2s"]).await;
    let address = addr(&server);
    let head = b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    let mut slow = Vec::new();
    for _ in 0..20 {
        slow.push(TcpStream::connect(&address).await.unwrap());
    }
    let dripping = tokio::spawn(async move {
        let mut dropped = 0;
        for byte in head.iter().cycle().take(10) {
            for stream in &mut slow {
                if stream.write_all(&[*byte]).await.is_err() {
                    dropped += 1;
                }
            }
            // scenario: a slow-loris client sends its head a byte every 200 ms
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let mut closed = 0;
        for stream in &mut slow {
            if closed_within(stream, Duration::from_millis(500)).await {
                closed += 1;
            }
        }
        (dropped, closed)
    });
    // Service goes on meanwhile.
    let health = http_client()
        .get(format!("{}/healthz", server.base))
        .send()
        .await
        .unwrap();
    assert_eq!(health.status(), 200);
    let (_, closed) = dripping.await.unwrap();
    assert_eq!(
        closed, 20,
        "every slow-loris connection must be closed after the header read timeout"
    );

    let mut idle = TcpStream::connect(&address).await.unwrap();
    idle.write_all(HEALTHZ).await.unwrap();
    let mut buf = [0u8; 4096];
    let n = idle.read(&mut buf).await.unwrap();
    assert!(
        buf[..n].starts_with(b"HTTP/1.1 200"),
        "{:?}",
        String::from_utf8_lossy(&buf[..n])
    );
    assert!(
        !closed_within(&mut idle, Duration::from_millis(1200)).await,
        "an idle keep-alive connection was closed before the 2 s keep-alive timeout"
    );
    assert!(
        closed_within(&mut idle, Duration::from_secs(3)).await,
        "an idle keep-alive connection must be closed after the keep-alive timeout"
    );
}

/// With `--max-connections 3` and three connections open, a fourth waits (no answer) while
/// the open ones are still served; once one closes, the fourth is answered.
#[tokio::test]
async fn past_the_connection_cap_new_connections_wait() {
    let (server, _dir) = serve(&["--max-connections", "3"]).await;
    let address = addr(&server);
    let mut open = Vec::new();
    for _ in 0..3 {
        open.push(TcpStream::connect(&address).await.unwrap());
    }
    // The server has taken all three once each has been answered (they stay open: keep-alive).
    for stream in &mut open {
        healthz_on(stream).await;
    }
    let url = format!("{}/healthz", server.base);
    let waiting =
        tokio::spawn(async move { http_client().get(url).send().await.map(|r| r.status()) });
    // scenario: the fourth must still be unanswered after a while, not just at once
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert!(
        !waiting.is_finished(),
        "a fourth connection past --max-connections 3 was answered at once"
    );
    // The open connections go on.
    let first = &mut open[0];
    healthz_on(first).await;
    drop(open.pop());
    let status = tokio::time::timeout(Duration::from_secs(5), waiting)
        .await
        .expect("the waiting connection must be served once one closes")
        .unwrap()
        .unwrap();
    assert_eq!(status, 200);
}
