//! Raw MCP exchanges (no SDK), to see the JSON as sent: a Streamable HTTP session and `omniforge bridge` over stdio lines; the listing checks.

use super::*;

// ---------------------------------------------------------------------------------------
// Raw MCP exchanges (no SDK), to see the JSON as sent
// ---------------------------------------------------------------------------------------

/// A raw Streamable HTTP session: initialize and notifications/initialized done.
pub(super) struct RawHttp {
    pub(super) client: reqwest::Client,
    pub(super) url: String,
    /// Content-Type, Accept, Mcp-Session-Id, MCP-Protocol-Version (and Authorization).
    pub(super) headers: Vec<(String, String)>,
}

impl RawHttp {
    pub(super) async fn open(url: &str, token: Option<&str>) -> RawHttp {
        let client = support::http_client();
        let auth: Vec<(String, String)> = token
            .map(|t| vec![("Authorization".to_owned(), format!("Bearer {t}"))])
            .unwrap_or_default();
        let body = serde_json::to_vec(&support::initialize_request(1, "2025-11-25")).unwrap();
        let mut headers = support::post_headers(None, None);
        headers.extend(auth.clone());
        let reply = support::http_send(&client, "POST", url, &headers, Some(body), &[json!(1)])
            .await
            .expect("raw initialize");
        assert_eq!(reply.status, 200, "raw initialize: {reply:?}");
        let session = reply
            .header("mcp-session-id")
            .expect("raw initialize: no Mcp-Session-Id")
            .to_owned();
        let mut headers = support::post_headers(Some(&session), Some("2025-11-25"));
        headers.extend(auth);
        let raw = RawHttp {
            client,
            url: url.to_owned(),
            headers,
        };
        let reply = raw
            .post(json!({"jsonrpc":"2.0","method":"notifications/initialized"}))
            .await;
        assert_eq!(
            reply.status, 202,
            "raw notifications/initialized: {reply:?}"
        );
        raw
    }

    /// POSTs one message; for a request, reads until its response.
    pub(super) async fn post(&self, message: Value) -> support::HttpReply {
        let wait: Vec<Value> = message.get("id").cloned().into_iter().collect();
        support::http_send(
            &self.client,
            "POST",
            &self.url,
            &self.headers,
            Some(serde_json::to_vec(&message).unwrap()),
            &wait,
        )
        .await
        .unwrap_or_else(|e| panic!("raw POST {message}: {e}"))
    }

    /// The response to request `message`.
    pub(super) async fn request(&self, message: Value) -> Value {
        let id = message["id"].clone();
        let reply = self.post(message.clone()).await;
        reply
            .messages
            .iter()
            .find(|m| m["id"] == id && (m.get("result").is_some() || m.get("error").is_some()))
            .cloned()
            .unwrap_or_else(|| panic!("raw POST {message}: no response in {reply:?}"))
    }
}

/// initialize, notifications/initialized and tools/list over raw Streamable HTTP; the
/// `result.tools` array exactly as the server sent it.
pub(super) async fn raw_http_tools(url: &str, token: Option<&str>) -> Vec<Value> {
    let raw = RawHttp::open(url, token).await;
    let response = raw
        .request(json!({"jsonrpc":"2.0","id":2,"method":"tools/list"}))
        .await;
    response["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("raw tools/list: no result.tools in {response}"))
        .clone()
}

/// Problems with the listed tools' shape: forge keys, non-MCP keys, schemas that differ
/// from the manifest's, the streaming RPC listed, a unary RPC missing.
pub(super) fn listing_problems(tools: &[Value], expect_builtins: bool) -> Vec<String> {
    let manifest: Value =
        serde_json::from_slice(&std::fs::read(fixture_manifest()).unwrap()).unwrap();
    let mut problems = Vec::new();
    let names: Vec<&str> = tools.iter().filter_map(|t| t["name"].as_str()).collect();
    for want in UNARY_TOOLS {
        if !names.contains(&want) {
            problems.push(format!("{want} is not listed: {names:?}"));
        }
    }
    if names.contains(&"fixture_watch") {
        problems.push("fixture_watch (a server-streaming RPC) is listed".into());
    }
    let has_builtin = names.contains(&"omniforge_instructions");
    if has_builtin != expect_builtins {
        problems.push(format!(
            "omniforge_instructions listed: {has_builtin}, expected {expect_builtins}: {names:?}"
        ));
    }
    for tool in tools {
        let name = tool["name"].as_str().unwrap_or("?");
        let Some(object) = tool.as_object() else {
            problems.push(format!("a tool is not an object: {tool}"));
            continue;
        };
        for key in object.keys() {
            if FORGE_KEYS.contains(&key.as_str()) {
                problems.push(format!(
                    "{name} carries the forge routing key `{key}`: {tool}"
                ));
            } else if !MCP_TOOL_KEYS.contains(&key.as_str()) {
                problems.push(format!("{name} carries the non-MCP key `{key}`: {tool}"));
            }
        }
        let Some(entry) = manifest["tools"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == name)
        else {
            continue;
        };
        for key in ["inputSchema", "outputSchema", "description"] {
            if tool[key] != entry[key] {
                problems.push(format!(
                    "{name}.{key} differs from the manifest's: listed {}, manifest {}",
                    tool[key], entry[key]
                ));
            }
        }
    }
    problems
}

/// `omniforge bridge` spoken to with raw newline-delimited JSON-RPC.
pub(super) struct RawBridge {
    pub(super) child: Child,
    pub(super) stdin: Option<ChildStdin>,
    pub(super) lines: mpsc::UnboundedReceiver<String>,
    pub(super) stderr: Captured,
    pub(super) _dir: TempDir,
}

impl RawBridge {
    pub(super) async fn start(args: &[&str]) -> RawBridge {
        let dir = tempfile::tempdir().unwrap();
        let mut cmd = Command::new(BIN);
        cmd.args(["bridge", "--data-dir"])
            .arg(dir.path())
            .args(args)
            .env("NO_COLOR", "1");
        let mut child = no_proxy(&mut cmd)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {BIN} bridge: {e}"));
        let stdin = child.stdin.take();
        let stderr = Captured::default();
        drain(child.stderr.take().unwrap(), stderr.clone());
        let lines = line_reader(child.stdout.take().unwrap(), Captured::default());
        RawBridge {
            child,
            stdin,
            lines,
            stderr,
            _dir: dir,
        }
    }

    pub(super) async fn send(&mut self, message: Value) {
        let mut line = message.to_string();
        line.push('\n');
        let stdin = self.stdin.as_mut().unwrap();
        stdin.write_all(line.as_bytes()).await.unwrap();
        stdin.flush().await.unwrap();
    }

    /// The next message from the server, or `None` within `timeout`.
    pub(super) async fn next(&mut self, timeout: Duration) -> Option<Value> {
        match tokio::time::timeout(timeout, self.lines.recv()).await {
            Ok(Some(line)) => Some(
                serde_json::from_str(&line)
                    .unwrap_or_else(|e| panic!("bridge stdout line is not JSON ({e}): {line:?}")),
            ),
            _ => None,
        }
    }

    /// Waits for the response to `id`; every other message read meanwhile is returned too.
    pub(super) async fn response(&mut self, id: i64, timeout: Duration) -> (Value, Vec<Value>) {
        let deadline = tokio::time::Instant::now() + timeout;
        let mut others = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            match self.next(left).await {
                Some(m)
                    if m["id"] == id && (m.get("result").is_some() || m.get("error").is_some()) =>
                {
                    return (m, others);
                }
                Some(m) => others.push(m),
                None => panic!(
                    "bridge: no response to id {id} within {timeout:?} (other messages: {others:?}); \
                     stderr:\n{}",
                    self.stderr.tail(6000)
                ),
            }
        }
    }

    /// Polls `fixture_stats` until `field` is at least 1 (up to `within`): the stats. Request
    /// ids count up from `*id`; messages for other ids go to `late`.
    pub(super) async fn wait_stat(
        &mut self,
        id: &mut i64,
        late: &mut Vec<Value>,
        field: &str,
        within: Duration,
    ) -> Value {
        eventually(
            within,
            &format!("bridge: fixture_stats {field} >= 1"),
            async || {
                *id += 1;
                self.send(json!({"jsonrpc":"2.0","id":*id,"method":"tools/call",
                             "params":{"name":"fixture_stats","arguments":{}}}))
                    .await;
                let (m, others) = self.response(*id, Duration::from_secs(10)).await;
                late.extend(others);
                let stats = m["result"]["structuredContent"].clone();
                if stats[field].as_i64().unwrap_or(0) >= 1 {
                    Ok(stats)
                } else {
                    Err(stats.to_string())
                }
            },
        )
        .await
    }

    pub(super) async fn initialize(&mut self) {
        self.send(support::initialize_request(0, "2025-11-25"))
            .await;
        let (m, _) = self.response(0, Duration::from_secs(20)).await;
        assert!(m.get("result").is_some(), "bridge initialize: {m}");
        self.send(json!({"jsonrpc":"2.0","method":"notifications/initialized"}))
            .await;
    }
}

impl Drop for RawBridge {
    fn drop(&mut self) {
        kill_and_reap(&mut self.child);
    }
}

/// Copies the fixture manifest into a fresh temp dir; the dir and the copy's path.
pub(super) fn manifest_copy() -> (TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("manifest.json");
    std::fs::copy(fixture_manifest(), &path).unwrap();
    (dir, path)
}

/// Replaces `path` as a generator would: a temp file in the same directory, renamed over it.
pub(super) fn write_atomically(path: &Path, bytes: &[u8]) {
    let tmp = path.with_extension("json.tmp");
    std::fs::write(&tmp, bytes).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}
