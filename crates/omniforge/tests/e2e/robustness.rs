//! Robustness: 10,000 random and mutated JSON-RPC messages against the real binary, over
//! stdio and over Streamable HTTP. The server must answer garbage with well-formed JSON-RPC
//! (or HTTP 4xx), keep serving, and never panic.
//!
//! The messages come from a seeded xorshift generator, so a run is reproducible: the seed is
//! printed, and `OMNIFORGE_ROBUST_SEED=N` replays another one. Valid `initialize`, `ping`,
//! `tools/list`, `tools/call`, notifications and responses are mutated structurally (wrong
//! types for id/method/params/arguments, huge numbers, nesting up to 200 levels, batches) and
//! byte-wise (dropped, duplicated, flipped bytes, invalid UTF-8, truncation), and mixed with
//! framing oddities (empty lines, CRLF, lone brackets, whitespace).
//!
//! Checks: stdio — every stdout line is a JSON-RPC 2.0 object or a non-empty array of them,
//! every unmutated request is answered, a final `ping` gets exactly `result: {}`, the process
//! is alive and exits on EOF; HTTP — no 5xx, every JSON/SSE body parses, an unmutated request
//! accepted with 200 is answered in that response, a final `ping` in the fuzzed session gets
//! `result: {}`, `/healthz` is 200. Neither may log `panicked`. The `*_odd_request_ids` tests
//! send pings with legal but unusual ids one at a time: each must be answered exactly once.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};

use crate::support::{self, ReadError, Serve, StdioServer, http_client};

/// How many generated messages each test sends.
const MESSAGES: usize = 10_000;

/// The default seed; `OMNIFORGE_ROBUST_SEED` overrides it.
const DEFAULT_SEED: u64 = 0x0F0E_F0E1_D2C3_B4A5;

/// The id of the closing ping. The generator never produces it.
const FINAL_PING_ID: &str = "robustness-final-ping";

fn seed() -> u64 {
    match std::env::var("OMNIFORGE_ROBUST_SEED") {
        Ok(s) => s
            .trim()
            .parse()
            .unwrap_or_else(|e| panic!("OMNIFORGE_ROBUST_SEED={s:?} is not a u64: {e}")),
        Err(_) => DEFAULT_SEED,
    }
}

// ---------------------------------------------------------------------------------------
// The generator
// ---------------------------------------------------------------------------------------

/// xorshift64*: tiny, deterministic, good enough to pick mutations.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        // A zero state would stay zero.
        Rng(seed ^ 0x9E37_79B9_7F4A_7C15 | 1)
    }

    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in `0..n` (n > 0).
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    /// True with probability `percent`/100.
    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// Marks a place in a JSON value to be replaced, after serialization, by raw text that a
/// `Value` cannot hold (numbers beyond f64, `NaN`, textual deep nesting).
const RAW_MARK: &str = "\u{1}raw\u{1}";

struct Generator {
    rng: Rng,
    /// Raw texts for the [`RAW_MARK`]s of the message being built, in order.
    raw: Vec<String>,
    next_id: u64,
}

const METHODS: &[&str] = &[
    "initialize",
    "ping",
    "tools/list",
    "tools/call",
    "notifications/initialized",
    "notifications/cancelled",
    "notifications/progress",
    "notifications/roots/list_changed",
    "logging/setLevel",
    "resources/list",
    "resources/read",
    "prompts/list",
    "prompts/get",
    "completion/complete",
    "no/such/method",
    "rpc.discover",
    "",
];

const VERSIONS: &[&str] = &[
    "2024-11-05",
    "2025-03-26",
    "2025-06-18",
    "2025-11-25",
    "2026-07-28",
    "1999-01-01",
    "",
    "latest",
];

/// Strings that tend to trip parsers and routers.
const ODD_STRINGS: &[&str] = &[
    "",
    " ",
    "\u{0}",
    "\u{feff}",
    "é",
    "𝄞",
    "\u{202e}evil",
    "../../../etc/passwd",
    "omniforge-batch/0/0",
    "omniforge-batch/1/0",
    "null",
    "{}",
    "[]",
    "\"",
    "\\",
    "\r\n",
    "%s%n%x",
    "omniforge_instructions",
    "OMNIFORGE_INSTRUCTIONS",
    "omniforge_instructions ",
];

/// Raw JSON (or almost-JSON) number tokens.
const HUGE_NUMBERS: &[&str] = &[
    "1e400",
    "-1e400",
    "1E-400",
    "123456789012345678901234567890",
    "-123456789012345678901234567890",
    "18446744073709551616",
    "18446744073709551615",
    "9223372036854775808",
    "-9223372036854775809",
    "-0",
    "0.0000000000000000000000001",
    "1.7976931348623157e308",
    "NaN",
    "Infinity",
    "-Infinity",
    "0x10",
    "01",
    "1.",
    ".5",
    "+1",
];

/// Whole lines that are not messages.
const ODD_LINES: &[&[u8]] = &[
    b"",
    b" ",
    b"\t",
    b"\r",
    b"[",
    b"]",
    b"{",
    b"}",
    b"[]",
    b"{}",
    b"[[]]",
    b"[{}]",
    b"[[{}]]",
    b"null",
    b"true",
    b"false",
    b"0",
    b"-1",
    b"\"ping\"",
    b"[1,2,3]",
    b"[null]",
    b"{\"jsonrpc\":\"2.0\"}",
    b"{\"jsonrpc\":\"2.0\",\"id\":1}",
    b"{\"jsonrpc\":\"2.0\",\"method\":null}",
    b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"id\":2}",
    b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{},\"error\":{\"code\":1,\"message\":\"x\"}}",
    b"\xef\xbb\xbf{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}",
    b"\xff\xfe\xfd",
    b"\xc3\x28",
    b"{\"jsonrpc\":\"2.0\",\"id\":\"\xed\xa0\x80\",\"method\":\"ping\"}",
    b"{\"jsonrpc\":\"2.0\",\"id\":\"\\ud800\",\"method\":\"ping\"}",
    b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\"}",
    b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"} trailing",
    b"\x00\x00\x00",
    b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"",
    b"{'jsonrpc':'2.0','id':1,'method':'ping'}",
];

impl Generator {
    fn new(seed: u64) -> Generator {
        Generator {
            rng: Rng::new(seed),
            raw: Vec::new(),
            next_id: 1,
        }
    }

    fn id(&mut self) -> Value {
        self.next_id += 1;
        if self.rng.chance(30) {
            json!(format!("r-{}", self.next_id))
        } else {
            json!(self.next_id)
        }
    }

    /// A placeholder for `text`; [`Generator::serialize`] puts `text` in its place (in every
    /// copy of it, should a mutation duplicate the placeholder).
    fn raw(&mut self, text: String) -> Value {
        self.raw.push(text);
        json!(format!("{RAW_MARK}{}{RAW_MARK}", self.raw.len() - 1))
    }

    /// A nested value `depth` levels deep, as raw text (a `Value` that deep is fine for
    /// serde_json here, but the text form lets us exceed its parser's recursion limit).
    fn deep(&mut self, depth: usize) -> Value {
        let (open, close) = match self.rng.below(3) {
            0 => ("[".repeat(depth), "]".repeat(depth)),
            1 => ("{\"a\":".repeat(depth), "}".repeat(depth)),
            _ => ("[{\"a\":".repeat(depth), "}]".repeat(depth)),
        };
        let inner = if self.rng.chance(50) { "1" } else { "{}" };
        self.raw(format!("{open}{inner}{close}"))
    }

    /// A random JSON value of any type, sometimes odd.
    fn any_value(&mut self) -> Value {
        match self.rng.below(14) {
            0 => Value::Null,
            1 => json!(self.rng.chance(50)),
            2 => json!(self.rng.next() as i64),
            3 => json!(-1.5e300),
            4 => json!(*self.rng.pick(ODD_STRINGS)),
            5 => json!([]),
            6 => json!({}),
            7 => json!([1, "two", null, {"three": [3]}]),
            8 => json!({"name": 5, "arguments": "x", "_meta": []}),
            9 => {
                let n = *self.rng.pick(HUGE_NUMBERS);
                self.raw(n.to_owned())
            }
            10 => {
                let depth = 1 + self.rng.below(200);
                self.deep(depth)
            }
            11 => json!("x".repeat(1 + self.rng.below(20_000))),
            12 => json!(u64::MAX),
            _ => json!(i64::MIN),
        }
    }

    /// A valid (or nearly so) client message.
    fn base(&mut self) -> Value {
        let id = self.id();
        match self.rng.below(16) {
            0 | 1 => json!({"jsonrpc": "2.0", "id": id, "method": "initialize", "params": {
                "protocolVersion": *self.rng.pick(VERSIONS),
                "capabilities": {"roots": {"listChanged": true}, "sampling": {}},
                "clientInfo": {"name": "robust", "version": "0"}
            }}),
            2 | 3 => json!({"jsonrpc": "2.0", "id": id, "method": "ping"}),
            4 => json!({"jsonrpc": "2.0", "id": id, "method": "tools/list"}),
            5 => json!({"jsonrpc": "2.0", "id": id, "method": "tools/list",
                        "params": {"cursor": *self.rng.pick(ODD_STRINGS)}}),
            6 | 7 => json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                            "params": {"name": "omniforge_instructions", "arguments": {}}}),
            8 => json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                        "params": {"name": *self.rng.pick(ODD_STRINGS),
                                   "arguments": {"name": "x", "n": 1}}}),
            9 => json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
            10 => json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                         "params": {"requestId": id, "reason": "robustness"}}),
            11 => json!({"jsonrpc": "2.0", "method": "notifications/progress",
                         "params": {"progressToken": id, "progress": 1, "total": 2}}),
            12 => json!({"jsonrpc": "2.0", "id": id, "result": {}}),
            13 => json!({"jsonrpc": "2.0", "id": id,
                         "error": {"code": -32601, "message": "no"}}),
            14 => json!({"jsonrpc": "2.0", "id": id, "method": "logging/setLevel",
                         "params": {"level": "debug"}}),
            _ => json!({"jsonrpc": "2.0", "id": id,
                        "method": *self.rng.pick(METHODS), "params": {}}),
        }
    }

    /// One structural mutation of a message object.
    fn mutate_value(&mut self, msg: &mut Value) {
        let Some(obj) = msg.as_object_mut() else {
            return;
        };
        // `obj` borrows `msg`; values are built first, then inserted.
        match self.rng.below(12) {
            // id: wrong type, huge, odd string, removed, added.
            0 | 1 => {
                let id = match self.rng.below(6) {
                    0 => self.any_value(),
                    1 => {
                        let n = *self.rng.pick(HUGE_NUMBERS);
                        self.raw(n.to_owned())
                    }
                    2 => json!(*self.rng.pick(ODD_STRINGS)),
                    3 => json!(1.5),
                    4 => Value::Null,
                    _ => json!(true),
                };
                if self.rng.chance(15) {
                    obj.remove("id");
                } else {
                    obj.insert("id".into(), id);
                }
            }
            // method: wrong type or another method.
            2 => {
                let method = match self.rng.below(4) {
                    0 => self.any_value(),
                    1 => json!(*self.rng.pick(METHODS)),
                    2 => json!(*self.rng.pick(ODD_STRINGS)),
                    _ => json!("tools/call".to_uppercase()),
                };
                obj.insert("method".into(), method);
            }
            3 => {
                obj.remove("method");
            }
            // params: wrong type or deep.
            4 | 5 => {
                let params = self.any_value();
                obj.insert("params".into(), params);
            }
            // tools/call arguments and name: wrong types.
            6 | 7 => {
                let arguments = self.any_value();
                let name = if self.rng.chance(30) {
                    self.any_value()
                } else {
                    json!("omniforge_instructions")
                };
                let params = obj
                    .entry("params")
                    .or_insert_with(|| Value::Object(Map::new()));
                if let Some(p) = params.as_object_mut() {
                    p.insert("arguments".into(), arguments);
                    p.insert("name".into(), name);
                }
            }
            // jsonrpc: wrong or missing.
            8 => {
                let v = match self.rng.below(5) {
                    0 => json!("1.0"),
                    1 => json!(2.0),
                    2 => Value::Null,
                    3 => json!("2.0 "),
                    _ => json!("2"),
                };
                if self.rng.chance(30) {
                    obj.remove("jsonrpc");
                } else {
                    obj.insert("jsonrpc".into(), v);
                }
            }
            // Extra or conflicting members.
            9 => {
                let v = self.any_value();
                let key = *self
                    .rng
                    .pick(&["result", "error", "params", "_meta", "extra", ""]);
                obj.insert(key.into(), v);
            }
            // _meta with odd progress tokens.
            10 => {
                let token = self.any_value();
                let params = obj
                    .entry("params")
                    .or_insert_with(|| Value::Object(Map::new()));
                if let Some(p) = params.as_object_mut() {
                    p.insert("_meta".into(), json!({"progressToken": token}));
                }
            }
            // initialize with broken params.
            _ => {
                let caps = self.any_value();
                let version = self.any_value();
                obj.insert("method".into(), json!("initialize"));
                obj.insert(
                    "params".into(),
                    json!({"protocolVersion": version, "capabilities": caps, "clientInfo": caps}),
                );
            }
        }
    }

    /// Serializes `msg`, replacing the raw marks.
    fn serialize(&mut self, msg: &Value) -> Vec<u8> {
        let mut text = msg.to_string();
        // Highest index first, so that placeholder 1 never matches inside placeholder 12.
        for (i, raw) in std::mem::take(&mut self.raw).into_iter().enumerate().rev() {
            let mark = serde_json::to_string(&format!("{RAW_MARK}{i}{RAW_MARK}")).unwrap();
            text = text.replace(&mark, &raw);
        }
        text.into_bytes()
    }

    /// One byte-level mutation.
    fn mutate_bytes(&mut self, bytes: &mut Vec<u8>) {
        if bytes.is_empty() {
            bytes.push(b'{');
            return;
        }
        let at = self.rng.below(bytes.len());
        match self.rng.below(8) {
            0 => {
                bytes.remove(at);
            }
            1 => {
                let b = bytes[at];
                bytes.insert(at, b);
            }
            2 => bytes[at] ^= 1 << self.rng.below(8),
            3 => {
                // Any byte but a line feed, which would only split the line.
                let b = (self.rng.next() % 255) as u8;
                bytes.insert(at, if b == b'\n' { 0xff } else { b });
            }
            4 => {
                const BAD_UTF8: &[&[u8]] = &[
                    b"\xff",
                    b"\xc0\xaf",
                    b"\xed\xa0\x80",
                    b"\xf4\x90\x80\x80",
                    b"\xe2\x82",
                    b"\x80",
                ];
                let bad = *self.rng.pick(BAD_UTF8);
                bytes.splice(at..at, bad.iter().copied());
            }
            5 => bytes.truncate(at),
            6 => {
                let end = (at + 1 + self.rng.below(16)).min(bytes.len());
                let chunk = bytes[at..end].to_vec();
                bytes.splice(at..at, chunk);
            }
            _ => {
                let other = self.rng.below(bytes.len());
                bytes.swap(at, other);
            }
        }
    }

    /// One generated message body (no line terminator), and a label for statistics.
    fn message(&mut self) -> (Vec<u8>, &'static str) {
        match self.rng.below(100) {
            // Valid messages.
            0..=14 => {
                let msg = self.base();
                (self.serialize(&msg), "valid")
            }
            // Structurally mutated.
            15..=54 => {
                let mut msg = self.base();
                for _ in 0..1 + self.rng.below(3) {
                    self.mutate_value(&mut msg);
                }
                (self.serialize(&msg), "mutated")
            }
            // Byte-mutated (after an optional structural mutation).
            55..=79 => {
                let mut msg = self.base();
                if self.rng.chance(30) {
                    self.mutate_value(&mut msg);
                }
                let mut bytes = self.serialize(&msg);
                for _ in 0..1 + self.rng.below(4) {
                    self.mutate_bytes(&mut bytes);
                }
                (bytes, "bytes")
            }
            // Batches of valid and mutated messages, sometimes nested.
            80..=89 => {
                let n = self.rng.below(9);
                let mut items = Vec::new();
                for _ in 0..n {
                    let mut msg = self.base();
                    if self.rng.chance(40) {
                        self.mutate_value(&mut msg);
                    }
                    if self.rng.chance(5) {
                        msg = json!([msg]);
                    }
                    items.push(msg);
                }
                let mut bytes = self.serialize(&Value::Array(items));
                if self.rng.chance(15) {
                    self.mutate_bytes(&mut bytes);
                }
                (bytes, "batch")
            }
            // Framing oddities and non-messages.
            90..=96 => (self.rng.pick(ODD_LINES).to_vec(), "odd"),
            // Whole-message nesting.
            _ => {
                let depth = 1 + self.rng.below(200);
                let v = self.deep(depth);
                (self.serialize(&v), "deep")
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// stdio
// ---------------------------------------------------------------------------------------

/// Why a stdout line is not a well-formed JSON-RPC message (object, or array of objects,
/// each with `"jsonrpc":"2.0"`), if it is not.
fn bad_stdout_line(line: &[u8]) -> Option<String> {
    let Some(body) = line.strip_suffix(b"\n") else {
        return Some("not terminated by \\n".into());
    };
    if body.ends_with(b"\r") {
        return Some("ends with \\r\\n".into());
    }
    let value: Value = match serde_json::from_slice(body) {
        Ok(v) => v,
        Err(e) => return Some(format!("not JSON ({e})")),
    };
    let ok = |m: &Value| m.is_object() && m.get("jsonrpc") == Some(&json!("2.0"));
    match &value {
        Value::Array(items) if !items.is_empty() && items.iter().all(ok) => None,
        Value::Array(_) => {
            Some("an array that is empty or has a member without jsonrpc 2.0".into())
        }
        m if ok(m) => None,
        _ => Some("not an object with \"jsonrpc\":\"2.0\"".into()),
    }
}

/// The id of a request (a JSON object with `method` and `id`), if `bytes` is one.
fn request_id(bytes: &[u8]) -> Option<Value> {
    let m: Value = serde_json::from_slice(bytes).ok()?;
    m.get("method")?;
    m.get("id").cloned()
}

fn show(line: &[u8]) -> String {
    let text = String::from_utf8_lossy(line);
    if text.len() > 300 {
        let mut cut = 300;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        format!("{:?}... ({} bytes)", &text[..cut], line.len())
    } else {
        format!("{text:?}")
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn robust_stdio_survives_10k_mutated_messages() {
    let seed = seed();
    let started = Instant::now();
    // stdout is read (and kept whole) by the server's own reader task while we write.
    let mut server = StdioServer::start(&[]);

    // A real handshake first. 2025-03-26 allows batches, so they reach the regrouping code
    // instead of being refused wholesale.
    let init = json!({"jsonrpc":"2.0","id":"robust-init","method":"initialize","params":{
        "protocolVersion":"2025-03-26","capabilities":{},
        "clientInfo":{"name":"omniforge-robustness","version":"0"}}});
    server.send_line(&init.to_string()).await.unwrap();
    server
        .send_line("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}")
        .await
        .unwrap();

    // The 10,000 messages, written by their own task while stdout is read.
    // Ids of the unmutated requests: each must be answered.
    let mut expected: Vec<Value> = Vec::new();
    let (stats, written) = {
        let mut generator = Generator::new(seed);
        let mut stats: BTreeMap<&'static str, usize> = BTreeMap::new();
        let mut blob = Vec::new();
        for _ in 0..MESSAGES {
            let (bytes, kind) = generator.message();
            *stats.entry(kind).or_default() += 1;
            if kind == "valid" {
                expected.extend(request_id(&bytes));
            }
            if generator.rng.chance(3) {
                blob.extend_from_slice(if generator.rng.chance(50) {
                    b"\n"
                } else {
                    b"\r\n"
                });
            }
            blob.extend_from_slice(&bytes);
            blob.extend_from_slice(if generator.rng.chance(15) {
                b"\r\n"
            } else {
                b"\n"
            });
        }
        (stats, blob)
    };
    let bytes_written = written.len();
    let mut problems = Vec::new();
    let ping = json!({"jsonrpc":"2.0","id":FINAL_PING_ID,"method":"ping"});
    let writing = tokio::time::timeout(Duration::from_secs(60), async {
        for chunk in written.chunks(16 * 1024) {
            server.send_raw(chunk).await?;
        }
        server.send_line(&ping.to_string()).await
    })
    .await;
    match writing {
        Ok(Ok(())) => {}
        Ok(Err(e)) => problems.push(format!("writing to the server's stdin failed: {e}")),
        Err(_) => {
            problems.push("writing the messages took over 60 s (is the server reading?)".into());
        }
    }
    let written_at = started.elapsed();

    let needle = format!("\"{FINAL_PING_ID}\"").into_bytes();
    let final_answer = tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            let line = server.read_raw_line(Duration::from_secs(30)).await?;
            if line.windows(needle.len()).any(|w| w == needle) {
                return Ok(line);
            }
        }
    })
    .await;
    let answered_at = started.elapsed();
    match final_answer {
        Ok(Ok(line)) => {
            let got: Result<Value, _> = serde_json::from_slice(&line);
            let want = json!({"jsonrpc":"2.0","id":FINAL_PING_ID,"result":{}});
            if got.as_ref().ok() != Some(&want) {
                problems.push(format!(
                    "the final ping {{\"jsonrpc\":\"2.0\",\"id\":\"{FINAL_PING_ID}\",\"method\":\"ping\"}} \
                     was answered with {} instead of {want}",
                    show(&line)
                ));
            }
        }
        Ok(Err(ReadError::Closed)) => {
            problems.push("stdout closed before the final ping was answered".into());
        }
        Ok(Err(ReadError::Timeout)) | Err(_) => {
            problems.push("the final ping got no answer within 30 s".into());
        }
    }
    if !server.is_alive() {
        problems.push("the server process is not running any more".into());
    }

    // Close stdin: the server must exit, and every line it wrote is then in its stdout.
    match server.close(Duration::from_secs(15)).await {
        Some(status) if status.success() => {}
        Some(status) => problems.push(format!(
            "after stdin closed the server exited with {status}"
        )),
        None => problems.push("the server did not exit within 15 s of stdin closing".into()),
    }
    let stdout = server.stdout_bytes();
    let lines: Vec<&[u8]> = stdout.split_inclusive(|&b| b == b'\n').collect();
    let mut bad = Vec::new();
    let mut codes: BTreeMap<String, usize> = BTreeMap::new();
    let mut answered: std::collections::HashMap<String, usize> = Default::default();
    for (i, line) in lines.iter().enumerate() {
        match bad_stdout_line(line) {
            Some(why) => bad.push(format!("line {}: {why}: {}", i + 1, show(line))),
            None => {
                if let Ok(v) = serde_json::from_slice::<Value>(line) {
                    let items = match v {
                        Value::Array(items) => items,
                        m => vec![m],
                    };
                    for m in items {
                        if m.get("result").is_some() || m.get("error").is_some() {
                            *answered.entry(m["id"].to_string()).or_default() += 1;
                        }
                        let key = match m.pointer("/error/code") {
                            Some(code) => format!("error {code}"),
                            None if m.get("result").is_some() => "result".to_owned(),
                            None => format!(
                                "method {}",
                                m.get("method").and_then(Value::as_str).unwrap_or("?")
                            ),
                        };
                        *codes.entry(key).or_default() += 1;
                    }
                }
            }
        }
    }
    if !bad.is_empty() {
        problems.push(format!(
            "{} stdout line(s) are not JSON-RPC 2.0 messages; the first ones:\n      {}",
            bad.len(),
            bad.iter()
                .take(15)
                .cloned()
                .collect::<Vec<_>>()
                .join("\n      ")
        ));
    }
    let unanswered: Vec<String> = expected
        .iter()
        .map(Value::to_string)
        .filter(|id| !answered.contains_key(id))
        .collect();
    if !unanswered.is_empty() {
        problems.push(format!(
            "{} of the {} unmutated requests got no response; their ids: {}",
            unanswered.len(),
            expected.len(),
            unanswered
                .iter()
                .take(20)
                .cloned()
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    let err_text = server.stderr_all();
    let panics = support::panic_lines(&err_text);
    if !panics.is_empty() {
        problems.push(format!(
            "stderr reports a panic: {:?}",
            &panics[..panics.len().min(5)]
        ));
    }

    eprintln!(
        "robust stdio: seed {seed}, {MESSAGES} messages ({bytes_written} bytes) {stats:?}; \
         written after {:.1} s, final ping answered after {:.1} s, {:.1} s in all; \
         {} stdout lines, messages by outcome {codes:?}; {} bytes of stderr",
        written_at.as_secs_f64(),
        answered_at.as_secs_f64(),
        started.elapsed().as_secs_f64(),
        lines.len(),
        err_text.len(),
    );
    if !problems.is_empty() {
        panic!(
            "stdio robustness (seed {seed}; replay with OMNIFORGE_ROBUST_SEED={seed}):\n  - {}\n\n\
             --- server stderr (end) ---\n{}",
            problems.join("\n  - "),
            server.stderr_text()
        );
    }
}

// ---------------------------------------------------------------------------------------
// Streamable HTTP
// ---------------------------------------------------------------------------------------

/// What one POST returned.
struct Reply {
    status: u16,
    content_type: String,
    session: Option<String>,
    body: Vec<u8>,
}

const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// POSTs `body` with `headers` and reads the whole response body (a POST's SSE stream ends
/// after its answers), within [`REQUEST_TIMEOUT`].
async fn post(
    client: &reqwest::Client,
    url: &str,
    headers: &[(&str, String)],
    body: Vec<u8>,
) -> Result<Reply, String> {
    let mut req = client.post(url).body(body);
    for (name, value) in headers {
        req = req.header(*name, value.as_str());
    }
    let work = async {
        let resp = req
            .send()
            .await
            .map_err(|e| format!("request failed: {e:?}"))?;
        let status = resp.status().as_u16();
        let header = |name: &str| {
            resp.headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        let content_type = header("content-type").unwrap_or_default();
        let session = header("mcp-session-id");
        let body = resp
            .bytes()
            .await
            .map_err(|e| format!("reading the body (HTTP {status}) failed: {e:?}"))?
            .to_vec();
        Ok(Reply {
            status,
            content_type,
            session,
            body,
        })
    };
    tokio::time::timeout(REQUEST_TIMEOUT, work)
        .await
        .unwrap_or_else(|_| Err(format!("no complete response within {REQUEST_TIMEOUT:?}")))
}

/// The JSON-RPC messages in a reply body, or why the body is malformed.
fn reply_messages(reply: &Reply) -> Result<Vec<Value>, String> {
    let essence = reply
        .content_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    let flatten = |v: Value| match v {
        Value::Array(items) => items,
        m => vec![m],
    };
    match essence.as_str() {
        "application/json" => serde_json::from_slice(&reply.body)
            .map(flatten)
            .map_err(|e| format!("application/json body is not JSON ({e})")),
        "text/event-stream" => {
            let (messages, errors) = crate::support::parse_sse(&reply.body, true);
            if errors.is_empty() {
                Ok(messages)
            } else {
                Err(errors.join("; "))
            }
        }
        _ => Ok(Vec::new()),
    }
}

const HEADER_VERSIONS: &[&str] = &[
    "2025-11-25",
    "2025-03-26",
    "2025-06-18",
    "2099-01-01",
    "garbage",
];

/// Opens a session (initialize + initialized) and returns its id.
async fn open_session(
    client: &reqwest::Client,
    url: &str,
    version: &str,
) -> Result<String, String> {
    let init = json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{
        "protocolVersion":version,"capabilities":{},
        "clientInfo":{"name":"omniforge-robustness","version":"0"}}});
    let headers = [
        ("content-type", "application/json".to_owned()),
        ("accept", "application/json, text/event-stream".to_owned()),
    ];
    let reply = post(client, url, &headers, init.to_string().into_bytes()).await?;
    let id = reply
        .session
        .clone()
        .ok_or_else(|| format!("initialize: HTTP {} without Mcp-Session-Id", reply.status))?;
    let mut headers = headers.to_vec();
    headers.push(("mcp-session-id", id.clone()));
    headers.push(("mcp-protocol-version", version.to_owned()));
    let reply = post(
        client,
        url,
        &headers,
        br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#.to_vec(),
    )
    .await?;
    if reply.status != 202 {
        return Err(format!(
            "notifications/initialized: HTTP {} (want 202)",
            reply.status
        ));
    }
    Ok(id)
}

/// Pings in `session`; Ok if the answer is exactly `{"jsonrpc":"2.0","id":ID,"result":{}}`.
async fn ping(client: &reqwest::Client, url: &str, session: &str, id: &str) -> Result<(), String> {
    let headers = [
        ("content-type", "application/json".to_owned()),
        ("accept", "application/json, text/event-stream".to_owned()),
        ("mcp-session-id", session.to_owned()),
    ];
    let body = json!({"jsonrpc":"2.0","id":id,"method":"ping"});
    let reply = post(client, url, &headers, body.to_string().into_bytes()).await?;
    let want = json!({"jsonrpc":"2.0","id":id,"result":{}});
    let messages = reply_messages(&reply)?;
    if reply.status == 200 && messages.contains(&want) {
        Ok(())
    } else {
        Err(format!(
            "POST {body} in session {session} answered HTTP {} {}: {} (want {want})",
            reply.status,
            reply.content_type,
            show(&reply.body)
        ))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn robust_http_survives_10k_mutated_bodies() {
    let seed = seed();
    let started = Instant::now();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let mut server = Serve::start(&["--data-dir".as_ref(), data.as_os_str()]).await;
    let client = http_client();
    let url = server.url.clone();

    let modern = open_session(&client, &url, "2025-11-25")
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", server.output_tail()));
    let legacy = open_session(&client, &url, "2025-03-26")
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", server.output_tail()));

    let mut generator = Generator::new(seed ^ 0x4854_5450); // "HTTP": not the stdio stream
    let mut statuses: BTreeMap<u16, usize> = BTreeMap::new();
    let mut kinds: BTreeMap<&'static str, usize> = BTreeMap::new();
    let mut failures: Vec<String> = Vec::new();
    let mut failure_count = 0usize;
    let mut slowest = (Duration::ZERO, String::new());
    for i in 0..MESSAGES {
        let (body, kind) = generator.message();
        *kinds.entry(kind).or_default() += 1;
        let rng = &mut generator.rng;
        let mut headers: Vec<(&str, String)> = Vec::new();
        match rng.below(100) {
            0..=89 => headers.push(("content-type", "application/json".into())),
            90..=93 => headers.push(("content-type", "application/json; charset=utf-8".into())),
            94..=96 => headers.push(("content-type", "text/plain".into())),
            _ => {}
        }
        match rng.below(100) {
            0..=69 => headers.push(("accept", "application/json, text/event-stream".into())),
            70..=84 => headers.push(("accept", "application/json".into())),
            85..=89 => headers.push(("accept", "text/event-stream".into())),
            90..=94 => headers.push(("accept", "text/html".into())),
            _ => {}
        }
        let session = match rng.below(100) {
            0..=44 => Some(modern.clone()),
            45..=64 => Some(legacy.clone()),
            65..=89 => None,
            90..=96 => Some("00000000-0000-0000-0000-000000000000".into()),
            _ => Some(format!("{}x", modern)),
        };
        let with_session = session.is_some();
        if let Some(s) = session {
            headers.push(("mcp-session-id", s));
        }
        if rng.chance(50) {
            headers.push(("mcp-protocol-version", (*rng.pick(HEADER_VERSIONS)).into()));
        }
        let t0 = Instant::now();
        let outcome = post(&client, &url, &headers, body.clone()).await;
        let took = t0.elapsed();
        if took > slowest.0 {
            slowest = (took, show(&body));
        }
        let problem = match outcome {
            Err(e) => Some(e),
            Ok(reply) => {
                *statuses.entry(reply.status).or_default() += 1;
                if reply.status >= 500 {
                    Some(format!(
                        "HTTP {} {}: {}",
                        reply.status,
                        reply.content_type,
                        show(&reply.body)
                    ))
                } else {
                    match reply_messages(&reply) {
                        Err(e) => Some(format!(
                            "HTTP {}: malformed body: {e}: {}",
                            reply.status,
                            show(&reply.body)
                        )),
                        // An unmutated request that the front accepted (200) must be
                        // answered in that response.
                        Ok(messages) => match request_id(&body) {
                            Some(id)
                                if kind == "valid"
                                    && reply.status == 200
                                    && !crate::support::answered(&messages, &id) =>
                            {
                                Some(format!(
                                    "HTTP 200 {} without a response for id {id}: {}",
                                    reply.content_type,
                                    show(&reply.body)
                                ))
                            }
                            _ => None,
                        },
                    }
                }
            }
        };
        if let Some(problem) = problem {
            failure_count += 1;
            if failures.len() < 15 {
                failures.push(format!(
                    "body #{i} ({kind}, {}session, headers {:?}): {}\n        request body: {}",
                    if with_session { "" } else { "no " },
                    headers,
                    problem,
                    show(&body)
                ));
            }
        }
    }
    let fuzzed_at = started.elapsed();

    let mut problems = Vec::new();
    if failure_count > 0 {
        problems.push(format!(
            "{failure_count} of {MESSAGES} POSTs got a 5xx, a malformed body or no complete answer; \
             the first ones:\n      {}",
            failures.join("\n      ")
        ));
    }
    if let Err(e) = ping(&client, &url, &modern, "robust-final-ping").await {
        let fresh = match open_session(&client, &url, "2025-11-25").await {
            Ok(s) => ping(&client, &url, &s, "robust-fresh-ping")
                .await
                .map(|()| "a fresh session still answers ping".to_owned())
                .unwrap_or_else(|e| format!("a fresh session fails too: {e}")),
            Err(e) => format!("no fresh session can be opened: {e}"),
        };
        problems.push(format!(
            "the final ping in the fuzzed session failed: {e} ({fresh})"
        ));
    }
    match client.get(format!("{}/healthz", server.base)).send().await {
        Ok(resp) if resp.status() == 200 => {}
        Ok(resp) => problems.push(format!("GET /healthz answered HTTP {}", resp.status())),
        Err(e) => problems.push(format!("GET /healthz failed: {e:?}")),
    }
    if !server.is_alive() {
        problems.push("the server process is not running any more".into());
    }
    let err_text = server.stderr();
    let panics = support::panic_lines(&err_text);
    if !panics.is_empty() {
        problems.push(format!(
            "stderr reports a panic: {:?}",
            &panics[..panics.len().min(5)]
        ));
    }
    eprintln!(
        "robust http: seed {seed}, {MESSAGES} POSTs {kinds:?}; statuses {statuses:?}; \
         fuzzing took {:.1} s, {:.1} s in all; slowest POST {:?}: {}; {} bytes of stderr",
        fuzzed_at.as_secs_f64(),
        started.elapsed().as_secs_f64(),
        slowest.0,
        slowest.1,
        err_text.len()
    );
    if !problems.is_empty() {
        panic!(
            "HTTP robustness (seed {seed}; replay with OMNIFORGE_ROBUST_SEED={seed}):\n  - {}\n\n\
             --- server stderr (end) ---\n{}",
            problems.join("\n  - "),
            server.output_tail()
        );
    }
}

#[test]
fn robust_generator_is_deterministic_and_varied() {
    let run = |seed| {
        let mut g = Generator::new(seed);
        (0..500).map(|_| g.message()).collect::<Vec<_>>()
    };
    let a = run(7);
    assert_eq!(a, run(7), "same seed, same messages");
    assert_ne!(a, run(8), "another seed, other messages");
    let kinds: std::collections::BTreeSet<_> = a.iter().map(|(_, k)| *k).collect();
    assert_eq!(kinds.len(), 6, "every kind of message shows up: {kinds:?}");
    // The placeholders never leak into the output (serialized, `\u{1}` is `\u0001`).
    let leaked: Vec<String> = a
        .iter()
        .map(|(b, _)| String::from_utf8_lossy(b).into_owned())
        .filter(|text| text.contains(r"\u0001raw"))
        .collect();
    assert!(leaked.is_empty(), "placeholders left in {leaked:?}");
    // Some messages are still well-formed requests, some are not JSON at all.
    let parses = a
        .iter()
        .filter(|(b, _)| serde_json::from_slice::<Value>(b).is_ok())
        .count();
    assert!(parses > 100 && parses < 480, "{parses} of 500 parse");
}

// ---------------------------------------------------------------------------------------
// Odd but legal request ids, one request at a time
// ---------------------------------------------------------------------------------------

/// Request ids that are legal JSON-RPC (strings and numbers) but unusual. Each `ping` with
/// one of them must be answered exactly once, with the same id.
fn odd_ids() -> Vec<(String, Value)> {
    let texts = [
        r#""""#,
        r#"" ""#,
        r#""omniforge-batch/0/0""#,
        r#""omniforge-batch/999/1""#,
        r#""é𝄞\u0000""#,
        r#""null""#,
        r#""0""#,
        "0",
        "-1",
        "9007199254740993",
        "9223372036854775807",
        "-9223372036854775808",
        "18446744073709551615",
        "1.0",
        "1.5",
        "1e2",
        "-0",
    ];
    let mut ids: Vec<(String, Value)> = texts
        .iter()
        .map(|t| (t.to_string(), serde_json::from_str(t).unwrap()))
        .collect();
    let long = "i".repeat(10_000);
    ids.push((format!("\"{long}\""), json!(long)));
    ids
}

/// Whether `got` answers a request whose id was `want`. Strings and integers must come back
/// unchanged; a number that is not an integer to serde_json (`1.0`, `1e2`, `-0`) may come
/// back as the same number in another spelling, or be refused with an error whose id is null.
fn answers(got: &Value, want: &Value) -> bool {
    if !(got.get("result").is_some() || got.get("error").is_some()) {
        return false;
    }
    let id = &got["id"];
    id == want
        || (want.is_f64()
            && (id.as_f64() == want.as_f64() || (id.is_null() && got.get("error").is_some())))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn robust_stdio_answers_odd_request_ids() {
    let mut server = crate::support::StdioServer::start(&[]);
    crate::support::init_stdio(&mut server, "2025-11-25")
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", server.stderr_text()));
    let mut problems = Vec::new();
    for (text, want) in odd_ids() {
        let request = format!(r#"{{"jsonrpc":"2.0","id":{text},"method":"ping"}}"#);
        server.send_line(&request).await.unwrap();
        match server.read_message(Duration::from_secs(5)).await {
            Ok(got) if answers(&got, &want) => {
                if let Err(extra) = server.expect_silence(200).await {
                    problems.push(format!("{request}: a second line {}", show(&extra)));
                }
            }
            Ok(got) => problems.push(format!("{request}: answered {got}")),
            Err(e) => problems.push(format!("{}: {e}", show(request.as_bytes()))),
        }
    }
    assert!(server.is_alive(), "{}", server.stderr_text());
    assert!(
        problems.is_empty(),
        "pings with legal but odd ids over stdio, each should be answered once with its id \
         (as a result, or an error):\n  - {}\n--- stderr ---\n{}",
        problems.join("\n  - "),
        server.stderr_text()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn robust_http_answers_odd_request_ids() {
    let dir = tempfile::tempdir().unwrap();
    let server = Serve::start(&["--data-dir".as_ref(), dir.path().as_os_str()]).await;
    let client = http_client();
    let session = open_session(&client, &server.url, "2025-11-25")
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", server.output_tail()));
    let mut problems = Vec::new();
    for accept in ["application/json", "application/json, text/event-stream"] {
        for (text, want) in odd_ids() {
            let request = format!(r#"{{"jsonrpc":"2.0","id":{text},"method":"ping"}}"#);
            let headers = [
                ("content-type", "application/json".to_owned()),
                ("accept", accept.to_owned()),
                ("mcp-session-id", session.clone()),
            ];
            let what = format!("POST (Accept: {accept}) {}", show(request.as_bytes()));
            match post(&client, &server.url, &headers, request.clone().into_bytes()).await {
                Err(e) => problems.push(format!("{what}: {e}")),
                Ok(reply) => match reply_messages(&reply) {
                    Err(e) => problems.push(format!("{what}: HTTP {}: {e}", reply.status)),
                    Ok(messages) => {
                        let n = messages.iter().filter(|m| answers(m, &want)).count();
                        if reply.status >= 500 || n != 1 {
                            problems.push(format!(
                                "{what}: HTTP {} with {n} answers: {}",
                                reply.status,
                                show(&reply.body)
                            ));
                        }
                    }
                },
            }
        }
    }
    assert!(
        problems.is_empty(),
        "pings with legal but odd ids over HTTP, each should be answered once with its id \
         (as a result, or an error):\n  - {}\n--- stderr ---\n{}",
        problems.join("\n  - "),
        server.output_tail()
    );
}

/// A `tools/call` request whose text nests `depth` arrays and objects (the top-level object
/// counts as one), with id `id`.
fn nested_request(id: u64, depth: usize) -> String {
    let arrays = depth - 3;
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"omniforge_instructions","arguments":{{"x":{}1{}}}}}}}"#,
        "[".repeat(arrays),
        "]".repeat(arrays)
    )
}

/// Issue 11, finding 9: over stdio every request gets an answer. Requests nested 100 to 300
/// levels deep (127 and more went unanswered: rmcp parses the text again and drops what
/// passes its depth limit) and cut-off lines get -32700 with their id when it can be
/// recovered, or a result; a notification nested as deep gets none; the server goes on.
#[tokio::test]
async fn stdio_answers_every_request_however_deep_or_broken() {
    let mut server = crate::support::StdioServer::start(&[]);
    crate::support::init_stdio(&mut server, "2025-11-25")
        .await
        .unwrap();
    let wait = Duration::from_secs(10);
    for (id, depth) in [
        (100, 100),
        (126, 126),
        (127, 127),
        (128, 128),
        (129, 129),
        (300, 300),
    ] {
        server.send_line(&nested_request(id, depth)).await.unwrap();
        let m = server
            .read_message(wait)
            .await
            .unwrap_or_else(|e| panic!("a request nested {depth} deep got no answer: {e}"));
        assert_eq!(m["jsonrpc"], "2.0", "{m}");
        assert_eq!(
            m["id"], id,
            "the answer to a request nested {depth} deep: {m}"
        );
        assert!(
            m.get("result").is_some() || m["error"]["code"] == -32700,
            "depth {depth}: a result or -32700, got {m}"
        );
    }
    // A cut-off line: -32700 with the id recovered by scanning.
    server
        .send_line(r#"{"jsonrpc":"2.0","id":"cut","method":"tools/list","params":{"#)
        .await
        .unwrap();
    let m = server.read_message(wait).await.unwrap();
    assert_eq!(
        (m["id"].clone(), m["error"]["code"].clone()),
        (json!("cut"), json!(-32700)),
        "{m}"
    );
    // A deep notification that parses is not answered; one that does not parse is a parse
    // error, answered with id null as JSON-RPC 2.0 says.
    let note = nested_request(0, 127).replace(r#""id":0,"#, "");
    server.send_line(&note).await.unwrap();
    server.expect_silence(300).await.unwrap_or_else(|line| {
        panic!(
            "a notification was answered: {}",
            String::from_utf8_lossy(&line)
        )
    });
    let note = nested_request(0, 200).replace(r#""id":0,"#, "");
    server.send_line(&note).await.unwrap();
    let m = server.read_message(wait).await.unwrap();
    assert_eq!(
        (m["id"].clone(), m["error"]["code"].clone()),
        (Value::Null, json!(-32700)),
        "{m}"
    );
    server
        .send_line(r#"{"jsonrpc":"2.0","id":"last","method":"ping"}"#)
        .await
        .unwrap();
    let m = server.read_message(wait).await.unwrap();
    assert_eq!(m, json!({"jsonrpc":"2.0","id":"last","result":{}}));
    assert!(
        !server.stderr_all().contains("panicked"),
        "{}",
        server.stderr_text()
    );
}
