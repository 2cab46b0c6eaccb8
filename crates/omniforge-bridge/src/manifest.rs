//! The forge manifest (`gen/mcp/manifest.json`), read the way the Go reference bridge
//! (`mcpbridge.LoadManifest`) reads it. Unknown fields are ignored.
//!
//! ```json
//! {"_generated": "...", "schema_version": "1", "project": "demo",
//!  "tools": [{"name": "greet", "description": "...", "inputSchema": {"type": "object"},
//!             "outputSchema": {...}, "service": "demo.v1.GreetService", "method": "Greet",
//!             "procedure": "/demo.v1.GreetService/Greet", "auth_required": false,
//!             "idempotency_key": false, "streaming": ""}]}
//! ```

use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::{Map, Value};

/// A loaded, validated manifest.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Manifest {
    /// Generator banner.
    #[serde(rename = "_generated", default)]
    pub generated: String,
    /// Manifest format version.
    #[serde(default)]
    pub schema_version: String,
    /// The forge project's name.
    #[serde(default)]
    pub project: String,
    /// One entry per RPC.
    #[serde(default)]
    pub tools: Vec<ManifestTool>,
}

/// One RPC as a tool.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct ManifestTool {
    /// Tool name, `^[a-zA-Z0-9_-]{1,64}$`.
    pub name: String,
    /// What the RPC does.
    #[serde(default)]
    pub description: String,
    /// JSON Schema of the request message; root must be an object schema.
    #[serde(rename = "inputSchema")]
    pub input_schema: Map<String, Value>,
    /// JSON Schema of the response message, when declared.
    #[serde(rename = "outputSchema", default)]
    pub output_schema: Option<Map<String, Value>>,
    /// Fully qualified service, e.g. `demo.v1.GreetService`.
    #[serde(default)]
    pub service: String,
    /// RPC method name, e.g. `Greet`.
    #[serde(default)]
    pub method: String,
    /// The Connect procedure path, e.g. `/demo.v1.GreetService/Greet`.
    #[serde(default)]
    pub procedure: String,
    /// Whether the RPC needs an authenticated caller upstream.
    #[serde(default)]
    pub auth_required: bool,
    /// Whether each call carries a fresh `Idempotency-Key`.
    #[serde(default)]
    pub idempotency_key: bool,
    /// Empty for unary RPCs; `server`, `client` or `bidi` for streaming ones.
    #[serde(default)]
    pub streaming: String,
}

impl ManifestTool {
    /// Whether this RPC streams (streaming RPCs are not served as tools).
    pub fn is_streaming(&self) -> bool {
        !self.streaming.is_empty()
    }
}

/// A manifest that cannot be used. Every variant names the file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ManifestError {
    /// The file cannot be read.
    #[error("{path}: {source}")]
    Read {
        /// The manifest file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The file is not valid JSON of the manifest's shape.
    #[error("{path}: {detail}")]
    Parse {
        /// The manifest file.
        path: PathBuf,
        /// What serde found, with a location (`tools[2].inputSchema`, line and column).
        detail: String,
    },
    /// A tool entry breaks a rule.
    #[error("{path}: tool {tool:?} (tools[{index}]), field `{field}`: {problem}")]
    Invalid {
        /// The manifest file.
        path: PathBuf,
        /// The tool's name as written.
        tool: String,
        /// The tool's position in `tools`.
        index: usize,
        /// The offending field.
        field: &'static str,
        /// What is wrong.
        problem: String,
    },
}

fn valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

impl Manifest {
    /// Reads and validates the manifest at `path`.
    ///
    /// # Errors
    /// An unreadable file, invalid JSON, or a tool that breaks a rule; the error names the
    /// file, the tool and the field.
    pub fn load(path: &Path) -> Result<Manifest, ManifestError> {
        let text = std::fs::read_to_string(path).map_err(|source| ManifestError::Read {
            path: path.to_owned(),
            source,
        })?;
        Manifest::parse(path, &text)
    }

    /// Parses and validates manifest `text`; `path` is only used in errors.
    ///
    /// # Errors
    /// As [`Manifest::load`], less the read error.
    pub fn parse(path: &Path, text: &str) -> Result<Manifest, ManifestError> {
        let manifest: Manifest = serde_json::from_str(text).map_err(|e| ManifestError::Parse {
            path: path.to_owned(),
            detail: describe_parse_error(text, &e),
        })?;
        // A JSON file that is not a manifest (package.json, `{}`) must not start as "no tools".
        let has_tools = serde_json::from_str::<Value>(text)
            .ok()
            .is_some_and(|v| v.get("tools").is_some_and(Value::is_array));
        if !has_tools {
            return Err(ManifestError::Parse {
                path: path.to_owned(),
                detail: "not a forge manifest: the top level has no `tools` array".into(),
            });
        }
        manifest.validate(path)?;
        Ok(manifest)
    }

    fn validate(&self, path: &Path) -> Result<(), ManifestError> {
        let mut seen = std::collections::HashSet::new();
        for (index, tool) in self.tools.iter().enumerate() {
            let invalid = |field: &'static str, problem: String| ManifestError::Invalid {
                path: path.to_owned(),
                tool: tool.name.clone(),
                index,
                field,
                problem,
            };
            if !valid_name(&tool.name) {
                return Err(invalid("name", "must match ^[a-zA-Z0-9_-]{1,64}$".into()));
            }
            if !seen.insert(tool.name.as_str()) {
                return Err(invalid(
                    "name",
                    "another tool in this manifest has the same name".into(),
                ));
            }
            if tool.input_schema.get("type").and_then(Value::as_str) != Some("object") {
                return Err(invalid(
                    "inputSchema",
                    "the root must be {\"type\": \"object\", ...}".into(),
                ));
            }
            if let Some(output) = &tool.output_schema
                && output.get("type").and_then(Value::as_str) != Some("object")
            {
                return Err(invalid(
                    "outputSchema",
                    "the root must be {\"type\": \"object\", ...}".into(),
                ));
            }
            if !tool.is_streaming() && !tool.procedure.starts_with('/') {
                return Err(invalid(
                    "procedure",
                    format!(
                        "must be a path like /pkg.Service/Method, got {:?}",
                        tool.procedure
                    ),
                ));
            }
        }
        Ok(())
    }
}

/// Names the field serde stopped at, e.g. `tools[1].inputSchema: invalid type ... at line 4 column 20`.
fn describe_parse_error(text: &str, error: &serde_json::Error) -> String {
    // serde_json does not report the field path; re-walk the document to find the tool.
    let location = serde_json::from_str::<Value>(text).ok().and_then(|doc| {
        let tools = doc.get("tools")?.as_array()?;
        tools.iter().enumerate().find_map(|(i, t)| {
            let name = t.get("name").and_then(Value::as_str).unwrap_or("?");
            if t.get("name").is_some_and(|n| !n.is_string()) {
                return Some(format!("tools[{i}] field `name`"));
            }
            if !t.get("inputSchema").is_some_and(Value::is_object) {
                return Some(format!("tool {name:?} (tools[{i}]) field `inputSchema`"));
            }
            serde_json::from_value::<ManifestTool>(t.clone())
                .err()
                .map(|e| format!("tool {name:?} (tools[{i}]): {e}"))
        })
    });
    match location {
        Some(location) => format!("{location}: {error}"),
        None => error.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Manifest, ManifestError> {
        Manifest::parse(Path::new("gen/mcp/manifest.json"), text)
    }

    #[test]
    fn reads_the_reference_shape_and_ignores_unknown_fields() {
        let m = parse(
            r#"{"_generated":"forge","schema_version":"1","project":"demo","extra":1,"tools":[
            {"name":"greet","description":"d","inputSchema":{"type":"object"},"service":"s","method":"m",
             "procedure":"/demo.v1.S/Greet","auth_required":true,"idempotency_key":true,"streaming":"","x":2},
            {"name":"watch","inputSchema":{"type":"object"},"streaming":"server"}]}"#,
        )
        .unwrap();
        assert_eq!(m.project, "demo");
        assert_eq!(m.tools.len(), 2);
        assert!(
            m.tools[0].auth_required && m.tools[0].idempotency_key && !m.tools[0].is_streaming()
        );
        assert!(m.tools[1].is_streaming());
    }

    #[test]
    fn errors_name_file_tool_and_field() {
        let err = parse(
            r#"{"tools":[{"name":"a b","inputSchema":{"type":"object"},"procedure":"/x/Y"}]}"#,
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("gen/mcp/manifest.json")
                && err.contains("\"a b\"")
                && err.contains("`name`"),
            "{err}"
        );
        let err =
            parse(r#"{"tools":[{"name":"ok","inputSchema":{"type":"array"},"procedure":"/x/Y"}]}"#)
                .unwrap_err()
                .to_string();
        assert!(
            err.contains("inputSchema") && err.contains("\"ok\""),
            "{err}"
        );
        let err = parse(r#"{"tools":[{"name":"t","inputSchema":"nope"}]}"#)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("\"t\"") && err.contains("inputSchema"),
            "{err}"
        );
        let err = parse("{not json").unwrap_err().to_string();
        assert!(err.contains("line 1"), "{err}");
    }
}
