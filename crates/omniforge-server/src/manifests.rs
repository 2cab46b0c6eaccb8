//! The manifest tool source: forge manifests configured by the operator, turned into MCP
//! tools and kept current by hot reload.
//!
//! A malformed manifest at start-up is an error that names the file, the tool and the field.
//! Later, a bad edit keeps the previous version in place (logged by the watcher); a good one
//! replaces the catalog's manifest tools at once, which announces `list_changed`.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use omniforge_bridge::watch::{ManifestWatch, WatchError, watch};
use omniforge_bridge::{Manifest, ManifestError, ManifestTool};
use rmcp::model::Tool;

use crate::auth::Scope;
use crate::catalog::{Catalog, CatalogTool, ToolSource};

/// The loaded manifests and their watches. Dropping it stops the hot reload.
pub struct ManifestSource {
    _watches: Vec<ManifestWatch>,
}

/// A manifest source could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ManifestSourceError {
    /// A manifest is missing or malformed.
    #[error(transparent)]
    Manifest(#[from] ManifestError),
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

/// Loads every manifest in `paths`, publishes their tools into `catalog`, and reloads on change.
/// Must be called inside a tokio runtime.
///
/// # Errors
/// A manifest is missing or malformed, or cannot be watched.
pub fn start(
    catalog: Arc<Catalog>,
    paths: &[PathBuf],
) -> Result<ManifestSource, ManifestSourceError> {
    let loaded: Vec<Manifest> = paths
        .iter()
        .map(|p| Manifest::load(p))
        .collect::<Result<_, _>>()?;
    let loaded = Arc::new(Mutex::new(loaded));
    publish(&catalog, &loaded);
    let mut watches = Vec::new();
    for (index, path) in paths.iter().enumerate() {
        let catalog = catalog.clone();
        let loaded_for_watch = loaded.clone();
        let w = watch(path, move |manifest| {
            if let Some(slot) = loaded_for_watch
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .get_mut(index)
            {
                *slot = manifest;
            }
            publish(&catalog, &loaded_for_watch);
        })
        .map_err(|source| ManifestSourceError::Watch {
            path: path.clone(),
            source,
        })?;
        watches.push(w);
    }
    Ok(ManifestSource { _watches: watches })
}

fn publish(catalog: &Catalog, loaded: &Mutex<Vec<Manifest>>) {
    let tools: Vec<CatalogTool> = loaded
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .flat_map(|m| m.tools.iter())
        .filter(|t| !t.is_streaming())
        .map(to_catalog_tool)
        .collect();
    catalog.replace_source(ToolSource::Manifest, tools);
}

/// Only MCP fields go on the wire; the forge routing fields stay behind.
fn to_catalog_tool(t: &ManifestTool) -> CatalogTool {
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
    CatalogTool {
        tool,
        source: ToolSource::Manifest,
        required_scope: Scope::Call,
    }
}
