//! The measurements: bare, cold and warm calls interleaved; first call; throughput; memory;
//! isolation experiments. Each prints a Markdown table and appends raw JSON to DATA/results.jsonl.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use omniforge_script::{Env, RunSpec, Runner, RunnerConfig, SandboxLevel};
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt as _;
use tokio_util::sync::CancellationToken;

use crate::capture::{self, RealSandbox};
use crate::cgroups::Root;
use crate::warm::{self, Call, Options, Template};
use crate::{BoxError, TEMPLATE_PY, Tool, tool};

pub struct ToolSetup {
    pub tool: &'static Tool,
    pub env: Env,
    pub real: RealSandbox,
    /// The tool's code as a file, for the bare run.
    pub script: PathBuf,
}

pub struct Setup {
    pub tools: Vec<ToolSetup>,
    pub cold: Runner,
    pub root: Arc<Root>,
    pub template_py: PathBuf,
    pub data: PathBuf,
}

pub async fn setup(envs: &[(String, Env)], data: &Path) -> Result<Setup, BoxError> {
    let template_py = data.join("template.py");
    std::fs::write(&template_py, TEMPLATE_PY)?;
    let mut tools = Vec::new();
    for (name, env) in envs {
        let t = tool(name);
        let real = capture::capture(env, &data.join(format!("capture-{name}")))
            .await
            .map_err(|e| e.to_string())?;
        let inactive: Vec<_> = real.layers.iter().filter(|(_, a)| !a).collect();
        if !inactive.is_empty() {
            return Err(format!("layers inactive on this machine: {inactive:?}").into());
        }
        let script = data.join(format!("{name}.py"));
        std::fs::write(&script, t.code)?;
        tools.push(ToolSetup {
            tool: t,
            env: env.clone(),
            real,
            script,
        });
    }
    let cold = Runner::new(RunnerConfig::new(SandboxLevel::Standard))?;
    let root = Arc::new(Root::create());
    eprintln!("cgroups: {}", root.describe());
    Ok(Setup {
        tools,
        cold,
        root,
        template_py,
        data: data.to_owned(),
    })
}

impl Setup {
    pub async fn template(&self, t: &ToolSetup, opts: Options) -> Result<Template, BoxError> {
        self.template_code(t, t.tool.code, opts, true).await
    }

    pub async fn template_code(
        &self,
        t: &ToolSetup,
        code: &str,
        opts: Options,
        single_thread_vars: bool,
    ) -> Result<Template, BoxError> {
        Template::start(
            &t.real,
            &t.env.path,
            code,
            &self.template_py,
            Arc::clone(&self.root),
            opts,
            single_thread_vars,
        )
        .await
    }
}

fn args_of(t: &Tool) -> Value {
    serde_json::from_str(t.args).expect("tool args are JSON")
}

/// `<env>/bin/python -I tool.py`, arguments on stdin, as the bench harness's bare run.
pub async fn bare(t: &ToolSetup) -> Result<(Duration, Vec<u8>), BoxError> {
    let started = Instant::now();
    let mut child = tokio::process::Command::new(t.env.python())
        .arg("-I")
        .arg(&t.script)
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("LANG", "C.UTF-8")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()?;
    let mut stdin = child.stdin.take().ok_or("no stdin")?;
    stdin.write_all(t.tool.args.as_bytes()).await?;
    drop(stdin);
    let out = child.wait_with_output().await?;
    let took = started.elapsed();
    if !out.status.success() {
        return Err(format!("bare run failed: {}", String::from_utf8_lossy(&out.stderr)).into());
    }
    Ok((took, out.stdout))
}

/// omniforge-script's `Runner`, every layer, as the server runs a stored tool call.
pub async fn cold(
    runner: &Runner,
    t: &ToolSetup,
    code: &str,
    args: Value,
    env: Vec<(String, String)>,
) -> Result<(Duration, Vec<u8>, Vec<u8>), BoxError> {
    let mut spec = RunSpec::new(&t.env, code);
    spec.arguments = args;
    spec.env = env;
    let started = Instant::now();
    let out = runner.run(spec, CancellationToken::new()).await?;
    Ok((started.elapsed(), out.stdout, out.stderr))
}

fn check(what: &str, t: &Tool, out: &[u8]) -> Result<(), BoxError> {
    if String::from_utf8_lossy(out).contains(t.expect) {
        Ok(())
    } else {
        Err(format!(
            "{what} {}: unexpected output {:?}",
            t.name,
            String::from_utf8_lossy(out)
        )
        .into())
    }
}

/// Nearest-rank percentile of milliseconds.
pub fn pct(xs: &[f64], p: f64) -> f64 {
    if xs.is_empty() {
        return f64::NAN;
    }
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    let rank = ((p / 100.0) * v.len() as f64).ceil().max(1.0) as usize;
    v[rank.min(v.len()) - 1]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Load of the machine: the 1-minute load average and the share of CPU time busy (all
/// processes, both cores) between two samples.
#[derive(Clone, Copy)]
pub struct CpuSample {
    busy: u64,
    total: u64,
}

pub fn cpu_sample() -> CpuSample {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let f: Vec<u64> = stat
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .skip(1)
        .filter_map(|v| v.parse().ok())
        .collect();
    let total: u64 = f.iter().take(8).sum();
    let idle = f.get(3).copied().unwrap_or(0) + f.get(4).copied().unwrap_or(0);
    CpuSample {
        busy: total - idle,
        total,
    }
}

pub fn load_note(start: CpuSample, start_load: &str) -> Value {
    let end = cpu_sample();
    let busy = (end.busy - start.busy) as f64 / ((end.total - start.total).max(1)) as f64;
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    json!({"loadavg_start": start_load.trim(), "loadavg_end": load.trim(), "cpu_busy_share": (busy * 1000.0).round() / 1000.0})
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg").unwrap_or_default()
}

fn record(data: &Path, v: &Value) {
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(data.join("results.jsonl"))
    {
        let _ = writeln!(f, "{v}");
    }
}

fn summary(xs: &[f64]) -> Value {
    json!({"n": xs.len(), "p50": r3(pct(xs, 50.0)), "p90": r3(pct(xs, 90.0)), "p99": r3(pct(xs, 99.0)),
           "mean": r3(xs.iter().sum::<f64>() / xs.len().max(1) as f64)})
}

fn r3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

// --- smoke ---------------------------------------------------------------------------------

pub async fn smoke(envs: &[(String, Env)], data: &Path) -> Result<(), BoxError> {
    let s = setup(envs, data).await?;
    for t in &s.tools {
        let (d, out) = bare(t).await?;
        check("bare", t.tool, &out)?;
        println!(
            "{} bare {:.1} ms {}",
            t.tool.name,
            ms(d),
            String::from_utf8_lossy(&out).trim()
        );
        let (d, out, err) = cold(&s.cold, t, t.tool.code, args_of(t.tool), vec![]).await?;
        check("cold", t.tool, &out)
            .map_err(|e| format!("{e}; stderr {}", String::from_utf8_lossy(&err)))?;
        println!("{} cold {:.1} ms", t.tool.name, ms(d));
        let started = Instant::now();
        let tpl = s.template(t, Options::default()).await?;
        println!(
            "{} template ready in {:.1} ms: {}",
            t.tool.name,
            ms(started.elapsed()),
            tpl.boot()
        );
        tpl.wait_spares(1).await;
        for i in 0..3 {
            let o = tpl.call(&Call::new(args_of(t.tool))).await?;
            check("warm", t.tool, &o.stdout)
                .map_err(|e| format!("{e}; stderr {}", String::from_utf8_lossy(&o.stderr)))?;
            println!(
                "{} warm #{i} {:.2} ms (child {}, exit {}, spare ready: {}, {:?}, recv->code {:?} us, code {:?} us, new modules {:?})",
                t.tool.name,
                ms(o.total),
                o.pid,
                o.code,
                o.spare_was_ready,
                o.spare,
                o.recv_to_code_us,
                o.code_us,
                o.new_modules
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        println!("{} template status {}", t.tool.name, tpl.status().await?);
        tpl.stop().await;
    }
    Ok(())
}

// --- latency -------------------------------------------------------------------------------

pub async fn latency(
    envs: &[(String, Env)],
    data: &Path,
    calls: usize,
    pause_ms: u64,
    no_nospare: bool,
) -> Result<(), BoxError> {
    let s = setup(envs, data).await?;
    // The warm variants: (name, options). `warm` is the proposed design.
    let mut warm_variants: Vec<(&str, Options)> = vec![
        ("warm", Options::default()),
        (
            "warm-ast",
            Options {
                preload: "ast",
                ..Options::default()
            },
        ),
        (
            "warm-learned",
            Options {
                preload: "ast",
                learn_preload: true,
                ..Options::default()
            },
        ),
    ];
    if !no_nospare {
        warm_variants.push((
            "warm-nospare",
            Options {
                spares: 0,
                ..Options::default()
            },
        ));
    }
    // templates[k][w]: tool k, warm variant w.
    let mut templates: Vec<Vec<Template>> = Vec::new();
    for t in &s.tools {
        let mut row = Vec::new();
        for (name, o) in &warm_variants {
            let started = Instant::now();
            let tpl = s.template(t, o.clone()).await?;
            eprintln!(
                "{} {name}: template ready in {:.0} ms, {} modules preloaded",
                t.tool.name,
                ms(started.elapsed()),
                tpl.boot()["preloaded"].as_array().map_or(0, Vec::len)
            );
            row.push(tpl);
        }
        templates.push(row);
    }
    let mut variants: Vec<&str> = vec!["bare", "cold"];
    variants.extend(warm_variants.iter().map(|(n, _)| *n));
    let mut times: BTreeMap<(String, String), Vec<f64>> = BTreeMap::new();
    let mut parts: BTreeMap<(String, String), Vec<f64>> = BTreeMap::new();
    let mut not_ready = 0usize;
    let start_load = loadavg();
    let cpu0 = cpu_sample();
    let started = Instant::now();
    for i in 0..calls + 3 {
        for (k, t) in s.tools.iter().enumerate() {
            for j in 0..variants.len() {
                let v = variants[(i + j + k) % variants.len()];
                tokio::time::sleep(Duration::from_millis(pause_ms)).await;
                let (d, extra) = match v {
                    "bare" => {
                        let (d, out) = bare(t).await?;
                        check(v, t.tool, &out)?;
                        (d, None)
                    }
                    "cold" => {
                        let (d, out, _) =
                            cold(&s.cold, t, t.tool.code, args_of(t.tool), vec![]).await?;
                        check(v, t.tool, &out)?;
                        (d, None)
                    }
                    _ => {
                        let w = warm_variants
                            .iter()
                            .position(|(n, _)| *n == v)
                            .expect("a warm variant");
                        let tpl = &templates[k][w];
                        let o = tpl.call(&Call::new(args_of(t.tool))).await?;
                        check(v, t.tool, &o.stdout)?;
                        if v != "warm-nospare" && !o.spare_was_ready && i >= 3 {
                            not_ready += 1;
                        }
                        (o.total, Some(o))
                    }
                };
                if i < 3 {
                    continue; // warm-up
                }
                let key = (t.tool.name.to_owned(), v.to_owned());
                times.entry(key.clone()).or_default().push(ms(d));
                if let Some(o) = extra {
                    for (part, val) in [
                        ("spare_make", o.spare.make_us),
                        ("fork_to_ready", o.spare.fork_to_ready_us),
                        ("landlock", o.spare.landlock_us),
                        ("cgroup_move", o.spare.move_us),
                        ("recv_to_code", o.recv_to_code_us.unwrap_or(0)),
                        ("code", o.code_us.unwrap_or(0)),
                        ("exit_funcs", o.exit_funcs_us),
                        ("send_to_child_wakeup", o.send_to_child_us),
                        ("done_to_server_wakeup", o.done_to_server_us),
                        ("server_to_sent", o.sent.as_micros() as u64),
                        ("server_to_done", o.exited.as_micros() as u64),
                    ] {
                        parts
                            .entry((format!("{}/{v}", t.tool.name), part.to_owned()))
                            .or_default()
                            .push(val as f64 / 1000.0);
                    }
                }
            }
        }
    }
    let load = load_note(cpu0, &start_load);
    let mut result = json!({"kind": "latency", "calls": calls, "pause_ms": pause_ms, "seconds": started.elapsed().as_secs(),
        "load": load, "warm_spare_not_ready": not_ready});
    println!(
        "\nlatency: {calls} calls per variant, interleaved round-robin, {pause_ms} ms pause before each; load {load}"
    );
    println!(
        "\n| tool | variant | p50 ms | p90 ms | p99 ms | mean ms |\n|---|---|---:|---:|---:|---:|"
    );
    for ((tool, v), xs) in &times {
        let sm = summary(xs);
        println!(
            "| {tool} | {v} | {:.2} | {:.2} | {:.2} | {:.2} |",
            sm["p50"].as_f64().unwrap(),
            sm["p90"].as_f64().unwrap(),
            sm["p99"].as_f64().unwrap(),
            sm["mean"].as_f64().unwrap()
        );
        result["times"][format!("{tool}/{v}")] = sm;
    }
    println!("\n| tool | variant | p50 / bare p50 | p50 / cold p50 |\n|---|---|---:|---:|");
    for t in &s.tools {
        let p = |v: &str| {
            times
                .get(&(t.tool.name.to_owned(), v.to_owned()))
                .map_or(f64::NAN, |x| pct(x, 50.0))
        };
        for (v, _) in &warm_variants {
            println!(
                "| {} | {v} | {:.3} | {:.3} |",
                t.tool.name,
                p(v) / p("bare"),
                p(v) / p("cold")
            );
            result["ratios"][t.tool.name][*v] =
                json!({"/bare": r3(p(v) / p("bare")), "/cold": r3(p(v) / p("cold"))});
        }
        println!(
            "| {} | cold | {:.3} | 1 |",
            t.tool.name,
            p("cold") / p("bare")
        );
    }
    println!(
        "\nwarm path, per part (p50 / p99 ms; spare_make, fork_to_ready, landlock and cgroup_move are off the latency path for `warm`, on it for `warm-nospare`)"
    );
    println!("\n| tool/variant | part | p50 ms | p99 ms |\n|---|---|---:|---:|");
    for ((tv, part), xs) in &parts {
        println!(
            "| {tv} | {part} | {:.3} | {:.3} |",
            pct(xs, 50.0),
            pct(xs, 99.0)
        );
        result["parts"][format!("{tv}/{part}")] = summary(xs);
    }
    record(&s.data, &result);
    for t in templates.iter().flatten() {
        t.stop().await;
    }
    Ok(())
}

// --- first call ----------------------------------------------------------------------------

pub async fn first(envs: &[(String, Env)], data: &Path, runs: usize) -> Result<(), BoxError> {
    let s = setup(envs, data).await?;
    let variants = ["cold", "first-wait", "first-cold+boot"];
    let mut times: BTreeMap<(String, String), Vec<f64>> = BTreeMap::new();
    let mut boots: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    let start_load = loadavg();
    let cpu0 = cpu_sample();
    for i in 0..runs + 1 {
        for (k, t) in s.tools.iter().enumerate() {
            for j in 0..variants.len() {
                let v = variants[(i + j + k) % variants.len()];
                tokio::time::sleep(Duration::from_millis(100)).await;
                let d = match v {
                    "cold" => {
                        let (d, out, _) =
                            cold(&s.cold, t, t.tool.code, args_of(t.tool), vec![]).await?;
                        check(v, t.tool, &out)?;
                        d
                    }
                    "first-wait" => {
                        // The call waits for a template started for it, then for its first child.
                        let started = Instant::now();
                        // AST preload only: the fastest boot (submodules can follow in idle time).
                        let tpl = s
                            .template(
                                t,
                                Options {
                                    spares: 0,
                                    preload: "ast",
                                    ..Options::default()
                                },
                            )
                            .await?;
                        let boot = started.elapsed();
                        let o = tpl.call(&Call::new(args_of(t.tool))).await?;
                        let d = started.elapsed();
                        check(v, t.tool, &o.stdout)?;
                        boots
                            .entry(t.tool.name.to_owned())
                            .or_default()
                            .push(ms(boot));
                        tpl.stop().await;
                        d
                    }
                    _ => {
                        // The call runs cold while the template boots beside it, at idle priority.
                        let tpl = {
                            let s = &s;
                            async move {
                                let _idle = IdleScope::enter();
                                s.template(t, Options::default()).await
                            }
                        };
                        let call = cold(&s.cold, t, t.tool.code, args_of(t.tool), vec![]);
                        let ((d, out, _), tpl) = tokio::join!(async { call.await.unwrap() }, tpl);
                        check(v, t.tool, &out)?;
                        let tpl = tpl?;
                        restore_priority(&tpl);
                        tpl.stop().await;
                        d
                    }
                };
                if i == 0 {
                    continue;
                }
                times
                    .entry((t.tool.name.to_owned(), v.to_owned()))
                    .or_default()
                    .push(ms(d));
            }
        }
    }
    let load = load_note(cpu0, &start_load);
    println!("\nfirst call after create: {runs} runs each, interleaved; load {load}");
    println!(
        "\n| tool | variant | p50 ms | p90 ms | ratio to cold p50 |\n|---|---|---:|---:|---:|"
    );
    let mut result = json!({"kind": "first", "runs": runs, "load": load});
    for t in &s.tools {
        let cold_p50 = pct(&times[&(t.tool.name.to_owned(), "cold".to_owned())], 50.0);
        for v in variants {
            let xs = &times[&(t.tool.name.to_owned(), v.to_owned())];
            println!(
                "| {} | {v} | {:.2} | {:.2} | {:.3} |",
                t.tool.name,
                pct(xs, 50.0),
                pct(xs, 90.0),
                pct(xs, 50.0) / cold_p50
            );
            result["times"][format!("{}/{v}", t.tool.name)] = summary(xs);
        }
        if let Some(b) = boots.get(t.tool.name) {
            println!(
                "| {} | (template start to ready, within first-wait) | {:.2} | {:.2} | |",
                t.tool.name,
                pct(b, 50.0),
                pct(b, 90.0)
            );
            result["boot"][t.tool.name] = summary(b);
        }
    }
    record(&s.data, &result);
    Ok(())
}

/// While alive, processes this thread spawns start under SCHED_IDLE (inherited through fork
/// and exec): the template boots on the CPU the cold call leaves over.
struct IdleScope;

thread_local! {
    static IDLE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

impl IdleScope {
    fn enter() -> IdleScope {
        IDLE.with(|c| c.set(true));
        crate::warm::set_spawn_idle(true);
        IdleScope
    }
}

impl Drop for IdleScope {
    fn drop(&mut self) {
        IDLE.with(|c| c.set(false));
        crate::warm::set_spawn_idle(false);
    }
}

/// Back to SCHED_OTHER for the template's processes (root may do this for any process).
fn restore_priority(t: &Template) {
    let mut pids = vec![t.pid()];
    if let Some(p) = warm::ppid(t.pid()) {
        pids.push(p);
    }
    if let Some(b) = t.bwrap_pid() {
        pids.push(b as i32);
    }
    for pid in pids {
        let param = libc::sched_param { sched_priority: 0 };
        // SAFETY: sched_setscheduler with a valid param struct.
        unsafe { libc::sched_setscheduler(pid, libc::SCHED_OTHER, &param) };
    }
}

// --- throughput ----------------------------------------------------------------------------

pub async fn throughput(
    envs: &[(String, Env)],
    data: &Path,
    clients: usize,
    seconds: Duration,
    rounds: usize,
    spares: usize,
    slots: usize,
) -> Result<(), BoxError> {
    let acct = CpuAcct::join();
    let s = Arc::new(setup(envs, data).await?);
    let t_index = s
        .tools
        .iter()
        .position(|t| t.tool.name == "dateutil")
        .ok_or("no dateutil tool")?;
    let tpl = s
        .template(
            &s.tools[t_index],
            Options {
                spares,
                ..Options::default()
            },
        )
        .await?;
    tpl.wait_spares(spares).await;
    let gate = Arc::new(tokio::sync::Semaphore::new(slots));
    let start_load = loadavg();
    let cpu0 = cpu_sample();
    let mut rows = Vec::new();
    for round in 0..rounds {
        let order = if round % 2 == 0 {
            ["cold", "warm"]
        } else {
            ["warm", "cold"]
        };
        for v in order {
            tokio::time::sleep(Duration::from_millis(500)).await;
            let done = Arc::new(AtomicU64::new(0));
            let lat = Arc::new(std::sync::Mutex::new(Vec::new()));
            let deadline = Instant::now() + seconds;
            let cpu_round = cpu_sample();
            let cpu0 = acct.ms();
            let mut tasks = Vec::new();
            for _ in 0..clients {
                let (s, tpl, done, lat, gate) = (
                    Arc::clone(&s),
                    tpl.clone(),
                    Arc::clone(&done),
                    Arc::clone(&lat),
                    Arc::clone(&gate),
                );
                tasks.push(tokio::spawn(async move {
                    let t = &s.tools[t_index];
                    while Instant::now() < deadline {
                        let started = Instant::now();
                        let ok = if v == "cold" {
                            match cold(&s.cold, t, t.tool.code, args_of(t.tool), vec![]).await {
                                Ok((_, out, _)) => check(v, t.tool, &out).is_ok(),
                                Err(_) => false,
                            }
                        } else {
                            let _slot = gate.acquire().await.unwrap();
                            match tpl.call(&Call::new(args_of(t.tool))).await {
                                Ok(o) => check(v, t.tool, &o.stdout).is_ok(),
                                Err(_) => false,
                            }
                        };
                        if ok && Instant::now() <= deadline + Duration::from_secs(5) {
                            done.fetch_add(1, Ordering::Relaxed);
                            lat.lock().unwrap().push(ms(started.elapsed()));
                        }
                    }
                }));
            }
            for t in tasks {
                t.await?;
            }
            let elapsed = seconds.as_secs_f64().max(1e-9);
            let n = done.load(Ordering::Relaxed);
            let lat = lat.lock().unwrap().clone();
            let busy = load_note(cpu_round, "");
            // CPU time of everything on our side: server threads, bwrap, Python, template, spares.
            let cpu_ms = acct.ms() - cpu0;
            let row = json!({"round": round, "variant": v, "calls": n, "calls_per_s": r3(n as f64 / elapsed),
                "latency": summary(&lat), "cpu_busy_share": busy["cpu_busy_share"],
                "cpu_ms_per_call": r3(cpu_ms / n.max(1) as f64)});
            eprintln!("{row}");
            rows.push(row);
        }
    }
    let load = load_note(cpu0, &start_load);
    println!(
        "\nthroughput: dateutil tool, {clients} concurrent clients, {}s per variant, {rounds} rounds alternating; {slots} run slots for both (the Runner's default on 2 cores); {spares} ready spare(s); load {load}",
        seconds.as_secs()
    );
    println!(
        "\n| round | variant | calls/s | p50 ms | p99 ms | CPU busy (machine) | CPU ms per call (ours) |\n|---|---|---:|---:|---:|---:|---:|"
    );
    let mut ratios = Vec::new();
    for round in 0..rounds {
        let get = |v: &str| {
            rows.iter()
                .find(|r| r["round"] == round && r["variant"] == v)
                .unwrap()
        };
        for v in ["cold", "warm"] {
            let r = get(v);
            println!(
                "| {round} | {v} | {:.1} | {:.2} | {:.2} | {} | {} |",
                r["calls_per_s"].as_f64().unwrap(),
                r["latency"]["p50"].as_f64().unwrap_or(f64::NAN),
                r["latency"]["p99"].as_f64().unwrap_or(f64::NAN),
                r["cpu_busy_share"],
                r["cpu_ms_per_call"]
            );
        }
        ratios.push(
            get("warm")["calls_per_s"].as_f64().unwrap()
                / get("cold")["calls_per_s"].as_f64().unwrap(),
        );
    }
    println!(
        "\nwarm/cold calls/s per round: {:?}; median {:.2}",
        ratios.iter().map(|r| r3(*r)).collect::<Vec<_>>(),
        pct(&ratios, 50.0)
    );
    record(
        &s.data,
        &json!({"kind": "throughput", "clients": clients, "seconds": seconds.as_secs(), "spares": spares, "slots": slots, "rows": rows, "ratios": ratios, "load": load}),
    );
    tpl.stop().await;
    Ok(())
}

/// A v1 `cpuacct` cgroup holding this process and everything it starts from now on (bwrap,
/// Python, templates, spares: moves into the pids and kill hierarchies leave it unchanged).
/// Its `cpuacct.usage` is the CPU time all of them used, whoever reaps whom.
pub struct CpuAcct(Option<PathBuf>);

impl CpuAcct {
    pub fn join() -> CpuAcct {
        let d = PathBuf::from(format!(
            "/sys/fs/cgroup/cpuacct/warm-spike-{}",
            std::process::id()
        ));
        let ok = std::fs::create_dir(&d).is_ok()
            && std::fs::write(d.join("cgroup.procs"), std::process::id().to_string()).is_ok();
        CpuAcct(ok.then_some(d))
    }

    /// CPU time used so far, ms.
    pub fn ms(&self) -> f64 {
        self.0
            .as_ref()
            .and_then(|d| std::fs::read_to_string(d.join("cpuacct.usage")).ok())
            .and_then(|v| v.trim().parse::<f64>().ok())
            .map_or(f64::NAN, |ns| ns / 1e6)
    }
}

impl Drop for CpuAcct {
    fn drop(&mut self) {
        if let Some(d) = &self.0 {
            let _ = std::fs::write(
                "/sys/fs/cgroup/cpuacct/cgroup.procs",
                std::process::id().to_string(),
            );
            // Stopped templates may take a moment to leave.
            for _ in 0..200 {
                if std::fs::remove_dir(d).is_ok() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        }
    }
}

// --- CPU per call ----------------------------------------------------------------------------

/// CPU time per call (cpuacct: everything on our side), per variant, sequential calls of the
/// dateutil tool, interleaved in blocks of 20: what each warm layer costs in CPU, and the
/// load-independent throughput ratio.
pub async fn cpu(envs: &[(String, Env)], data: &Path, calls: usize) -> Result<(), BoxError> {
    let acct = CpuAcct::join();
    let s = setup(envs, data).await?;
    let t = s
        .tools
        .iter()
        .find(|t| t.tool.name == "dateutil")
        .ok_or("no dateutil tool")?;
    let variants: Vec<(&str, Option<Options>)> = vec![
        ("cold", None),
        ("warm", Some(Options::default())),
        (
            "warm, no per-call cgroups",
            Some(Options {
                cgroups: false,
                ..Options::default()
            }),
        ),
        (
            "warm, no per-call Landlock",
            Some(Options {
                child_landlock: false,
                ..Options::default()
            }),
        ),
        (
            "warm, neither",
            Some(Options {
                cgroups: false,
                child_landlock: false,
                ..Options::default()
            }),
        ),
    ];
    let mut tpls = Vec::new();
    for (_, o) in &variants {
        tpls.push(match o {
            Some(o) => Some(s.template(t, o.clone()).await?),
            None => None,
        });
    }
    let mut spent = vec![0f64; variants.len()];
    let mut n = vec![0usize; variants.len()];
    let start_load = loadavg();
    let cpu0 = cpu_sample();
    for block in 0..calls.div_ceil(20) {
        for j in 0..variants.len() {
            let k = (block + j) % variants.len();
            tokio::time::sleep(Duration::from_millis(200)).await; // let the last block's cleanup finish
            let before = acct.ms();
            for _ in 0..20 {
                let out = match &tpls[k] {
                    None => {
                        cold(&s.cold, t, t.tool.code, args_of(t.tool), vec![])
                            .await?
                            .1
                    }
                    Some(tpl) => tpl.call(&Call::new(args_of(t.tool))).await?.stdout,
                };
                check(variants[k].0, t.tool, &out)?;
            }
            // Include the background work each call leaves (cgroup removal, cleanup, next spare).
            tokio::time::sleep(Duration::from_millis(150)).await;
            spent[k] += acct.ms() - before;
            n[k] += 20;
        }
    }
    let load = load_note(cpu0, &start_load);
    println!(
        "\nCPU per call (cpuacct of everything on our side, incl. background cleanup and the next spare), {} calls each; load {load}\n",
        n[0]
    );
    println!("| variant | CPU ms per call | cold / this |\n|---|---:|---:|");
    let cold_ms = spent[0] / n[0] as f64;
    let mut result = json!({"kind": "cpu", "load": load});
    for (k, (name, _)) in variants.iter().enumerate() {
        let per = spent[k] / n[k] as f64;
        println!("| {name} | {per:.2} | {:.2} |", cold_ms / per);
        result["ms_per_call"][*name] = json!(r3(per));
    }
    record(&s.data, &result);
    for t in tpls.into_iter().flatten() {
        t.stop().await;
    }
    Ok(())
}

// --- memory --------------------------------------------------------------------------------

pub async fn memory(envs: &[(String, Env)], data: &Path) -> Result<(), BoxError> {
    let s = setup(envs, data).await?;
    println!("\n| tool | process | VmRSS MB | Pss MB | private MB |\n|---|---|---:|---:|---:|");
    let mut result = json!({"kind": "memory"});
    for t in &s.tools {
        let tpl = s.template(t, Options::default()).await?;
        tpl.wait_spares(1).await;
        // A few calls first: the steady state a served template is in.
        for _ in 0..5 {
            tpl.call(&Call::new(args_of(t.tool))).await?;
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        tpl.wait_spares(1).await;
        let py = tpl.pid();
        let init = warm::ppid(py).unwrap_or(0);
        let outer = tpl.bwrap_pid().unwrap_or(0) as i32;
        let spare = children(py);
        let mut rows = vec![
            ("template (python)", py),
            ("bwrap (pid 1 inside)", init),
            ("bwrap (outside)", outer),
        ];
        for c in &spare {
            rows.push(("ready spare child", *c));
        }
        for (what, pid) in rows {
            let (rss, pss, private) = warm::memory_kb(pid);
            println!(
                "| {} | {what} | {:.1} | {:.1} | {:.1} |",
                t.tool.name,
                rss as f64 / 1024.0,
                pss as f64 / 1024.0,
                private as f64 / 1024.0
            );
            result[t.tool.name][what] =
                json!({"rss_kb": rss, "pss_kb": pss, "private_kb": private});
        }
        tpl.stop().await;
    }
    record(&s.data, &result);
    Ok(())
}

/// Host pids of the children of `pid`.
fn children(pid: i32) -> Vec<i32> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

// --- isolation -----------------------------------------------------------------------------

pub async fn isolation(envs: &[(String, Env)], data: &Path) -> Result<(), BoxError> {
    crate::isolation::run(&setup(envs, data).await?).await
}

// --- clone3 --------------------------------------------------------------------------------

pub async fn clone3(envs: &[(String, Env)], data: &Path, runs: usize) -> Result<(), BoxError> {
    crate::isolation::clone3(&setup(envs, data).await?, runs).await
}

pub(crate) fn args(t: &Tool) -> Value {
    args_of(t)
}
