//! Issue 15 spike: warm sandboxed Python templates, measured against the bare interpreter and
//! omniforge-script's cold sandboxed run on this machine. See ../README.md.
//!
//!     warm-spike prepare   [--data DIR]                      build the three tool environments
//!     warm-spike smoke     [--data DIR]                      one call of each tool, each way
//!     warm-spike latency   [--data DIR] [--calls N] [--pause-ms MS]
//!     warm-spike first     [--data DIR] [--runs N]
//!     warm-spike throughput [--data DIR] [--clients N] [--seconds S] [--rounds R]
//!     warm-spike cpu       [--data DIR] [--calls N]
//!     warm-spike isolation [--data DIR]
//!     warm-spike memory    [--data DIR]
//!     warm-spike clone3    [--data DIR] [--runs N]
//!
//! This executable is also the Landlock helper of the cold runner and of the templates
//! (`omniforge_script::main_if_helper`), as the `omniforge` binary is in the server.

#![allow(clippy::print_stdout)]

mod capture;
mod cgroups;
mod fdpass;
mod isolation;
mod measure;
mod warm;

use std::path::{Path, PathBuf};
use std::time::Duration;

use omniforge_script::{Env, EnvBuilder, EnvConfig, HostEnv, Interpreter, UvTool};
use serde_json::{Value, json};

pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

pub const TEMPLATE_PY: &str = include_str!("../template.py");

/// One tool of the spike.
pub struct Tool {
    pub name: &'static str,
    pub code: &'static str,
    pub deps: &'static [&'static str],
    pub args: &'static str,
    pub expect: &'static str,
}

pub const TOOLS: &[Tool] = &[
    Tool {
        name: "dateutil",
        code: include_str!("../../peers/dateutil_tool.py"),
        deps: &["python-dateutil==2.9.0.post0"],
        args: r#"{"date":"2026-11-30T12:34:56+01:00"}"#,
        expect: "next_month",
    },
    Tool {
        name: "numpy",
        code: include_str!("../tools/numpy_tool.py"),
        deps: &["numpy>=2"],
        args: r#"{"values":[3.5,1,4,1,5,9,2,6,5,3,5,8,9,7,9,3,2,3,8,4]}"#,
        expect: "p95",
    },
    Tool {
        name: "add_vat",
        code: include_str!("../tools/add_vat.py"),
        deps: &[],
        args: r#"{"net":100.5}"#,
        expect: "gross",
    },
];

struct Opts {
    data: PathBuf,
    rest: Vec<String>,
}

impl Opts {
    fn get<T: std::str::FromStr>(&self, name: &str, default: T) -> T {
        self.rest
            .iter()
            .position(|a| a == name)
            .and_then(|i| self.rest.get(i + 1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    }
    fn flag(&self, name: &str) -> bool {
        self.rest.iter().any(|a| a == name)
    }
}

fn main() -> Result<(), BoxError> {
    omniforge_script::main_if_helper();
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    if args.is_empty() {
        return Err("usage: warm-spike COMMAND [--data DIR] [options] (see src/main.rs)".into());
    }
    let cmd = args.remove(0);
    let data = args
        .iter()
        .position(|a| a == "--data")
        .and_then(|i| args.get(i + 1))
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/tmp/warm-spike-data"));
    let opts = Opts { data, rest: args };
    let workers: usize = opts.get("--workers", 2);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()?;
    rt.block_on(async move {
        match cmd.as_str() {
            "prepare" => prepare(&opts.data).await.map(drop),
            "smoke" => measure::smoke(&load(&opts.data).await?, &opts.data).await,
            "latency" => {
                measure::latency(
                    &load(&opts.data).await?,
                    &opts.data,
                    opts.get("--calls", 100),
                    opts.get("--pause-ms", 50),
                    opts.flag("--no-nospare"),
                )
                .await
            }
            "first" => {
                measure::first(&load(&opts.data).await?, &opts.data, opts.get("--runs", 15)).await
            }
            "throughput" => {
                measure::throughput(
                    &load(&opts.data).await?,
                    &opts.data,
                    opts.get("--clients", 8),
                    Duration::from_secs(opts.get("--seconds", 10)),
                    opts.get("--rounds", 3),
                    opts.get("--spares", 1),
                    opts.get("--slots", 4),
                )
                .await
            }
            "cpu" => {
                measure::cpu(
                    &load(&opts.data).await?,
                    &opts.data,
                    opts.get("--calls", 200),
                )
                .await
            }
            "isolation" => measure::isolation(&load(&opts.data).await?, &opts.data).await,
            "memory" => measure::memory(&load(&opts.data).await?, &opts.data).await,
            "clone3" => {
                measure::clone3(&load(&opts.data).await?, &opts.data, opts.get("--runs", 40)).await
            }
            other => Err(format!("unknown command {other}").into()),
        }
    })
}

/// Builds (or finds) the environment of each tool with omniforge-script's `EnvBuilder`, as
/// `omniforge_create_tool` does, and records them in `DATA/envs.json`.
async fn prepare(data: &Path) -> Result<Vec<(String, Env)>, BoxError> {
    std::fs::create_dir_all(data)?;
    let python = Interpreter::resolve(Path::new("python3")).await?;
    let deps_uv = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.deps/bin/uv");
    // The spike is a binary: it reads its own environment, as omniforge's binary does.
    let host = HostEnv::from_vars(std::env::vars_os());
    let uv = UvTool::locate_or_install(data, deps_uv.exists().then_some(deps_uv), &python, &host)
        .await?;
    let builder = EnvBuilder::new(EnvConfig {
        host,
        data_dir: data.to_owned(),
        uv,
        python,
        allow_source_builds: false,
        command_timeout: Duration::from_secs(600),
    });
    let mut out = Vec::new();
    let mut record = serde_json::Map::new();
    for tool in TOOLS {
        let deps: Vec<String> = tool.deps.iter().map(|d| (*d).to_owned()).collect();
        let lock = builder.lock(&deps).await?;
        let env = builder.build(&lock, |_| {}).await?;
        eprintln!("{}: {}", tool.name, env.path.display());
        record.insert(
            tool.name.into(),
            json!({"path": env.path, "env_id": env.env_id}),
        );
        out.push((tool.name.to_owned(), env));
    }
    std::fs::write(data.join("envs.json"), serde_json::to_vec_pretty(&record)?)?;
    Ok(out)
}

/// The environments `prepare` built, of the tools `--tools a,b` names (default: all).
async fn load(data: &Path) -> Result<Vec<(String, Env)>, BoxError> {
    let only: Option<Vec<String>> = std::env::args()
        .skip_while(|a| a != "--tools")
        .nth(1)
        .map(|v| v.split(',').map(str::to_owned).collect());
    let all = load_all(data).await?;
    Ok(all
        .into_iter()
        .filter(|(n, _)| only.as_ref().is_none_or(|o| o.contains(n)))
        .collect())
}

async fn load_all(data: &Path) -> Result<Vec<(String, Env)>, BoxError> {
    let Ok(text) = std::fs::read(data.join("envs.json")) else {
        return prepare(data).await;
    };
    let v: Value = serde_json::from_slice(&text)?;
    TOOLS
        .iter()
        .map(|t| {
            let e = &v[t.name];
            Ok((
                t.name.to_owned(),
                Env {
                    path: PathBuf::from(e["path"].as_str().ok_or("envs.json: no path")?),
                    env_id: e["env_id"].as_str().unwrap_or_default().to_owned(),
                },
            ))
        })
        .collect()
}

pub fn tool(name: &str) -> &'static Tool {
    TOOLS.iter().find(|t| t.name == name).expect("a known tool")
}
