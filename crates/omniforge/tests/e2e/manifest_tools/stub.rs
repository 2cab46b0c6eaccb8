//! A loopback HTTP server that answers every request with one fixed response: the upstream failures a Connect server does not produce (an HTML 502 page, a 200 that is not JSON).

use super::*;

// A loopback HTTP server that answers every request with one fixed response
// ---------------------------------------------------------------------------------------

/// One request the stub received: the request line and headers, and the body.
#[derive(Debug, Clone)]
pub(super) struct StubRequest {
    pub(super) head: String,
    pub(super) body: String,
}

/// `std::net::TcpListener` on 127.0.0.1:0 answering every request with `response` (raw
/// bytes, `Connection: close`). Stops accepting when dropped.
pub(super) struct StubHttp {
    pub(super) url: String,
    pub(super) addr: std::net::SocketAddr,
    pub(super) requests: Arc<Mutex<Vec<StubRequest>>>,
    pub(super) stop: Arc<AtomicBool>,
    pub(super) thread: Option<std::thread::JoinHandle<()>>,
}

impl StubHttp {
    pub(super) fn start(response: Vec<u8>) -> StubHttp {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let url = format!("http://{addr}");
        let requests: Arc<Mutex<Vec<StubRequest>>> = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let (seen, stopping) = (requests.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            // A blocking accept; `Drop` wakes it with a connection of its own to stop.
            while let Ok((mut stream, _)) = listener.accept() {
                if stopping.load(Ordering::Relaxed) {
                    break;
                }
                let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
                if let Some(request) = read_request(&mut stream) {
                    seen.lock().unwrap().push(request);
                }
                let _ = stream.write_all(&response);
                let _ = stream.flush();
                let _ = stream.shutdown(std::net::Shutdown::Both);
            }
        });
        StubHttp {
            url,
            addr,
            requests,
            stop,
            thread: Some(thread),
        }
    }

    pub(super) fn requests(&self) -> Vec<StubRequest> {
        self.requests.lock().unwrap().clone()
    }
}

impl Drop for StubHttp {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = std::net::TcpStream::connect(self.addr);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Reads one HTTP/1.1 request (head and a Content-Length body).
pub(super) fn read_request(stream: &mut std::net::TcpStream) -> Option<StubRequest> {
    let mut data = Vec::new();
    let mut buf = [0u8; 4096];
    let head_end = loop {
        if let Some(i) = data.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let n = stream.read(&mut buf).ok()?;
        if n == 0 {
            return None;
        }
        data.extend_from_slice(&buf[..n]);
    };
    let head = String::from_utf8_lossy(&data[..head_end]).into_owned();
    let length: usize = head
        .lines()
        .find_map(|l| {
            let (name, value) = l.split_once(':')?;
            name.trim()
                .eq_ignore_ascii_case("content-length")
                .then(|| value.trim().parse().ok())?
        })
        .unwrap_or(0);
    while data.len() < head_end + length {
        let n = stream.read(&mut buf).ok()?;
        if n == 0 {
            break;
        }
        data.extend_from_slice(&buf[..n]);
    }
    let body = String::from_utf8_lossy(&data[head_end..]).into_owned();
    Some(StubRequest { head, body })
}

pub(super) fn http_response(status_line: &str, content_type: &str, body: &str) -> Vec<u8> {
    format!(
        "{status_line}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// A port on 127.0.0.1 that nothing listens on (bound, then closed).
pub(super) fn closed_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    port
}
