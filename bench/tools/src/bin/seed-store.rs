//! Inserts N script tools straight into an OmniForge data directory's store, the way
//! `omniforge_create_tool` would save them, for the `tools/list` workload (issue 6, #2).
//!
//!     seed-store DATA_DIR [N=10000]
//!     seed-store postgres://... [N]    (issue 14: the same tools in a PostgreSQL store)
//!
//! Each tool: a ~150-character description, a title, a 2-property input schema with
//! descriptions, read-only annotations, ~300 bytes of code, no dependencies. Tools are not
//! runnable (their environment id names no environment); listing does not need one.

use std::path::PathBuf;
use std::time::Instant;

use omniforge_store::{
    Actor, Annotations, DEFAULT_BUSY_TIMEOUT, DEFAULT_CALL_STATS_MAX_AGE,
    DEFAULT_CHANGE_LOG_MAX_ROWS, DEFAULT_MAX_READERS, Limits, NewStatus, NewVersion, PgEnv,
    Runtime, Store, StoreConfig, ToolStore,
};
use serde_json::json;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let target = args.next().ok_or("usage: seed-store DATA_DIR|postgres://... [N]")?;
    let n: usize = args.next().map_or(Ok(10_000), |a| a.parse())?;
    let url = if target.starts_with("postgres") {
        target.clone()
    } else {
        let dir = PathBuf::from(&target);
        std::fs::create_dir_all(&dir)?;
        format!("sqlite:{}", dir.join("omniforge.db").display())
    };
    let config = StoreConfig {
        busy_timeout: DEFAULT_BUSY_TIMEOUT,
        call_log_max_rows: 10_000,
        max_readers: DEFAULT_MAX_READERS,
        change_log_max_rows: DEFAULT_CHANGE_LOG_MAX_ROWS,
        call_stats_max_age: DEFAULT_CALL_STATS_MAX_AGE,
        // No secrets are written: no keyring needed.
        keyring: None,
    };
    let store = omniforge_store::open(&url, &PgEnv::from_vars(std::env::vars()), &config).await?;
    let existing = store.list_enabled().await?.len();
    let started = Instant::now();
    for i in existing..n {
        let name = format!("bench_tool_{i:05}");
        let schema = json!({
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "City name, e.g. Paris"},
                "days": {"type": "integer", "minimum": 1, "maximum": 14, "description": "Forecast length in days"}
            },
            "required": ["city"],
            "additionalProperties": false
        });
        let spec = NewVersion {
            title: Some(format!("Bench tool {i}")),
            description: format!(
                "Benchmark tool number {i}: looks up a made-up weather forecast for a city and \
                 returns it as text. Seeded by bench/tools seed-store."
            ),
            input_schema: schema.as_object().cloned().unwrap_or_default(),
            output_schema: None,
            annotations: Annotations {
                read_only_hint: Some(true),
                destructive_hint: Some(false),
                idempotent_hint: Some(true),
                open_world_hint: Some(false),
            },
            runtime: Runtime::Python,
            code: format!(
                "import json, sys\n# tool {i}\nargs = json.load(sys.stdin)\ncity = args['city']\n\
                 days = int(args.get('days', 3))\nfor d in range(days):\n    \
                 print(f'{{city}} day {{d + 1}}: sunny, 21 C')\n"
            ),
            dependencies: Vec::new(),
            limits: Limits {
                timeout_ms: 30_000,
                memory_bytes: 2 << 30,
                network: false,
            },
            lock: String::new(),
            env_id: "bench-seed-no-env".to_owned(),
            secrets: Vec::new(),
            author: "bench".to_owned(),
            examples: Vec::new(),
            execution: Default::default(),
        };
        store
            .create_tool(&Actor::new("bench"), &name, spec, NewStatus::Live)
            .await?;
    }
    store.close().await;
    eprintln!(
        "seed-store: {} tools in {} ({} new, {:.1} s)",
        n,
        target,
        n.saturating_sub(existing),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}
