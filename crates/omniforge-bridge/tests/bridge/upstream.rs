//! One call against a real local HTTP server: the response size cap (issue 11 finding 7: a
//! 1 GiB answer must not be buffered) and redirects (a 302 must not be followed).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::thread::JoinHandle;
use std::time::Duration;

use omniforge_bridge::ManifestTool;
use omniforge_bridge::dispatch::{DEFAULT_MAX_RESPONSE_BYTES, Outcome, Upstream, UpstreamConfig};
use serde_json::{Map, json};

/// One gibibyte.
const GIB: u64 = 1 << 30;

/// The far bound on what a server may get to write before the client gives up: the cap plus
/// socket buffers, nowhere near the gigabyte it tried to send.
const WRITTEN_BOUND: u64 = 128 << 20;

/// How a test server answers one request.
enum Reply {
    /// The status line and headers (without the blank line), then this body.
    Fixed { head: String, body: Vec<u8> },
    /// `200 OK` with `total` bytes of `x`, streamed in 64 KiB pieces, chunked or with a
    /// declared `Content-Length`.
    Stream { total: u64, declare_length: bool },
}

/// Serves one connection per reply, one request each, on 127.0.0.1:0. The handle yields, per
/// connection, how many body bytes were written before the client went away.
fn serve(replies: Vec<Reply>) -> (SocketAddr, JoinHandle<Vec<u64>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let handle = std::thread::spawn(move || {
        replies
            .into_iter()
            .map(|reply| {
                let (stream, _) = listener.accept().unwrap();
                answer(stream, reply)
            })
            .collect()
    });
    (addr, handle)
}

/// Reads the request (headers and a `Content-Length` body), then writes `reply` until it is
/// done or the peer is gone; returns the body bytes written.
fn answer(stream: TcpStream, reply: Reply) -> u64 {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut length = 0usize;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap() == 0 || line == "\r\n" {
            break;
        }
        if let Some((name, value)) = line.split_once(':')
            && name.eq_ignore_ascii_case("content-length")
        {
            length = value.trim().parse().unwrap();
        }
    }
    let mut request_body = vec![0; length];
    reader.read_exact(&mut request_body).unwrap();
    let mut out = stream;
    match reply {
        Reply::Fixed { head, body } => {
            let sent = out
                .write_all(format!("{head}\r\n\r\n").as_bytes())
                .and_then(|()| out.write_all(&body));
            if sent.is_ok() { body.len() as u64 } else { 0 }
        }
        Reply::Stream {
            total,
            declare_length,
        } => {
            let framing = if declare_length {
                format!("Content-Length: {total}")
            } else {
                "Transfer-Encoding: chunked".to_owned()
            };
            let head =
                format!("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n{framing}\r\n\r\n");
            if out.write_all(head.as_bytes()).is_err() {
                return 0;
            }
            let piece = vec![b'x'; 64 << 10];
            let mut written = 0u64;
            while written < total {
                let n = piece.len().min(usize::try_from(total - written).unwrap());
                let sent = if declare_length {
                    out.write_all(&piece[..n])
                } else {
                    out.write_all(format!("{n:x}\r\n").as_bytes())
                        .and_then(|()| out.write_all(&piece[..n]))
                        .and_then(|()| out.write_all(b"\r\n"))
                };
                if sent.is_err() {
                    // The client closed the connection: it stopped reading.
                    return written;
                }
                written += n as u64;
            }
            if !declare_length {
                let _ = out.write_all(b"0\r\n\r\n");
            }
            written
        }
    }
}

/// What the server wrote per connection, once it is done. Awaited off the runtime's thread: the
/// client's connection tasks must keep running (to close their sockets) while the server ends.
async fn finished(server: JoinHandle<Vec<u64>>) -> Vec<u64> {
    tokio::task::spawn_blocking(move || server.join().unwrap())
        .await
        .unwrap()
}

fn upstream(addr: SocketAddr, max_response_bytes: u64) -> Upstream {
    Upstream::new(&UpstreamConfig {
        base_url: format!("http://{addr}"),
        auth_header: Some("Bearer upstream-secret".into()),
        timeout: Duration::from_secs(120),
        headers: Vec::new(),
        max_response_bytes,
    })
    .unwrap()
}

fn tool() -> ManifestTool {
    serde_json::from_value(json!({
        "name": "echo",
        "inputSchema": {"type": "object"},
        "procedure": "/fixture.v1.Echo/Echo"
    }))
    .unwrap()
}

async fn call(upstream: &Upstream) -> Outcome {
    upstream.call(&tool(), &Map::new()).await
}

fn failure(outcome: Outcome) -> String {
    match outcome {
        Outcome::Failure(text) => text,
        other => panic!("expected a failure, got {other:?}"),
    }
}

#[tokio::test]
async fn a_streamed_gigabyte_is_abandoned_at_the_default_cap() {
    let (addr, server) = serve(vec![Reply::Stream {
        total: GIB,
        declare_length: false,
    }]);
    assert_eq!(DEFAULT_MAX_RESPONSE_BYTES, 16 << 20);
    let text = failure(call(&upstream(addr, DEFAULT_MAX_RESPONSE_BYTES)).await);
    assert!(
        text.contains("16 MiB (16777216 bytes)") && text.contains("max_response_bytes"),
        "{text}"
    );
    assert!(!text.contains("upstream-secret"), "{text}");
    let written = finished(server).await[0];
    assert!(
        written > DEFAULT_MAX_RESPONSE_BYTES && written < WRITTEN_BOUND,
        "the server wrote {written} bytes before the client stopped reading"
    );
}

#[tokio::test]
async fn a_declared_gigabyte_is_refused_before_its_body_is_read() {
    let (addr, server) = serve(vec![Reply::Stream {
        total: GIB,
        declare_length: true,
    }]);
    let text = failure(call(&upstream(addr, 1 << 20)).await);
    assert!(
        text.contains("1 MiB (1048576 bytes)") && text.contains("declared 1024 MiB"),
        "{text}"
    );
    let written = finished(server).await[0];
    assert!(written < WRITTEN_BOUND, "{written}");
}

#[tokio::test]
async fn a_body_of_exactly_the_cap_is_read_and_one_byte_more_is_not() {
    let body = json!({"pad": "y".repeat(1000)}).to_string().into_bytes();
    let n = body.len() as u64;
    for declare_length in [true, false] {
        let fixed = |body: &[u8]| {
            let framing = if declare_length {
                format!("Content-Length: {}", body.len())
            } else {
                // Close-delimited: the cap must hold without any declared length.
                "Connection: close".to_owned()
            };
            Reply::Fixed {
                head: format!("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n{framing}"),
                body: body.to_vec(),
            }
        };
        let (addr, server) = serve(vec![fixed(&body), fixed(&body)]);
        match call(&upstream(addr, n)).await {
            Outcome::Reply(value) => assert_eq!(value["pad"].as_str().unwrap().len(), 1000),
            other => panic!("at the cap ({declare_length}): {other:?}"),
        }
        let text = failure(call(&upstream(addr, n - 1)).await);
        assert!(
            text.contains(&format!("{} bytes", n - 1)),
            "over the cap ({declare_length}): {text}"
        );
        finished(server).await;
    }
}

#[tokio::test]
async fn redirects_are_failures_that_name_the_status_and_location() {
    // Where the redirects point: nothing may ever connect to it.
    let target = TcpListener::bind("127.0.0.1:0").unwrap();
    target.set_nonblocking(true).unwrap();
    let location = format!(
        "http://{}/fixture.v1.Echo/Echo",
        target.local_addr().unwrap()
    );
    let statuses = [
        (301, "Moved Permanently"),
        (302, "Found"),
        (303, "See Other"),
        (307, "Temporary Redirect"),
        (308, "Permanent Redirect"),
    ];
    let replies = statuses
        .iter()
        .map(|(code, reason)| Reply::Fixed {
            head: format!(
                "HTTP/1.1 {code} {reason}\r\nLocation: {location}\r\nContent-Length: 0\r\nConnection: close"
            ),
            body: Vec::new(),
        })
        .collect();
    let (addr, server) = serve(replies);
    let upstream = upstream(addr, DEFAULT_MAX_RESPONSE_BYTES);
    for (code, reason) in statuses {
        let text = failure(call(&upstream).await);
        assert!(
            text.contains(&format!("HTTP {code} {reason}"))
                && text.contains(&format!("Location: {location}"))
                && text.contains("not followed"),
            "{text}"
        );
    }
    finished(server).await;
    match target.accept() {
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
        other => panic!("the redirect target was contacted: {other:?}"),
    }
}

#[tokio::test]
async fn a_redirect_without_a_location_is_named_too() {
    let (addr, server) = serve(vec![Reply::Fixed {
        head: "HTTP/1.1 302 Found\r\nContent-Length: 0\r\nConnection: close".into(),
        body: Vec::new(),
    }]);
    let text = failure(call(&upstream(addr, DEFAULT_MAX_RESPONSE_BYTES)).await);
    assert!(
        text.contains("HTTP 302 Found") && text.contains("without a Location"),
        "{text}"
    );
    finished(server).await;
}
