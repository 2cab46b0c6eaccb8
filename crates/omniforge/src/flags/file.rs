//! The TOML config file given with `--config`: the same keys as the flags, with `_` for `-`,
//! except manifests, which are `[[manifest]]` tables.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};
use serde::Deserialize;

use super::options::{LogFormat, SandboxArg, SchemaProfileArg};

/// The config file. Unknown keys are errors (a typo must not be silently ignored).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct FileConfig {
    pub(crate) data_dir: Option<PathBuf>,
    pub(crate) database: Option<String>,
    pub(crate) secret_key_file: Option<PathBuf>,
    pub(crate) log_level: Option<String>,
    pub(crate) log_format: Option<LogFormat>,
    pub(crate) page_size: Option<usize>,
    pub(crate) metrics: Option<bool>,
    pub(crate) metrics_max_tools: Option<usize>,
    pub(crate) otlp_endpoint: Option<String>,
    pub(crate) metrics_listen: Option<SocketAddr>,
    #[serde(default, with = "humantime_serde_opt")]
    pub(crate) shutdown_grace: Option<Duration>,
    #[serde(default)]
    pub(crate) manifest: Vec<FileManifest>,
    #[serde(default, with = "humantime_serde_opt")]
    pub(crate) upstream_timeout: Option<Duration>,
    pub(crate) upstream_max_response_bytes: Option<u64>,
    pub(crate) inline_schema_refs: Option<bool>,
    pub(crate) python: Option<PathBuf>,
    pub(crate) uv: Option<PathBuf>,
    pub(crate) allow_source_builds: Option<bool>,
    pub(crate) sandbox: Option<SandboxArg>,
    pub(crate) no_authoring: Option<bool>,
    #[serde(default, with = "humantime_serde_opt")]
    pub(crate) tool_timeout: Option<Duration>,
    #[serde(default, with = "humantime_serde_opt")]
    pub(crate) max_tool_timeout: Option<Duration>,
    pub(crate) memory_limit_bytes: Option<u64>,
    pub(crate) keep_failed_drafts: Option<bool>,
    pub(crate) require_approval: Option<bool>,
    pub(crate) max_result_bytes: Option<usize>,
    pub(crate) call_log_rows: Option<u64>,
    pub(crate) call_log_queue: Option<usize>,
    #[serde(default, with = "humantime_serde_opt")]
    pub(crate) call_log_batch_wait: Option<Duration>,
    pub(crate) schema_profile: Option<SchemaProfileArg>,
    #[serde(default, with = "humantime_serde_opt")]
    pub(crate) output_ttl: Option<Duration>,
    #[serde(default, with = "humantime_serde_opt")]
    pub(crate) audit_retention: Option<Duration>,
    #[serde(default, with = "humantime_serde_opt")]
    pub(crate) task_ttl: Option<Duration>,
    #[serde(default, with = "humantime_serde_opt")]
    pub(crate) task_lease: Option<Duration>,
    pub(crate) request_state_key_file: Option<PathBuf>,
    pub(crate) warm_pool: Option<usize>,
    #[serde(default, with = "humantime_serde_opt")]
    pub(crate) warm_idle: Option<Duration>,
    pub(crate) listen: Option<SocketAddr>,
    pub(crate) path: Option<String>,
    pub(crate) stateless: Option<bool>,
    #[serde(default)]
    pub(crate) allow_origin: Vec<String>,
    #[serde(default)]
    pub(crate) allow_host: Vec<String>,
    pub(crate) token_file: Option<PathBuf>,
    pub(crate) insecure_no_auth: Option<bool>,
    pub(crate) max_body_bytes: Option<usize>,
    #[serde(default, with = "humantime_serde_opt")]
    pub(crate) session_idle_timeout: Option<Duration>,
    pub(crate) max_sessions: Option<u32>,
    #[serde(default, with = "humantime_serde_opt")]
    pub(crate) header_read_timeout: Option<Duration>,
    #[serde(default, with = "humantime_serde_opt")]
    pub(crate) keep_alive_timeout: Option<Duration>,
    pub(crate) max_connections: Option<u32>,
    pub(crate) ready_file: Option<PathBuf>,
    /// `[oauth]`.
    pub(crate) oauth: Option<super::oauth::FileOAuth>,
}

/// A `[[manifest]]` entry of the config file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct FileManifest {
    pub(crate) path: PathBuf,
    #[serde(default)]
    pub(crate) upstream: String,
    /// The Authorization header value, verbatim.
    pub(crate) auth_header: Option<String>,
    /// A file whose first line is the Authorization header value (keeps the credential out of
    /// the config file).
    pub(crate) auth_header_file: Option<PathBuf>,
    #[serde(default, with = "humantime_serde_opt")]
    pub(crate) timeout: Option<Duration>,
    #[serde(default)]
    pub(crate) headers: std::collections::BTreeMap<String, String>,
    /// The largest response body accepted from this upstream, in bytes.
    pub(crate) max_response_bytes: Option<u64>,
    /// Which tools may run as tasks: tool name → `forbidden`, `optional` or `required`.
    #[serde(default)]
    pub(crate) task_support: std::collections::BTreeMap<String, String>,
}

/// Reads and parses the config file at `path`.
///
/// # Errors
/// The file cannot be read, is not TOML, or has an unknown key or a bad value.
pub(crate) fn read(path: &Path) -> Result<FileConfig> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading config file {}", path.display()))?;
    toml::from_str(&text).with_context(|| format!("parsing config file {}", path.display()))
}

/// Durations in the config file are strings like "30s".
mod humantime_serde_opt {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer};

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<Duration>, D::Error> {
        let Some(s) = Option::<String>::deserialize(d)? else {
            return Ok(None);
        };
        super::super::options::parse_duration(&s)
            .map(Some)
            .map_err(serde::de::Error::custom)
    }
}
