//! The container image (deploy/image/build.sh) run with podman, rootful, as CI runs it: built
//! around the debug binary this test target already has (never a second release build), started
//! with the least privilege under which every sandbox layer works (deploy/image/README.md), then
//! driven with the official Python SDK: a tool with a PyPI dependency is forged and called,
//! `omniforge doctor` inside reports the layers, SIGTERM stops it within the grace period, and a
//! new container on the same volume still serves the tool.
//!
//! Needs podman, buildah and mmdebstrap (scripts/bootstrap installs them) and root. The image's
//! root filesystem is cached in podman's store (`localhost/omniforge-rootfs:HASH`): the first
//! run on a machine builds it (about 2-4 minutes, mostly downloading Debian packages), later runs
//! only add the binary.

use std::path::{Path, PathBuf};
use std::process::Command as StdCommand;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::process::Command;

use crate::support::{
    BIN, deps, eventually, http_client, no_proxy, py_driver, python1, repo_root, require,
};

/// The image's uid (deploy/image/rootfs.sh): owner of the delegated cgroups.
const IMAGE_UID: u32 = 10001;
/// `serve --shutdown-grace` in the container, and what `podman stop --time` allows.
const GRACE_S: u64 = 10;

/// podman with the global flags these machines need (shared/notes/podman.md): runc, because
/// crun refuses cgroup hybrid mode, and the cgroupfs manager (no systemd here).
fn podman() -> StdCommand {
    let mut cmd = StdCommand::new("podman");
    cmd.args(["--cgroup-manager=cgroupfs", "--runtime", "runc"]);
    cmd
}

/// Runs `cmd` to the end; returns (success, stdout, stderr).
fn run(cmd: &mut StdCommand) -> (bool, String, String) {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Runs `cmd`, which must succeed; returns its stdout.
fn run_ok(cmd: &mut StdCommand) -> String {
    let (ok, out, err) = run(cmd);
    assert!(ok, "{cmd:?} failed:\n{out}\n{err}");
    out
}

/// What the test made outside its temporary directory, removed when it ends, whatever happened.
struct Cleanup {
    containers: Vec<String>,
    volume: String,
    image: String,
    cgroups: Vec<PathBuf>,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        for name in &self.containers {
            let _ = podman()
                .args(["rm", "--force", "--time", "0", name])
                .output();
        }
        let _ = podman()
            .args(["volume", "rm", "--force", &self.volume])
            .output();
        // The rootfs layer stays cached; this run's image goes, with the `latest` tag build.sh
        // gave it too (by id: removing one of two tags only untags).
        if let Ok(out) = podman()
            .args(["image", "inspect", "--format", "{{.Id}}", &self.image])
            .output()
        {
            let id = String::from_utf8_lossy(&out.stdout).trim().to_owned();
            if !id.is_empty() {
                let _ = podman().args(["rmi", "--force", &id]).output();
            }
        }
        // A cgroup can be removed only once its last process is gone, which may be a moment
        // after `podman rm` returns: a few tries, 10 s in all.
        for dir in &self.cgroups {
            for _ in 0..50 {
                remove_cgroup_tree(dir);
                if !dir.exists() {
                    break;
                }
                // scenario: waiting for the kernel to let the emptied cgroup go (no event for it)
                std::thread::sleep(Duration::from_millis(200));
            }
            if dir.exists() {
                eprintln!("container: could not remove {}", dir.display());
            }
        }
    }
}

/// Removes a cgroup directory and the (empty) cgroups below it, deepest first.
fn remove_cgroup_tree(dir: &Path) {
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.flatten() {
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                remove_cgroup_tree(&entry.path());
            }
        }
    }
    let _ = std::fs::remove_dir(dir);
}

/// The cgroup delegation of deploy/image/README.md on this machine's layout (cgroup v1
/// `memory` and `pids`): one directory per hierarchy owned by the image's uid, bind-mounted
/// where the server looks for its own cgroup (`--cgroupns=private` makes that `/`). Not the
/// hybrid v2 hierarchy: moving a process there needs write access to the common ancestor of
/// both cgroups, inside the writer's cgroup namespace, which a sibling directory is not; so
/// `cgroup-kill` (and with it the warm pool) stays off. Returns the directories and the
/// `--volume` flags.
fn delegate_cgroups(name: &str) -> (Vec<PathBuf>, Vec<String>) {
    let mut dirs = Vec::new();
    let mut flags = Vec::new();
    for hierarchy in ["memory", "pids"] {
        let root = Path::new("/sys/fs/cgroup").join(hierarchy);
        assert!(
            root.is_dir(),
            "{} is missing: this test knows the cgroup v1/hybrid layout of these machines only",
            root.display()
        );
        let dir = root.join(name);
        std::fs::create_dir(&dir).unwrap_or_else(|e| panic!("mkdir {}: {e}", dir.display()));
        dirs.push(dir.clone());
        // The directory and its interface files (cgroup.procs, tasks, subtree_control, ...).
        for path in std::iter::once(dir.clone())
            .chain(std::fs::read_dir(&dir).unwrap().flatten().map(|e| e.path()))
        {
            std::os::unix::fs::chown(&path, Some(IMAGE_UID), Some(IMAGE_UID))
                .unwrap_or_else(|e| panic!("chown {}: {e}", path.display()));
        }
        flags.push("--volume".into());
        flags.push(format!("{}:/sys/fs/cgroup/{hierarchy}:rw", dir.display()));
    }
    (dirs, flags)
}

/// A free loopback port (bound, then released for podman to publish).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Waits (up to `limit`) until `GET /healthz` on `port` answers 200; returns its JSON. The
/// container's logs are printed when it does not.
async fn wait_healthy(port: u16, limit: Duration, name: &str) -> Value {
    let client = http_client();
    let url = format!("http://127.0.0.1:{port}/healthz");
    let logs = LogsOnPanic(name.to_owned());
    let health = eventually(limit, &format!("{url} answers 200"), async || {
        let response = client.get(&url).send().await.map_err(|e| e.to_string())?;
        if response.status() != 200 {
            return Err(format!("{}", response.status()));
        }
        response.json::<Value>().await.map_err(|e| e.to_string())
    })
    .await;
    drop(logs);
    health
}

/// Prints a container's logs if dropped during a panic.
struct LogsOnPanic(String);

impl Drop for LogsOnPanic {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let (_, out, err) = run(podman().args(["logs", &self.0]));
            eprintln!("container {} logs:\n{out}\n{err}", self.0);
        }
    }
}

/// Runs the SDK driver `support/py/container_forge.py URL TOKEN ARGS...`; returns its JSON line.
async fn sdk(port: u16, token: &str, args: &[&str]) -> Value {
    let url = format!("http://127.0.0.1:{port}/mcp");
    let mut cmd = Command::new(python1());
    cmd.arg(py_driver("container_forge.py"))
        .arg(&url)
        .arg(token)
        .args(args)
        .env("PYTHONDONTWRITEBYTECODE", "1");
    no_proxy(&mut cmd);
    let out = tokio::time::timeout(Duration::from_secs(300), cmd.output())
        .await
        .expect("container_forge.py did not finish within 300 s")
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "container_forge.py {args:?} failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("container_forge.py printed {stdout:?}: {e}"))
}

/// The text of a CallToolResult.
fn result_text(result: &Value) -> String {
    result["content"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["text"].as_str())
        .collect()
}

#[tokio::test]
async fn the_image_runs_the_sandbox_forges_a_tool_and_keeps_it_across_containers() {
    crate::support::needs_deps!();
    for tool in ["podman", "buildah", "mmdebstrap"] {
        assert!(
            run(StdCommand::new(tool).arg("--version")).0,
            "{tool} is missing: run scripts/bootstrap (it installs podman, buildah, mmdebstrap \
             and runc from Debian)"
        );
    }
    // Rootful podman, and the cgroup delegation, need root.
    let uid = run_ok(StdCommand::new("id").arg("-u"));
    assert_eq!(
        uid.trim(),
        "0",
        "the container test runs rootful podman, as root"
    );
    let pip = deps().join("uv/bin/python");
    require(&[python1(), pip.clone()]);

    let name = format!("omniforge-e2e-{}", std::process::id());
    let tag = format!("e2e-{}", std::process::id());
    let image = format!("localhost/omniforge:{tag}");
    // Not `omniforge-*`: servers on the host remove such cgroups when no process has the
    // number after the dash.
    let (cgroups, cgroup_flags) =
        delegate_cgroups(&format!("ofe2e-container-{}", std::process::id()));
    let mut cleanup = Cleanup {
        containers: Vec::new(),
        volume: name.clone(),
        image: image.clone(),
        cgroups,
    };

    // 1. The image, around the debug binary of this test target.
    let started = Instant::now();
    let built = run_ok(
        StdCommand::new(repo_root().join("deploy/image/build.sh"))
            .args(["--binary", BIN, "--tag", &tag])
            .env("OMNIFORGE_IMAGE_PIP", &pip),
    );
    assert_eq!(built.trim(), image, "build.sh prints the image it built");
    eprintln!(
        "container: image built in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let config: Value = serde_json::from_str(&run_ok(podman().args([
        "image",
        "inspect",
        "--format",
        "{{json .Config}}",
        &image,
    ])))
    .unwrap();
    assert_eq!(config["User"], json!("omniforge:omniforge"), "{config}");
    assert!(
        config["Volumes"].get("/var/lib/omniforge").is_some(),
        "{config}"
    );

    // 2. The least privilege (deploy/image/README.md): no capabilities, no_new_privs, a
    //    read-only root, the default seccomp profile plus sethostname, /proc unmasked, the
    //    delegated cgroups.
    let dir = tempfile::tempdir().unwrap();
    let seccomp = dir.path().join("seccomp.json");
    std::fs::write(
        &seccomp,
        run_ok(&mut StdCommand::new(
            repo_root().join("deploy/image/seccomp.sh"),
        )),
    )
    .unwrap();
    let token = format!("t{}", std::process::id());
    let tokens = dir.path().join("tokens");
    std::fs::write(&tokens, format!("e2e {token} admin\n")).unwrap();
    std::os::unix::fs::chown(&tokens, Some(IMAGE_UID), Some(IMAGE_UID)).unwrap();
    run_ok(podman().args(["volume", "create", &name]));

    let start_container = |suffix: &str, port: u16| -> String {
        let container = format!("{name}-{suffix}");
        let mut cmd = podman();
        cmd.args(["run", "--detach", "--name", &container])
            .args([
                "--cap-drop=ALL",
                "--security-opt=no-new-privileges",
                "--read-only",
            ])
            // At or below this machine's hard limits (podman's default nofile is above them).
            .args([
                "--ulimit",
                "nofile=20000:20000",
                "--ulimit",
                "nproc=4096:4096",
            ])
            .args(["--security-opt", "unmask=/proc/*"])
            .arg(format!("--security-opt=seccomp={}", seccomp.display()))
            .args(["--cgroupns=private"])
            .args(&cgroup_flags)
            // PyPI through the host's network without sharing its namespace.
            .args(["--network", "slirp4netns"])
            .arg(format!("--publish=127.0.0.1:{port}:8765"))
            .arg(format!("--volume={name}:/var/lib/omniforge"))
            .arg(format!(
                "--volume={}:/etc/omniforge/tokens:ro",
                tokens.display()
            ))
            // The machine's CA bundle (it may hold a TLS-intercepting proxy's CA), read-only.
            .args([
                "--volume",
                "/etc/ssl/certs/ca-certificates.crt:/etc/ssl/certs/ca-certificates.crt:ro",
            ])
            .arg(&image)
            .args(["serve", "--token-file", "/etc/omniforge/tokens"])
            .arg(format!("--shutdown-grace={GRACE_S}s"));
        run_ok(&mut cmd);
        container
    };

    // 3. Start, wait for /healthz, and the image's HEALTHCHECK (`omniforge health`).
    let port = free_port();
    let first = start_container("a", port);
    cleanup.containers.push(first.clone());
    let health = wait_healthy(port, Duration::from_secs(60), &first).await;
    assert_eq!(health["status"], json!("ok"), "{health}");
    let (healthy, out, err) = run(podman().args(["healthcheck", "run", &first]));
    assert!(healthy, "the image's HEALTHCHECK failed: {out}{err}");

    // 4. doctor inside: every layer but cgroup-kill, which says why, and so no warm pool.
    let doctor: Value = serde_json::from_str(&run_ok(podman().args([
        "exec",
        &first,
        "omniforge",
        "doctor",
        "--json",
    ])))
    .unwrap();
    let layers = doctor["layers"].as_array().unwrap();
    let inactive: Vec<&str> = layers
        .iter()
        .filter(|l| l["active"] != json!(true))
        .map(|l| l["name"].as_str().unwrap())
        .collect();
    assert_eq!(inactive, ["cgroup-kill"], "inactive layers: {doctor:#}");
    for wanted in [
        "namespaces",
        "unprivileged-uid",
        "read-only-root",
        "no-network",
        "cgroup-pids",
        "cgroup-memory",
        "landlock",
        "seccomp",
    ] {
        assert!(
            layers.iter().any(|l| l["name"] == json!(wanted)),
            "doctor names no {wanted} layer: {doctor}"
        );
    }
    let kill = layers
        .iter()
        .find(|l| l["name"] == json!("cgroup-kill"))
        .unwrap();
    assert!(
        kill["detail"]
            .as_str()
            .unwrap()
            .contains("no writable cgroup v2"),
        "{kill}"
    );
    assert_eq!(
        doctor["sandbox"],
        json!("strict"),
        "the image asks for --sandbox strict"
    );
    assert_eq!(
        doctor["missing"],
        json!([]),
        "strict has what it needs: {doctor}"
    );
    assert_eq!(doctor["warm"]["on"], json!(false), "{doctor}");

    // 5. Forge a tool with a PyPI dependency over MCP, and call it.
    let tool = repo_root().join("examples/tools/parse_date.json");
    let args = json!({"text": "3 March 2026 14:05"}).to_string();
    let forged = sdk(port, &token, &["forge", tool.to_str().unwrap(), &args]).await;
    assert!(
        forged["tools"]
            .as_array()
            .unwrap()
            .contains(&json!("parse_date")),
        "{forged}"
    );
    assert_ne!(forged["result"]["isError"], json!(true), "{forged}");
    assert!(
        result_text(&forged["result"]).contains("2026-03-03T14:05:00"),
        "{forged}"
    );

    // 6. SIGTERM (podman stop), within the grace period: a clean exit, not the SIGKILL after it.
    let stopping = Instant::now();
    run_ok(podman().args(["stop", "--time", &GRACE_S.to_string(), &first]));
    let took = stopping.elapsed();
    let code = run_ok(podman().args(["inspect", "--format", "{{.State.ExitCode}}", &first]));
    assert_eq!(
        code.trim(),
        "0",
        "the server's exit after SIGTERM (137 is podman's SIGKILL)"
    );
    assert!(
        took < Duration::from_secs(GRACE_S),
        "stopping took {took:?}, past the {GRACE_S} s grace"
    );
    eprintln!("container: stopped in {:.1} s", took.as_secs_f64());

    // 7. A new container on the same volume still has the tool, and its environment.
    let port = free_port();
    let second = start_container("b", port);
    cleanup.containers.push(second.clone());
    wait_healthy(port, Duration::from_secs(60), &second).await;
    let called = sdk(port, &token, &["call", "parse_date", &args]).await;
    assert!(
        called["tools"]
            .as_array()
            .unwrap()
            .contains(&json!("parse_date")),
        "{called}"
    );
    assert!(
        result_text(&called["result"]).contains("2026-03-03T14:05:00"),
        "{called}"
    );
    run_ok(podman().args(["stop", "--time", &GRACE_S.to_string(), &second]));
    eprintln!(
        "container: whole test {:.1} s",
        started.elapsed().as_secs_f64()
    );
    drop(cleanup);
}
