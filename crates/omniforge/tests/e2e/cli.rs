//! The command line for people (`omniforge tool ...`, `secret`, `backup`, `gc`, `doctor`)
//! against a running server on the same data directory; what each command prints and which
//! options it takes; the readiness contract of `serve --ready-file`; the process protection of
//! the serving commands.

use std::process::Stdio;
use std::time::Duration;

use regex::Regex;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use crate::support::{
    BIN, Serve, http_client, omniforge_cli, omniforge_in, repo_root, spawn_piped,
};

#[tokio::test]
async fn tool_commands_reach_a_running_server() {
    crate::support::needs_deps!();
    let dir = tempfile::tempdir().unwrap();
    let mut server = omniforge_in(dir.path())
        .arg("stdio")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdin = server.stdin.take().unwrap();
    let mut lines = BufReader::new(server.stdout.take().unwrap()).lines();
    let init = json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{
        "protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"cli-test","version":"0"}}});
    stdin
        .write_all(format!("{init}\n").as_bytes())
        .await
        .unwrap();
    let answer: Value = serde_json::from_str(&lines.next_line().await.unwrap().unwrap()).unwrap();
    assert_eq!(answer["result"]["protocolVersion"], json!("2025-06-18"));
    stdin
        .write_all(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n")
        .await
        .unwrap();

    let example = repo_root().join("examples/tools/add_vat.json");
    let (ok, out, err) = omniforge_cli(
        dir.path(),
        &["tool", "add", example.to_str().unwrap()],
        None,
    )
    .await;
    assert!(ok, "tool add failed: {out}\n{err}");
    assert!(out.contains("Created tool add_vat (version 1)"), "{out}");

    // The running server notices the other process's write and tells its peer.
    let changed = tokio::time::timeout(Duration::from_secs(5), async {
        while let Some(line) = lines.next_line().await.unwrap() {
            let message: Value = serde_json::from_str(&line).unwrap();
            if message["method"] == json!("notifications/tools/list_changed") {
                return true;
            }
        }
        false
    })
    .await;
    assert_eq!(
        changed,
        Ok(true),
        "no list_changed within 5 s of `tool add`"
    );
    let list = json!({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"add_vat","arguments":{"net":10}}});
    stdin
        .write_all(format!("{list}\n").as_bytes())
        .await
        .unwrap();
    let answer: Value = loop {
        let m: Value = serde_json::from_str(&lines.next_line().await.unwrap().unwrap()).unwrap();
        if m["id"] == json!(2) {
            break m;
        }
    };
    assert_eq!(
        answer["result"]["content"][0]["text"],
        json!("{\"net\": \"10\", \"rate\": \"20\", \"vat\": \"2.00\", \"gross\": \"12.00\"}")
    );

    let (ok, out, _) = omniforge_cli(
        dir.path(),
        &["tool", "run", "add_vat", r#"{"net": 7}"#],
        None,
    )
    .await;
    assert!(ok && out.contains("\"gross\": \"8.40\""), "{out}");
    let (ok, out, _) = omniforge_cli(
        dir.path(),
        &["tool", "run", "add_vat", r#"{"net": "x"}"#],
        None,
    )
    .await;
    assert!(
        !ok && out.contains("Arguments do not match inputSchema"),
        "{out}"
    );
    let (ok, out, _) = omniforge_cli(dir.path(), &["tool", "list"], None).await;
    assert!(ok && out.starts_with("add_vat"), "{out}");

    // An edit that gives only a new description keeps the code and everything else.
    let edit = dir.path().join("edit.json");
    std::fs::write(
        &edit,
        json!({"name": "add_vat", "description": "UK VAT at 20%, as decimal strings"}).to_string(),
    )
    .unwrap();
    let (ok, out, err) = omniforge_cli(
        dir.path(),
        &["tool", "edit", "add_vat", edit.to_str().unwrap()],
        None,
    )
    .await;
    assert!(ok && out.contains("version 2"), "{out}\n{err}");
    let (ok, out, _) = omniforge_cli(
        dir.path(),
        &["tool", "run", "add_vat", r#"{"net": 10}"#],
        None,
    )
    .await;
    assert!(ok && out.contains("\"gross\": \"12.00\""), "{out}");
    let (ok, out, _) = omniforge_cli(dir.path(), &["tool", "show", "add_vat"], None).await;
    assert!(
        ok && out.contains("UK VAT at 20%, as decimal strings"),
        "{out}"
    );

    let (ok, _, _) = omniforge_cli(dir.path(), &["tool", "disable", "add_vat"], None).await;
    assert!(ok);
    let (ok, out, _) = omniforge_cli(dir.path(), &["tool", "list"], None).await;
    assert!(
        ok && out.trim().is_empty(),
        "a disabled tool is listed: {out}"
    );
    // A disabled tool does not run from the command line either.
    let (ok, out, _) = omniforge_cli(
        dir.path(),
        &["tool", "run", "add_vat", r#"{"net": 1}"#],
        None,
    )
    .await;
    assert!(!ok && out.contains("is disabled"), "{out}");

    let (ok, _, err) = omniforge_cli(
        dir.path(),
        &["secret", "set", "API_KEY"],
        Some("s3cret-value\n"),
    )
    .await;
    assert!(ok, "{err}");
    let (ok, out, _) = omniforge_cli(dir.path(), &["secret", "list"], None).await;
    assert!(
        ok && out.trim() == "API_KEY" && !out.contains("s3cret"),
        "{out}"
    );

    let backup = dir.path().join("backup.db");
    let (ok, _, err) = omniforge_cli(dir.path(), &["backup", backup.to_str().unwrap()], None).await;
    assert!(ok && backup.exists(), "{err}");
    let (ok, out, err) = omniforge_cli(dir.path(), &["doctor", "--json"], None).await;
    assert!(ok, "{err}");
    let doctor: Value = serde_json::from_str(&out).unwrap();
    assert!(
        doctor["layers"].as_array().is_some_and(|l| !l.is_empty()),
        "{doctor}"
    );
    let (ok, out, _) = omniforge_cli(dir.path(), &["gc"], None).await;
    assert!(ok && out.contains("unused environment"), "{out}");
}

/// Boolean flags take a value only with `=`, so a flag written before the subcommand (as
/// `omniforge [OPTIONS] stdio`) does not swallow the subcommand's name.
#[tokio::test]
async fn boolean_flags_before_the_subcommand() {
    crate::support::needs_deps!();
    let dir = tempfile::tempdir().unwrap();
    for flag in [
        "--no-authoring",
        "--allow-source-builds",
        "--inline-schema-refs",
        "--no-authoring=true",
    ] {
        let (ok, out, err) = omniforge_cli(dir.path(), &[flag, "tool", "list"], None).await;
        assert!(ok, "{flag} tool list: {out}\n{err}");
    }
    let (ok, _, err) =
        omniforge_cli(dir.path(), &["--no-authoring=maybe", "tool", "list"], None).await;
    assert!(!ok && err.contains("invalid value"), "{err}");
}

/// `omniforge COMMAND --help`, which must succeed; returns stdout.
async fn help(args: &[&str]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let args: Vec<&str> = args.iter().copied().chain(["--help"]).collect();
    let (ok, out, err) = omniforge_cli(dir.path(), &args, None).await;
    assert!(ok, "{args:?}: {out}{err}");
    out
}

/// The long options a help text lists.
fn options_of(help: &str) -> Vec<String> {
    let re = Regex::new(r"(?m)^\s+(?:-\w, )?(--[a-z][a-z-]*)").unwrap();
    re.captures_iter(help).map(|c| c[1].to_owned()).collect()
}

/// A subcommand's `--help` lists the options it uses and the three global ones, not the ~25
/// server options every command used to repeat.
#[tokio::test]
async fn subcommand_help_lists_only_its_options() {
    crate::support::needs_deps!();
    const GLOBAL: [&str; 6] = [
        "--config",
        "--data-dir",
        "--log-level",
        "--database",
        "--secret-key-file",
        "--help",
    ];
    let cases: [(&[&str], &[&str]); 6] = [
        (
            &["tool", "add"],
            &[
                "--python",
                "--uv",
                "--sandbox",
                "--allow-source-builds",
                "--tool-timeout",
                "--max-tool-timeout",
                "--memory-limit-bytes",
                "--keep-failed-drafts",
            ],
        ),
        (&["tool", "list"], &["--all"]),
        (&["tool", "history"], &[]),
        (&["secret", "set"], &[]),
        (&["doctor"], &["--json", "--sandbox"]),
        (&["backup"], &[]),
    ];
    for (command, own) in cases {
        let listed = options_of(&help(command).await);
        let mut want: Vec<String> = GLOBAL.iter().chain(own).map(|s| s.to_string()).collect();
        want.sort();
        let mut got = listed.clone();
        got.sort();
        assert_eq!(
            got,
            want,
            "omniforge {} --help lists {listed:?}",
            command.join(" ")
        );
    }
    // The serving commands still list everything they use.
    let serve = options_of(&help(&["serve"]).await);
    for option in [
        "--manifest",
        "--upstream",
        "--upstream-auth-file",
        "--listen",
        "--ready-file",
        "--no-authoring",
        "--page-size",
        "--keep-failed-drafts",
    ] {
        assert!(
            serve.iter().any(|o| o == option),
            "serve --help lacks {option}: {serve:?}"
        );
    }
    let bridge = options_of(&help(&["bridge"]).await);
    assert!(
        bridge.iter().any(|o| o == "--manifest") && !bridge.iter().any(|o| o == "--python"),
        "bridge takes the manifest options and no script options: {bridge:?}"
    );
}

/// The `--manifest` help reads "comma-separated", not "comma- separated".
#[tokio::test]
async fn manifest_help_reads_comma_separated() {
    crate::support::needs_deps!();
    for command in [&["serve"][..], &["stdio"], &["bridge"], &[]] {
        let text = help(command).await;
        let manifest = text
            .split("--manifest <PATH>")
            .nth(1)
            .and_then(|rest| rest.split("\n      --").next())
            .unwrap_or_else(|| panic!("no --manifest in omniforge {command:?} --help"));
        assert!(
            manifest.contains("comma-separated") && !text.contains("comma- "),
            "omniforge {command:?} --help: {manifest}"
        );
    }
}

/// `tool history` shows when each version was made as a date and time, not epoch milliseconds,
/// and marks the current version.
#[tokio::test]
async fn tool_history_shows_readable_times() {
    crate::support::needs_deps!();
    let dir = tempfile::tempdir().unwrap();
    let example = repo_root().join("examples/tools/add_vat.json");
    let (ok, out, err) = omniforge_cli(
        dir.path(),
        &["tool", "add", example.to_str().unwrap()],
        None,
    )
    .await;
    assert!(ok, "{out}\n{err}");
    let edit = dir.path().join("edit.json");
    std::fs::write(&edit, json!({"description": "VAT, again"}).to_string()).unwrap();
    let (ok, out, err) = omniforge_cli(
        dir.path(),
        &["tool", "edit", "add_vat", edit.to_str().unwrap()],
        None,
    )
    .await;
    assert!(ok, "{out}\n{err}");

    let (ok, out, err) = omniforge_cli(dir.path(), &["tool", "history", "add_vat"], None).await;
    assert!(ok, "{err}");
    let line = Regex::new(
        r"^([ *])v(\d+)\s+(\S+)\s+(\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}) UTC\s+by cli:\S+\s+\S",
    )
    .unwrap();
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 2, "{out}");
    let year = |text: &str| text[..4].parse::<u32>().unwrap();
    for (l, (mark, number, status)) in lines
        .iter()
        .zip([(" ", "1", "previous"), ("*", "2", "current")])
    {
        let c = line.captures(l).unwrap_or_else(|| {
            panic!("not `[*]vN STATUS YYYY-MM-DD HH:MM:SS UTC by AUTHOR ...`: {l:?}")
        });
        assert_eq!((&c[1], &c[2], &c[3]), (mark, number, status), "{out}");
        assert!(year(&c[4]) >= 2025, "{l}");
    }
    assert!(
        !Regex::new(r"\d{13}").unwrap().is_match(&out),
        "raw epoch milliseconds: {out}"
    );
}

/// `enable`, `disable`, `rollback` and `rm` print one line each, naming the tool.
#[tokio::test]
async fn mutating_tool_commands_print_one_line() {
    crate::support::needs_deps!();
    let dir = tempfile::tempdir().unwrap();
    let example = repo_root().join("examples/tools/add_vat.json");
    let (ok, out, err) = omniforge_cli(
        dir.path(),
        &["tool", "add", example.to_str().unwrap()],
        None,
    )
    .await;
    assert!(ok, "{out}\n{err}");
    assert_eq!(out.lines().count(), 1, "tool add: {out:?}");
    let edit = dir.path().join("edit.json");
    std::fs::write(&edit, json!({"description": "v2"}).to_string()).unwrap();
    let (ok, _, err) = omniforge_cli(
        dir.path(),
        &["tool", "edit", "add_vat", edit.to_str().unwrap()],
        None,
    )
    .await;
    assert!(ok, "{err}");
    // A disabled tool is left out of `tool list` and shown by `tool list --all`.
    let (ok, _, err) = omniforge_cli(dir.path(), &["tool", "disable", "add_vat"], None).await;
    assert!(ok, "{err}");
    let (ok, out, _) = omniforge_cli(dir.path(), &["tool", "list"], None).await;
    assert!(ok && !out.contains("add_vat"), "{out}");
    let (ok, out, _) = omniforge_cli(dir.path(), &["tool", "list", "--all"], None).await;
    assert!(
        ok && Regex::new(r"(?m)^add_vat\s+v2\s+disabled\s+\S")
            .unwrap()
            .is_match(&out),
        "tool list --all: {out:?}"
    );
    for (command, says) in [
        (&["tool", "disable", "add_vat"][..], "disabled"),
        (&["tool", "enable", "add_vat"], "enabled"),
        (&["tool", "rollback", "add_vat", "1"], "now runs version 1"),
        (&["tool", "rm", "add_vat"], "removed"),
    ] {
        let (ok, out, err) = omniforge_cli(dir.path(), command, None).await;
        assert!(ok, "{command:?}: {err}");
        assert!(
            out.lines().count() == 1 && out.contains("add_vat") && out.contains(says),
            "{command:?} must print one line saying {says:?} about add_vat, got {out:?}"
        );
    }
    let (ok, out, _) = omniforge_cli(dir.path(), &["tool", "history", "add_vat"], None).await;
    assert!(!ok && out.is_empty(), "the tool is gone: {out}");
}

/// `tool add` reports the dependency install on stderr while it works: plain lines when
/// stderr is not a terminal (a spinner when it is). stdout keeps only the one result line.
#[tokio::test]
async fn tool_add_reports_install_progress_on_stderr() {
    crate::support::needs_deps!();
    let dir = tempfile::tempdir().unwrap();
    let tool = dir.path().join("uses_six.json");
    std::fs::write(
        &tool,
        json!({"name": "uses_six", "description": "Says hello with six.",
               "dependencies": ["six"],
               "code": "import six\nprint(six.text_type('hello'))\n"})
        .to_string(),
    )
    .unwrap();
    let (ok, out, err) =
        omniforge_cli(dir.path(), &["tool", "add", tool.to_str().unwrap()], None).await;
    assert!(ok, "{out}\n{err}");
    assert!(
        out.lines().count() == 1 && out.contains("Created tool uses_six"),
        "stdout: {out:?}"
    );
    let lines: Vec<&str> = err.lines().collect();
    let position = |needle: &str| {
        lines
            .iter()
            .position(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("no progress line with {needle:?} on stderr:\n{err}"))
    };
    assert!(
        position("resolving dependencies") < position("installing")
            && position("installing") < position("six=="),
        "progress in order:\n{err}"
    );
    assert!(
        !err.contains('\r') && !err.contains('\u{1b}'),
        "no terminal drawing on a pipe: {err:?}"
    );
}

/// `bridge` without `--addr`: a call's configuration error names `--addr`, the flag bridge
/// users type.
#[tokio::test]
async fn bridge_without_addr_names_addr() {
    crate::support::needs_deps!();
    let dir = tempfile::tempdir().unwrap();
    let manifest = repo_root().join("tests/fixtures/connect/manifest.json");
    let mut bridge = spawn_piped(
        omniforge_in(dir.path())
            .arg("bridge")
            .arg("--manifest")
            .arg(&manifest),
    )
    .unwrap();
    let mut stdin = bridge.stdin.take().unwrap();
    let mut lines = BufReader::new(bridge.stdout.take().unwrap()).lines();
    crate::support::drain(
        bridge.stderr.take().unwrap(),
        crate::support::Captured::default(),
    );
    for message in [
        json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{
            "protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"cli-test","version":"0"}}}),
        json!({"jsonrpc":"2.0","method":"notifications/initialized"}),
        json!({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"fixture_echo","arguments":{"text":"hi"}}}),
    ] {
        stdin
            .write_all(format!("{message}\n").as_bytes())
            .await
            .unwrap();
    }
    let answer = tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            let line = lines
                .next_line()
                .await
                .unwrap()
                .expect("bridge stdout closed");
            let m: Value = serde_json::from_str(&line).unwrap();
            if m["id"] == json!(2) {
                return m;
            }
        }
    })
    .await
    .expect("no answer to tools/call within 20 s");
    let text = answer["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or("");
    assert!(
        answer["result"]["isError"] == json!(true)
            && text.contains("no upstream address is configured")
            && text.contains("--addr"),
        "{answer}"
    );
    crate::support::kill_and_reap(&mut bridge);
}

/// The readiness contract: `serve --ready-file FILE` writes the endpoint URL and a newline
/// once the server accepts connections, and removes the file at exit.
#[tokio::test]
async fn ready_file_names_the_endpoint_until_exit() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = Serve::start(&["--data-dir".as_ref(), dir.path().as_os_str()]).await;
    let text = std::fs::read_to_string(server.ready_file()).unwrap();
    assert_eq!(text, format!("{}\n", server.url));
    assert!(
        Regex::new(r"^http://127\.0\.0\.1:[1-9][0-9]*/mcp\n$")
            .unwrap()
            .is_match(&text),
        "{text:?}"
    );
    let health = http_client()
        .get(format!("{}/healthz", server.base))
        .send()
        .await
        .unwrap();
    assert_eq!(health.status(), 200);
    let status = std::process::Command::new("kill")
        .args(["-TERM", &server.pid().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let status = server
        .wait_exit(Duration::from_secs(20))
        .await
        .expect("serve exits after SIGTERM");
    assert!(status.success(), "{status}: {}", server.output_tail());
    assert!(
        !server.ready_file().exists(),
        "the ready file outlived the server"
    );
}

/// A flag written before the subcommand beats the subcommand's environment variable, and
/// one written after it beats both.
#[tokio::test]
async fn a_flag_before_the_subcommand_beats_the_environment() {
    crate::support::needs_deps!();
    let dir = tempfile::tempdir().unwrap();
    for (env, args, want) in [
        (
            "strict",
            &["--sandbox", "off", "doctor", "--json"][..],
            "off",
        ),
        (
            "off",
            &["doctor", "--json", "--sandbox", "strict"],
            "strict",
        ),
        (
            "off",
            &[
                "--sandbox",
                "standard",
                "doctor",
                "--json",
                "--sandbox",
                "strict",
            ],
            "strict",
        ),
        ("standard", &["doctor", "--json"], "standard"),
    ] {
        let out = omniforge_in(dir.path())
            .args(args)
            .env("OMNIFORGE_SANDBOX", env)
            .output()
            .await
            .unwrap();
        let report: Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{args:?}: {e}: {out:?}"));
        assert_eq!(
            report["sandbox"],
            json!(want),
            "OMNIFORGE_SANDBOX={env} {args:?}"
        );
    }
}

/// `stdio` (like `serve` and `bridge`) marks itself non-dumpable, so another process of the
/// same uid cannot read its environment (credentials such as OMNIFORGE_UPSTREAM_AUTH). Both run
/// as uid 65534 here, without capabilities (root's CAP_SYS_PTRACE would read anything).
#[tokio::test]
async fn serving_process_environment_is_unreadable_by_its_uid() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(
        dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o777),
    )
    .unwrap();
    let as_nobody = |program: &str| {
        let mut cmd = tokio::process::Command::new("setpriv");
        cmd.args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--inh-caps=-all",
            "--bounding-set=-all",
            program,
        ]);
        cmd
    };
    let mut server = spawn_piped(
        as_nobody(BIN)
            .arg("stdio")
            .arg("--data-dir")
            .arg(dir.path())
            .arg("--sandbox=off")
            .arg("--manifest")
            .arg(repo_root().join("tests/fixtures/connect/manifest.json"))
            .env("OMNIFORGE_UPSTREAM_AUTH", "Bearer must-stay-private"),
    )
    .expect("setpriv (util-linux) runs the server as uid 65534");
    let mut stdin = server.stdin.take().unwrap();
    let mut lines = BufReader::new(server.stdout.take().unwrap()).lines();
    let stderr = crate::support::Captured::default();
    crate::support::drain(server.stderr.take().unwrap(), stderr.clone());
    // Once it answers initialize, it is past the start-up.
    let init = json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{
        "protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"cli-test","version":"0"}}});
    stdin
        .write_all(format!("{init}\n").as_bytes())
        .await
        .unwrap();
    let answer = tokio::time::timeout(Duration::from_secs(20), lines.next_line())
        .await
        .expect("no initialize answer")
        .unwrap()
        .unwrap_or_else(|| panic!("stdio exited; stderr:\n{}", stderr.text()));
    assert!(answer.contains("protocolVersion"), "{answer}");
    let pid = server.id().unwrap();
    let read = as_nobody("cat")
        .arg(format!("/proc/{pid}/environ"))
        .output()
        .await
        .unwrap();
    assert!(
        !read.status.success()
            && !String::from_utf8_lossy(&read.stdout).contains("must-stay-private"),
        "a process of the same uid read the server's environment: {read:?}"
    );
    // The same reader can read a dumpable process of that uid: the check above is not vacuous.
    let mut sleeper = as_nobody("sh")
        .args(["-c", "echo started; exec sleep 30"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    // It prints once it runs as uid 65534 (setpriv has switched and exec'd).
    let mut started = BufReader::new(sleeper.stdout.take().unwrap()).lines();
    assert_eq!(
        started.next_line().await.unwrap().as_deref(),
        Some("started")
    );
    let control = as_nobody("cat")
        .arg(format!("/proc/{}/environ", sleeper.id().unwrap()))
        .output()
        .await
        .unwrap();
    crate::support::kill_and_reap(&mut sleeper);
    assert!(control.status.success(), "{control:?}");
    crate::support::kill_and_reap(&mut server);
}

/// `doctor` says whether `serve` would run stored calls on warm templates, and why not:
/// `--warm-pool 0` (flag or `OMNIFORGE_WARM_POOL`, the flag winning), `--sandbox off`.
#[tokio::test]
async fn doctor_says_whether_the_warm_pool_is_on() {
    crate::support::needs_deps!();
    let dir = tempfile::tempdir().unwrap();
    for (env, args, on, reason) in [
        (None, &["doctor", "--json"][..], true, ""),
        (Some("0"), &["doctor", "--json"], false, "--warm-pool 0"),
        (
            Some("3"),
            &["--warm-pool", "0", "doctor", "--json"],
            false,
            "--warm-pool 0",
        ),
        (
            Some("0"),
            &["--warm-pool", "2", "doctor", "--json"],
            true,
            "",
        ),
        (
            None,
            &["--sandbox", "off", "doctor", "--json"],
            false,
            "--sandbox off",
        ),
    ] {
        let mut cmd = omniforge_in(dir.path());
        cmd.env_remove("OMNIFORGE_WARM_POOL").args(args);
        if let Some(n) = env {
            cmd.env("OMNIFORGE_WARM_POOL", n);
        }
        let out = cmd.output().await.unwrap();
        let report: Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{args:?}: {e}: {out:?}"));
        let warm = &report["warm"];
        assert_eq!(
            warm["on"],
            json!(on),
            "OMNIFORGE_WARM_POOL={env:?} {args:?}: {report}"
        );
        if !on {
            assert!(
                warm["off_reason"]
                    .as_str()
                    .is_some_and(|r| r.contains(reason)),
                "{args:?}: {report}"
            );
        }
    }
}

/// Issue 30: `serve` on a busy port fails at once, before it opens the store or sets up the
/// sandbox.
#[tokio::test]
async fn serve_on_a_busy_port_fails_before_setting_anything_up() {
    let dir = tempfile::tempdir().unwrap();
    let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = busy.local_addr().unwrap().to_string();
    let started = std::time::Instant::now();
    let (ok, _, stderr) = omniforge_cli(
        dir.path(),
        &["serve", "--log-level", "debug", "--listen", &addr],
        None,
    )
    .await;
    assert!(!ok, "serve on a busy port succeeded: {stderr}");
    assert!(stderr.contains(&format!("binding {addr}")), "{stderr}");
    assert!(
        !stderr.contains("sandbox layer") && !stderr.contains("migration"),
        "set up before binding: {stderr}"
    );
    assert!(
        !dir.path().join("omniforge.db").exists(),
        "the store was opened"
    );
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
}

/// Issue 30: `serve` starts with one summary of what it serves (MCP and console URLs, store,
/// auth, approval, sources), and the rest of its start-up at debug: a few short lines.
#[tokio::test]
async fn serve_starts_with_one_short_summary() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_str().unwrap();
    let uv = crate::support::paths::uv();
    let server = Serve::start(&["--data-dir", data, "--uv", uv.to_str().unwrap()]).await;
    // Logged before the server is ready.
    let log = server.stderr();
    let summary = log
        .lines()
        .find(|l| l.contains(" serving "))
        .unwrap_or_else(|| panic!("no summary line in\n{log}"));
    for want in [
        format!("mcp={}", server.url),
        format!("console={}/console", server.base),
        format!("store=sqlite:{data}/omniforge.db"),
        "auth=none".to_owned(),
        "approval=\"off\"".to_owned(),
        "sources=0 stored tools".to_owned(),
    ] {
        assert!(summary.contains(&want), "{want:?} not in {summary}");
    }
    let lines: Vec<&str> = log.lines().collect();
    assert!(lines.len() <= 6, "{} start-up lines:\n{log}", lines.len());
    assert!(
        lines.iter().all(|l| l.len() < 500),
        "a long start-up line:\n{log}"
    );
}

/// `omniforge health` (the container image's HEALTHCHECK): exit 0 while the server answers
/// `/healthz`, also when given the unspecified address the server listens on in a container,
/// and exit 1, naming the URL, once it is gone.
#[tokio::test]
async fn health_answers_for_a_running_server_and_fails_without_one() {
    crate::support::needs_deps!();
    let server = crate::support::HttpServer::start(&[], &crate::support::Auth::None).await;
    let port = server.base().rsplit(':').next().unwrap().to_owned();
    let dir = tempfile::tempdir().unwrap();
    for listen in [format!("127.0.0.1:{port}"), format!("0.0.0.0:{port}")] {
        let (ok, out, err) =
            omniforge_cli(dir.path(), &["health", "--listen", &listen], None).await;
        assert!(ok, "health --listen {listen} failed: {err}");
        assert_eq!(out, "", "health prints nothing when healthy");
    }
    drop(server);
    let (ok, _, err) = omniforge_cli(
        dir.path(),
        &["health", "--listen", &format!("127.0.0.1:{port}")],
        None,
    )
    .await;
    assert!(!ok, "health succeeded with no server on port {port}");
    assert!(
        err.contains(&format!("GET http://127.0.0.1:{port}/healthz")),
        "the error names the URL: {err}"
    );
}
