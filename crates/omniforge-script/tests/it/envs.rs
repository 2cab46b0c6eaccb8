//! Environments: lock, build, share, wheels-only, gc, uv.

use std::collections::HashSet;
use std::sync::Mutex;
use std::time::Duration;

use omniforge_script::*;

use crate::util::*;

#[tokio::test]
async fn build_with_a_dependency_and_import_it_offline() {
    let data = fresh_data_dir();
    let builder = builder_in(data.path(), false).await;
    let lock = builder.lock(&["humanize".to_owned()]).await.unwrap();
    assert!(
        lock.requirements.contains("humanize=="),
        "{}",
        lock.requirements
    );
    assert!(
        lock.requirements.contains("--hash=sha256:"),
        "{}",
        lock.requirements
    );
    assert_eq!(lock.env_id.len(), 64);

    let events = Mutex::new(Vec::new());
    let env = builder
        .build(&lock, |e| events.lock().unwrap().push(e))
        .await
        .unwrap();
    let events = events.into_inner().unwrap();
    assert_eq!(events.first(), Some(&ProgressEvent::CreatingVenv));
    assert!(
        events.contains(&ProgressEvent::Installing { packages: 1 }),
        "{events:?}"
    );
    assert!(
        events.iter().any(|e| matches!(e, ProgressEvent::Output(_))),
        "{events:?}"
    );
    assert_eq!(
        events.last(),
        Some(&ProgressEvent::Installed { packages: 1 })
    );
    assert_eq!(env.path, builder.envs_dir().join(&lock.env_id));

    let mut s = RunSpec::new(
        &env,
        "import humanize, omniforge\nprint(humanize.intcomma(1234567))\n",
    );
    s.network = false;
    let runner = sandboxed();
    assert_layer(&runner, "no-network");
    let out = run(&runner, s).await;
    assert_eq!(stdout(&out), "1,234,567\n", "{out:?}");
}

#[tokio::test]
async fn identical_locks_share_one_env() {
    let data = fresh_data_dir();
    let builder = builder_in(data.path(), false).await;
    let a = builder.lock(&[]).await.unwrap();
    let b = builder.lock(&[]).await.unwrap();
    assert_eq!(a, b);
    // Two concurrent builds of the same lock: one wins the rename, both get the same env.
    let (x, y) = tokio::join!(builder.build(&a, |_| {}), builder.build(&b, |_| {}));
    let (x, y) = (x.unwrap(), y.unwrap());
    assert_eq!(x, y);
    let reused = Mutex::new(Vec::new());
    let z = builder
        .build(&a, |e| reused.lock().unwrap().push(e))
        .await
        .unwrap();
    assert_eq!(z, x);
    assert_eq!(reused.into_inner().unwrap(), [ProgressEvent::Reused]);
    let dirs: Vec<_> = std::fs::read_dir(builder.envs_dir())
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(
        dirs,
        [std::ffi::OsString::from(&a.env_id)],
        "no build directory left behind"
    );

    // The env id covers the requirements and the build flags.
    let source_ok = builder_in(data.path(), true).await;
    assert_ne!(source_ok.lock(&[]).await.unwrap().env_id, a.env_id);
    assert_ne!(
        builder
            .lock_from_requirements("six==1.17.0\n".into())
            .env_id,
        a.env_id
    );
    assert_eq!(builder.lock_from_requirements(String::new()), a);
}

#[tokio::test]
async fn source_only_package_fails_under_wheels_only() {
    let builder = shared_builder().await;
    // docopt 0.6.2 is published as a source distribution only.
    let err = builder
        .lock(&["docopt==0.6.2".to_owned()])
        .await
        .unwrap_err();
    match &err {
        EnvError::Uv { step, stderr, .. } => {
            assert_eq!(*step, "uv pip compile");
            assert!(
                stderr.contains("docopt") && stderr.contains("wheel"),
                "{stderr}"
            );
        }
        other => panic!("expected a uv error, got {other:?}"),
    }
    eprintln!("{err}");
}

#[tokio::test]
async fn invalid_dependencies_are_refused_before_uv() {
    let builder = shared_builder().await;
    for dep in [
        "-e .",
        "pkg @ https://example.invalid/p.whl",
        "./local",
        "--index-url=x",
    ] {
        assert!(
            matches!(
                builder.lock(&[dep.to_owned()]).await,
                Err(EnvError::InvalidDependency { .. })
            ),
            "{dep}"
        );
    }
}

#[tokio::test]
async fn gc_removes_unused_envs() {
    let data = fresh_data_dir();
    let wheels = builder_in(data.path(), false).await;
    let sources = builder_in(data.path(), true).await;
    let keep = wheels
        .build(&wheels.lock(&[]).await.unwrap(), |_| {})
        .await
        .unwrap();
    let drop_me = sources
        .build(&sources.lock(&[]).await.unwrap(), |_| {})
        .await
        .unwrap();
    // A build in progress (fresh temporary directory) is left alone.
    std::fs::create_dir(wheels.envs_dir().join(".tmp-inprogress")).unwrap();
    let in_use: HashSet<String> = [keep.env_id.clone()].into();
    let removed = gc(&wheels.layout(), &in_use).unwrap();
    assert_eq!(removed, std::slice::from_ref(&drop_me.env_id));
    assert!(keep.path.is_dir() && !drop_me.path.exists());
    assert!(wheels.envs_dir().join(".tmp-inprogress").is_dir());
    assert_eq!(
        gc(&Layout::new(data.path().join("missing")), &in_use).unwrap(),
        Vec::<String>::new()
    );
}

#[tokio::test]
async fn pep723_block_feeds_lock() {
    let code = "# /// script\n# dependencies = [\"humanize\"]\n# ///\nimport humanize\n";
    assert_eq!(pep723_dependencies(code).unwrap(), ["humanize"]);
}

/// The product installs uv itself when none is found: a venv with the pinned interpreter and
/// `pip install uv==UV_VERSION` from the registry.
#[tokio::test]
async fn uv_installs_into_the_data_dir() {
    let data = fresh_data_dir();
    let python = python().await;
    let uv = UvTool::install(data.path(), &python).await.unwrap();
    assert_eq!(uv.version(), UV_VERSION);
    assert_eq!(uv.path(), data.path().join("uv/bin/uv"));
    // Found again without installing.
    let again =
        UvTool::locate_or_install(data.path(), Some(uv.path().to_owned()), &python, &host())
            .await
            .unwrap();
    assert_eq!(again.path(), uv.path());
    // An explicit uv that does not run is an error, not a silent fallback.
    let bad = UvTool::locate_or_install(
        data.path(),
        Some("/nonexistent/uv".into()),
        &python,
        &host(),
    )
    .await;
    assert!(matches!(bad, Err(EnvError::UvUnavailable(_))), "{bad:?}");
}

/// `allow_source_builds`: a real source-only package from PyPI (docopt 0.6.2, pure Python)
/// resolves, builds and imports; the build ran in the sandbox (bubblewrap, network shared).
#[tokio::test]
async fn source_only_package_builds_when_allowed() {
    let data = fresh_data_dir();
    let builder = builder_in(data.path(), true).await;
    let lock = builder.lock(&["docopt==0.6.2".to_owned()]).await.unwrap();
    assert!(
        lock.requirements.contains("docopt==0.6.2"),
        "{}",
        lock.requirements
    );
    let env = builder.build(&lock, |_| {}).await.unwrap();
    let out = run(
        &sandboxed(),
        RunSpec::new(&env, "import docopt\nprint(docopt.__version__)\n"),
    )
    .await;
    assert_eq!(stdout(&out), "0.6.2\n", "{out:?}");
}

/// The build code of a source distribution runs inside the sandbox: a package whose
/// `setup.py` probes the host records what it saw in the module it builds. It is served to
/// uv from a loopback HTTP server (the build sandbox shares the host's network).
#[tokio::test]
async fn source_build_code_is_sandboxed() {
    let data = fresh_data_dir();
    let db = data.path().join("omniforge.db");
    std::fs::write(&db, "SECRET-DB").unwrap();
    let pwned = data.path().join("pwned-by-build");
    // `sleep MARKER` runs in the build for 1.5 s: the host's uid of the build's processes.
    let marker = format!("1.5{:06}", std::process::id() % 1_000_000);
    let setup_py = format!(
        r#"import json, os
from setuptools import setup
res = {{}}
def attempt(name, f):
    try:
        res[name] = "OK " + str(f())
    except Exception as e:
        res[name] = "{{}} {{}}".format(type(e).__name__, getattr(e, "errno", ""))
attempt("read_db", lambda: open({db:?}).read())
attempt("list_data", lambda: os.listdir({data:?}))
attempt("write_data", lambda: open({pwned:?}, "w").write("x"))
attempt("write_usr", lambda: open("/usr/pwned-by-build", "w").write("x"))
attempt("uid", lambda: os.getuid())
# The host sees this process (its argument marks it) and reads its uid there.
import subprocess
subprocess.run(["sleep", {marker:?}])
with open("omniforge_probe.py", "w") as f:
    f.write("RESULTS = " + repr(res) + "\n")
setup(name="omniforge-probe", version="1.0", py_modules=["omniforge_probe"])
"#,
        db = db.display().to_string(),
        data = data.path().display().to_string(),
        pwned = pwned.display().to_string(),
        marker = marker,
    );
    // The sdist: omniforge_probe-1.0/{setup.py,PKG-INFO}, tarred by the system's tar.
    let src = tempfile::tempdir().unwrap();
    let pkg = src.path().join("omniforge_probe-1.0");
    std::fs::create_dir(&pkg).unwrap();
    std::fs::write(pkg.join("setup.py"), setup_py).unwrap();
    std::fs::write(
        pkg.join("PKG-INFO"),
        "Metadata-Version: 2.1\nName: omniforge-probe\nVersion: 1.0\n",
    )
    .unwrap();
    let tarball = src.path().join("omniforge_probe-1.0.tar.gz");
    let status = std::process::Command::new("tar")
        .arg("czf")
        .arg(&tarball)
        .arg("-C")
        .arg(src.path())
        .arg("omniforge_probe-1.0")
        .status()
        .unwrap();
    assert!(status.success());
    let bytes = std::fs::read(&tarball).unwrap();
    let hash = sha256_hex(&bytes);

    // A one-file HTTP server on loopback, for as long as the test runs.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        while let Ok((mut sock, _)) = listener.accept().await {
            let bytes = bytes.clone();
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                let _ = sock.read(&mut buf).await;
                let head = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: application/gzip\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                    bytes.len()
                );
                let _ = sock.write_all(head.as_bytes()).await;
                let _ = sock.write_all(&bytes).await;
            });
        }
    });

    let builder = builder_in(data.path(), true).await;
    let lock = builder.lock_from_requirements(format!(
        "omniforge-probe @ http://127.0.0.1:{port}/omniforge_probe-1.0.tar.gz --hash=sha256:{hash}\n"
    ));
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let watcher = {
        let (stop, marker) = (stop.clone(), marker.clone());
        std::thread::spawn(move || host_uid_of(&["sleep", &marker], &stop))
    };
    let env = builder.build(&lock, |_| {}).await.unwrap();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let host_uid = watcher.join().unwrap();
    assert!(!pwned.exists(), "the build wrote into the data directory");
    assert!(!std::path::Path::new("/usr/pwned-by-build").exists());
    let out = run(
        &sandboxed(),
        RunSpec::new(
            &env,
            "import json, omniforge_probe\nprint(json.dumps(omniforge_probe.RESULTS))\n",
        ),
    )
    .await;
    let seen: serde_json::Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {out:?}"));
    eprintln!("what the build saw: {seen}");
    assert_eq!(seen["read_db"], "FileNotFoundError 2", "{seen}");
    // Only the path down to the environment being built exists, as directories bubblewrap
    // creates for the bind; the database is not there. Where that path lies under /tmp (as in
    // CI, where the clone itself is under /tmp), it is created inside the build's private,
    // writable /tmp, so a write there can succeed: it lands in the scratch directory, never in
    // the host's data directory (checked above with `pwned`). Elsewhere it is read-only.
    let listed = seen["list_data"].as_str().unwrap_or_default();
    assert!(listed.starts_with("OK ["), "{seen}");
    assert!(listed.contains("'envs'"), "{seen}");
    let db_name = db.file_name().unwrap().to_string_lossy().into_owned();
    assert!(
        !listed.contains(&db_name),
        "the build saw the database: {seen}"
    );
    let under_tmp = data.path().starts_with("/tmp");
    if under_tmp {
        assert!(
            matches!(seen["write_data"].as_str(), Some("OK 1" | "OSError 30")),
            "{seen}"
        );
    } else {
        assert_eq!(seen["write_data"], "OSError 30", "{seen}"); // EROFS
        assert_eq!(seen["list_data"], "OK ['envs']", "{seen}");
    }
    assert_eq!(seen["write_usr"], "OSError 30", "{seen}"); // EROFS
    assert_eq!(seen["uid"], "OK 65534", "{seen}");
    // uid 65534 in the build's user namespace is, on the host, the uid that started
    // bubblewrap: under a root server, a uid leased for the build, never root.
    let host_uid = host_uid.expect("the build's `sleep` was never seen on the host");
    if rustix::process::geteuid().is_root() {
        assert!(
            (RUN_UID_BASE..RUN_UID_BASE + RUN_UID_SLOTS).contains(&host_uid),
            "the build ran as host uid {host_uid}"
        );
        // Handed back: everything of the environment is root's again.
        let mut stack = vec![env.path.clone()];
        while let Some(p) = stack.pop() {
            let m = std::fs::symlink_metadata(&p).unwrap();
            assert_eq!(
                (
                    std::os::unix::fs::MetadataExt::uid(&m),
                    std::os::unix::fs::MetadataExt::gid(&m)
                ),
                (0, 0),
                "{} is not root's after the build",
                p.display()
            );
            if m.is_dir() {
                stack.extend(std::fs::read_dir(&p).unwrap().map(|e| e.unwrap().path()));
            }
        }
    } else {
        assert_eq!(host_uid, rustix::process::geteuid().as_raw());
    }
}

/// The host's real uid of the first process whose command line is `argv`, looked for in
/// `/proc` every 5 ms until `stop`.
fn host_uid_of(argv: &[&str], stop: &std::sync::atomic::AtomicBool) -> Option<u32> {
    let want: Vec<u8> = argv.iter().flat_map(|a| a.bytes().chain([0])).collect();
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
            if std::fs::read(entry.path().join("cmdline")).ok().as_deref() != Some(&want[..]) {
                continue;
            }
            let status = std::fs::read_to_string(entry.path().join("status")).unwrap_or_default();
            let uid = status
                .lines()
                .find_map(|l| l.strip_prefix("Uid:"))
                .and_then(|l| l.split_whitespace().next())
                .and_then(|u| u.parse().ok());
            if uid.is_some() {
                return uid;
            }
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    None
}

fn sha256_hex(bytes: &[u8]) -> String {
    let out = std::process::Command::new("sha256sum")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            use std::io::Write;
            c.stdin.take().unwrap().write_all(bytes)?;
            c.wait_with_output()
        })
        .unwrap();
    String::from_utf8(out.stdout).unwrap()[..64].to_owned()
}

#[tokio::test]
async fn syntax_check_names_the_line_and_times_out() {
    let python = python().await;
    python
        .check_syntax("import json\nprint(json.dumps({}))\n", SYNTAX_CHECK_TIMEOUT)
        .await
        .unwrap();
    match python
        .check_syntax("x = 1\nif x\n    pass\n", SYNTAX_CHECK_TIMEOUT)
        .await
    {
        Err(SyntaxError::Invalid { detail }) => {
            assert!(detail.starts_with("line 2, column "), "{detail}")
        }
        other => panic!("expected Invalid, got {other:?}"),
    }
    // Compiling never runs the code.
    python
        .check_syntax("import os\nos._exit(3)\n", SYNTAX_CHECK_TIMEOUT)
        .await
        .unwrap();
    match python.check_syntax("x = 1\n", Duration::ZERO).await {
        Err(SyntaxError::Timeout(_)) => {}
        other => panic!("expected Timeout, got {other:?}"),
    }
}
