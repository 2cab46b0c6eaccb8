//! The cost of each layer of a warm script tool call, without MCP (issue 6, #4).
//!
//!     script-layers ENV_DIR SCRIPT.py ARGS_JSON [RUNS=40] [SCRATCH_DIR]
//!
//! ENV_DIR is an environment OmniForge built (`<data-dir>/envs/<env_id>`). Times, interleaved,
//! RUNS calls each of:
//! - `bare`: `ENV_DIR/bin/python -I SCRIPT.py`, args on stdin, spawned and waited for directly;
//! - `runner-off`: omniforge-script's `Runner` at `SandboxLevel::Off` (process group, rlimits,
//!   side channel socketpair, capped capture, per-run script file);
//! - `runner-cgroups`: `Standard` without bubblewrap, Landlock and seccomp (adds the per-run
//!   cgroups: pids and kill);
//! - `runner-bwrap`: `Standard` with every layer, as OmniForge runs it (adds bubblewrap:
//!   namespaces, uid 65534, read-only binds; the seccomp filter; Landlock, with this executable
//!   as the helper);
//! - `call-log`: one `SqliteStore::record_call` (the call log row OmniForge writes after every
//!   stored-tool call; `synchronous=FULL`, so one fsync), on a temporary database.
//!
//! Prints one JSON object: the active layers of each runner, the latency summary (µs) of
//! each configuration, and the median of paired per-iteration differences between them.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use omniforge_script::{Env, RunSpec, Runner, RunnerConfig, SandboxLevel};
use omniforge_store::{
    Actor, Annotations, CallLog, CallOutcome, CallRecord, CallSource, DEFAULT_BUSY_TIMEOUT,
    DEFAULT_CALL_STATS_MAX_AGE, DEFAULT_CHANGE_LOG_MAX_ROWS, DEFAULT_MAX_READERS, Limits,
    NewStatus, NewVersion, Runtime, SqliteStore, StoreConfig, ToolStore,
};

/// Unix milliseconds now.
fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // This executable is also the runners' Landlock helper, as the omniforge binary is.
    omniforge_script::main_if_helper();
    let mut args = std::env::args().skip(1);
    let usage = "usage: script-layers ENV_DIR SCRIPT.py ARGS_JSON [RUNS] [SCRATCH_DIR]";
    let env_dir = PathBuf::from(args.next().ok_or(usage)?);
    let script = PathBuf::from(args.next().ok_or(usage)?);
    let arguments: Value = serde_json::from_str(&args.next().ok_or(usage)?)?;
    let runs: usize = args.next().map_or(Ok(40), |a| a.parse())?;
    let scratch = args.next().map(PathBuf::from);
    let code = std::fs::read_to_string(&script)?;
    let env = Env {
        path: std::path::absolute(&env_dir)?,
        env_id: env_dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
    };
    let config = |level: SandboxLevel, bwrap: bool| {
        let mut c = RunnerConfig::new(level);
        if !bwrap {
            c.disabled_layers = ["namespaces", "landlock", "seccomp"].map(String::from).to_vec();
        }
        if let Some(s) = &scratch {
            c.scratch_dir = s.clone();
        }
        c
    };
    let runners = [
        ("runner-off", Runner::new(config(SandboxLevel::Off, true))?),
        ("runner-cgroups", Runner::new(config(SandboxLevel::Standard, false))?),
        ("runner-bwrap", Runner::new(config(SandboxLevel::Standard, true))?),
    ];
    let layers: serde_json::Map<String, Value> = runners
        .iter()
        .map(|(name, r)| {
            let active: Vec<&str> = r.layers().iter().filter(|l| l.active).map(|l| l.name).collect();
            ((*name).to_owned(), json!(active))
        })
        .collect();

    let stdin = serde_json::to_vec(&arguments)?;
    let mut timings: Vec<(&str, Vec<Duration>)> = vec![("bare", Vec::new())];
    timings.extend(runners.iter().map(|(n, _)| (*n, Vec::new())));
    let mut sample_output = String::new();
    for i in 0..runs + 3 {
        let warm = i >= 3;
        // bare
        let t0 = Instant::now();
        let mut child = std::process::Command::new(env.python())
            .arg("-I")
            .arg(&script)
            .env_clear()
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()?;
        std::io::Write::write_all(&mut child.stdin.take().ok_or("stdin")?, &stdin)?;
        let out = child.wait_with_output()?;
        let dt = t0.elapsed();
        if !out.status.success() {
            return Err(format!("bare run failed: {}", String::from_utf8_lossy(&out.stderr)).into());
        }
        if warm {
            timings[0].1.push(dt);
        }
        for (k, (name, runner)) in runners.iter().enumerate() {
            let mut spec = RunSpec::new(&env, code.clone());
            spec.arguments = arguments.clone();
            let t0 = Instant::now();
            let out = runner.run(spec, CancellationToken::new()).await?;
            let dt = t0.elapsed();
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            if out.exit != omniforge_script::Exit::Code(0) {
                return Err(format!("{name}: {out:?}").into());
            }
            if i == 0 && k == 2 {
                sample_output = text;
            }
            if warm {
                timings[k + 1].1.push(dt);
            }
        }
    }

    // The call-log write, on a temporary database with one tool.
    let dir = std::env::temp_dir().join(format!("bench-calllog-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    let store = SqliteStore::open_with(
        dir.join("omniforge.db"),
        &StoreConfig {
            busy_timeout: DEFAULT_BUSY_TIMEOUT,
            call_log_max_rows: 10_000,
            max_readers: DEFAULT_MAX_READERS,
            change_log_max_rows: DEFAULT_CHANGE_LOG_MAX_ROWS,
            call_stats_max_age: DEFAULT_CALL_STATS_MAX_AGE,
            // No secrets are written: no keyring needed.
            keyring: None,
        },
    )
    .await?;
    store
        .create_tool(
            &Actor::new("bench"),
            "t",
            NewVersion {
                title: None,
                description: "t".into(),
                input_schema: Default::default(),
                output_schema: None,
                annotations: Annotations::default(),
                runtime: Runtime::Python,
                code: String::new(),
                dependencies: Vec::new(),
                limits: Limits {
                    timeout_ms: 1000,
                    memory_bytes: 1 << 30,
                    network: false,
                },
                lock: String::new(),
                env_id: "x".into(),
                secrets: Vec::new(),
                author: "bench".into(),
                examples: Vec::new(),
                execution: Default::default(),
            },
            NewStatus::Live,
        )
        .await?;
    let mut log_times = Vec::new();
    for _ in 0..runs {
        let t0 = Instant::now();
        store
            .record_call(CallRecord {
                tool: "t".into(),
                source: CallSource::Stored,
                version: Some(1),
                // Now, so that the write updates its hour as a real call's does.
                started_at_ms: now_ms(),
                duration_ms: 1,
                outcome: CallOutcome::Ok,
                bytes_out: 10,
                principal: Some("bench".into()),
                error: None,
                arguments: None,
                arguments_text: None,
                result_text: None,
            })
            .await?;
        log_times.push(t0.elapsed());
    }
    store.close().await;
    let _ = std::fs::remove_dir_all(&dir);
    timings.push(("call-log", log_times));

    // Paired differences: each iteration ran bare, off, cgroups and bwrap back to back, so the
    // median of per-iteration differences is robust to the machine's load drifting.
    let mut diffs = serde_json::Map::new();
    for (a, b) in [(1, 0), (2, 1), (3, 2), (3, 0)] {
        let mut d: Vec<f64> = timings[a]
            .1
            .iter()
            .zip(&timings[b].1)
            .map(|(x, y)| (x.as_secs_f64() - y.as_secs_f64()) * 1e6)
            .collect();
        d.sort_by(f64::total_cmp);
        diffs.insert(
            format!("{} - {}", timings[a].0, timings[b].0),
            json!((d[d.len() / 2] * 10.0).round() / 10.0),
        );
    }
    let mut results = serde_json::Map::new();
    for (name, mut v) in timings {
        v.sort();
        let us = |d: Duration| (d.as_secs_f64() * 1e6 * 10.0).round() / 10.0;
        let q = |p: f64| us(v[((v.len() - 1) as f64 * p).round() as usize]);
        results.insert(
            name.to_owned(),
            json!({"p50": q(0.5), "p90": q(0.9), "min": us(v[0]), "max": us(v[v.len() - 1]), "n": v.len()}),
        );
    }
    println!(
        "{}",
        json!({"runs": runs, "layers": layers, "lat_us": results, "paired_diff_us": diffs, "sample_output": sample_output.trim_end()})
    );
    Ok(())
}
