//! Warm templates against cold runs and the bare interpreter (issue 15), without MCP.
//!
//!     script-warm DATA_DIR UV [CALLS=60] [CLIENTS=8] [SECONDS=6] [ROUNDS=3] [PARTS]
//!
//! Builds three tool environments with omniforge-script's `EnvBuilder` in DATA_DIR (uv at
//! UV): the dateutil tool of workload 4 (`bench/peers/dateutil_tool.py`), a numpy tool
//! (`examples/tools/describe_numbers.json`) and add_vat (no dependency). Then, PARTS being a
//! comma-separated subset of `latency,first,throughput,layers,memory` (default all):
//!
//! - `latency`: per tool, CALLS calls each of `bare` (`<env>/bin/python -I tool.py`, the
//!   arguments on stdin), `cold` (the `Runner`, every layer, the pool off) and `warm` (a
//!   `WarmPool` whose template was prepared), interleaved round-robin, each after a 50 ms
//!   pause (as between two tool calls); p50/p90/p99 and the ratios of the p50s;
//! - `first`: the first call after create: with the pool on (the template prepared when the
//!   version is created, as the server does) against a cold call with the pool off, ROUNDS*5
//!   times per tool; and how long the template took to be ready;
//! - `throughput`: CLIENTS closed-loop clients calling the dateutil tool for SECONDS, warm
//!   and pool off alternating, ROUNDS rounds: calls/s and the ratio per round;
//! - `layers`: what each per-call layer of the warm path costs (dateutil): every layer, no
//!   per-call cgroups, no per-call Landlock domain, neither; warm with the runner's seccomp
//!   off (a template-level layer: inherited, free per call); and the same with no ready spare
//!   (`spares: 0`: the fork, the Landlock domain and the cgroup moves on the call's path, as
//!   for calls beyond the ready spares in a burst);
//! - `memory`: RSS and PSS of each template (its bubblewrap, init and interpreter) and its
//!   ready spare, and the pool's total.
//!
//! Prints one JSON object on stdout, tables on stderr. Root for the per-call cgroups.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use omniforge_script::*;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

struct Tool {
    name: &'static str,
    env: Env,
    code: String,
    file: PathBuf,
    args: Value,
    expect: &'static str,
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    // This executable is the runners' Landlock helper, as the omniforge binary is.
    main_if_helper();
    let mut a = std::env::args().skip(1);
    let usage = "usage: script-warm DATA_DIR UV [CALLS] [CLIENTS] [SECONDS] [ROUNDS] [PARTS]";
    let data = PathBuf::from(a.next().ok_or(usage)?);
    let uv = PathBuf::from(a.next().ok_or(usage)?);
    let calls: usize = a.next().map_or(Ok(60), |v| v.parse())?;
    let clients: usize = a.next().map_or(Ok(8), |v| v.parse())?;
    let seconds: f64 = a.next().map_or(Ok(6.0), |v| v.parse())?;
    let rounds: usize = a.next().map_or(Ok(3), |v| v.parse())?;
    let parts: Vec<String> = a
        .next()
        .unwrap_or_else(|| "latency,first,throughput,layers,memory".into())
        .split(',')
        .map(str::to_owned)
        .collect();
    let want = |p: &str| parts.iter().any(|x| x == p);
    std::fs::create_dir_all(&data)?;
    let data = std::fs::canonicalize(&data)?;
    let tools = build_tools(&data, &uv).await?;
    let runner = || -> Result<Runner, BoxError> {
        let mut c = RunnerConfig::new(SandboxLevel::Standard);
        c.scratch_dir = data.join("run");
        Ok(Runner::new(c)?)
    };
    let layers: Vec<&str> = runner()?
        .layers()
        .iter()
        .filter(|l| l.active)
        .map(|l| l.name)
        .collect();
    let mut out = json!({"calls": calls, "layers": layers, "load_start": loadavg()});

    if want("latency") || want("memory") {
        let pool = WarmPool::new(runner()?, WarmConfig::default());
        let cold = runner()?;
        let mut lat = serde_json::Map::new();
        for tool in &tools {
            let key = WarmKey::new(format!("{}@lat", tool.name), "bench");
            prepare(&pool, &key, tool).await?;
            let mut t: [Vec<Duration>; 3] = Default::default();
            for i in 0..calls + 3 {
                for (v, slot) in t.iter_mut().enumerate() {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    let took = match v {
                        0 => bare(tool)?,
                        1 => timed(cold.run(spec(tool), CancellationToken::new()), tool).await?,
                        _ => timed(pool.run(&key, spec(tool), CancellationToken::new()), tool).await?,
                    };
                    if i >= 3 {
                        slot.push(took);
                    }
                }
            }
            let [b, c, w] = t.map(summary);
            let ratio = |x: &Value, y: &Value| round3(x["p50"].as_f64().unwrap_or(0.0) / y["p50"].as_f64().unwrap_or(1.0));
            eprintln!(
                "latency {:<8} bare p50 {:>7.2} p99 {:>7.2} | cold p50 {:>7.2} p99 {:>7.2} | warm p50 {:>6.2} p99 {:>6.2} | warm/bare {:.3} warm/cold {:.3}",
                tool.name, b["p50"], b["p99"], c["p50"], c["p99"], w["p50"], w["p99"],
                ratio(&w, &b), ratio(&w, &c)
            );
            lat.insert(
                tool.name.into(),
                json!({"bare": b, "cold": c, "warm": w, "warm_over_bare": ratio(&w, &b), "warm_over_cold": ratio(&w, &c)}),
            );
        }
        out["latency"] = Value::Object(lat);
        if want("memory") {
            tokio::time::sleep(Duration::from_millis(500)).await;
            let report = pool.report();
            let mib = |b: u64| round3(b as f64 / (1 << 20) as f64);
            let per: Vec<Value> = report
                .templates
                .iter()
                .map(|t| {
                    eprintln!(
                        "memory  {:<14} template RSS {:>6.1} MiB, spare RSS {:>6.1} MiB, PSS {:>6.1} MiB, boot {:?}",
                        t.key.version, mib(t.template_rss_bytes), mib(t.spares_rss_bytes), mib(t.pss_bytes), t.boot
                    );
                    json!({"tool": t.key.version, "template_rss_mib": mib(t.template_rss_bytes),
                           "spare_rss_mib": mib(t.spares_rss_bytes), "pss_mib": mib(t.pss_bytes),
                           "spares": t.spares, "boot_ms": t.boot.map(|b| b.as_secs_f64() * 1000.0)})
                })
                .collect();
            eprintln!("memory  pool: RSS {:.1} MiB, PSS {:.1} MiB", mib(report.rss_bytes), mib(report.pss_bytes));
            out["memory"] = json!({"templates": per, "pool_rss_mib": mib(report.rss_bytes), "pool_pss_mib": mib(report.pss_bytes)});
        }
    }

    if want("first") {
        let pool = WarmPool::new(runner()?, WarmConfig::default());
        let cold = runner()?;
        let mut first = serde_json::Map::new();
        for (n, tool) in tools.iter().enumerate() {
            let mut t: [Vec<Duration>; 3] = Default::default();
            for i in 0..rounds * 5 {
                // A new version: created (template prepared), then called once; against the
                // same call with the pool off.
                tokio::time::sleep(Duration::from_millis(50)).await;
                let key = WarmKey::new(format!("{}@first-{n}-{i}", tool.name), "bench");
                let t0 = Instant::now();
                prepare(&pool, &key, tool).await?;
                t[2].push(t0.elapsed());
                tokio::time::sleep(Duration::from_millis(50)).await;
                t[0].push(timed(pool.run(&key, spec(tool), CancellationToken::new()), tool).await?);
                tokio::time::sleep(Duration::from_millis(50)).await;
                t[1].push(timed(cold.run(spec(tool), CancellationToken::new()), tool).await?);
                pool.retire(&key.version);
            }
            let [w, c, boot] = t.map(summary);
            let r = round3(w["p50"].as_f64().unwrap_or(0.0) / c["p50"].as_f64().unwrap_or(1.0));
            eprintln!(
                "first   {:<8} first call after create p50 {:>7.2} | cold, pool off p50 {:>7.2} | ratio {:.3} | template ready in p50 {:>7.2}",
                tool.name, w["p50"], c["p50"], r, boot["p50"]
            );
            first.insert(tool.name.into(), json!({"first_after_create": w, "cold_pool_off": c, "ratio": r, "template_ready": boot}));
        }
        out["first"] = Value::Object(first);
    }

    if want("throughput") {
        let tool = &tools[0];
        let pool = WarmPool::new(runner()?, WarmConfig::default());
        let key = WarmKey::new("dateutil@tput", "bench");
        prepare(&pool, &key, tool).await?;
        let cold = WarmPool::new(runner()?, WarmConfig { max_templates: 0, ..WarmConfig::default() });
        let mut per_round = Vec::new();
        for round in 0..rounds {
            let w = throughput(&pool, &key, tool, clients, seconds).await?;
            let c = throughput(&cold, &key, tool, clients, seconds).await?;
            let r = round3(w / c);
            eprintln!("throughput round {round}: {clients} clients, warm {w:.1} calls/s, pool off {c:.1} calls/s, ratio {r:.2}");
            per_round.push(json!({"warm_per_s": round3(w), "cold_per_s": round3(c), "ratio": r}));
        }
        let mut ratios: Vec<f64> = per_round.iter().filter_map(|r| r["ratio"].as_f64()).collect();
        ratios.sort_by(f64::total_cmp);
        let median = ratios.get(ratios.len() / 2).copied().unwrap_or(0.0);
        eprintln!("throughput median ratio {median:.2}");
        out["throughput"] = json!({"clients": clients, "seconds": seconds, "rounds": per_round, "median_ratio": median});
    }

    if want("layers") {
        let tool = &tools[0];
        // (name, per-call layers off, runner's seccomp off, ready spares)
        let variants: [(&str, Vec<&str>, bool, usize); 8] = [
            ("warm", vec![], false, 1),
            ("no call cgroups", vec!["cgroups"], false, 1),
            ("no call landlock", vec!["landlock"], false, 1),
            ("neither", vec!["cgroups", "landlock"], false, 1),
            ("runner without seccomp", vec![], true, 1),
            ("spare on demand", vec![], false, 0),
            ("on demand, no call cgroups", vec!["cgroups"], false, 0),
            ("on demand, no call landlock", vec!["landlock"], false, 0),
        ];
        let mut pools = Vec::new();
        for (name, off, no_seccomp, spares) in &variants {
            let mut c = RunnerConfig::new(SandboxLevel::Standard);
            c.scratch_dir = data.join("run");
            if *no_seccomp {
                c.disabled_layers = vec!["seccomp".into()];
            }
            let pool = WarmPool::new(
                Runner::new(c)?,
                WarmConfig {
                    disabled_call_layers: off.iter().map(|s| (*s).to_owned()).collect(),
                    spares: *spares,
                    ..WarmConfig::default()
                },
            );
            let key = WarmKey::new(format!("dateutil@{name}"), "bench");
            prepare(&pool, &key, tool).await?;
            pools.push((*name, pool, key));
        }
        let mut t: Vec<Vec<Duration>> = vec![Vec::new(); pools.len()];
        for i in 0..calls + 3 {
            for (k, (_, pool, key)) in pools.iter().enumerate() {
                tokio::time::sleep(Duration::from_millis(50)).await;
                let took = timed(pool.run(key, spec(tool), CancellationToken::new()), tool).await?;
                if i >= 3 {
                    t[k].push(took);
                }
            }
        }
        let mut res = serde_json::Map::new();
        for (k, (name, _, _)) in pools.iter().enumerate() {
            // Against the same spares setting with every layer: what this layer costs there.
            let base = if k >= 5 { 5 } else { 0 };
            let paired = paired_diff(&t[base], &t[k]);
            let s = summary(t[k].clone());
            eprintln!("layers  {name:<28} p50 {:>6.2} p99 {:>6.2} | with the layer minus without: {paired:+.3} ms (median of paired differences)", s["p50"], s["p99"]);
            res.insert((*name).into(), json!({"summary": s, "with_minus_without_ms": paired}));
        }
        out["layers_warm"] = Value::Object(res);
    }
    out["load_end"] = loadavg();
    println!("{out}");
    Ok(())
}

async fn build_tools(data: &Path, uv: &Path) -> Result<Vec<Tool>, BoxError> {
    let host = HostEnv::from_vars(std::env::vars_os());
    let python = Interpreter::resolve(Path::new("python3")).await?;
    let uv = UvTool::locate_or_install(data, Some(uv.to_owned()), &python, &host).await?;
    let builder = EnvBuilder::new(EnvConfig {
        data_dir: data.to_owned(),
        uv,
        python,
        allow_source_builds: false,
        command_timeout: Duration::from_secs(600),
        host,
    });
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let example = |f: &str| -> Result<String, BoxError> {
        let v: Value = serde_json::from_str(&std::fs::read_to_string(root.join("examples/tools").join(f))?)?;
        Ok(v["code"].as_str().ok_or("no code")?.to_owned())
    };
    let specs = [
        ("dateutil", vec!["python-dateutil==2.9.0.post0".to_owned()], std::fs::read_to_string(root.join("bench/peers/dateutil_tool.py"))?, json!({"date": "2026-11-30T12:34:56+01:00"}), "next_month"),
        ("numpy", vec!["numpy>=2".to_owned()], example("describe_numbers.json")?, json!({"values": [3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3, 2, 3, 8, 4]}), "p95"),
        ("add_vat", vec![], example("add_vat.json")?, json!({"net": 100}), "gross"),
    ];
    let mut tools = Vec::new();
    for (name, deps, code, args, expect) in specs {
        let lock = builder.lock(&deps).await?;
        let env = builder.build(&lock, |_| {}).await?;
        let file = data.join(format!("{name}.py"));
        std::fs::write(&file, &code)?;
        eprintln!("tool {name}: {}", env.path.display());
        tools.push(Tool { name, env, code, file, args, expect });
    }
    Ok(tools)
}

fn spec(tool: &Tool) -> RunSpec {
    let mut s = RunSpec::new(&tool.env, tool.code.clone());
    s.arguments = tool.args.clone();
    s
}

async fn prepare(pool: &WarmPool, key: &WarmKey, tool: &Tool) -> Result<(), BoxError> {
    match pool.prepare(key, &spec(tool)).await {
        Prepared::Ready => Ok(()),
        Prepared::Cold(why) => Err(format!("{}: no template: {why}", tool.name).into()),
    }
}

async fn timed(
    run: impl std::future::Future<Output = Result<RunOutput, RunError>>,
    tool: &Tool,
) -> Result<Duration, BoxError> {
    let t0 = Instant::now();
    let out = run.await?;
    let took = t0.elapsed();
    if out.exit != Exit::Code(0) || !String::from_utf8_lossy(&out.stdout).contains(tool.expect) {
        return Err(format!("{}: {out:?}", tool.name).into());
    }
    Ok(took)
}

fn bare(tool: &Tool) -> Result<Duration, BoxError> {
    let t0 = Instant::now();
    let mut child = std::process::Command::new(tool.env.python())
        .arg("-I")
        .arg(&tool.file)
        .env_clear()
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()?;
    std::io::Write::write_all(&mut child.stdin.take().ok_or("stdin")?, tool.args.to_string().as_bytes())?;
    let out = child.wait_with_output()?;
    let took = t0.elapsed();
    if !out.status.success() {
        return Err(format!("bare {}: {}", tool.name, String::from_utf8_lossy(&out.stderr)).into());
    }
    Ok(took)
}

async fn throughput(
    pool: &WarmPool,
    key: &WarmKey,
    tool: &Tool,
    clients: usize,
    seconds: f64,
) -> Result<f64, BoxError> {
    let end = Instant::now() + Duration::from_secs_f64(seconds);
    let t0 = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..clients {
        let (pool, key, s) = (pool.clone(), key.clone(), spec(tool));
        tasks.push(tokio::spawn(async move {
            let mut n = 0u64;
            while Instant::now() < end {
                match pool.run(&key, s.clone(), CancellationToken::new()).await {
                    Ok(o) if o.exit == Exit::Code(0) => n += 1,
                    Ok(o) => return Err(format!("{o:?}")),
                    Err(RunError::Busy) => tokio::time::sleep(Duration::from_millis(5)).await,
                    Err(e) => return Err(e.to_string()),
                }
            }
            Ok(n)
        }));
    }
    let mut total = 0;
    for t in tasks {
        total += t.await?.map_err(|e| -> BoxError { e.into() })?;
    }
    Ok(total as f64 / t0.elapsed().as_secs_f64())
}

fn summary(mut v: Vec<Duration>) -> Value {
    v.sort();
    if v.is_empty() {
        return json!({});
    }
    let ms = |d: Duration| round3(d.as_secs_f64() * 1000.0);
    let q = |p: f64| ms(v[((v.len() - 1) as f64 * p).round() as usize]);
    json!({"p50": q(0.5), "p90": q(0.9), "p99": q(0.99), "min": ms(v[0]), "n": v.len()})
}

fn paired_diff(a: &[Duration], b: &[Duration]) -> f64 {
    let mut d: Vec<f64> = a
        .iter()
        .zip(b)
        .map(|(x, y)| (x.as_secs_f64() - y.as_secs_f64()) * 1000.0)
        .collect();
    d.sort_by(f64::total_cmp);
    round3(d.get(d.len() / 2).copied().unwrap_or(0.0))
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

fn loadavg() -> Value {
    json!(std::fs::read_to_string("/proc/loadavg").unwrap_or_default().trim())
}
