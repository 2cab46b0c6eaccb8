//! The discovery built-ins: `omniforge_search_tools` (ranked search over the tools the
//! caller may see and call) and `omniforge_get_tool_schemas` (named tools' full
//! definitions). Both see exactly what `tools/call` would let the caller call: its scopes,
//! its own pending versions (nobody else's), no disabled tool, no hidden built-in (a
//! `tools:call` token never finds an authoring built-in).

use std::sync::{Arc, Weak};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::auth::Scope;
use crate::catalog::entry::{Entry, ToolSource};
use crate::catalog::publish::Catalog;
use crate::catalog::search::Query;
use crate::context::actor::Actor;
use crate::error::AuthoringError;
use crate::tools::builtin::signature::signature;
use crate::tools::ops::{Hints, Operation, Outcome, ToolDef};

/// The most tools one search or schema request returns.
pub(crate) const MAX_TOOLS: u32 = 50;
/// The longest summary, in characters.
pub(crate) const MAX_SUMMARY: usize = 200;
/// The longest query, in characters (a longer one is refused, not searched in part; a
/// task's whole text, pasted data included, fits).
pub(crate) const MAX_QUERY_CHARS: usize = 65_536;

/// What the discovery built-ins work on: the catalog (weak: its entries hold this).
pub(crate) struct Discovery {
    catalog: Weak<Catalog>,
}

impl Discovery {
    /// The discovery built-ins of `catalog`.
    pub(crate) fn new(catalog: &Arc<Catalog>) -> Discovery {
        Discovery {
            catalog: Arc::downgrade(catalog),
        }
    }

    fn catalog(&self) -> Result<Arc<Catalog>, AuthoringError> {
        self.catalog
            .upgrade()
            .ok_or_else(|| AuthoringError::invalid("catalog", "the server is shutting down"))
    }
}

/// How much of each found tool a search returns: `brief` (name, title, summary, score,
/// source), `signature` (and a Python-style signature), `full` (and the whole tool definition
/// as tools/list has it).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Detail {
    #[default]
    Brief,
    Signature,
    Full,
}

/// Where a tool comes from (`openapi` and `mcp`: no such source yet).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub(crate) enum SourceFilter {
    Builtin,
    Stored,
    Manifest,
    Openapi,
    Mcp,
}

impl SourceFilter {
    fn admits(self, source: ToolSource) -> bool {
        matches!(
            (self, source),
            (SourceFilter::Builtin, ToolSource::Builtin)
                | (SourceFilter::Stored, ToolSource::Stored)
                | (SourceFilter::Manifest, ToolSource::Manifest)
        )
    }
}

fn ten() -> u32 {
    10
}

/// `omniforge_search_tools`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct SearchTools {
    /// What the tool should do, in a few words, or its name.
    #[schemars(length(max = 65536))]
    pub(crate) query: String,
    /// How many tools to return, best first.
    #[serde(default = "ten")]
    #[schemars(range(min = 1, max = 50))]
    pub(crate) limit: u32,
    /// How much of each tool: `brief` (name, title, summary), `signature` (and a
    /// Python-style signature), `full` (and the whole tool definition).
    #[serde(default)]
    pub(crate) detail: Detail,
    /// Only tools from this source (`openapi`, `mcp`: none yet).
    pub(crate) source: Option<SourceFilter>,
    /// Only tools of this configured upstream (no upstream is named yet: matches none).
    pub(crate) upstream: Option<String>,
    /// Only tools with all these tags (no tool has tags yet: a tag matches none).
    #[serde(default)]
    pub(crate) tags: Vec<String>,
}

impl Operation for SearchTools {
    type Service = Discovery;
    const TOOL: ToolDef = ToolDef {
        name: "omniforge_search_tools",
        title: Some("Search tools"),
        description: "Search the tools you may call, by what they do or by name: the best matches first, one line each (name, summary). Search before you forge a new tool. detail \"signature\" adds a Python-style signature, \"full\" the whole definition; omniforge_get_tool_schemas gives named tools' schemas. Call a found tool directly or with omniforge_call_tool.",
        scope: Scope::Call,
        hints: Hints::READ,
    };

    async fn apply(
        self,
        discovery: &Discovery,
        actor: Actor<'_>,
    ) -> Result<Outcome, AuthoringError> {
        if self.limit == 0 || self.limit > MAX_TOOLS {
            return Err(AuthoringError::invalid(
                "limit",
                format!(
                    "must be 1 to {MAX_TOOLS} (the maximum is {MAX_TOOLS}); got {}",
                    self.limit
                ),
            ));
        }
        if self.query.chars().count() > MAX_QUERY_CHARS {
            return Err(AuthoringError::invalid(
                "query",
                format!("at most {MAX_QUERY_CHARS} characters"),
            ));
        }
        let catalog = discovery.catalog()?;
        let principal = actor.cx.principal().map(|p| p.as_str());
        let allows = |scope: Scope| actor.allows(scope);
        let source = self.source;
        let nothing_else = self.upstream.is_none() && self.tags.is_empty();
        let keep = |e: &Entry| nothing_else && source.is_none_or(|s| s.admits(e.source));
        let found = catalog.search(&Query {
            text: &self.query,
            principal,
            allows: &allows,
            keep: &keep,
            limit: self.limit as usize,
        });
        let mut lines = Vec::new();
        let mut tools = Vec::new();
        for (entry, score) in &found.hits {
            let tool = entry.tool();
            let summary = summary(tool.description.as_deref().unwrap_or(""));
            let mut item = json!({
                "name": &*entry.name,
                "summary": summary,
                "score": round(*score),
                "source": entry.source.as_str(),
            });
            if let Some(title) = &tool.title {
                item["title"] = json!(title);
            }
            let mut head = entry.name.to_string();
            if self.detail != Detail::Brief {
                let sig = signature(
                    &tool.name,
                    &tool.input_schema,
                    tool.output_schema.as_deref(),
                );
                item["signature"] = json!(sig);
                head = sig;
            }
            if self.detail == Detail::Full {
                item["tool"] = serde_json::to_value(&tool).unwrap_or(Value::Null);
            }
            lines.push(if summary.is_empty() {
                head
            } else {
                format!("{head} - {summary}")
            });
            tools.push(item);
        }
        let text = if found.total == 0 {
            format!(
                "No tool matches {:?}. Try other words, or forge one with omniforge_create_tool.",
                self.query
            )
        } else {
            format!(
                "{} of {} matching tools, best first:\n{}",
                lines.len(),
                found.total,
                lines.join("\n")
            )
        };
        Ok(Outcome::done(text).with_data(json!({"tools": tools, "total": found.total})))
    }
}

/// `omniforge_get_tool_schemas`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct GetToolSchemas {
    /// The tools' names (at most 50).
    #[schemars(length(min = 1, max = 50))]
    pub(crate) names: Vec<String>,
}

impl Operation for GetToolSchemas {
    type Service = Discovery;
    const TOOL: ToolDef = ToolDef {
        name: "omniforge_get_tool_schemas",
        title: Some("Get tool schemas"),
        description: "The full definitions (inputSchema, outputSchema, annotations) of the named tools, in the order asked, as tools/list has them; a name you may not call is listed as unknown. At most 50 names.",
        scope: Scope::Call,
        hints: Hints::READ,
    };

    async fn apply(
        self,
        discovery: &Discovery,
        actor: Actor<'_>,
    ) -> Result<Outcome, AuthoringError> {
        if self.names.len() > MAX_TOOLS as usize {
            return Err(AuthoringError::invalid(
                "names",
                format!(
                    "at most {MAX_TOOLS} names (the maximum is {MAX_TOOLS}); got {}",
                    self.names.len()
                ),
            ));
        }
        let snapshot = discovery.catalog()?.snapshot();
        let principal = actor.cx.principal().map(|p| p.as_str());
        let mut tools = Vec::new();
        let mut unknown = Vec::new();
        for name in &self.names {
            match snapshot
                .get_for(name, principal)
                .filter(|e| e.listed && actor.allows(e.scope))
            {
                Some(entry) => {
                    tools.push(serde_json::to_value(entry.tool()).unwrap_or(Value::Null))
                }
                None => unknown.push(name.clone()),
            }
        }
        let data = json!({"tools": tools, "unknown": unknown});
        let mut text = serde_json::to_string(&data["tools"]).unwrap_or_default();
        if !unknown.is_empty() {
            text.push_str(&format!("\nunknown: {}", unknown.join(", ")));
        }
        Ok(Outcome::done(text).with_data(data))
    }
}

/// A description's first sentence, at most [`MAX_SUMMARY`] characters (cut ones end in `…`).
pub(crate) fn summary(description: &str) -> String {
    let text = description.trim();
    let mut end = text.len();
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        let next = chars.peek().map(|&(_, n)| n);
        let ends = match c {
            '\n' => Some(i),
            '.' | '!' | '?' if next.is_none_or(char::is_whitespace) => Some(i + c.len_utf8()),
            '。' | '！' | '？' => Some(i + c.len_utf8()),
            _ => None,
        };
        if let Some(at) = ends {
            end = at;
            break;
        }
    }
    let sentence = text[..end].trim();
    if sentence.chars().count() <= MAX_SUMMARY {
        return sentence.to_owned();
    }
    let mut cut: String = sentence.chars().take(MAX_SUMMARY - 1).collect();
    cut.push('…');
    cut
}

/// A score as it is shown: four decimals.
fn round(score: f32) -> f64 {
    (f64::from(score) * 10_000.0).round() / 10_000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_summary_is_the_first_sentence_and_short() {
        assert_eq!(summary("Adds VAT. Rounds to cents."), "Adds VAT.");
        assert_eq!(
            summary("Version 2.5 of x is here! Yes"),
            "Version 2.5 of x is here!"
        );
        assert_eq!(summary("First line\nsecond line"), "First line");
        assert_eq!(summary("使用必应搜索。返回结果"), "使用必应搜索。");
        assert_eq!(summary("  no end  "), "no end");
        let long = summary(&"word ".repeat(100));
        assert_eq!(long.chars().count(), MAX_SUMMARY);
        assert!(long.ends_with('…'));
    }
}
