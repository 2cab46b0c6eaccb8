//! The real sandbox of a cold run, captured rather than re-implemented: omniforge-script's
//! `Runner` (every layer, `SandboxLevel::Standard`) runs one call with a recording wrapper as
//! its bubblewrap; the wrapper saves the exact argument list and the seccomp program bubblewrap
//! is handed (`--add-seccomp-fd`), then execs the real `/usr/bin/bwrap`. A template is started
//! with that same command line, only its script bind pointing at `template.py`.

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt as _;
use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;

use omniforge_script::{Env, RunSpec, Runner, RunnerConfig, SandboxLevel};
use tokio_util::sync::CancellationToken;

/// What a cold run of one environment executes, captured.
#[derive(Debug, Clone)]
pub struct RealSandbox {
    /// bubblewrap's arguments up to and including `--`, then the Landlock helper with its
    /// arguments, then `<python> -I /omniforge/main.py`.
    pub args: Vec<OsString>,
    /// The seccomp program (struct sock_filter array) bubblewrap loaded.
    pub seccomp: Vec<u8>,
    /// The helper's `--ro` and `--rw` paths (the cold run's Landlock rules).
    pub landlock_ro: Vec<String>,
    pub landlock_rw: Vec<String>,
    /// Active layers of the capturing runner, as `omniforge doctor` lists them.
    pub layers: Vec<(String, bool)>,
}

pub async fn capture(env: &Env, work: &Path) -> Result<RealSandbox, Box<dyn std::error::Error>> {
    std::fs::create_dir_all(work)?;
    let args_file = work.join("bwrap-args.bin");
    let bpf_file = work.join("seccomp.bpf");
    let _ = std::fs::remove_file(&args_file);
    let wrapper = work.join("bwrap-record");
    std::fs::write(
        &wrapper,
        format!(
            r#"#!/bin/sh
# Records the command line of a real run (not the runner's probes), then runs bubblewrap.
case "$*" in
  *" /omniforge/main.py"*)
    printf '%s\0' "$@" > '{args}'
    prev=
    for a in "$@"; do
      # /proc/self/fd/N reopens the memfd: its own offset, bwrap's stays at 0.
      if [ "$prev" = --add-seccomp-fd ]; then cat "/proc/self/fd/$a" > '{bpf}'; fi
      prev=$a
    done ;;
esac
exec /usr/bin/bwrap "$@"
"#,
            args = args_file.display(),
            bpf = bpf_file.display()
        ),
    )?;
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755))?;
    let mut config = RunnerConfig::new(SandboxLevel::Standard);
    config.bwrap = Some(wrapper);
    let runner = Runner::new(config)?;
    let layers: Vec<(String, bool)> = runner
        .layers()
        .iter()
        .map(|l| (l.name.to_owned(), l.active))
        .collect();
    let out = runner
        .run(
            RunSpec::new(env, "print('captured')\n"),
            CancellationToken::new(),
        )
        .await?;
    if out.stdout != b"captured\n" {
        return Err(format!("the capturing run failed: {out:?}").into());
    }
    let raw = std::fs::read(&args_file)?;
    let args: Vec<OsString> = raw
        .split(|b| *b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| OsString::from_vec(a.to_vec()))
        .collect();
    let seccomp = std::fs::read(&bpf_file).unwrap_or_default();
    let mut landlock_ro = Vec::new();
    let mut landlock_rw = Vec::new();
    let mut it = args.iter().skip_while(|a| *a != "__omniforge-sandbox-exec");
    while let Some(a) = it.next() {
        match a.to_str() {
            Some("--ro") => landlock_ro.extend(it.next().map(|p| p.to_string_lossy().into_owned())),
            Some("--rw") => landlock_rw.extend(it.next().map(|p| p.to_string_lossy().into_owned())),
            Some("--") => break,
            _ => {}
        }
    }
    Ok(RealSandbox {
        args,
        seccomp,
        landlock_ro,
        landlock_rw,
        layers,
    })
}

impl RealSandbox {
    /// The template's bubblewrap arguments: the captured ones with the script bind pointing at
    /// `template` and the seccomp descriptor number replaced by `seccomp_fd`.
    pub fn template_args(&self, template: &Path, seccomp_fd: i32) -> Vec<OsString> {
        let mut out = Vec::with_capacity(self.args.len());
        let mut i = 0;
        while i < self.args.len() {
            let a = &self.args[i];
            if a == "--add-seccomp-fd" {
                out.push(a.clone());
                out.push(seccomp_fd.to_string().into());
                i += 2;
                continue;
            }
            if a == "--ro-bind"
                && self
                    .args
                    .get(i + 2)
                    .is_some_and(|t| t == "/omniforge/main.py")
            {
                out.extend([
                    a.clone(),
                    template.as_os_str().to_owned(),
                    "/omniforge/main.py".into(),
                ]);
                i += 3;
                continue;
            }
            out.push(a.clone());
            i += 1;
        }
        out
    }
}
