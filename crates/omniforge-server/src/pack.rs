//! Packs: one document (TOML or JSON, parsed by the binary) holding tools, resources, resource
//! templates and prompts, so that a set can be kept in git and loaded anywhere.
//!
//! Shape (format 1):
//! ```toml
//! format = 1
//! name = "conformance"          # optional
//! description = "..."           # optional
//! [[tools]]                     # each: the arguments of omniforge_create_tool
//! [[resources]]                 # each: the arguments of omniforge_create_resource
//! [[resource_templates]]        # each: the arguments of omniforge_create_resource_template
//! [[prompts]]                   # each: the arguments of omniforge_create_prompt
//! ```
//!
//! An import validates every entry first (tool environments are built and tool examples run
//! then), collecting every error with its entry's index and name, and writes nothing if there
//! is one; otherwise it
//! writes everything in one store transaction (`ContentStore::import`). Entries that are
//! already stored exactly so are left alone (a tool gets no new version), so importing twice
//! changes nothing. An export writes every enabled entry in the same shape, so it imports back.

use std::collections::HashSet;

use omniforge_store::{
    ImportBatch, ImportReport, Store, StoreError, StoredTool, TaskStart, TaskSupport,
};
use rmcp::model::JsonObject;
use serde_json::{Value, json};

use crate::content::args::{PromptArgs, ResourceArgs, TemplateArgs};
use crate::context::request::RequestCx;
use crate::error::parse_arguments;
use crate::script_host::host::ScriptHost;
use crate::tools::authoring::tool::ToolAuthoring;

/// The pack format this build reads and writes.
pub(crate) const FORMAT: u64 = 1;

/// A pack that was not imported: every problem found, each prefixed with its entry
/// (`tools[2] (add_vat): code: ...`).
#[derive(Debug, thiserror::Error)]
#[error("{} error(s) in the pack", .problems.len())]
pub struct PackError {
    /// The problems, one per entry and field.
    pub problems: Vec<String>,
}

/// The sections of a pack, with the key that names an entry of each.
const SECTIONS: &[(&str, &str)] = &[
    ("tools", "name"),
    ("resources", "uri"),
    ("resource_templates", "uriTemplate"),
    ("prompts", "name"),
];

fn entry_label(section: &str, index: usize, entry: &Value, key: &str) -> String {
    match entry.get(key).and_then(Value::as_str) {
        Some(name) => format!("{section}[{index}] ({name})"),
        None => format!("{section}[{index}]"),
    }
}

/// One entry of a pack whose shape is right: a table in a known section, its name unique
/// there.
pub(crate) struct PackEntry {
    /// `tools`, `resources`, `resource_templates` or `prompts`.
    pub(crate) section: &'static str,
    /// `tools[2] (add_vat)`, for errors.
    pub(crate) label: String,
    /// The entry: the authoring arguments of its kind.
    pub(crate) arguments: JsonObject,
}

/// Reads the shape of a parsed pack (format, name, description, the sections, each entry a
/// table with a unique name) without looking into the entries: the entries whose shape is
/// right, and every problem found, each naming its key or entry. Never panics, whatever the
/// document (a property of `tests::pack_documents_never_panic`).
pub(crate) fn read_document(pack: Value) -> (Vec<PackEntry>, Vec<String>) {
    let Value::Object(mut pack) = pack else {
        return (
            Vec::new(),
            vec!["the pack must be a table (TOML) or an object (JSON)".into()],
        );
    };
    let mut errors = Vec::new();
    match pack.remove("format") {
        Some(v) if v.as_u64() == Some(FORMAT) => {}
        Some(v) => errors.push(format!(
            "format: this OmniForge reads format = {FORMAT}, got {v}"
        )),
        None => errors.push(format!(
            "format: missing (write format = {FORMAT} at the top)"
        )),
    }
    for key in ["name", "description"] {
        if let Some(v) = pack.remove(key)
            && !v.is_string()
        {
            errors.push(format!("{key}: must be a string"));
        }
    }
    let mut sections: Vec<(&'static str, &'static str, Vec<Value>)> = Vec::new();
    for (section, key) in SECTIONS {
        match pack.remove(*section) {
            None => {}
            Some(Value::Array(items)) => sections.push((section, key, items)),
            Some(_) => errors.push(format!("{section}: must be an array of tables")),
        }
    }
    for unknown in pack.keys() {
        errors.push(format!(
            "{unknown}: unknown key (a pack has format, name, description, tools, resources, resource_templates, prompts)"
        ));
    }
    let mut entries = Vec::new();
    for (section, key, items) in sections {
        let mut seen = HashSet::new();
        for (index, entry) in items.into_iter().enumerate() {
            let label = entry_label(section, index, &entry, key);
            let Value::Object(arguments) = entry else {
                errors.push(format!("{label}: must be a table"));
                continue;
            };
            if let Some(name) = arguments.get(key).and_then(Value::as_str)
                && !seen.insert(name.to_owned())
            {
                errors.push(format!(
                    "{label}: {key} {name:?} appears twice in this pack"
                ));
                continue;
            }
            entries.push(PackEntry {
                section,
                label,
                arguments,
            });
        }
    }
    (entries, errors)
}

/// Imports a parsed pack. On success, says what changed.
///
/// # Errors
/// Every problem found, each prefixed with its entry (`tools[2] (add_vat): code: ...`); when
/// there is any, nothing was written.
pub(crate) async fn import(
    tools: &ToolAuthoring,
    host: &ScriptHost,
    store: &dyn Store,
    pack: Value,
    cx: &RequestCx<'_>,
) -> Result<ImportReport, PackError> {
    let (entries, mut errors) = read_document(pack);
    let mut batch = ImportBatch::default();
    let mut prepared = Vec::new();
    for PackEntry {
        section,
        label,
        arguments,
    } in entries
    {
        let result = match section {
            "tools" => tools
                .prepare(arguments, cx)
                .await
                .map(|(name, spec, report)| {
                    batch.tools.push((name.clone(), spec.clone()));
                    prepared.push((name, spec, report));
                }),
            "resources" => parse_arguments::<ResourceArgs>(arguments)
                .and_then(ResourceArgs::validate)
                .map(|r| batch.resources.push(r)),
            "resource_templates" => match parse_arguments::<TemplateArgs>(arguments) {
                Ok(args) => args
                    .validate(host, cx)
                    .await
                    .map(|t| batch.templates.push(t)),
                Err(e) => Err(e),
            },
            _ => match parse_arguments::<PromptArgs>(arguments) {
                Ok(args) => args.validate(host, cx).await.map(|p| batch.prompts.push(p)),
                Err(e) => Err(e),
            },
        };
        if let Err(e) = result {
            errors.push(format!("{label}: {e}"));
        }
    }
    if !errors.is_empty() {
        return Err(PackError { problems: errors });
    }
    let report = store
        .import(&cx.actor(), batch)
        .await
        .map_err(|e| PackError {
            problems: vec![e.to_string()],
        })?;
    tools.record_imported(&prepared, cx).await;
    Ok(report)
}

/// The arguments of `omniforge_create_tool` that recreate a stored tool's current version.
fn tool_arguments(stored: &StoredTool) -> JsonObject {
    let spec = &stored.current.spec;
    let mut args = JsonObject::new();
    args.insert("name".into(), json!(stored.tool.name));
    if let Some(title) = &spec.title {
        args.insert("title".into(), json!(title));
    }
    args.insert("description".into(), json!(spec.description));
    args.insert("code".into(), json!(spec.code));
    args.insert(
        "inputSchema".into(),
        Value::Object(spec.input_schema.clone()),
    );
    if let Some(output) = &spec.output_schema {
        args.insert("outputSchema".into(), Value::Object(output.clone()));
    }
    if !spec.dependencies.is_empty() {
        args.insert("dependencies".into(), json!(spec.dependencies));
    }
    let a = spec.annotations;
    let mut annotations = JsonObject::new();
    for (key, hint) in [
        ("readOnlyHint", a.read_only_hint),
        ("destructiveHint", a.destructive_hint),
        ("idempotentHint", a.idempotent_hint),
        ("openWorldHint", a.open_world_hint),
    ] {
        if let Some(hint) = hint {
            annotations.insert(key.into(), json!(hint));
        }
    }
    if !annotations.is_empty() {
        args.insert("annotations".into(), Value::Object(annotations));
    }
    args.insert(
        "timeout_s".into(),
        json!(spec.limits.timeout_ms as f64 / 1000.0),
    );
    if !spec.examples.is_empty() {
        args.insert("examples".into(), json!(spec.examples));
    }
    if spec.limits.network {
        args.insert("network".into(), json!(true));
    }
    if !spec.secrets.is_empty() {
        args.insert("secrets".into(), json!(spec.secrets));
    }
    let execution = spec.execution;
    if execution.task_support != TaskSupport::default() {
        args.insert("taskSupport".into(), json!(execution.task_support.as_str()));
    }
    if execution.task_start != TaskStart::default() {
        args.insert("taskStart".into(), json!(execution.task_start.as_str()));
    }
    args
}

/// Every enabled tool, resource, resource template and prompt as a pack (format 1).
///
/// # Errors
/// The store failed.
pub async fn export(store: &dyn Store) -> Result<Value, StoreError> {
    let mut tools = store.list_enabled().await?;
    tools.sort_by(|a, b| a.tool.name.cmp(&b.tool.name));
    let tools: Vec<Value> = tools
        .iter()
        .map(|t| Value::Object(tool_arguments(t)))
        .collect();
    let mut resources = Vec::new();
    for info in store.list_resources().await? {
        if !info.state.enabled {
            continue;
        }
        if let Some(stored) = store.get_resource(&info.uri).await? {
            resources.push(
                serde_json::to_value(ResourceArgs::from_stored(&stored.spec)).unwrap_or_default(),
            );
        }
    }
    let templates: Vec<Value> = store
        .list_templates()
        .await?
        .iter()
        .filter(|t| t.state.enabled)
        .map(|t| serde_json::to_value(TemplateArgs::from_stored(&t.spec)).unwrap_or_default())
        .collect();
    let prompts: Vec<Value> = store
        .list_prompts()
        .await?
        .iter()
        .filter(|p| p.state.enabled)
        .map(|p| serde_json::to_value(PromptArgs::from_stored(&p.spec)).unwrap_or_default())
        .collect();
    Ok(json!({
        "format": FORMAT,
        "tools": tools,
        "resources": resources,
        "resource_templates": templates,
        "prompts": prompts,
    }))
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// What every problem of [`read_document`] starts with: a key of the pack, a section's
    /// entry, or the document itself.
    fn names_its_place(problem: &str) -> bool {
        let keys = ["format:", "name:", "description:"];
        problem.starts_with("the pack must be")
            || keys.iter().any(|k| problem.starts_with(k))
            || SECTIONS.iter().any(|(s, _)| problem.starts_with(s))
            || problem.contains(": unknown key (a pack has")
    }

    fn check(value: Value) {
        let items: usize = match &value {
            Value::Object(o) => SECTIONS
                .iter()
                .filter_map(|(s, _)| o.get(*s).and_then(Value::as_array).map(Vec::len))
                .sum(),
            _ => 0,
        };
        let (entries, errors) = read_document(value);
        for e in &errors {
            assert!(!e.is_empty() && names_its_place(e), "{e:?}");
        }
        assert!(entries.len() <= items);
        for entry in &entries {
            assert!(entry.label.starts_with(entry.section), "{}", entry.label);
        }
    }

    /// JSON values shaped like packs: known and unknown keys, entries of every type.
    fn json_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(|n| json!(n)),
            any::<f64>().prop_map(|n| json!(n)),
            "\\PC{0,12}".prop_map(Value::String),
        ];
        let key = prop_oneof![
            Just("format".to_owned()),
            Just("name".to_owned()),
            Just("uri".to_owned()),
            Just("tools".to_owned()),
            Just("resources".to_owned()),
            Just("resource_templates".to_owned()),
            Just("prompts".to_owned()),
            "\\PC{0,8}",
        ];
        leaf.prop_recursive(4, 48, 6, move |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                prop::collection::btree_map(key.clone(), inner, 0..6)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        /// Arbitrary text, read as JSON or TOML as the binary does, never panics the pack
        /// reader, and every problem names its place.
        #[test]
        fn pack_documents_never_panic(text in "\\PC{0,200}") {
            if let Ok(value) = serde_json::from_str::<Value>(&text) {
                check(value);
            }
            if let Ok(value) = toml::from_str::<Value>(&text) {
                check(value);
            }
        }

        /// Arbitrary pack-shaped JSON: the same, and a resource entry's own checks (the ones
        /// that need no script host) never panic either.
        #[test]
        fn pack_shaped_values_never_panic(value in json_value(), format in prop::option::of(0u64..3)) {
            let mut value = value;
            if let (Value::Object(o), Some(f)) = (&mut value, format) {
                o.insert("format".into(), json!(f));
            }
            check(value.clone());
            let (entries, _) = read_document(value);
            for entry in entries.into_iter().filter(|e| e.section == "resources") {
                let checked = parse_arguments::<ResourceArgs>(entry.arguments)
                    .and_then(ResourceArgs::validate);
                if let Err(e) = checked {
                    prop_assert!(!e.to_string().is_empty());
                }
            }
        }
    }

    #[test]
    fn a_good_document_has_its_entries_and_no_problem() {
        let (entries, errors) = read_document(json!({
            "format": 1, "name": "p",
            "tools": [{"name": "a"}, {"name": "a"}, 3],
            "resources": [{"uri": "doc://x"}],
        }));
        let labels: Vec<&str> = entries.iter().map(|e| e.label.as_str()).collect();
        assert_eq!(labels, ["tools[0] (a)", "resources[0] (doc://x)"]);
        assert_eq!(
            errors,
            [
                "tools[1] (a): name \"a\" appears twice in this pack",
                "tools[2]: must be a table"
            ]
        );
    }
}
