//! The scene every attack runs in: the script prelude, a session on the attack server, the
//! calls (each with its own time budget), and the health checks after the attack.

use super::*;

/// The Python every attack script starts with: the arguments, and `probe(name, fn)` that
/// prints one JSON line with what happened.
const PRELUDE: &str = r#"import errno, json, os, sys
ARGS = json.load(sys.stdin)
def note(probe, ok, value=None, exc=None, limit=400):
    rec = {"probe": probe, "ok": ok}
    if exc is not None:
        code = getattr(exc, "errno", None)
        rec["exc"] = type(exc).__name__
        rec["errno"] = errno.errorcode.get(code, str(code)) if isinstance(code, int) else ""
        rec["detail"] = str(exc)[:limit]
    else:
        text = value if isinstance(value, str) else repr(value)
        rec["detail"] = text if limit is None else text[:limit]
    print(json.dumps(rec), flush=True)
def probe(name, fn, limit=400):
    try:
        value = fn()
    except BaseException as e:
        note(name, False, exc=e, limit=limit)
        return None
    note(name, True, value, limit=limit)
    return value
"#;

fn script(body: &str) -> String {
    format!("{PRELUDE}{body}")
}

/// What a `tools/call` returned.
#[derive(Debug)]
pub(super) struct Call {
    /// The CallToolResult.
    pub(super) result: Value,
    pub(super) elapsed: Duration,
    pub(super) exchange: Exchange,
}

impl Call {
    pub(super) fn text(&self) -> String {
        support::text_of(&self.result)
    }

    pub(super) fn is_error(&self) -> bool {
        self.result["isError"] == true
    }
}

/// An initialized session at `url`.
pub(super) async fn session(url: &str) -> HttpClient {
    HttpClient::open(url)
        .await
        .unwrap_or_else(|e| panic!("initialize: {e}"))
}

/// `tools/call` within `budget`: must reach a CallToolResult (normal or isError), never a
/// protocol error; no answer, or a JSON-RPC error, is an `Err` naming it.
pub(super) async fn call_tool(
    c: &mut HttpClient,
    name: &str,
    arguments: Value,
    budget: Duration,
) -> Result<Call, String> {
    call_tool_with(c, name, arguments, None, budget).await
}

/// [`call_tool`] with the request's `_meta` (a progressToken).
pub(super) async fn call_tool_with(
    c: &mut HttpClient,
    name: &str,
    arguments: Value,
    meta: Option<Value>,
    budget: Duration,
) -> Result<Call, String> {
    let mut params = json!({"name": name, "arguments": arguments});
    if let Some(meta) = meta {
        params["_meta"] = meta;
    }
    let exchange = c.exchange("tools/call", params, budget).await?;
    let Some(response) = exchange.response().cloned() else {
        return Err(format!(
            "no JSON-RPC response to tools/call within {budget:?} (HTTP {}, notes {:?}, {} messages)",
            exchange.status,
            exchange.notes,
            exchange.messages.len()
        ));
    };
    if let Some(error) = response.get("error") {
        return Err(format!(
            "tools/call answered a JSON-RPC (protocol) error: {error}"
        ));
    }
    let result = response["result"].clone();
    if !result["content"].is_array() {
        return Err(format!(
            "tools/call {name}: the result is not a CallToolResult: {response}"
        ));
    }
    Ok(Call {
        result,
        elapsed: exchange.elapsed,
        exchange,
    })
}

/// `omniforge_create_tool` that must succeed.
pub(super) async fn create(c: &mut HttpClient, args: Value) {
    let name = args["name"].as_str().unwrap_or("?").to_owned();
    let call = call_tool(c, "omniforge_create_tool", args, Duration::from_secs(120))
        .await
        .unwrap_or_else(|e| panic!("omniforge_create_tool {name}: {e}"));
    assert!(
        !call.is_error(),
        "omniforge_create_tool {name} failed: {}",
        call.text()
    );
}

/// A session on the attack server, and `ping` (a trivial script tool for the health check).
/// The server itself is the test's: [`Scene::finish`] borrows it for the health checks.
pub(super) struct Scene {
    pub(super) mode: Mode,
    pub(super) s: HttpClient,
    /// `http://127.0.0.1:PORT` of the server.
    pub(super) base: String,
    /// The server's `OMNIFORGE_E2E_SECRET` value, which must never show.
    secret: String,
    pub(super) marker: String,
    started: Instant,
    /// The attack tools created (for the warm mode's check).
    tools: Vec<String>,
}

impl Scene {
    pub(super) async fn new(mode: Mode, server: &Serve, home: &Home) -> Scene {
        let mut s = session(&server.url).await;
        create(
            &mut s,
            json!({"name": "ping", "description": "Answers pong.", "code": "print('pong')\n"}),
        )
        .await;
        Scene {
            mode,
            s,
            base: server.base.clone(),
            secret: home.secret.clone(),
            marker: unique("escape-marker-"),
            started: home.started,
            tools: Vec::new(),
        }
    }

    /// Creates the attack tool `name` from `body` (after the prelude), taking any arguments.
    pub(super) async fn tool(&mut self, name: &str, body: &str, extra: Value) {
        let mut args = json!({"name": name, "description": format!("Escape attempt: {name}."),
                              "code": script(body),
                              "inputSchema": {"type": "object", "properties": {}, "additionalProperties": true}});
        if let (Some(args), Value::Object(extra)) = (args.as_object_mut(), extra) {
            args.extend(extra);
        }
        create(&mut self.s, args).await;
        self.tools.push(name.to_owned());
    }

    /// Warm mode: each attack tool's current version has a template that ran its calls, or
    /// the pool says why its code runs cold (`/healthz` `warm`).
    async fn check_warm(&self, v: &mut Verdict) {
        let health: Value = match support::http_client()
            .get(format!("{}/healthz", self.base))
            .timeout(Duration::from_secs(10))
            .send()
            .await
        {
            Ok(r) => r.json().await.unwrap_or(Value::Null),
            Err(e) => {
                v.problem(format!("warm: GET /healthz failed: {e}"));
                return;
            }
        };
        let warm = &health["warm"];
        if warm["on"] != true {
            v.problem(format!("warm: the pool is not on: {warm}"));
            return;
        }
        for tool in &self.tools {
            let templates: Vec<&Value> = warm["templates"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|t| {
                    t["version"]
                        .as_str()
                        .is_some_and(|k| k.starts_with(&format!("{tool}@")))
                })
                .collect();
            let warm_calls: u64 = templates.iter().filter_map(|t| t["calls"].as_u64()).sum();
            let cold: Vec<&str> = templates
                .iter()
                .filter_map(|t| t["cold_reason"].as_str())
                .collect();
            if warm_calls > 0 {
                v.saw(format!(
                    "warm: {tool} ran {warm_calls} call(s) on its template"
                ));
            } else if !cold.is_empty() {
                v.saw(format!(
                    "warm: {tool} runs cold by the pool's decision: {}",
                    cold.join("; ")
                ));
            } else {
                v.problem(format!(
                    "warm: no template of {tool} ran a call and none is marked cold: {templates:?}"
                ));
            }
        }
    }

    /// Calls the attack tool; a protocol error or no answer is recorded as a problem.
    pub(super) async fn attack(
        &mut self,
        v: &mut Verdict,
        name: &str,
        args: Value,
        bound: Duration,
    ) -> Option<Call> {
        match call_tool(&mut self.s, name, args, bound + Duration::from_secs(10)).await {
            Ok(call) => {
                v.saw(format!(
                    "call {name}: {:.2} s, isError {}, {} bytes of text",
                    call.elapsed.as_secs_f64(),
                    call.is_error(),
                    call.text().len()
                ));
                if call.elapsed > bound {
                    v.problem(format!(
                        "the call of {name} took {:.1} s, over its bound of {:.0} s",
                        call.elapsed.as_secs_f64(),
                        bound.as_secs_f64()
                    ));
                }
                if call.text().contains(&self.secret) {
                    v.leak(format!(
                        "the server's OMNIFORGE_E2E_SECRET value appears in the output of {name}"
                    ));
                }
                Some(call)
            }
            Err(e) => {
                v.problem(format!(
                    "the call of {name} did not give a CallToolResult: {e}"
                ));
                None
            }
        }
    }

    /// Health after the attack, leftover marker processes, then the verdict.
    pub(super) async fn finish(mut self, server: &mut Serve, mut v: Verdict) {
        if self.mode == Mode::Warm {
            self.check_warm(&mut v).await;
        }
        let left = leftovers(&self.marker, Duration::from_secs(3)).await;
        if !left.is_empty() {
            v.leak(format!(
                "processes carrying the marker outlived the call by 3 s (killed now): {left:?}"
            ));
        }
        match call_tool(&mut self.s, "ping", json!({}), Duration::from_secs(20)).await {
            Ok(call) if !call.is_error() && call.text() == "pong" => {}
            Ok(call) => v.problem(format!(
                "health: the trivial tool `ping` answered {:?} (isError {}) after the attack",
                call.text(),
                call.is_error()
            )),
            Err(e) => v.problem(format!(
                "health: the trivial tool `ping` failed after the attack: {e}"
            )),
        }
        let health = support::http_client()
            .get(format!("{}/healthz", self.base))
            .timeout(Duration::from_secs(10))
            .send()
            .await;
        match health {
            Ok(r) if r.status().as_u16() == 200 => {}
            Ok(r) => v.problem(format!("health: GET /healthz answered {}", r.status())),
            Err(e) => v.problem(format!("health: GET /healthz failed: {e}")),
        }
        if !server.is_alive() {
            v.problem("health: the server process exited".to_owned());
        }
        let stderr = server.stderr();
        let panics = panic_lines(&stderr);
        if !panics.is_empty() {
            v.problem(format!("the server panicked: {panics:?}"));
        }
        if stderr.contains(&self.secret) {
            v.problem("the server logged its OMNIFORGE_E2E_SECRET value".to_owned());
        }
        let started = self.started;
        drop(self);
        // The server is done with: killed before the verdict (which may panic).
        server.kill();
        v.finish(started);
    }
}

/// Records what the script reported, for the summary and the failure message.
pub(super) fn absorb(v: &mut Verdict, obs: &[Obs]) {
    for o in obs {
        v.saw(o.what());
    }
}
