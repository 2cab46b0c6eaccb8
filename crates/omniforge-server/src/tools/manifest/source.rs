//! The manifest tool source: forge manifests configured by the operator, turned into catalog
//! entries (their calls are [`ManifestCall`]s), and kept current by hot reload.
//!
//! A malformed manifest at start-up is an error that names the file, the tool and the field.
//! Later, a bad edit keeps the previous version in place (logged by the watcher); a good one
//! replaces the catalog's manifest tools at once, which announces `list_changed`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use omniforge_bridge::dispatch::{Upstream, UpstreamConfig, UpstreamError};
use omniforge_bridge::schema_refs::{InlineError, inline_refs};
use omniforge_bridge::watch::{ManifestWatch, WatchError, watch};
use omniforge_bridge::{Manifest, ManifestError, ManifestTool};
use omniforge_store::{CallSource, TaskStart, TaskSupport};
use rmcp::model::Tool;

use crate::auth::Scope;
use crate::catalog::entry::{Entry, Tasking, ToolSource};
use crate::catalog::publish::Catalog;
use crate::telemetry::metrics::Metrics;
use crate::tools::manifest::call::{ManifestCall, Streaming};
use crate::tools::manifest::health::UpstreamHealth;

/// One configured manifest: the file and the service its RPCs go to.
#[derive(Debug, Clone)]
pub struct ManifestConfig {
    /// The manifest file (`gen/mcp/manifest.json`).
    pub path: PathBuf,
    /// The Connect service. An empty base URL makes every call a clear configuration error.
    pub upstream: UpstreamConfig,
    /// Which of its tools may run as tasks (issue 13), by tool name; the others never do.
    pub task_support: BTreeMap<String, TaskSupport>,
}

/// One loaded manifest: its tools, its service and which tools may run as tasks.
struct Loaded {
    manifest: Manifest,
    upstream: Arc<Upstream>,
    health: Arc<UpstreamHealth>,
    tasks: Arc<TaskConfig>,
}

/// A manifest's task settings.
struct TaskConfig {
    support: BTreeMap<String, TaskSupport>,
    /// The upstream's per-call timeout (a task's TTL is never shorter).
    timeout: std::time::Duration,
}

/// The loaded manifests and their watches. Dropping it stops the hot reload.
pub(crate) struct ManifestSource {
    _watches: Vec<ManifestWatch>,
    upstreams: Vec<Arc<UpstreamHealth>>,
}

impl ManifestSource {
    /// Each manifest's upstream and how it has answered, in configuration order.
    pub(crate) fn upstreams(&self) -> Vec<Arc<UpstreamHealth>> {
        self.upstreams.clone()
    }
}

/// A manifest source could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ManifestSourceError {
    /// A manifest is missing or malformed.
    #[error(transparent)]
    Manifest(#[from] ManifestError),
    /// An upstream's settings are invalid.
    #[error("manifest {path}: upstream: {source}")]
    Upstream {
        /// The manifest file.
        path: PathBuf,
        /// What is wrong.
        #[source]
        source: UpstreamError,
    },
    /// `--inline-schema-refs` cannot inline a tool's schema.
    #[error("{path}: tool {tool:?}, field `{field}`: {source}")]
    Inline {
        /// The manifest file.
        path: PathBuf,
        /// The tool.
        tool: String,
        /// `inputSchema` or `outputSchema`.
        field: &'static str,
        /// The cycle or unresolvable reference.
        #[source]
        source: InlineError,
    },
    /// A manifest's directory cannot be watched.
    #[error("cannot watch {path}: {source}")]
    Watch {
        /// The manifest file.
        path: PathBuf,
        /// The watcher's error.
        #[source]
        source: WatchError,
    },
}

/// Loads every configured manifest, publishes their tools into `catalog`, and reloads on
/// change. Must be called inside a tokio runtime.
///
/// # Errors
/// A manifest is missing or malformed, an upstream is misconfigured, or a file cannot be watched.
pub(crate) fn start(
    catalog: Arc<Catalog>,
    configs: &[ManifestConfig],
    inline_schema_refs: bool,
    metrics: Arc<Metrics>,
) -> Result<ManifestSource, ManifestSourceError> {
    let mut loaded = Vec::new();
    let mut upstreams = Vec::new();
    for config in configs {
        let manifest = prepare(
            &config.path,
            Manifest::load(&config.path)?,
            inline_schema_refs,
        )?;
        let upstream =
            Upstream::new(&config.upstream).map_err(|source| ManifestSourceError::Upstream {
                path: config.path.clone(),
                source,
            })?;
        for name in config.task_support.keys() {
            if !manifest.tools.iter().any(|t| &t.name == name) {
                tracing::warn!(manifest = %config.path.display(), tool = %name, "task_support names a tool the manifest does not have");
            }
        }
        let health = UpstreamHealth::new(config.path.clone(), &config.upstream.base_url);
        upstreams.push(health.clone());
        loaded.push(Loaded {
            manifest,
            upstream: Arc::new(upstream),
            health,
            tasks: Arc::new(TaskConfig {
                support: config.task_support.clone(),
                timeout: config.upstream.timeout,
            }),
        });
    }
    let loaded = Arc::new(Mutex::new(loaded));
    publish(&catalog, &loaded, &metrics);
    let mut watches = Vec::new();
    for (index, config) in configs.iter().enumerate() {
        let catalog = catalog.clone();
        let loaded_for_watch = loaded.clone();
        let metrics = metrics.clone();
        let path = config.path.clone();
        let w = watch(&config.path, move |manifest| {
            let manifest = match prepare(&path, manifest, inline_schema_refs) {
                Ok(manifest) => manifest,
                Err(error) => {
                    tracing::warn!(%error, "manifest changed but cannot be served; keeping the previous one");
                    return;
                }
            };
            if let Some(slot) = loaded_for_watch
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .get_mut(index)
            {
                slot.manifest = manifest;
            }
            publish(&catalog, &loaded_for_watch, &metrics);
        })
        .map_err(|source| ManifestSourceError::Watch {
            path: config.path.clone(),
            source,
        })?;
        watches.push(w);
    }
    Ok(ManifestSource {
        _watches: watches,
        upstreams,
    })
}

/// Applies `--inline-schema-refs` to every tool's schemas.
fn prepare(
    path: &std::path::Path,
    mut manifest: Manifest,
    inline: bool,
) -> Result<Manifest, ManifestSourceError> {
    if !inline {
        return Ok(manifest);
    }
    for tool in &mut manifest.tools {
        let error = |field, source| ManifestSourceError::Inline {
            path: path.to_owned(),
            tool: tool.name.clone(),
            field,
            source,
        };
        let input = inline_refs(&tool.input_schema).map_err(|e| error("inputSchema", e))?;
        let output = match &tool.output_schema {
            Some(schema) => Some(inline_refs(schema).map_err(|e| error("outputSchema", e))?),
            None => None,
        };
        tool.input_schema = input;
        tool.output_schema = output;
    }
    Ok(manifest)
}

fn publish(catalog: &Catalog, loaded: &Mutex<Vec<Loaded>>, metrics: &Arc<Metrics>) {
    let tools: Vec<Entry> = loaded
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .flat_map(|l| l.manifest.tools.iter().map(move |t| entry(t, l, metrics)))
        .collect();
    catalog.replace(ToolSource::Manifest, tools);
}

/// Only MCP fields go on the wire; the forge routing fields stay behind.
fn entry(t: &ManifestTool, loaded: &Loaded, metrics: &Arc<Metrics>) -> Entry {
    let tasks = &loaded.tasks;
    let mut tool = Tool::new(
        t.name.clone(),
        t.description.clone(),
        Arc::new(t.input_schema.clone()),
    );
    if let Some(output) = &t.output_schema {
        tool = tool.with_raw_output_schema(Arc::new(output.clone()));
    }
    if !t.method.is_empty() {
        let service = t.service.rsplit('.').next().unwrap_or(&t.service);
        let title = if service.is_empty() {
            t.method.clone()
        } else {
            format!("{service}.{}", t.method)
        };
        tool = tool.with_title(title);
    }
    if t.is_streaming() {
        let call = Arc::new(Streaming {
            name: t.name.clone(),
        });
        Entry::new(tool, ToolSource::Manifest, Scope::Call, call).unlisted()
    } else {
        let call = Arc::new(ManifestCall::new(
            t.clone(),
            loaded.upstream.clone(),
            loaded.health.clone(),
            metrics.clone(),
        ));
        let tasking = Tasking {
            support: tasks
                .support
                .get(&t.name)
                .copied()
                .unwrap_or(TaskSupport::Forbidden),
            start: TaskStart::Call,
            source: CallSource::Manifest,
            version: None,
            timeout: tasks.timeout,
        };
        Entry::new(tool, ToolSource::Manifest, Scope::Call, call).with_tasking(tasking)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inlining_errors_name_file_tool_and_field() {
        let text = r##"{"tools":[{"name":"loop","inputSchema":{"type":"object",
            "properties":{"n":{"$ref":"#/$defs/N"}},"$defs":{"N":{"type":"object","properties":{"m":{"$ref":"#/$defs/N"}}}}},
            "procedure":"/p.S/Loop"}]}"##;
        let path = std::path::Path::new("m.json");
        let manifest = Manifest::parse(path, text).unwrap();
        let err = prepare(path, manifest.clone(), true)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("m.json")
                && err.contains("\"loop\"")
                && err.contains("inputSchema")
                && err.contains("cycle"),
            "{err}"
        );
        assert!(prepare(path, manifest, false).is_ok());
    }
}
