//! Writes outside `/tmp`, and filling the disk there.

use super::*;

pub(super) async fn escape_write_outside_tmp(mode: Mode) {
    let (mut server, home) = attack_server(mode, &[]).await;
    let mut sc = Scene::new(mode, &server, &home).await;
    let mut v = Verdict::new("write outside /tmp", mode);
    let m = sc.marker.clone();
    let data = home.data.clone();
    let own = home.env_with("");
    let db = home.db();
    let prefix = {
        let python = std::fs::canonicalize(own.join("bin/python")).unwrap();
        python.parent().unwrap().parent().unwrap().to_owned()
    };
    // (label, path, mode): new files ("w") must not appear on the host; appended files
    // ("a", "r+b") must be unchanged.
    let targets: Vec<(&str, PathBuf, &str)> = vec![
        ("own env dir", own.join(format!("pwned-{m}")), "w"),
        ("own env pyvenv.cfg", own.join("pyvenv.cfg"), "a"),
        (
            "own env site-packages",
            walk_dirs(&own, "site-packages").join(format!("pwned-{m}.pth")),
            "w",
        ),
        ("/usr", PathBuf::from(format!("/usr/pwned-{m}")), "w"),
        ("interpreter prefix", prefix.join(format!("pwned-{m}")), "w"),
        ("data dir", data.join(format!("pwned-{m}")), "w"),
        (
            "envs dir",
            data.join("envs").join(format!("pwned-{m}")),
            "w",
        ),
        ("database", db.clone(), "r+b"),
        ("/etc", PathBuf::from(format!("/etc/pwned-{m}")), "w"),
        ("/etc/hosts", PathBuf::from("/etc/hosts"), "a"),
        ("/ (root)", PathBuf::from(format!("/pwned-{m}")), "w"),
    ];
    let before: Vec<Option<Vec<u8>>> = targets
        .iter()
        .map(|(_, p, _)| std::fs::read(p).ok())
        .collect();
    let body = r#"
payload = ("PWNED-" + ARGS["marker"]).encode()
for label, path, mode in ARGS["targets"]:
    def write(path=path, mode=mode):
        with open(path, mode + ("" if "b" in mode else "b")) as f:
            f.write(payload)
        return "WROTE " + path
    probe(label, write)
probe("/tmp (allowed)", lambda: open("/tmp/ok", "wb").write(payload))
"#;
    sc.tool("write_out", body, json!({})).await;
    let args = json!({
        "marker": m,
        "targets": targets.iter().map(|(l, p, mode)| json!([l, p.display().to_string(), mode])).collect::<Vec<_>>(),
    });
    if let Some(call) = sc
        .attack(&mut v, "write_out", args, Duration::from_secs(10))
        .await
    {
        let obs = observations(&call.text());
        absorb(&mut v, &obs);
        let payload = format!("PWNED-{m}");
        for ((label, path, _), before) in targets.iter().zip(&before) {
            let after = std::fs::read(path).ok();
            let changed = match (before, &after) {
                (None, None) => false,
                (Some(b), Some(a)) => a != b,
                _ => true,
            };
            let payload_in_db = *label == "database"
                && ["", "-wal", "-shm"].iter().any(|s| {
                    std::fs::read(format!("{}{s}", db.display()))
                        .unwrap_or_default()
                        .windows(payload.len())
                        .any(|w| w == payload.as_bytes())
                });
            let Some(o) = find(&obs, label) else {
                v.problem(format!("the script did not report target {label:?}"));
                continue;
            };
            if (changed && *label != "database") || payload_in_db {
                v.leak(format!(
                    "{label}: {} was written on the host (script: {})",
                    path.display(),
                    o.what()
                ));
            } else if o.ok {
                // The write "worked" inside the sandbox but nothing reached the host: it
                // landed on the sandbox's own root tmpfs.
                v.layer(match mode {
                    Mode::Namespaces | Mode::Warm => {
                        "namespaces (mount ns: the write landed on the sandbox's throwaway root)"
                    }
                    Mode::NoNamespaces => {
                        "unprivileged-uid (the run's mount ns: the write landed on a private tmpfs)"
                    }
                });
            } else {
                v.layer(layer_of(o, mode));
            }
        }
        if !find(&obs, "/tmp (allowed)").is_some_and(|o| o.ok) {
            v.problem("control: the script could not write its own /tmp");
        }
    }
    // Clean up after a failure: new files carry this test's marker; changed files get their
    // old content back (the database is left to the server).
    for ((label, path, mode), before) in targets.iter().zip(&before) {
        match (*mode, before) {
            ("w", _) => {
                let _ = std::fs::remove_file(path);
            }
            (_, Some(before))
                if *label != "database" && std::fs::read(path).is_ok_and(|now| &now != before) =>
            {
                let _ = std::fs::write(path, before);
            }
            _ => {}
        }
    }
    sc.finish(&mut server, v).await;
}

fn walk_dirs(dir: &Path, name: &str) -> PathBuf {
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                if e.file_name() == name {
                    return e.path();
                }
                stack.push(e.path());
            }
        }
    }
    panic!("no {name} under {}", dir.display())
}

/// The sandbox's root outside `/tmp`: is what a script can write there bounded like `/tmp`
/// (64 MiB), or read-only? The attack writes 32 MiB files (each under `RLIMIT_FSIZE`) until
/// a write fails or 256 MiB are written; the files live in memory (tmpfs) for the run.
pub(super) async fn escape_fill_disk_outside_tmp(mode: Mode) {
    let (mut server, home) = attack_server(mode, &[]).await;
    let mut sc = Scene::new(mode, &server, &home).await;
    let mut v = Verdict::new("fill the sandbox root outside /tmp", mode);
    let body = r#"
def fill(where, count, label):
    total = 0
    chunk = b"y" * (32 << 20)
    for i in range(count):
        try:
            with open(f"{where}/fill-{i}", "wb") as f:
                f.write(chunk)
        except OSError as e:
            note(label, False, exc=e)
            return total
        total += len(chunk)
    return total
def statfs(where):
    s = os.statvfs(where)
    return f"{s.f_blocks * s.f_frsize >> 20} MiB"
probe("size of /", lambda: statfs("/"))
probe("size of /tmp", lambda: statfs("/tmp"))
t = fill("/tmp", 8, "fill /tmp")
note("bytes written to /tmp", True, t)
for i in range(8):
    try: os.unlink(f"/tmp/fill-{i}")
    except OSError: pass
t = fill("", 8, "fill /")
note("bytes written to /", True, t)
"#;
    sc.tool("fill_root", body, json!({})).await;
    if let Some(call) = sc
        .attack(&mut v, "fill_root", json!({}), Duration::from_secs(20))
        .await
    {
        let obs = observations(&call.text());
        absorb(&mut v, &obs);
        let bytes = |p: &str| find(&obs, p).and_then(|o| o.detail.parse::<u64>().ok());
        match bytes("bytes written to /tmp") {
            Some(n) if n <= TMP_CAP => {}
            other => v.problem(format!(
                "control: /tmp took {other:?} bytes, over its 64 MiB cap"
            )),
        }
        match bytes("bytes written to /") {
            Some(n) if n <= TMP_CAP => {}
            Some(n) => v.leak(format!(
                "{} MiB written outside /tmp, to the sandbox root `/`, and nothing stopped it \
                 (the attack stopped itself at 256 MiB). `/` is bubblewrap's root tmpfs, mounted \
                 read-write and without a size cap (statvfs: {}; half the host's RAM), so \
                 `read-only-root` does not hold for `/` itself and the 64 MiB /tmp cap is \
                 bypassed: each file is limited by RLIMIT_FSIZE, their number is not, and they \
                 sit in host memory (no memory cgroup) until the run ends",
                n >> 20,
                find(&obs, "size of /")
                    .map(|o| o.detail.clone())
                    .unwrap_or_default()
            )),
            None => v.problem(format!(
                "the script did not report the bytes written: {}",
                short(&call.text(), 2000)
            )),
        }
        if let Some(o) = find(&obs, "fill /")
            && !o.ok
        {
            v.layer(layer_of(o, mode));
        }
    }
    sc.finish(&mut server, v).await;
}
