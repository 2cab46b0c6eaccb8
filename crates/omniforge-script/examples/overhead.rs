//! Per-call overhead of the runner, layer by layer, against a bare interpreter start.
//!
//!     cargo run --release -p omniforge-script --example overhead -- [RUNS] [UV] [CONFIGS]
//!
//! Builds an environment without dependencies in a temporary data directory (uv: the
//! optional argument, else `.deps/bin/uv`, `PATH`, or an install), then times `print('hi')`
//! RUNS times (default 20) per configuration, interleaved (the order rotates each iteration,
//! and each timed run follows a 30 ms pause, as between two tool calls), and prints the medians:
//!
//! - `bare`: `env/bin/python -I main.py`, spawned and waited for directly;
//! - `off`: the runner at `SandboxLevel::Off` (process group, rlimits, capture, side channel);
//! - `cgroups`: `Standard` without bubblewrap, the uid switch, Landlock or seccomp (adds the
//!   per-run cgroups);
//! - `+uid`: adds the uid switch a root server without bubblewrap uses (a private mount and
//!   IPC namespace, tmpfs, a new /proc, capabilities dropped, setresuid); needs root;
//! - `+sec/uid`: adds the seccomp filter, loaded in the child (without bubblewrap);
//! - `+ll/uid`: adds Landlock: every layer of a machine without bubblewrap;
//! - `bwrap`: `Standard` without `cgroup-kill`, `seccomp` and `landlock` (adds bubblewrap:
//!   namespaces, uid 65534, read-only binds; the line above it is another mode);
//! - `+kill`: adds the `cgroup-kill` layer (a second cgroup joined per run);
//! - `+seccomp`: adds the seccomp filter (a memfd handed to bubblewrap);
//! - `all`: adds Landlock (this example's own executable is the helper: one more exec).
//!
//! CONFIGS (comma-separated names, e.g. `bwrap,+kill`) keeps only those runners, so that two
//! configurations can be compared with more runs in the same time.
//!
//! Then the same runners with `/usr/bin/true` as the "interpreter", which isolates what the
//! runner and each layer cost from Python's own start-up.

#![allow(clippy::print_stdout)] // a command-line report

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use omniforge_script::*;
use tokio_util::sync::CancellationToken;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // This executable is also the Landlock helper of the runners below.
    main_if_helper();
    let mut args = std::env::args().skip(1);
    let runs: usize = args.next().map_or(Ok(20), |a| a.parse())?;
    let explicit_uv = args
        .next()
        .filter(|a| !a.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            let deps = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.deps/bin/uv");
            deps.exists().then_some(deps)
        });
    let data = tempfile::tempdir()?;
    let host = HostEnv::from_vars(std::env::vars_os());
    let python = Interpreter::resolve(Path::new("python3")).await?;
    let uv = UvTool::locate_or_install(data.path(), explicit_uv, &python, &host).await?;
    let builder = EnvBuilder::new(EnvConfig {
        data_dir: data.path().to_owned(),
        uv,
        python,
        allow_source_builds: false,
        command_timeout: Duration::from_secs(300),
        host,
    });
    let env = builder.build(&builder.lock(&[]).await?, |_| {}).await?;
    let code = "print('hi')\n";
    let script = data.path().join("main.py");
    std::fs::write(&script, code)?;

    let without = |layers: &[&str]| {
        let mut c = RunnerConfig::new(SandboxLevel::Standard);
        c.disabled_layers = layers.iter().map(|l| (*l).to_owned()).collect();
        Runner::new(c)
    };
    let only: Option<Vec<String>> = args
        .next()
        .map(|a| a.split(',').map(str::to_owned).collect());
    let runners: Vec<(&str, Runner)> = [
        ("off", Runner::new(RunnerConfig::new(SandboxLevel::Off))?),
        (
            "cgroups",
            without(&["namespaces", "unprivileged-uid", "landlock", "seccomp"])?,
        ),
        ("+uid", without(&["namespaces", "landlock", "seccomp"])?),
        ("+sec/uid", without(&["namespaces", "landlock"])?),
        ("+ll/uid", without(&["namespaces"])?),
        ("bwrap", without(&["cgroup-kill", "landlock", "seccomp"])?),
        ("+kill", without(&["landlock", "seccomp"])?),
        ("+seccomp", without(&["landlock"])?),
        ("all", without(&[])?),
    ]
    .into_iter()
    .filter(|(name, _)| only.as_ref().is_none_or(|o| o.iter().any(|n| n == name)))
    .collect();
    for (name, runner) in &runners {
        let active: Vec<_> = runner
            .layers()
            .iter()
            .filter(|l| l.active)
            .map(|l| l.name)
            .collect();
        println!("{name:<8} layers: {}", active.join(", "));
    }

    let mut bare = Vec::new();
    let mut timed: Vec<Vec<Duration>> = vec![Vec::new(); runners.len()];
    for iteration in 0..runs {
        let started = Instant::now();
        let out = std::process::Command::new(env.python())
            .arg("-I")
            .arg(&script)
            .env_clear()
            .stdin(std::process::Stdio::null())
            .output()?;
        bare.push(started.elapsed());
        assert_eq!(out.stdout, b"hi\n");
        for k in 0..runners.len() {
            let (i, runner) = pick(&runners, iteration, k);
            idle().await;
            let started = Instant::now();
            let out = runner
                .run(RunSpec::new(&env, code), CancellationToken::new())
                .await?;
            timed[i].push(started.elapsed());
            assert_eq!(out.stdout, b"hi\n", "{out:?}");
        }
    }
    report("python", runs, bare, &timed, &runners);

    let mut bare = Vec::new();
    let mut timed: Vec<Vec<Duration>> = vec![Vec::new(); runners.len()];
    for iteration in 0..runs {
        let started = Instant::now();
        std::process::Command::new("/usr/bin/true")
            .env_clear()
            .output()?;
        bare.push(started.elapsed());
        for k in 0..runners.len() {
            let (i, runner) = pick(&runners, iteration, k);
            idle().await;
            let mut spec = RunSpec::new(&env, code);
            spec.python = "/usr/bin/true".into();
            let started = Instant::now();
            let out = runner.run(spec, CancellationToken::new()).await?;
            timed[i].push(started.elapsed());
            assert_eq!(out.exit, Exit::Code(0), "{out:?}");
        }
    }
    report("/usr/bin/true", runs, bare, &timed, &runners);
    Ok(())
}

/// Medians, and each configuration's cost over the one before it as the median of the
/// paired per-iteration differences (robust to the machine's load drifting).
fn report(
    what: &str,
    runs: usize,
    bare: Vec<Duration>,
    timed: &[Vec<Duration>],
    runners: &[(&str, Runner)],
) {
    println!("{what}: {runs} runs each, interleaved");
    println!(
        "{:<8} median {:>7.1} ms",
        "bare",
        ms(median(&mut bare.clone()))
    );
    let mut previous = bare;
    for (i, (name, _)) in runners.iter().enumerate() {
        let mut paired: Vec<f64> = timed[i]
            .iter()
            .zip(&previous)
            .map(|(a, b)| ms(*a) - ms(*b))
            .collect();
        paired.sort_by(f64::total_cmp);
        println!(
            "{name:<8} median {:>7.1} ms  (paired +{:.2} ms over the line above)",
            ms(median(&mut timed[i].clone())),
            paired[paired.len() / 2]
        );
        previous = timed[i].clone();
    }
}

/// The k-th runner of an iteration: the order rotates, so that no configuration always runs
/// right after another (a cgroup migration right after one is much cheaper than after a pause).
fn pick<'a>(runners: &'a [(&str, Runner)], iteration: usize, k: usize) -> (usize, &'a Runner) {
    let i = (iteration + k) % runners.len();
    (i, &runners[i].1)
}

/// A pause before each timed run, as between two tool calls.
async fn idle() {
    tokio::time::sleep(Duration::from_millis(30)).await;
}

fn median(xs: &mut [Duration]) -> Duration {
    xs.sort();
    xs[xs.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
