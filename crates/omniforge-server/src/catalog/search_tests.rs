//! The index through the catalog: ranking, the snapshot's visibility rules, and incremental
//! updates that answer exactly as a fresh build.

use std::sync::Arc;

use rmcp::model::Tool;
use serde_json::json;

use super::*;
use crate::catalog::call::{Call, CallFuture, ToolCall, ready};
use crate::catalog::publish::Catalog;
use crate::catalog::schema_profile::SchemaProfile;
use crate::error::CallError;

struct Nothing;
impl ToolCall for Nothing {
    fn call<'a>(&'a self, _: Call<'a>) -> CallFuture<'a> {
        ready(Err(CallError::UnknownTool))
    }
}

fn tool(name: &str, source: ToolSource, description: &str) -> Entry {
    let schema = json!({"type": "object", "properties": {
        "city": {"type": "string", "description": "City name"}
    }});
    Entry::new(
        Tool::new(
            name.to_owned(),
            description.to_owned(),
            Arc::new(schema.as_object().cloned().unwrap_or_default()),
        ),
        source,
        Scope::Call,
        Arc::new(Nothing),
    )
}

fn scoped(mut e: Entry, scope: Scope) -> Entry {
    e.scope = scope;
    e
}

/// The names `catalog` finds for `text`, for `principal` with `scope`, and the total.
fn find(
    catalog: &Catalog,
    text: &str,
    principal: Option<&str>,
    scope: Scope,
) -> (Vec<String>, usize) {
    let allows = |s: Scope| match scope {
        Scope::Admin => true,
        Scope::Write => s != Scope::Admin,
        Scope::Call => s == Scope::Call,
    };
    let keep = |_: &Entry| true;
    let hits = catalog.search(&Query {
        text,
        principal,
        allows: &allows,
        keep: &keep,
        limit: 50,
    });
    let names = hits.hits.iter().map(|(e, _)| e.name.to_string()).collect();
    (names, hits.total)
}

fn names(catalog: &Catalog, text: &str) -> Vec<String> {
    find(catalog, text, None, Scope::Call).0
}

#[test]
fn the_best_match_ranks_first_and_an_exact_name_before_all() {
    let catalog = Catalog::new(SchemaProfile::AsAuthored);
    catalog.replace(
        ToolSource::Stored,
        vec![
            tool(
                "get_forecast",
                ToolSource::Stored,
                "Weather forecast for a city.",
            ),
            tool(
                "weather_now",
                ToolSource::Stored,
                "Current weather and weather alerts.",
            ),
            tool("add_vat", ToolSource::Stored, "Adds VAT to a net amount."),
            tool(
                "forecast",
                ToolSource::Stored,
                "Sales numbers for next quarter.",
            ),
        ],
    );
    assert_eq!(names(&catalog, "weather")[0], "weather_now");
    assert_eq!(names(&catalog, "VAT amounts"), ["add_vat"]);
    // Stemming: "forecasts" finds "forecast".
    assert!(names(&catalog, "forecasts").contains(&"get_forecast".to_owned()));
    // The exact name first, though "weather forecast" matches get_forecast better.
    assert_eq!(names(&catalog, "forecast")[0], "forecast");
    assert_eq!(names(&catalog, "add_vat")[0], "add_vat");
    // Nothing matches: no hit, total 0.
    assert_eq!(find(&catalog, "zebra", None, Scope::Call), (vec![], 0));
    assert_eq!(find(&catalog, "the of", None, Scope::Call), (vec![], 0));
}

#[test]
fn ties_are_broken_by_name_and_total_counts_all_matches() {
    let catalog = Catalog::new(SchemaProfile::AsAuthored);
    let same: Vec<Entry> = ["c_tool", "a_tool", "b_tool"]
        .into_iter()
        .map(|n| tool(n, ToolSource::Stored, "Converts money."))
        .collect();
    catalog.replace(ToolSource::Stored, same);
    let allows = |s: Scope| s == Scope::Call;
    let keep = |_: &Entry| true;
    let hits = catalog.search(&Query {
        text: "money",
        principal: None,
        allows: &allows,
        keep: &keep,
        limit: 2,
    });
    let got: Vec<&str> = hits.hits.iter().map(|(e, _)| &*e.name).collect();
    assert_eq!(got, ["a_tool", "b_tool"]);
    assert_eq!(hits.total, 3);
    assert_eq!(hits.hits[0].1, hits.hits[1].1);
}

#[test]
fn visibility_follows_the_snapshot() {
    let catalog = Catalog::new(SchemaProfile::AsAuthored);
    catalog.replace(
        ToolSource::Builtin,
        vec![
            tool("find_things", ToolSource::Builtin, "Search tools."),
            scoped(
                tool("make_widget", ToolSource::Builtin, "Create a tool."),
                Scope::Write,
            ),
        ],
    );
    catalog.replace(
        ToolSource::Stored,
        vec![
            tool("mine", ToolSource::Stored, "Live version: old tool."),
            // Shadowed by the built-in of the same name: never found as stored.
            tool("find_things", ToolSource::Stored, "A stored tool."),
        ],
    );
    let author: Arc<str> = Arc::from("token:w");
    catalog.set_pending(
        "mine",
        vec![(
            author.clone(),
            tool("mine", ToolSource::Stored, "Pending version: new tool."),
        )],
    );
    catalog.set_pending(
        "fresh",
        vec![(
            author.clone(),
            tool("fresh", ToolSource::Stored, "A new tool."),
        )],
    );
    // A tools:call caller never finds a built-in that needs tools:write.
    let mut seen = find(&catalog, "tool", None, Scope::Call).0;
    seen.sort();
    assert_eq!(seen, ["find_things", "mine"]);
    let writer = find(&catalog, "widget", Some("token:x"), Scope::Write).0;
    assert_eq!(writer, ["make_widget"]);
    // Another principal: the live version only, no pending new tool.
    let other = find(&catalog, "version tool", Some("token:x"), Scope::Call).0;
    assert!(other.contains(&"mine".to_owned()) && !other.contains(&"fresh".to_owned()));
    assert!(
        find(&catalog, "pending", Some("token:x"), Scope::Call)
            .0
            .is_empty()
    );
    assert!(find(&catalog, "live", Some("token:x"), Scope::Call).0 == ["mine"]);
    // The author: its pending version in place of the live one, and its new tool.
    assert_eq!(
        find(&catalog, "pending", Some("token:w"), Scope::Call).0,
        ["mine"]
    );
    assert!(
        find(&catalog, "live", Some("token:w"), Scope::Call)
            .0
            .is_empty()
    );
    assert_eq!(
        find(&catalog, "new", Some("token:w"), Scope::Call).0,
        ["fresh", "mine"]
    );
    // The stored duplicate of a built-in's name is never found.
    assert!(find(&catalog, "stored", None, Scope::Admin).0.is_empty());
    // Removing the built-in makes the stored one the served tool.
    catalog.replace(ToolSource::Builtin, Vec::new());
    assert_eq!(
        find(&catalog, "stored", None, Scope::Admin).0,
        ["find_things"]
    );
    // Disabled (removed from the catalog): gone from search.
    catalog.remove(ToolSource::Stored, "mine");
    assert!(find(&catalog, "live", None, Scope::Call).0.is_empty());
}

/// Each (name, words) of a seeded catalog of `n` tools.
fn seeded(n: usize, salt: usize) -> Vec<(String, String)> {
    const WORDS: [&str; 12] = [
        "weather", "stock", "price", "pdf", "convert", "email", "send", "city", "map", "chart",
        "git", "commit",
    ];
    (0..n)
        .map(|i| {
            let words: Vec<&str> = (0..4).map(|k| WORDS[(i * 7 + k * 5 + salt) % 12]).collect();
            (format!("t{i}"), words.join(" "))
        })
        .collect()
}

#[test]
fn incremental_updates_answer_as_a_fresh_build() {
    let incremental = Catalog::new(SchemaProfile::AsAuthored);
    let first = seeded(300, 0);
    incremental.replace(
        ToolSource::Stored,
        first
            .iter()
            .map(|(n, d)| tool(n, ToolSource::Stored, d))
            .collect(),
    );
    // Update a third, remove a tenth, add a few: one entry at a time.
    let mut now: std::collections::BTreeMap<String, String> = first.into_iter().collect();
    for (name, words) in seeded(300, 3).into_iter().step_by(3) {
        incremental.upsert(tool(&name, ToolSource::Stored, &words));
        now.insert(name, words);
    }
    for i in (0..300).step_by(10) {
        let name = format!("t{i}");
        incremental.remove(ToolSource::Stored, &name);
        now.remove(&name);
    }
    for (name, words) in seeded(5, 1) {
        let name = format!("new_{name}");
        incremental.upsert(tool(&name, ToolSource::Stored, &words));
        now.insert(name, words);
    }
    let fresh = Catalog::new(SchemaProfile::AsAuthored);
    fresh.replace(
        ToolSource::Stored,
        now.iter()
            .map(|(n, d)| tool(n, ToolSource::Stored, d))
            .collect(),
    );
    for query in [
        "weather",
        "stock price",
        "send email pdf",
        "git commit chart",
        "t42",
        "city",
    ] {
        let a = find(&incremental, query, None, Scope::Call);
        let b = find(&fresh, query, None, Scope::Call);
        assert_eq!(a, b, "{query}");
        assert!(a.1 > 0, "{query}");
    }
    let index = incremental.index_size();
    assert_eq!(index.0, now.len());
}
