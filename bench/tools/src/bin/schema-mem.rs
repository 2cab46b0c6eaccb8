//! What one compiled input-schema validator costs in memory (workload 2's RSS question).
//!
//!     schema-mem [N=10000]
//!
//! OmniForge compiles each catalog entry's inputSchema once (`jsonschema::validator_for`,
//! crates/omniforge-server/src/catalog.rs). This compiles N validators of the schema
//! `seed-store` gives every stored tool, with the same jsonschema line and features, and
//! reports the process's RSS growth per validator; then the same for N plain clones of the
//! schema (what the catalog keeps anyway). Prints one JSON object.

use serde_json::json;

fn rss_kb() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|r| r.split_whitespace().next()?.parse().ok())
        })
        .unwrap_or(0)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let n: usize = std::env::args().nth(1).map_or(Ok(10_000), |a| a.parse())?;
    let schema = json!({
        "type": "object",
        "properties": {
            "city": {"type": "string", "description": "City name, e.g. Paris"},
            "days": {"type": "integer", "minimum": 1, "maximum": 14, "description": "Forecast length in days"}
        },
        "required": ["city"],
        "additionalProperties": false
    });
    let base = rss_kb();
    let clones: Vec<serde_json::Value> = (0..n).map(|_| schema.clone()).collect();
    let after_clones = rss_kb();
    let started = std::time::Instant::now();
    let validators = (0..n)
        .map(|_| jsonschema::validator_for(&schema))
        .collect::<Result<Vec<_>, _>>()?;
    let compile_s = started.elapsed().as_secs_f64();
    let after_validators = rss_kb();
    assert!(validators[0].is_valid(&json!({"city": "Paris"})));
    println!(
        "{}",
        json!({
            "n": n,
            "schema_clone_kb_each": (after_clones - base) as f64 / n as f64,
            "validator_kb_each": (after_validators - after_clones) as f64 / n as f64,
            "validators_mb": (after_validators - after_clones) as f64 / 1024.0,
            "compile_us_each": compile_s * 1e6 / n as f64,
        })
    );
    drop(clones);
    Ok(())
}
