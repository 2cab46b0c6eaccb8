//! What a script must not read: the database, another tool's files, the server's environment.

use super::*;

pub(super) async fn escape_read_database(mode: Mode) {
    let (mut server, home) = attack_server(mode, &[]).await;
    let mut sc = Scene::new(mode, &server, &home).await;
    let mut v = Verdict::new("read the database", mode);
    // A canary only the database holds: the description of a stored tool.
    let canary = unique("escape-canary-");
    create(
        &mut sc.s,
        json!({"name": "holder", "description": format!("holds {canary}"), "code": "print(1)\n"}),
    )
    .await;
    let db = home.db();
    let on_host: Vec<u8> = ["", "-wal"]
        .iter()
        .flat_map(|s| std::fs::read(format!("{}{s}", db.display())).unwrap_or_default())
        .collect();
    assert!(
        on_host
            .windows(canary.len())
            .any(|w| w == canary.as_bytes()),
        "control: the canary is not in {} (or its -wal) on the host; the test cannot judge a read",
        db.display()
    );
    let body = r#"
d, db = ARGS["data_dir"], ARGS["db"]
probe("listdir data dir", lambda: sorted(os.listdir(d)))
for suffix in ["", "-wal", "-shm"]:
    def read(p=db + suffix):
        with open(p, "rb") as f:
            data = f.read()
        i = data.find(b"escape-canary-")
        return f"READ {len(data)} bytes header={data[:16]!r} canary={data[i:i+80]!r}" if i >= 0 else f"READ {len(data)} bytes header={data[:16]!r}"
    probe("read db" + suffix, read)
def dump():
    import sqlite3
    c = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    out = []
    for (t,) in c.execute("select name from sqlite_master where type = 'table'").fetchall():
        out.append((t, c.execute(f"select * from {t}").fetchall()))
    return repr(out)
probe("sqlite3 dump", dump, limit=None)
def fds():
    out = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            out.append((fd, os.readlink(f"/proc/self/fd/{fd}")))
        except OSError as e:
            out.append((fd, str(e)))
    return out
probe("inherited fds", fds, limit=None)
"#;
    sc.tool("read_db", body, json!({})).await;
    let args = json!({"data_dir": home.data.display().to_string(), "db": db.display().to_string()});
    if let Some(call) = sc
        .attack(&mut v, "read_db", args, Duration::from_secs(10))
        .await
    {
        let obs = observations(&call.text());
        absorb(&mut v, &obs);
        if call.text().contains(&canary) {
            v.leak(format!("the database canary {canary} is in the output"));
        }
        for p in ["read db", "read db-wal", "read db-shm", "sqlite3 dump"] {
            match find(&obs, p) {
                None => v.problem(format!(
                    "the script did not report probe {p:?}: {}",
                    short(&call.text(), 2000)
                )),
                Some(o) if o.ok => v.leak(format!("{p} succeeded: {}", short(&o.detail, 300))),
                // sqlite3 says only "unable to open database file" (no errno): the reads
                // above name the layer.
                Some(o) if o.errno.is_empty() => {}
                Some(o) => v.layer(layer_of(o, mode)),
            }
        }
        if let Some(o) = find(&obs, "inherited fds")
            && o.detail.contains("omniforge.db")
        {
            v.leak(format!(
                "the script inherited a descriptor of the database: {}",
                o.detail
            ));
        }
    }
    sc.finish(&mut server, v).await;
}

pub(super) async fn escape_read_other_tools_env(mode: Mode) {
    let (mut server, home) = attack_server(mode, &[]).await;
    let mut sc = Scene::new(mode, &server, &home).await;
    let mut v = Verdict::new("read another tool's env", mode);
    // Another tool with its own environment (a real PyPI dependency).
    create(
        &mut sc.s,
        json!({"name": "other", "description": "Another tool.", "dependencies": ["six"],
                        "code": "import six\nprint(six.__version__)\n"}),
    )
    .await;
    let other = home.env_with("six==");
    let own = home.env_with("");
    assert_ne!(other, own);
    let requirements = std::fs::read_to_string(other.join("requirements.txt")).unwrap();
    let pin = requirements
        .lines()
        .find(|l| l.starts_with("six=="))
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap()
        .to_owned();
    let six_py = walk(&other)
        .into_iter()
        .find(|p| p.ends_with("site-packages/six.py"))
        .expect("six.py in the other environment");
    let six_src = std::fs::read_to_string(&six_py).unwrap();
    let six_line = six_src
        .lines()
        .find(|l| l.starts_with("__author__"))
        .unwrap_or("__author__")
        .to_owned();
    let body = r#"
envs, other, run = ARGS["envs"], ARGS["other"], ARGS["run"]
probe("listdir envs", lambda: sorted(os.listdir(envs)))
probe("listdir other env", lambda: sorted(os.listdir(other)))
probe("read other requirements.txt", lambda: open(other + "/requirements.txt").read(), limit=None)
probe("read other six.py", lambda: open(ARGS["six"]).read()[:3000], limit=None)
probe("listdir run scratch", lambda: sorted(os.listdir(run)))
probe("listdir uv-cache", lambda: sorted(os.listdir(ARGS["cache"])))
"#;
    sc.tool("read_other", body, json!({})).await;
    let args = json!({
        "envs": home.data.join("envs").display().to_string(),
        "other": other.display().to_string(),
        "six": six_py.display().to_string(),
        "run": home.data.join("run").display().to_string(),
        "cache": home.data.join("uv-cache").display().to_string(),
    });
    if let Some(call) = sc
        .attack(&mut v, "read_other", args, Duration::from_secs(10))
        .await
    {
        let text = call.text();
        let obs = observations(&text);
        absorb(&mut v, &obs);
        for leaked in [pin.as_str(), six_line.as_str()] {
            if text.contains(leaked) {
                v.leak(format!(
                    "content of the other environment is in the output: {leaked:?}"
                ));
            }
        }
        let other_id = other.file_name().unwrap().to_string_lossy().into_owned();
        match find(&obs, "listdir envs") {
            Some(o) if o.ok && o.detail.contains(&other_id) => {
                v.leak(format!("the other environment is listed: {}", o.detail))
            }
            Some(o) if o.ok => v.layer(match mode {
                Mode::Namespaces | Mode::Warm => "namespaces (mount ns: only its own env is bound)",
                Mode::NoNamespaces => {
                    "unprivileged-uid (the run's mount ns: only its own env is bound back)"
                }
            }),
            Some(o) => v.layer(layer_of(o, mode)),
            None => v.problem("no probe `listdir envs`"),
        }
        for p in [
            "listdir other env",
            "read other requirements.txt",
            "read other six.py",
            "listdir run scratch",
            "listdir uv-cache",
        ] {
            match find(&obs, p) {
                None => v.problem(format!(
                    "the script did not report probe {p:?}: {}",
                    short(&text, 2000)
                )),
                Some(o) if o.ok => v.leak(format!("{p} succeeded: {}", short(&o.detail, 300))),
                Some(o) => v.layer(layer_of(o, mode)),
            }
        }
    }
    sc.finish(&mut server, v).await;
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out
}

pub(super) async fn escape_read_server_environment(mode: Mode) {
    let (mut server, home) = attack_server(mode, &[]).await;
    let mut sc = Scene::new(mode, &server, &home).await;
    let mut v = Verdict::new("read the server's environment", mode);
    // Control: the secret really is in the server's environment.
    let environ = std::fs::read(format!("/proc/{}/environ", server.pid())).unwrap_or_default();
    assert!(
        String::from_utf8_lossy(&environ).contains(&home.secret),
        "control: OMNIFORGE_E2E_SECRET is not in /proc/{}/environ on the host",
        server.pid()
    );
    let body = r#"
NAME = "OMNIFORGE_E2E_SECRET"
probe("os.environ", lambda: dict(os.environ), limit=None)
probe("os.environ has the name", lambda: NAME in os.environ)
for label, p in [("self", "/proc/self/environ"), ("pid 1", "/proc/1/environ"),
                 ("parent", f"/proc/{os.getppid()}/environ"),
                 ("server", f"/proc/{ARGS['server_pid']}/environ"),
                 ("server cmdline", f"/proc/{ARGS['server_pid']}/cmdline")]:
    probe(f"read {label} ({p})", lambda p=p: open(p, "rb").read().decode(errors="replace"), limit=None)
def every():
    seen, found = [], []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            env = open(f"/proc/{pid}/environ", "rb").read()
        except OSError as e:
            seen.append(f"{pid}:{errno.errorcode.get(e.errno)}")
            continue
        seen.append(pid)
        if NAME.encode() in env:
            found.append(env.decode(errors="replace"))
    return {"pids": seen, "with the name": found}
probe("every /proc/*/environ", every, limit=None)
"#;
    sc.tool("dump_env", body, json!({})).await;
    let args = json!({"server_pid": server.pid()});
    if let Some(call) = sc
        .attack(&mut v, "dump_env", args, Duration::from_secs(10))
        .await
    {
        let text = call.text();
        let obs = observations(&text);
        absorb(&mut v, &obs);
        if text.contains("more bytes not shown") {
            v.problem("the output was cut: the secret check would be incomplete");
        }
        match find(&obs, "os.environ has the name") {
            Some(o) if o.ok && o.detail == "False" => {
                v.layer("cleared environment (env_clear at spawn)")
            }
            Some(o) => v.leak(format!(
                "os.environ carries OMNIFORGE_E2E_SECRET: {}",
                o.detail
            )),
            None => v.problem("no probe `os.environ has the name`"),
        }
        let server = format!("read server (/proc/{}/environ)", server.pid());
        match find(&obs, &server) {
            Some(o) if !o.ok => v.layer(match o.errno.as_str() {
                "ENOENT" => match mode {
                    Mode::Namespaces | Mode::Warm => {
                        "namespaces (PID ns: the server is not visible)"
                    }
                    Mode::NoNamespaces => {
                        "unprivileged-uid (hidepid /proc: the server is not visible)"
                    }
                },
                _ => layer_of(o, mode),
            }),
            Some(o) => v.leak(format!(
                "the server's /proc/PID/environ was readable: {}",
                short(&o.detail, 200)
            )),
            None => v.problem("no probe for the server's environ"),
        }
        match find(&obs, "every /proc/*/environ") {
            Some(o) if o.ok && o.detail.contains("'with the name': []") => {}
            Some(o) => v.leak(format!(
                "an environ with OMNIFORGE_E2E_SECRET was found: {}",
                short(&o.detail, 400)
            )),
            None => v.problem("no probe `every /proc/*/environ`"),
        }
    }
    sc.finish(&mut server, v).await;
}
