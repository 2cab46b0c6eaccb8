//! Isolation experiments on the warm path, with the same probes on the cold path beside them.

use std::io::{Read as _, Seek as _, SeekFrom};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::BoxError;
use crate::measure::{self, Setup, ToolSetup};
use crate::warm::{self, Call, Options};

const PROBE: &str = include_str!("../tools/iso_probe.py");
const SIBLING: &str = include_str!("../tools/iso_sibling.py");

fn token() -> String {
    let mut b = [0u8; 12];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut b))
        .expect("urandom");
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn by_name<'a>(s: &'a Setup, name: &str) -> &'a ToolSetup {
    s.tools.iter().find(|t| t.tool.name == name).expect("tool")
}

fn parse(out: &[u8], err: &[u8]) -> Value {
    serde_json::from_slice(out).unwrap_or_else(|_| {
        json!({"unparsed_stdout": String::from_utf8_lossy(out), "stderr": String::from_utf8_lossy(err)})
    })
}

/// Where `needle` occurs in the readable memory of `pid` and in its environ (root reads any
/// process's memory through /proc/PID/mem).
pub fn scan(pid: i32, needle: &[u8]) -> Vec<String> {
    let mut hits = Vec::new();
    if std::fs::read(format!("/proc/{pid}/environ"))
        .unwrap_or_default()
        .windows(needle.len())
        .any(|w| w == needle)
    {
        hits.push("environ".to_owned());
    }
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap_or_default();
    let Ok(mut mem) = std::fs::File::open(format!("/proc/{pid}/mem")) else {
        hits.push("mem unreadable".into());
        return hits;
    };
    let mut scanned = 0u64;
    for line in maps.lines() {
        let mut f = line.split_whitespace();
        let (Some(range), Some(perms)) = (f.next(), f.next()) else {
            continue;
        };
        if !perms.starts_with('r') || line.ends_with("[vvar]") || line.ends_with("[vsyscall]") {
            continue;
        }
        let Some((a, b)) = range.split_once('-') else {
            continue;
        };
        let (Ok(a), Ok(b)) = (u64::from_str_radix(a, 16), u64::from_str_radix(b, 16)) else {
            continue;
        };
        let mut buf = vec![0u8; (b - a) as usize];
        if mem.seek(SeekFrom::Start(a)).is_err() || mem.read_exact(&mut buf).is_err() {
            continue;
        }
        scanned += b - a;
        if buf.windows(needle.len()).any(|w| w == needle) {
            hits.push(line.to_owned());
        }
    }
    hits.push(format!("({} MB scanned)", scanned >> 20));
    hits
}

pub async fn run(s: &Setup) -> Result<(), BoxError> {
    let numpy = by_name(s, "numpy");
    let dateutil = by_name(s, "dateutil");
    let mut report = json!({"kind": "isolation"});

    // 1. Two consecutive calls, warm and cold: what a fork shares, what a call leaves behind.
    let tpl = s
        .template_code(numpy, PROBE, Options::default(), true)
        .await?;
    tpl.wait_spares(1).await;
    let (s1, s2) = (token(), token());
    let mut warm_runs = Vec::new();
    let mut secret_scan = json!({});
    for (i, secret) in [&s1, &s2].into_iter().enumerate() {
        let mut call = Call::new(json!({}));
        call.env = vec![("SPIKE_SECRET".into(), secret.clone())];
        let o = tpl.call(&call).await?;
        warm_runs.push(parse(&o.stdout, &o.stderr));
        // After the call: the template, and the spare made after it, searched for the secret.
        tokio::time::sleep(Duration::from_millis(300)).await;
        tpl.wait_spares(1).await;
        let spares: Vec<i32> =
            std::fs::read_to_string(format!("/proc/{0}/task/{0}/children", tpl.pid()))
                .unwrap_or_default()
                .split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect();
        secret_scan[format!("after call {}", i + 1)] = json!({
            "template": scan(tpl.pid(), secret.as_bytes()),
            "spares": spares.iter().map(|p| scan(*p, secret.as_bytes())).collect::<Vec<_>>(),
            "bwrap init": scan(warm::ppid(tpl.pid()).unwrap_or(0), secret.as_bytes()),
        });
    }
    tpl.stop().await;
    let mut cold_runs = Vec::new();
    for secret in [&s1, &s2] {
        let (_, out, err) = measure::cold(
            &s.cold,
            numpy,
            PROBE,
            json!({}),
            vec![("SPIKE_SECRET".into(), secret.clone())],
        )
        .await?;
        cold_runs.push(parse(&out, &err));
    }
    println!("\n## consecutive calls (iso_probe.py, numpy environment)\n");
    println!(
        "| what | warm call 1 | warm call 2 | cold call 1 | cold call 2 |\n|---|---|---|---|---|"
    );
    let keys = [
        "pid",
        "ppid",
        "hash_str",
        "random",
        "np_random",
        "libc_printf",
        "stack",
        "heap",
        "id_None",
        "fds",
        "Uid",
        "CapEff",
        "Seccomp",
        "NoNewPrivs",
        "Threads",
        "json_marker_seen",
        "np_marker_seen",
        "env_left_seen",
        "secret",
        "env_keys",
        "tmpdir",
        "cwd",
        "tmpdir_file_seen",
        "tmpdir_file_write",
        "tmp_file_seen",
        "tmp_file_write",
        "shm_file_seen",
        "shm_file_write",
        "ls_tmp",
        "ls_shm",
        "bg_pid",
        "mp_lock",
        "inet_socket",
    ];
    let cell = |v: &Value| -> String { v.to_string().replace('|', "\\|") };
    for k in keys {
        println!(
            "| {k} | {} | {} | {} | {} |",
            cell(&warm_runs[0][k]),
            cell(&warm_runs[1][k]),
            cell(&cold_runs[0][k]),
            cell(&cold_runs[1][k])
        );
    }
    // Did call 1's background `sleep 30` survive into call 2's view?
    for (name, runs) in [("warm", &warm_runs), ("cold", &cold_runs)] {
        let left: Vec<&str> = runs[1]["procs"]
            .as_object()
            .map(|m| {
                m.values()
                    .filter_map(Value::as_str)
                    .filter(|c| c.contains("sleep"))
                    .collect()
            })
            .unwrap_or_default();
        println!("| processes of call 1 seen by call 2 ({name}) | {left:?} | | | |");
        println!(
            "| processes visible ({name}, call 2) | {} | | | |",
            cell(&runs[1]["procs"])
        );
    }
    println!(
        "\nsecret search after each warm call (template, ready spare, bwrap init): {secret_scan}"
    );
    report["consecutive"] =
        json!({"warm": warm_runs, "cold": cold_runs, "secret_scan": secret_scan});

    // 2. Two concurrent calls of one template: victim and attacker.
    let tpl = s
        .template_code(
            dateutil,
            SIBLING,
            Options {
                spares: 2,
                ..Options::default()
            },
            true,
        )
        .await?;
    tpl.wait_spares(2).await;
    let secret = token();
    let mut victim = Call::new(json!({"role": "victim", "hold_s": 2.5}));
    victim.env = vec![("SPIKE_SECRET".into(), secret.clone())];
    let attacker = Call::new(json!({"role": "attacker", "secret": secret, "delay_s": 0.6}));
    let (v, a) = tokio::join!(tpl.call(&victim), tpl.call(&attacker));
    let (v, a) = (v?, a?);
    let (vj, aj) = (parse(&v.stdout, &v.stderr), parse(&a.stdout, &a.stderr));
    let template_alive = tpl.status().await.is_ok();
    println!("\n## concurrent calls of one warm template (iso_sibling.py)\n");
    println!(
        "victim (exit {}): {}\n",
        v.code,
        serde_json::to_string_pretty(&vj)?
    );
    println!(
        "attacker (exit {}): {}\n",
        a.code,
        serde_json::to_string_pretty(&aj)?
    );
    println!("template still answering after the attack: {template_alive}");
    tpl.stop().await;
    let cold_v = measure::cold(
        &s.cold,
        dateutil,
        SIBLING,
        json!({"role": "victim", "hold_s": 2.5}),
        vec![("SPIKE_SECRET".into(), secret.clone())],
    );
    let cold_a = measure::cold(
        &s.cold,
        dateutil,
        SIBLING,
        json!({"role": "attacker", "secret": secret, "delay_s": 0.6}),
        vec![],
    );
    let (cv, ca) = tokio::join!(cold_v, cold_a);
    let (cv, ca) = (cv?, ca?);
    let (cvj, caj) = (parse(&cv.1, &cv.2), parse(&ca.1, &ca.2));
    println!("cold victim: {cvj}\n\ncold attacker: {caj}\n");
    report["concurrent"] = json!({"warm": {"victim": vj, "attacker": aj, "template_alive": template_alive},
        "cold": {"victim": cvj, "attacker": caj}});

    // 3. Threads in the template at fork: numpy with and without the single-thread variables.
    println!("## threads in a numpy template at fork\n");
    for vars in [true, false] {
        let started = Instant::now();
        let tpl = s
            .template_code(numpy, numpy.tool.code, Options::default(), vars)
            .await?;
        let threads = tpl.boot()["threads"].clone();
        println!(
            "- OPENBLAS_NUM_THREADS=1 etc. {}: {threads} thread(s) after importing numpy (boot {:.0} ms)",
            if vars { "set" } else { "unset" },
            started.elapsed().as_secs_f64() * 1e3
        );
        report["threads"][if vars { "with_vars" } else { "without_vars" }] = threads;
        tpl.stop().await;
    }
    let path = s.data.join("results.jsonl");
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?;
    std::io::Write::write_all(&mut f, format!("{report}\n").as_bytes())?;
    Ok(())
}

/// clone3(CLONE_INTO_CGROUP) from inside the sandbox, against fork + migration: spares made
/// on demand (no ready spare), so the fork and the cgroup work are on the call's path.
pub async fn clone3(s: &Setup, runs: usize) -> Result<(), BoxError> {
    let t = by_name(s, "dateutil");
    // Where does a clone3 spare land?
    let probe = s
        .template(
            t,
            Options {
                clone3: true,
                ..Options::default()
            },
        )
        .await?;
    probe.wait_spares(1).await;
    let kids: Vec<i32> =
        std::fs::read_to_string(format!("/proc/{0}/task/{0}/children", probe.pid()))
            .unwrap_or_default()
            .split_whitespace()
            .filter_map(|p| p.parse().ok())
            .collect();
    for k in &kids {
        println!(
            "clone3 spare {k}: /proc/{k}/cgroup:\n{}",
            std::fs::read_to_string(format!("/proc/{k}/cgroup")).unwrap_or_default()
        );
    }
    println!(
        "template {}: /proc/{}/cgroup:\n{}",
        probe.pid(),
        probe.pid(),
        std::fs::read_to_string(format!("/proc/{}/cgroup", probe.pid())).unwrap_or_default()
    );
    probe.stop().await;
    let variants = [
        (
            "fork + move v1 and v2",
            Options {
                spares: 0,
                ..Options::default()
            },
        ),
        (
            "clone3 into v2 + move v1",
            Options {
                spares: 0,
                clone3: true,
                ..Options::default()
            },
        ),
        (
            "fork, no cgroups",
            Options {
                spares: 0,
                cgroups: false,
                ..Options::default()
            },
        ),
    ];
    let mut tpls = Vec::new();
    for (_, o) in &variants {
        tpls.push(s.template(t, o.clone()).await?);
    }
    let mut rows: Vec<(Vec<f64>, Vec<f64>, Vec<f64>)> = vec![Default::default(); variants.len()];
    let start_load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let cpu0 = measure::cpu_sample();
    for i in 0..runs + 2 {
        for j in 0..variants.len() {
            let k = (i + j) % variants.len();
            tokio::time::sleep(Duration::from_millis(50)).await;
            let o = tpls[k].call(&Call::new(measure::args(t.tool))).await?;
            if !String::from_utf8_lossy(&o.stdout).contains(t.tool.expect) {
                return Err(format!(
                    "{}: {:?}",
                    variants[k].0,
                    String::from_utf8_lossy(&o.stderr)
                )
                .into());
            }
            if i >= 2 {
                rows[k].0.push(o.spare.make_us as f64 / 1e3);
                rows[k].1.push(o.spare.move_us as f64 / 1e3);
                rows[k].2.push(o.total.as_secs_f64() * 1e3);
            }
        }
    }
    let load = measure::load_note(cpu0, &start_load);
    println!("\nspares made on demand, {runs} calls each, interleaved, 50 ms pause; load {load}\n");
    println!(
        "| variant | fork to spare ready p50 ms | cgroup writes p50 ms | p90 | call total p50 ms | p90 |\n|---|---:|---:|---:|---:|---:|"
    );
    let mut report = json!({"kind": "clone3", "runs": runs, "load": load});
    for (k, (name, _)) in variants.iter().enumerate() {
        let (m, mv, tot) = &rows[k];
        println!(
            "| {name} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} |",
            measure::pct(m, 50.0),
            measure::pct(mv, 50.0),
            measure::pct(mv, 90.0),
            measure::pct(tot, 50.0),
            measure::pct(tot, 90.0)
        );
        report["rows"][*name] = json!({"make_p50": measure::pct(m, 50.0), "move_p50": measure::pct(mv, 50.0), "move_p90": measure::pct(mv, 90.0),
            "total_p50": measure::pct(tot, 50.0), "total_p90": measure::pct(tot, 90.0)});
    }
    for t in &tpls {
        t.stop().await;
    }
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(s.data.join("results.jsonl"))?;
    std::io::Write::write_all(&mut f, format!("{report}\n").as_bytes())?;
    Ok(())
}
