//! Tool search (issue 25) over real `omniforge serve` processes and Streamable HTTP:
//!
//! - `search_finds_what_the_caller_may_call`: one server with `--require-approval` and four
//!   tokens (`caller`: `tools:call`, `writer` and `writer2`: `tools:write`, `boss`: `admin`).
//!   An exact name ranks first; a `tools:call` token never finds an authoring built-in; a
//!   writer's pending version is found by its author only; a disabled tool is not found;
//!   `omniforge_get_tool_schemas` answers in request order and calls what the caller may not
//!   call unknown; `limit` over 50 is an error naming the maximum; signatures and full tools.
//! - `the_index_follows_another_process_through_the_change_feed`: two servers on one SQLite
//!   file; every write goes through server B (create, update, rollback, delete) or the command
//!   line (enable, disable), and server A's search follows each through the change feed.

use std::collections::BTreeSet;
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::{Auth, HttpClient, HttpServer, Serve, cli_ok, eventually, uv};

const CALLER: &str = "caller-token-0123456789abcdef";
const WRITER: &str = "writer-token-0123456789abcdef";
const WRITER2: &str = "writer2-token-0123456789abcdef";
const BOSS: &str = "boss-token-0123456789abcdef";

/// How long a change may take to reach another process (the change feed polls SQLite every
/// second).
const FEED: Duration = Duration::from_secs(15);

/// A stored tool's definition.
fn tool(name: &str, description: &str) -> Value {
    json!({
        "name": name,
        "description": description,
        "code": "import json, sys\nprint(json.dumps(json.load(sys.stdin)))\n",
        "inputSchema": {"type": "object", "properties": {
            "net": {"type": "number", "description": "Net amount"},
            "rate": {"type": "number", "default": 20}
        }, "required": ["net"]},
    })
}

/// `omniforge_search_tools` with `arguments`: the names found, in order, and the answer.
async fn search(client: &mut HttpClient, arguments: Value) -> (Vec<String>, Value) {
    let (text, is_error, result) = client
        .call("omniforge_search_tools", arguments.clone())
        .await;
    assert!(!is_error, "search {arguments}: {text}");
    let data = result["structuredContent"].clone();
    let names = data["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("no tools in {result}"))
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect();
    (names, data)
}

async fn found(client: &mut HttpClient, query: &str) -> Vec<String> {
    search(client, json!({"query": query, "limit": 50})).await.0
}

fn authoring(name: &str) -> bool {
    name.starts_with("omniforge_")
        && ![
            "omniforge_instructions",
            "omniforge_search_tools",
            "omniforge_get_tool_schemas",
            "omniforge_call_tool",
        ]
        .contains(&name)
}

#[tokio::test]
async fn search_finds_what_the_caller_may_call() {
    let uv = uv();
    let server = HttpServer::start(
        &["--uv", uv.to_str().unwrap(), "--require-approval"],
        &Auth::TokenFile(format!(
            "caller {CALLER} tools:call\nwriter {WRITER} tools:write\n\
             writer2 {WRITER2} tools:write\nboss {BOSS} admin\n"
        )),
    )
    .await;
    let mut boss = HttpClient::bearer(server.url(), BOSS).await;
    for (name, description) in [
        ("add_vat", "Adds VAT to a net amount. Rounds to cents."),
        (
            "vat_report",
            "Writes a quarterly VAT report for the tax office.",
        ),
        ("get_forecast", "Weather forecast for a city, by day."),
        ("old_tool", "A weather tool that is about to be disabled."),
    ] {
        let (text, is_error, _) = boss
            .call("omniforge_create_tool", tool(name, description))
            .await;
        assert!(!is_error, "create {name}: {text}");
    }
    let mut caller = HttpClient::bearer(server.url(), CALLER).await;

    // The exact name first, though other tools match its words too.
    let (names, data) = search(&mut caller, json!({"query": "add_vat"})).await;
    assert_eq!(names[0], "add_vat", "{data}");
    assert_eq!(data["tools"][0]["source"], "stored");
    assert_eq!(data["tools"][0]["summary"], "Adds VAT to a net amount.");
    assert!(
        data["tools"][0]["score"].as_f64().unwrap()
            > data["tools"][1]["score"].as_f64().unwrap_or(0.0)
    );
    let weather = found(&mut caller, "weather forecasts for a city").await;
    assert_eq!(weather[0], "get_forecast", "{weather:?}");

    // A tools:call token never finds an authoring built-in, even by its exact name.
    let mut seen = found(&mut caller, "create update delete tool secret version").await;
    seen.extend(found(&mut caller, "omniforge_create_tool").await);
    assert!(!seen.iter().any(|n| authoring(n)), "{seen:?}");
    assert!(seen.contains(&"omniforge_call_tool".to_owned()), "{seen:?}");
    let mut writer = HttpClient::bearer(server.url(), WRITER).await;
    assert_eq!(
        found(&mut writer, "omniforge_create_tool").await[0],
        "omniforge_create_tool"
    );
    let admin_only = found(&mut writer, "omniforge_set_secret").await;
    assert!(
        !admin_only.contains(&"omniforge_set_secret".to_owned()),
        "{admin_only:?}"
    );

    // A writer's new tool is pending: its author finds it, nobody else does.
    let (text, is_error, _) = writer
        .call(
            "omniforge_create_tool",
            tool("pending_gadget", "Polishes brass gadgets."),
        )
        .await;
    assert!(!is_error, "{text}");
    assert_eq!(
        found(&mut writer, "brass gadgets").await,
        ["pending_gadget"]
    );
    let mut writer2 = HttpClient::bearer(server.url(), WRITER2).await;
    assert!(found(&mut writer2, "brass gadgets").await.is_empty());
    assert!(found(&mut caller, "pending_gadget").await.is_empty());
    assert!(found(&mut boss, "brass gadgets").await.is_empty());

    // A disabled tool is not found.
    assert!(
        found(&mut caller, "disabled")
            .await
            .contains(&"old_tool".to_owned())
    );
    let (text, is_error, _) = boss
        .call("omniforge_delete_tool", json!({"name": "old_tool"}))
        .await;
    assert!(!is_error, "{text}");
    assert!(
        !found(&mut caller, "disabled weather")
            .await
            .contains(&"old_tool".to_owned())
    );

    // Filters, total and the limit.
    let (names, data) = search(&mut caller, json!({"query": "vat", "limit": 1})).await;
    assert_eq!(
        (names.len(), data["total"].as_u64()),
        (1, Some(2)),
        "{data}"
    );
    let builtins = search(&mut caller, json!({"query": "tool", "source": "builtin"}))
        .await
        .0;
    assert!(!builtins.is_empty() && builtins.iter().all(|n| n.starts_with("omniforge_")));
    let (text, is_error, _) = caller
        .call(
            "omniforge_search_tools",
            json!({"query": "vat", "limit": 51}),
        )
        .await;
    assert!(is_error && text.contains("50"), "{text}");

    // Signatures, full tools, and the text: one line per tool.
    let (_, data) = search(
        &mut caller,
        json!({"query": "add_vat", "detail": "signature", "limit": 1}),
    )
    .await;
    assert_eq!(
        data["tools"][0]["signature"],
        "add_vat(net: float, rate: float = 20)"
    );
    assert!(data["tools"][0].get("tool").is_none());
    let (text, _, result) = caller
        .call(
            "omniforge_search_tools",
            json!({"query": "vat", "detail": "full"}),
        )
        .await;
    let full = &result["structuredContent"]["tools"][0]["tool"];
    assert_eq!(full["inputSchema"]["required"], json!(["net"]), "{result}");
    assert_eq!(
        text.lines().count(),
        3,
        "a head line and one line per tool: {text}"
    );
    assert!(
        text.lines().any(|l| l.starts_with("add_vat(net: float")),
        "{text}"
    );

    // Schemas by name, in the order asked; what the caller may not call is unknown.
    let (text, is_error, result) = caller
        .call(
            "omniforge_get_tool_schemas",
            json!({"names": ["vat_report", "omniforge_create_tool", "add_vat", "nope", "pending_gadget"]}),
        )
        .await;
    assert!(!is_error, "{text}");
    let data = &result["structuredContent"];
    let names: Vec<&str> = data["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["vat_report", "add_vat"]);
    assert_eq!(
        data["unknown"],
        json!(["omniforge_create_tool", "nope", "pending_gadget"])
    );
    let (_, _, mine) = writer
        .call(
            "omniforge_get_tool_schemas",
            json!({"names": ["pending_gadget"]}),
        )
        .await;
    assert_eq!(
        mine["structuredContent"]["tools"][0]["name"], "pending_gadget",
        "{mine}"
    );
    let many: Vec<String> = (0..51).map(|i| format!("t{i}")).collect();
    let (text, is_error, _) = caller
        .call("omniforge_get_tool_schemas", json!({"names": many}))
        .await;
    assert!(is_error && text.contains("50"), "{text}");
}

#[tokio::test]
async fn the_index_follows_another_process_through_the_change_feed() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir(&data).unwrap();
    let a = Serve::on_data(&data, &[]).await;
    let b = Serve::on_data(&data, &[]).await;
    let mut on_a = HttpClient::open(&a.url).await.unwrap();
    let mut on_b = HttpClient::open(&b.url).await.unwrap();

    // What A finds for `query`, waited for until it is `want` (by name).
    async fn until(client: &mut HttpClient, query: &str, want: &[&str], step: &str) {
        let want: BTreeSet<String> = want.iter().map(|s| s.to_string()).collect();
        eventually(FEED, step, async || {
            let got: BTreeSet<String> = found(client, query).await.into_iter().collect();
            if got == want {
                Ok(())
            } else {
                Err(format!("found {got:?}, want {want:?}"))
            }
        })
        .await;
    }
    let call = async |client: &mut HttpClient, tool: &str, arguments: Value| {
        let (text, is_error, _) = client.call(tool, arguments).await;
        assert!(!is_error, "{tool}: {text}");
    };

    call(
        &mut on_b,
        "omniforge_create_tool",
        tool("convert_units", "Converts miles to kilometres."),
    )
    .await;
    until(
        &mut on_a,
        "kilometres",
        &["convert_units"],
        "create on B, found on A",
    )
    .await;

    let mut v2 = tool("convert_units", "Converts pounds to kilograms.");
    v2.as_object_mut().unwrap().remove("code");
    call(&mut on_b, "omniforge_update_tool", v2).await;
    until(&mut on_a, "kilograms", &["convert_units"], "update on B").await;
    until(
        &mut on_a,
        "kilometres",
        &[],
        "the old version's words are gone",
    )
    .await;

    call(
        &mut on_b,
        "omniforge_rollback_tool",
        json!({"name": "convert_units", "version": 1}),
    )
    .await;
    until(&mut on_a, "kilometres", &["convert_units"], "rollback on B").await;
    until(
        &mut on_a,
        "kilograms",
        &[],
        "the rolled-back version's words are gone",
    )
    .await;

    cli_ok(&data, &["tool", "disable", "convert_units"]).await;
    until(
        &mut on_a,
        "kilometres",
        &[],
        "disable from the command line",
    )
    .await;
    cli_ok(&data, &["tool", "enable", "convert_units"]).await;
    until(
        &mut on_a,
        "kilometres",
        &["convert_units"],
        "enable from the command line",
    )
    .await;

    call(
        &mut on_b,
        "omniforge_delete_tool",
        json!({"name": "convert_units"}),
    )
    .await;
    until(&mut on_a, "kilometres", &[], "delete on B").await;

    // B's own index agrees.
    assert!(found(&mut on_b, "kilometres").await.is_empty());
    a.assert_no_panic();
    b.assert_no_panic();
}
