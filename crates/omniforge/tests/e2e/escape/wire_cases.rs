//! WIRE-24 (an inputSchema without `properties` is listed with `properties: {}`) and WIRE-33
//! (heartbeat progress for a silent long call with a progressToken, none without).

use super::*;

/// WIRE-24: an inputSchema without `properties` is listed with `"properties": {}` added and
/// stored exactly as authored.
#[tokio::test]
async fn escape_suite_wire24_object_schema_without_properties_gets_empty_properties() {
    crate::support::needs_deps!();
    let started = Instant::now();
    let (server, _home) = attack_server(Mode::Namespaces, &[]).await;
    let mut s = session(&server.url).await;
    let schemas = [
        ("bare", json!({"type": "object"})),
        (
            "closed",
            json!({"type": "object", "additionalProperties": false, "description": "No arguments."}),
        ),
    ];
    for (name, schema) in &schemas {
        create(&mut s, json!({"name": name, "description": "No arguments.", "inputSchema": schema, "code": "print('ok')\n"}))
            .await;
    }
    let list = s.result("tools/list", json!({})).await;
    let tools = list["tools"].as_array().cloned().unwrap_or_default();
    let mut problems = Vec::new();
    for t in &tools {
        if !t["inputSchema"]["properties"].is_object() {
            problems.push(format!(
                "tools/list: {} has no object `properties` in its inputSchema: {}",
                t["name"], t["inputSchema"]
            ));
        }
    }
    for (name, schema) in &schemas {
        let listed = tools
            .iter()
            .find(|t| t["name"] == *name)
            .unwrap_or_else(|| panic!("{name} is not listed"));
        let mut want = schema.clone();
        want["properties"] = json!({});
        if listed["inputSchema"] != want {
            problems.push(format!(
                "{name}: listed inputSchema {} != stored schema plus properties: {{}} ({want})",
                listed["inputSchema"]
            ));
        }
        let get = call_tool(
            &mut s,
            "omniforge_get_tool",
            json!({"name": name}),
            Duration::from_secs(10),
        )
        .await
        .unwrap_or_else(|e| panic!("omniforge_get_tool {name}: {e}"));
        let stored = &get.result["structuredContent"]["inputSchema"];
        if stored != schema {
            problems.push(format!(
                "{name}: stored inputSchema {stored} != authored {schema}"
            ));
        }
        let call = call_tool(&mut s, name, json!({}), Duration::from_secs(20)).await;
        match call {
            Ok(c) if !c.is_error() && c.text() == "ok" => {}
            Ok(c) => problems.push(format!("{name} {{}}: {}", c.result)),
            Err(e) => problems.push(format!("{name} {{}}: {e}")),
        }
    }
    summary_row(
        "WIRE-24 properties: {} added",
        if problems.is_empty() { "ok" } else { "FAILED" },
        "listing adds properties: {}, store keeps the authored schema",
        started,
    );
    assert!(
        problems.is_empty(),
        "WIRE-24:\n  - {}",
        problems.join("\n  - ")
    );
}

/// WIRE-33: a tool silent for S seconds (S > 15, the heartbeat interval), called with a
/// progressToken, gets at least one `notifications/progress` "still running" (same token,
/// increasing values) before its result, with no gap over 20 s; without a progressToken no
/// progress is sent (neither on the POST stream nor on the session's GET stream).
#[tokio::test]
async fn escape_suite_wire33_heartbeat_progress_only_with_token() {
    crate::support::needs_deps!();
    let started = Instant::now();
    let s_secs: f64 = std::env::var("OMNIFORGE_E2E_LONG_RUN_S")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(18.0);
    assert!(
        s_secs > 15.5,
        "OMNIFORGE_E2E_LONG_RUN_S={s_secs}: must be over 15 s (the heartbeat comes after 15 s of silence)"
    );
    let (server, _home) = attack_server(Mode::Namespaces, &[]).await;
    let mut with = session(&server.url).await;
    let mut without = session(&server.url).await;
    create(&mut with, json!({
        "name": "deep_research", "description": "Sleeps S seconds silently.",
        "inputSchema": {"type": "object", "properties": {"q": {"type": "string"}, "s": {"type": "number"}}},
        "timeout_s": s_secs + 20.0,
        "code": "import json, sys, time\nargs = json.load(sys.stdin)\ntime.sleep(args['s'])\nprint('done')\n",
    }))
    .await;

    // The session without a token also listens on its GET stream.
    let mut on_get_stream = without.notifications().await;

    let budget = Duration::from_secs_f64(s_secs + 15.0);
    let args = json!({"q": "x", "s": s_secs});
    let (a, b) = tokio::join!(
        call_tool_with(
            &mut with,
            "deep_research",
            args.clone(),
            Some(json!({"progressToken": 11})),
            budget
        ),
        call_tool_with(&mut without, "deep_research", args, None, budget),
    );
    // scenario: a late progress on the GET stream would arrive within 200 ms of the answers
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut problems = Vec::new();
    match &a {
        Err(e) => problems.push(format!("with a token: {e}")),
        Ok(call) => {
            let ex = &call.exchange;
            if ex.content_type.as_deref() != Some("text/event-stream") {
                problems.push(format!(
                    "with a token: content type {:?}, want text/event-stream",
                    ex.content_type
                ));
            }
            if call.is_error() || call.text() != "done" {
                problems.push(format!("with a token: result {}", call.result));
            }
            let progress = ex.progress();
            eprintln!(
                "  with progressToken 11: {:.1} s, progress {:?}",
                call.elapsed.as_secs_f64(),
                progress
                    .iter()
                    .map(|(t, m)| format!(
                        "{t:.1}s {} {:?}",
                        m["params"]["progress"], m["params"]["message"]
                    ))
                    .collect::<Vec<_>>()
            );
            if !progress
                .iter()
                .any(|(_, m)| m["params"]["message"] == "still running")
            {
                problems.push(format!(
                    "with a token: no notifications/progress \"still running\" in {:.1} s of silence: {:?}",
                    call.elapsed.as_secs_f64(),
                    ex.messages
                ));
            }
            if let Some((_, bad)) = progress
                .iter()
                .find(|(_, m)| m["params"]["progressToken"] != 11)
            {
                problems.push(format!("with a token: progress with another token: {bad}"));
            }
            let values: Vec<f64> = progress
                .iter()
                .filter_map(|(_, m)| m["params"]["progress"].as_f64())
                .collect();
            if values.len() != progress.len() || !values.windows(2).all(|w| w[0] < w[1]) {
                problems.push(format!(
                    "with a token: progress values must increase: {values:?}"
                ));
            }
            let last = ex.messages.last().map(|(_, m)| m);
            if !last.is_some_and(|m| support::is_response(m) && m["id"] == ex.id) {
                problems.push(format!(
                    "with a token: the last message is not the response to {}: {last:?}",
                    ex.id
                ));
            }
            let mut times: Vec<f64> = vec![0.0];
            times.extend(ex.messages.iter().map(|(t, _)| *t));
            let gap = times.windows(2).map(|w| w[1] - w[0]).fold(0.0, f64::max);
            if gap > 20.0 {
                problems.push(format!(
                    "with a token: {gap:.1} s between messages (max 20)"
                ));
            }
        }
    }
    match &b {
        Err(e) => problems.push(format!("without a token: {e}")),
        Ok(call) => {
            let progress = call.exchange.progress();
            eprintln!(
                "  without progressToken: {:.1} s, {} progress notifications",
                call.elapsed.as_secs_f64(),
                progress.len()
            );
            if !progress.is_empty() {
                problems.push(format!("without a token: progress was sent: {progress:?}"));
            }
            if call.is_error() || call.text() != "done" {
                problems.push(format!("without a token: result {}", call.result));
            }
        }
    }
    let mut on_get = Vec::new();
    while let Ok(m) = on_get_stream.try_recv() {
        if m["method"] == "notifications/progress" {
            on_get.push(m);
        }
    }
    eprintln!(
        "  GET stream of the session without a token: {} progress",
        on_get.len()
    );
    if !on_get.is_empty() {
        problems.push(format!(
            "without a token: progress on the GET stream: {on_get:?}"
        ));
    }
    let panics: Vec<String> = panic_lines(&server.stderr())
        .into_iter()
        .map(str::to_owned)
        .collect();
    if !panics.is_empty() {
        problems.push(format!("the server panicked: {panics:?}"));
    }
    summary_row(
        &format!("WIRE-33 heartbeat (S={s_secs} s)"),
        if problems.is_empty() { "ok" } else { "FAILED" },
        "heartbeat progress only with a token",
        started,
    );
    assert!(
        problems.is_empty(),
        "WIRE-33:\n  - {}",
        problems.join("\n  - ")
    );
}
