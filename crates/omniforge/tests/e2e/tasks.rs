//! Durable tasks on the wire (issue 13; the MCP Tasks extension, SEP-2663), against the real
//! binary and real scripts, over raw 2026-07-28 HTTP requests (the Python SDK 2.3 has no
//! Tasks client): a call that outlives its request and is read through a second server
//! process on the same store; `tasks/cancel` kills the script's processes; another principal's
//! task is an unknown id; a task whose server died reads `failed` with a message; a script's
//! questions inside a task wait for `tasks/update`, delivered through another server. The
//! conformance suite (scripts/conformance) checks the wire shapes.

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::{
    Fixture, MarkedGuard, Serve, add_tools, data_home, eventually, fixture_manifest, marked,
    no_proxy, py_driver, python_driver, python2, require, sleeper_tool, start_task,
    stateless_meta as meta, stateless_request as request, task_get as get, unique, until_terminal,
    uv,
};

/// Polls `tasks/get` on `url` until the task asks its questions (it must be `working` until
/// then): the `input_required` result.
async fn input_required(url: &str, task_id: &str) -> Value {
    eventually(
        Duration::from_secs(30),
        "the task input_required",
        async || {
            let answer = get(url, None, task_id).await;
            if answer["result"]["status"] == "input_required" {
                return Some(answer["result"].clone());
            }
            assert_eq!(answer["result"]["status"], "working", "{answer}");
            None
        },
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_outlives_its_request_and_a_second_server_reads_it() {
    crate::support::needs_deps!();
    require(&[uv()]);
    let (_home, data) = data_home();
    add_tools(&data, &[sleeper_tool()]);
    let first = Serve::on_data(&data, &[]).await;
    let second = Serve::on_data(&data, &[]).await;
    // Without the extension the same tool answers inline.
    let inline = request(
        &first.url,
        None,
        "tools/call",
        json!({"name": "sleeper", "arguments": {"seconds": 0}, "_meta": meta(false)}),
    )
    .await;
    assert_eq!(inline["result"]["resultType"], "complete", "{inline}");
    assert_eq!(
        inline["result"]["content"][0]["text"], "slept 0",
        "{inline}"
    );

    let task_id = start_task(&first.url, None, "sleeper", json!({"seconds": 3})).await;
    // The request is answered; the task runs on the first server and the second reads it.
    let working = get(&second.url, None, &task_id).await;
    assert_eq!(working["result"]["taskId"], task_id, "{working}");
    assert_eq!(working["result"]["status"], "working", "{working}");
    assert!(working["result"].get("result").is_none(), "{working}");
    let done = until_terminal(&second.url, None, &task_id, Duration::from_secs(60)).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["result"]["content"][0]["text"], "slept 3", "{done}");
    assert!(done["ttlMs"].as_u64().unwrap() >= 120_000, "{done}");
    assert!(done["pollIntervalMs"].as_u64().unwrap() > 0, "{done}");
    // The first server answers the same.
    let again = get(&first.url, None, &task_id).await;
    assert_eq!(again["result"]["result"], done["result"], "{again}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_task_kills_its_processes() {
    crate::support::needs_deps!();
    require(&[uv()]);
    let (_home, data) = data_home();
    add_tools(&data, &[sleeper_tool()]);
    let server = Serve::on_data(&data, &[]).await;
    let marker = unique("omniforge-e2e-task-cancel-");
    let _leftovers = MarkedGuard(marker.clone());
    let task_id = start_task(
        &server.url,
        None,
        "sleeper",
        json!({"seconds": 60, "marker": marker}),
    )
    .await;
    eventually(
        Duration::from_secs(30),
        "the task's process started",
        async || (!marked(&marker).is_empty()).then_some(()),
    )
    .await;
    let ack = request(
        &server.url,
        None,
        "tasks/cancel",
        json!({"taskId": task_id, "_meta": meta(true)}),
    )
    .await;
    assert_eq!(ack["result"], json!({"resultType": "complete"}), "{ack}");
    eventually(
        Duration::from_secs(5),
        "the task's processes gone after tasks/cancel",
        async || {
            let left = marked(&marker);
            if left.is_empty() {
                Ok(())
            } else {
                Err(format!("{left:?} alive"))
            }
        },
    )
    .await;
    let cancelled = get(&server.url, None, &task_id).await;
    assert_eq!(cancelled["result"]["status"], "cancelled", "{cancelled}");
    // Cancelling again acknowledges the same and changes nothing.
    let again = request(
        &server.url,
        None,
        "tasks/cancel",
        json!({"taskId": task_id, "_meta": meta(true)}),
    )
    .await;
    assert_eq!(
        again["result"],
        json!({"resultType": "complete"}),
        "{again}"
    );
    assert_eq!(
        get(&server.url, None, &task_id).await["result"]["status"],
        "cancelled"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_principals_task_is_an_unknown_id() {
    crate::support::needs_deps!();
    require(&[uv()]);
    let (home, data) = data_home();
    add_tools(&data, &[sleeper_tool()]);
    let tokens = home.path().join("tokens");
    std::fs::write(
        &tokens,
        "alice alice-token-0123456789abcdef tools:call\nbob bob-token-0123456789abcdef0 tools:call\n",
    )
    .unwrap();
    std::fs::set_permissions(&tokens, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let server = Serve::on_data(&data, &["--token-file", tokens.to_str().unwrap()]).await;
    let alice = Some("alice-token-0123456789abcdef");
    let bob = Some("bob-token-0123456789abcdef0");
    let task_id = start_task(&server.url, alice, "sleeper", json!({"seconds": 1})).await;
    let unknown = get(&server.url, bob, "task-does-not-exist").await;
    assert_eq!(unknown["error"]["code"], -32602, "{unknown}");
    for (method, params) in [
        ("tasks/get", json!({"taskId": task_id, "_meta": meta(true)})),
        (
            "tasks/cancel",
            json!({"taskId": task_id, "_meta": meta(true)}),
        ),
        (
            "tasks/update",
            json!({"taskId": task_id, "inputResponses": {}, "_meta": meta(true)}),
        ),
    ] {
        let answer = request(&server.url, bob, method, params).await;
        assert_eq!(answer["error"]["code"], -32602, "{method}: {answer}");
        assert_eq!(
            answer["error"]["message"], unknown["error"]["message"],
            "{method}: another's task must read exactly like an unknown id"
        );
    }
    // Bob's cancel did nothing: Alice's task completes.
    let done = until_terminal(&server.url, alice, &task_id, Duration::from_secs(60)).await;
    assert_eq!(done["status"], "completed", "{done}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_whose_server_died_reads_failed_with_a_message() {
    crate::support::needs_deps!();
    require(&[uv()]);
    let (_home, data) = data_home();
    add_tools(&data, &[sleeper_tool()]);
    let mut first = Serve::on_data(&data, &["--task-lease", "2s"]).await;
    let task_id = start_task(&first.url, None, "sleeper", json!({"seconds": 60})).await;
    first.kill();
    let second = Serve::on_data(&data, &["--task-lease", "2s"]).await;
    let failed = until_terminal(&second.url, None, &task_id, Duration::from_secs(30)).await;
    assert_eq!(failed["status"], "failed", "{failed}");
    let message = failed["error"]["message"].as_str().unwrap();
    assert!(message.contains("stopped"), "{failed}");
    assert!(failed.get("result").is_none(), "{failed}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn questions_inside_a_task_wait_for_tasks_update_through_any_server() {
    crate::support::needs_deps!();
    require(&[uv()]);
    let (_home, data) = data_home();
    add_tools(
        &data,
        &[json!({
            "name": "two_questions",
            "description": "Asks two questions in one round",
            "inputSchema": {"type": "object", "properties": {}},
            "taskSupport": "required",
            "code": r#"import omniforge
schema = lambda p, t: {"type": "object", "properties": {p: {"type": t}}, "required": [p]}
answers = omniforge.ask({
    "who": omniforge.elicit_request("Who?", schema("name", "string")),
    "sure": omniforge.elicit_request("Sure?", schema("ok", "boolean")),
})
print("%s/%s" % (answers["who"]["content"]["name"], answers["sure"]["content"]["ok"]))
"#,
        })],
    );
    let runner = Serve::on_data(&data, &[]).await;
    let other = Serve::on_data(&data, &[]).await;
    // A required tool without the extension: -32021, nothing runs.
    let refused = request(
        &runner.url,
        None,
        "tools/call",
        json!({"name": "two_questions", "arguments": {}, "_meta": meta(false)}),
    )
    .await;
    assert_eq!(refused["error"]["code"], -32021, "{refused}");
    let task_id = start_task(&runner.url, None, "two_questions", json!({})).await;
    let waiting = input_required(&other.url, &task_id).await;
    let requests = waiting["inputRequests"].as_object().unwrap();
    assert_eq!(requests.len(), 2, "{waiting}");
    assert_eq!(requests["who"]["method"], "elicitation/create", "{waiting}");
    assert_eq!(requests["who"]["params"]["message"], "Who?", "{waiting}");
    // One answer (and one to a key never asked, ignored), through the other server.
    let update = |responses: Value| {
        request(
            &other.url,
            None,
            "tasks/update",
            json!({"taskId": task_id, "inputResponses": responses, "_meta": meta(true)}),
        )
    };
    let ack = update(json!({
        "who": {"action": "accept", "content": {"name": "Ada"}},
        "never_asked": {"action": "accept", "content": {}},
    }))
    .await;
    assert_eq!(ack["result"], json!({"resultType": "complete"}), "{ack}");
    let partial = get(&other.url, None, &task_id).await;
    assert_eq!(partial["result"]["status"], "input_required", "{partial}");
    let left: Vec<&String> = partial["result"]["inputRequests"]
        .as_object()
        .unwrap()
        .keys()
        .collect();
    assert_eq!(left, ["sure"], "{partial}");
    let ack = update(json!({"sure": {"action": "accept", "content": {"ok": true}}})).await;
    assert_eq!(ack["result"], json!({"resultType": "complete"}), "{ack}");
    let done = until_terminal(&other.url, None, &task_id, Duration::from_secs(30)).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["result"]["content"][0]["text"], "Ada/True", "{done}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_past_its_time_limit_reads_failed() {
    crate::support::needs_deps!();
    require(&[uv()]);
    let (_home, data) = data_home();
    add_tools(
        &data,
        &[json!({
            "name": "too_slow",
            "description": "Sleeps past its time limit",
            "inputSchema": {"type": "object", "properties": {}},
            "taskSupport": "optional",
            "timeout_s": 1,
            "code": "import time\ntime.sleep(30)\n",
        })],
    );
    let server = Serve::on_data(&data, &[]).await;
    // Inline, the time limit is an isError result as before.
    let inline = request(
        &server.url,
        None,
        "tools/call",
        json!({"name": "too_slow", "arguments": {}, "_meta": meta(false)}),
    )
    .await;
    assert_eq!(inline["result"]["isError"], true, "{inline}");
    // As a task, it could not finish: failed, with the reason.
    let task_id = start_task(&server.url, None, "too_slow", json!({})).await;
    let failed = until_terminal(&server.url, None, &task_id, Duration::from_secs(30)).await;
    assert_eq!(failed["status"], "failed", "{failed}");
    assert_eq!(failed["error"]["code"], -32603, "{failed}");
    let message = failed["error"]["message"].as_str().unwrap();
    assert!(message.contains("time limit"), "{failed}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_sdk_polls_a_task_longer_than_its_request_timeout() {
    crate::support::needs_deps!();
    require(&[uv(), python2()]);
    let (_home, data) = data_home();
    add_tools(&data, &[sleeper_tool()]);
    let server = Serve::on_data(&data, &[]).await;
    // The client gives each request 4 s; the script takes 10 s. The driver's Tasks extension
    // (support/py/tasks_client.py) polls tasks/get until the task completes.
    let mut driver = python_driver(&python2(), &py_driver("tasks_client.py"));
    no_proxy(&mut driver)
        .args([&server.url, "sleeper", r#"{"seconds": 10}"#, "4"])
        .kill_on_drop(true);
    let out = tokio::time::timeout(Duration::from_secs(120), driver.output())
        .await
        .expect("the Python client did not finish in 120 s")
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "python client failed: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    assert_eq!(report["text"], "slept 10", "{report}");
    assert_eq!(report["isError"], false, "{report}");
    assert_eq!(
        report["statuses"],
        json!(["working", "completed"]),
        "{report}"
    );
    assert!(report["polls"].as_u64().unwrap() >= 2, "{report}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tasks_cut_output_lives_as_long_as_the_task() {
    crate::support::needs_deps!();
    require(&[uv()]);
    let (_home, data) = data_home();
    add_tools(
        &data,
        &[json!({
            "name": "long_output",
            "description": "Prints 1000 lines",
            "inputSchema": {"type": "object", "properties": {}},
            "taskSupport": "optional",
            "code": "for i in range(1000):\n    print(f'line {i}')\n",
        })],
    );
    // Kept outputs expire after 1 s; tasks are kept an hour.
    let server = Serve::on_data(
        &data,
        &[
            "--max-result-bytes",
            "100",
            "--output-ttl",
            "1s",
            "--task-ttl",
            "1h",
        ],
    )
    .await;
    let link_of = |result: &Value| -> String {
        result["content"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["type"] == "resource_link")
            .unwrap_or_else(|| panic!("no resource_link in a cut result: {result}"))["uri"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let read = |uri: String| {
        let url = server.url.clone();
        async move {
            request(
                &url,
                None,
                "resources/read",
                json!({"uri": uri, "_meta": meta(false)}),
            )
            .await
        }
    };
    let inline = request(
        &server.url,
        None,
        "tools/call",
        json!({"name": "long_output", "arguments": {}, "_meta": meta(false)}),
    )
    .await;
    let inline_uri = link_of(&inline["result"]);
    let task_id = start_task(&server.url, None, "long_output", json!({})).await;
    let done = until_terminal(&server.url, None, &task_id, Duration::from_secs(60)).await;
    assert_eq!(done["status"], "completed", "{done}");
    let task_uri = link_of(&done["result"]);
    // Past --output-ttl: the inline call's output is gone, the task's is not.
    let gone = eventually(
        Duration::from_secs(10),
        "the inline call's output gone past --output-ttl",
        async || {
            let answer = read(inline_uri.clone()).await;
            answer.get("error").is_some().then_some(answer)
        },
    )
    .await;
    assert_eq!(gone["error"]["code"], -32602, "{gone}");
    let message = gone["error"]["message"].as_str().unwrap_or_default();
    assert!(message.starts_with("resource not found"), "{gone}");
    // The message names the configured lifetime, not a fixed one.
    assert!(
        message.ends_with("(outputs of cut results are kept for 1s)"),
        "{gone}"
    );
    let kept = read(task_uri).await;
    let text = kept["result"]["contents"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(text.ends_with("line 999"), "{kept}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manifest_tool_named_in_task_support_runs_as_a_task() {
    crate::support::needs_deps!();
    let fixture = Fixture::start().await;
    let (home, data) = data_home();
    let config = home.path().join("omniforge.toml");
    std::fs::write(
        &config,
        format!(
            "[[manifest]]\npath = {:?}\nupstream = {:?}\ntask_support = {{ fixture_echo = \"optional\" }}\n",
            fixture_manifest().to_str().unwrap(),
            fixture.url,
        ),
    )
    .unwrap();
    let server = Serve::on_data(&data, &["--config", config.to_str().unwrap()]).await;
    let task_id = start_task(
        &server.url,
        None,
        "fixture_echo",
        json!({"text": "as a task", "shout": true}),
    )
    .await;
    let done = until_terminal(&server.url, None, &task_id, Duration::from_secs(60)).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(
        done["result"]["structuredContent"]["text"], "AS A TASK",
        "{done}"
    );
    // The task's call is in the call log (read through the store), as an inline call is.
    let store = omniforge_store::SqliteStore::open(data.join("omniforge.db"))
        .await
        .unwrap();
    let filter = omniforge_store::CallFilter {
        tool: Some("fixture_echo".into()),
        limit: 10,
        ..Default::default()
    };
    // Written off the answer's path, a batch at a time: there within a few milliseconds.
    let calls = eventually(
        Duration::from_secs(5),
        "the task's call logged",
        async || {
            let calls = omniforge_store::CallLog::calls(&store, &filter)
                .await
                .unwrap();
            (!calls.is_empty()).then_some(calls)
        },
    )
    .await;
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert_eq!(calls[0].call.source, omniforge_store::CallSource::Manifest);
    assert_eq!(calls[0].call.outcome, omniforge_store::CallOutcome::Ok);
    assert_eq!(
        calls[0].call.principal.as_deref(),
        Some("anonymous"),
        "{calls:?}"
    );
    // A manifest tool not named there answers inline even with the extension declared.
    let inline = request(
        &server.url,
        None,
        "tools/call",
        json!({"name": "fixture_whoami", "arguments": {}, "_meta": meta(true)}),
    )
    .await;
    assert_eq!(inline["result"]["resultType"], "complete", "{inline}");
}

/// A tool whose task starts in its script (`taskStart: "script"`): asks a name (before the
/// task), starts its task, asks a confirmation (inside it), answers both and whether
/// `start_task()` made it a task.
fn greet_later_tool(support: &str) -> Value {
    json!({
        "name": "greet_later",
        "description": "Asks a name, then greets as a task",
        "inputSchema": {"type": "object", "properties": {}},
        "taskSupport": support,
        "taskStart": "script",
        "timeout_s": 120,
        "code": r#"import omniforge
schema = lambda p, t: {"type": "object", "properties": {p: {"type": t}}, "required": [p]}
name = omniforge.elicit("What is your name?", schema("name", "string"), key="user_name")["content"]["name"]
task = omniforge.start_task()
sure = omniforge.elicit("Sure?", schema("ok", "boolean"), key="sure")["content"]["ok"] if task else None
print("Hello, %s! task=%s sure=%s" % (name, task, sure))
"#,
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_script_started_task_asks_inline_first_then_runs_as_the_task() {
    crate::support::needs_deps!();
    require(&[uv()]);
    let (_home, data) = data_home();
    add_tools(&data, &[greet_later_tool("required")]);
    let server = Serve::on_data(&data, &[]).await;
    let call = |extra: Value| {
        let mut params = json!({"name": "greet_later", "arguments": {}, "_meta": meta(true)});
        params
            .as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        request(&server.url, None, "tools/call", params)
    };
    // Round 1: the question before the task is an input-required result of the request.
    let round1 = call(json!({})).await;
    let result = &round1["result"];
    assert_eq!(result["resultType"], "input_required", "{round1}");
    assert!(result.get("taskId").is_none(), "{round1}");
    assert_eq!(
        result["inputRequests"]["user_name"]["params"]["message"], "What is your name?",
        "{round1}"
    );
    let state = result["requestState"].as_str().expect("a requestState");
    // Round 2 answers it: the script starts its task, and the request answers the task.
    let round2 = call(json!({
        "inputResponses": {"user_name": {"action": "accept", "content": {"name": "Alice"}}},
        "requestState": state,
    }))
    .await;
    let created = &round2["result"];
    assert_eq!(created["resultType"], "task", "{round2}");
    assert_eq!(created["status"], "working", "{round2}");
    assert!(created.get("requestState").is_none(), "{round2}");
    assert!(created.get("inputRequests").is_none(), "{round2}");
    let task_id = created["taskId"].as_str().unwrap().to_owned();
    // The script goes on as the task: its next question is the task's.
    let waiting = input_required(&server.url, &task_id).await;
    let keys: Vec<&String> = waiting["inputRequests"]
        .as_object()
        .unwrap()
        .keys()
        .collect();
    assert_eq!(keys, ["sure"], "{waiting}");
    let ack = request(
        &server.url,
        None,
        "tasks/update",
        json!({"taskId": task_id, "_meta": meta(true),
               "inputResponses": {"sure": {"action": "accept", "content": {"ok": true}}}}),
    )
    .await;
    assert_eq!(ack["result"], json!({"resultType": "complete"}), "{ack}");
    let done = until_terminal(&server.url, None, &task_id, Duration::from_secs(60)).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(
        done["result"]["content"][0]["text"], "Hello, Alice! task=True sure=True",
        "{done}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn start_task_does_nothing_where_no_task_can_start() {
    crate::support::needs_deps!();
    require(&[uv()]);
    let (_home, data) = data_home();
    let probe = |name: &str, support: &str, start: &str| {
        json!({
            "name": name,
            "description": "Says whether start_task() made the call a task",
            "inputSchema": {"type": "object", "properties": {}},
            "taskSupport": support,
            "taskStart": start,
            "code": "import omniforge\nprint('task=%s' % omniforge.start_task())\n",
        })
    };
    add_tools(
        &data,
        &[
            probe("script_optional", "optional", "script"),
            probe("script_forbidden", "forbidden", "script"),
            probe("call_optional", "optional", "call"),
        ],
    );
    let server = Serve::on_data(&data, &[]).await;
    let call = |tool: &str, tasks: bool| {
        request(
            &server.url,
            None,
            "tools/call",
            json!({"name": tool, "arguments": {}, "_meta": meta(tasks)}),
        )
    };
    // Without the extension, and for a tool that does not allow tasks: inline, no task.
    for (tool, tasks) in [("script_optional", false), ("script_forbidden", true)] {
        let answer = call(tool, tasks).await;
        assert_eq!(
            answer["result"]["resultType"], "complete",
            "{tool}: {answer}"
        );
        assert_eq!(
            answer["result"]["content"][0]["text"], "task=False",
            "{tool}: {answer}"
        );
    }
    // taskStart "call": the call is a task from its start; start_task() changes nothing.
    let task_id = start_task(&server.url, None, "call_optional", json!({})).await;
    let done = until_terminal(&server.url, None, &task_id, Duration::from_secs(60)).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["result"]["content"][0]["text"], "task=True", "{done}");
}
