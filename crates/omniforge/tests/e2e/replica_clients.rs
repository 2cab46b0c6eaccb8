//! The official MCP clients through the balancer of the replica test (issue 14): the Python SDK
//! 2.x without a session (2026-07-28, round robin) and 2025-x sessions of the Python and
//! TypeScript SDKs, driven line by line (`drivers/replica_client.py`, `.mjs`).

use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;
use tokio::process::{Child, ChildStdin};
use tokio::sync::mpsc;

use crate::procs::{Captured, drain, kill_and_reap};
use crate::util::{
    self, e2e_dir, http_send, line_channel, no_proxy, node_driver, post_headers, python_driver,
    python2, require, spawn_piped, ts_modules,
};

/// How long a driver may take to answer one command (a request, or a new session and a
/// request; the machine is shared).
const ANSWER: Duration = Duration::from_secs(90);

/// Which official client a driver runs.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Sdk {
    /// PyPI `mcp` 2.x (`.deps/py-mcp2`).
    Python,
    /// npm `@modelcontextprotocol/sdk` 1.x (`.deps/node`), run by Node 22.
    TypeScript,
}

/// One driver process, ended by pid when dropped.
pub(crate) struct Driver {
    pub(crate) sdk: Sdk,
    child: Child,
    stdin: ChildStdin,
    lines: mpsc::UnboundedReceiver<String>,
    stderr: Captured,
    _home: tempfile::TempDir,
}

impl Drop for Driver {
    fn drop(&mut self) {
        kill_and_reap(&mut self.child);
    }
}

impl Driver {
    /// Starts `replica_client MODE URL` (`stateless` or `session`) with `sdk`.
    pub(crate) fn start(sdk: Sdk, mode: &str, url: &str) -> Driver {
        Driver::start_with(sdk, &[mode, url])
    }

    /// Starts `replica_client ARGS...` with `sdk` (see the drivers' usage).
    pub(crate) fn start_with(sdk: Sdk, args: &[&str]) -> Driver {
        let home = tempfile::tempdir().unwrap();
        let mut cmd = match sdk {
            Sdk::Python => {
                require(&[python2()]);
                python_driver(&python2(), &e2e_dir("drivers").join("replica_client.py"))
            }
            Sdk::TypeScript => {
                require(&[util::node22(), ts_modules()]);
                node_driver(home.path(), &e2e_dir("drivers").join("replica_client.mjs"))
            }
        };
        no_proxy(cmd.args(args));
        let mut child = spawn_piped(&mut cmd).expect("a client driver");
        let stdin = child.stdin.take().unwrap();
        let lines = line_channel(child.stdout.take().unwrap());
        let stderr = Captured::default();
        drain(child.stderr.take().unwrap(), stderr.clone());
        Driver {
            sdk,
            child,
            stdin,
            lines,
            stderr,
            _home: home,
        }
    }

    /// Sends one command line.
    pub(crate) async fn send(&mut self, command: &str) {
        self.stdin
            .write_all(format!("{command}\n").as_bytes())
            .await
            .unwrap_or_else(|e| panic!("{:?} driver: {e}\n{}", self.sdk, self.stderr.tail(3000)));
        self.stdin.flush().await.unwrap();
    }

    /// The next answer line: its tag and JSON payload (`null` when it has none).
    pub(crate) async fn answer(&mut self) -> (String, Value) {
        let line = tokio::time::timeout(ANSWER, self.lines.recv())
            .await
            .ok()
            .flatten()
            .unwrap_or_else(|| {
                panic!(
                    "{:?} driver: no answer within {ANSWER:?}\n{}",
                    self.sdk,
                    self.stderr.tail(4000)
                )
            });
        match line.split_once(' ') {
            Some((tag, payload)) => (tag.to_owned(), serde_json::from_str(payload).unwrap()),
            None => (line, Value::Null),
        }
    }

    /// The next answer, which must be tagged `tag`; its payload.
    pub(crate) async fn expect(&mut self, tag: &str) -> Value {
        let (got, payload) = self.answer().await;
        assert_eq!(
            got,
            tag,
            "{:?} driver: {payload}\n{}",
            self.sdk,
            self.stderr.tail(4000)
        );
        payload
    }

    /// What the driver wrote to stderr lately.
    pub(crate) fn stderr_tail(&self) -> String {
        self.stderr.tail(4000)
    }
}

/// Whether the session `id` (of revision `version`) lives on the replica at `url`: a ping sent
/// there directly is answered (any other replica answers 404).
pub(crate) async fn lives_on(url: &str, id: &str, version: &str) -> bool {
    let ping = json!({"jsonrpc": "2.0", "id": 1, "method": "ping"});
    http_send(
        &util::http_client(),
        "POST",
        url,
        &post_headers(Some(id), Some(version)),
        Some(serde_json::to_vec(&ping).unwrap()),
        &[json!(1)],
    )
    .await
    .is_ok_and(|reply| reply.status == 200)
}

/// A session driver of `sdk` whose session, opened through the balancer at `lb`, lives on the
/// replica at `replica` (it opens new sessions until one lands there); its session id.
pub(crate) async fn session_on(sdk: Sdk, lb: &str, replica: &str) -> (Driver, String) {
    let mut driver = Driver::start(sdk, "session", lb);
    for _ in 0..30 {
        let session = driver.expect("SESSION").await;
        let id = session["id"].as_str().unwrap().to_owned();
        if lives_on(replica, &id, session["version"].as_str().unwrap()).await {
            return (driver, id);
        }
        driver.send("open").await;
    }
    panic!("no {sdk:?} session through the balancer landed on {replica}");
}

/// The stateless driver's counts (`ok`, `failed`, first `errors`) since its last report, summed
/// over reports every 200 ms until at least one call worked (a loaded machine may be slow to
/// answer the first).
pub(crate) async fn counts_with_a_success(stateless: &mut Driver) -> Value {
    let mut sum = json!({"ok": 0, "failed": 0, "errors": []});
    for _ in 0..300 {
        stateless.send("report").await;
        let counts = stateless.expect("COUNTS").await;
        for key in ["ok", "failed"] {
            sum[key] = json!(sum[key].as_u64().unwrap() + counts[key].as_u64().unwrap());
        }
        if let Some(errors) = counts["errors"].as_array() {
            sum["errors"]
                .as_array_mut()
                .unwrap()
                .extend(errors.iter().cloned());
        }
        if sum["ok"].as_u64() > Some(0) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    sum
}
