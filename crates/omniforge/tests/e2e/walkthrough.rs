//! The book's getting-started chapter (`docs/src/getting-started.md`), run as written.
//!
//! Every ```` ```sh ```` block of the chapter is taken from the Markdown and run, in order, by
//! one `bash -euo pipefail` in a fresh directory, with a fresh `HOME` (so the chapter's data
//! directory, `$HOME/omniforge-trial`, is new) and an environment of `HOME` and `PATH` only.
//! On that `PATH`, `omniforge` is the binary under test and `python3` is the pinned Python
//! SDK's venv, so two lines are not run, and the test checks they are still there as written:
//! `cargo install --locked --path crates/omniforge` (its binary is the one cargo built for this
//! test) and `pip install mcp` (`scripts/bootstrap` installed the SDK). Everything else runs
//! verbatim: the tool file, `tool add`, `tool run`, the `.mcp.json` of Claude Code's shape, and
//! the Python SDK reading that JSON, starting `omniforge stdio` with its `env`, forging a tool
//! over MCP and calling it. Each ```` ```text ```` block right after a step is what the step
//! must print: each of its lines is a substring of one line of the step's output.
//!
//! The book's flags reference is checked here too: every flag `omniforge --help` and
//! `omniforge serve --help` list, and every command, is in `docs/src/reference/flags.md`.

use std::path::Path;
use std::time::Duration;

use tokio::process::Command;

use crate::support::{BIN, deps, python2, repo_root, require, uv};

/// The chapter's lines that are not run, and why.
const NOT_RUN: &[(&str, &str)] = &[
    (
        "cargo install --locked --path crates/omniforge",
        "the binary under test is the one cargo built",
    ),
    (
        "pip install mcp",
        "scripts/bootstrap installed the pinned SDK",
    ),
];

/// One step of the chapter: its command lines and the output it shows, if any.
struct Step {
    script: String,
    expected: Option<String>,
}

/// The ```` ```sh ```` blocks of `markdown`, each with the ```` ```text ```` block that follows
/// it directly (only blank lines between), if one does.
fn steps(markdown: &str) -> Vec<Step> {
    let mut steps: Vec<Step> = Vec::new();
    let mut lines = markdown.lines();
    // Whether only blank lines came since the last sh block closed.
    let mut after_sh = false;
    while let Some(line) = lines.next() {
        let fence = line.trim_end();
        if let Some(info) = fence.strip_prefix("```").filter(|i| !i.is_empty()) {
            let mut body = String::new();
            for inner in lines.by_ref() {
                if inner.trim_end() == "```" {
                    break;
                }
                body.push_str(inner);
                body.push('\n');
            }
            match info {
                "sh" => {
                    steps.push(Step {
                        script: body,
                        expected: None,
                    });
                    after_sh = true;
                    continue;
                }
                "text" if after_sh => steps.last_mut().unwrap().expected = Some(body),
                _ => {}
            }
            after_sh = false;
        } else if !line.trim().is_empty() {
            after_sh = false;
        }
    }
    steps
}

#[test]
fn steps_are_read_as_written() {
    let md = "x\n```sh\na\nb\n```\n\n```text\nout\n```\n```sh\nc\n```\nprose\n```text\nno\n```\n";
    let got = steps(md);
    assert_eq!(got.len(), 2);
    assert_eq!(got[0].script, "a\nb\n");
    assert_eq!(got[0].expected.as_deref(), Some("out\n"));
    assert_eq!(got[1].script, "c\n");
    assert_eq!(got[1].expected, None);
}

#[tokio::test]
async fn the_getting_started_chapter_runs_as_written() {
    crate::support::needs_deps!();
    require(&[python2(), uv()]);
    let chapter = std::fs::read_to_string(repo_root().join("docs/src/getting-started.md")).unwrap();
    let steps = steps(&chapter);
    assert!(
        steps.len() >= 6,
        "the chapter has its steps: {}",
        steps.len()
    );

    let root = tempfile::tempdir().unwrap();
    let (home, bin, work) = (
        root.path().join("home"),
        root.path().join("bin"),
        root.path().join("work"),
    );
    for dir in [&home, &bin, &work] {
        std::fs::create_dir_all(dir).unwrap();
    }
    std::os::unix::fs::symlink(BIN, bin.join("omniforge")).unwrap();
    let venv_bin = python2().parent().unwrap().to_owned();
    let path = [
        bin.as_path(),
        venv_bin.as_path(),
        &deps().join("bin"),
        Path::new("/usr/local/bin"),
        Path::new("/usr/bin"),
        Path::new("/bin"),
    ]
    .iter()
    .map(|p| p.display().to_string())
    .collect::<Vec<_>>()
    .join(":");

    // One script: each step after a marker line, the lines not run taken out (each must be
    // found, so the chapter and this list cannot drift apart).
    let mut script = String::from("set -euo pipefail\n");
    let mut skipped = Vec::new();
    for (i, step) in steps.iter().enumerate() {
        script.push_str(&format!("echo '@@step {i}@@'\n"));
        for line in step.script.lines() {
            if let Some((_, why)) = NOT_RUN.iter().find(|(l, _)| *l == line.trim()) {
                skipped.push(line.trim().to_owned());
                script.push_str(&format!("# not run: {why}\n"));
            } else {
                script.push_str(line);
                script.push('\n');
            }
        }
    }
    let wanted: Vec<&str> = NOT_RUN.iter().map(|(l, _)| *l).collect();
    assert_eq!(
        skipped, wanted,
        "the chapter still has the lines this test does not run"
    );

    let run = Command::new("bash")
        .arg("-c")
        .arg(&script)
        .current_dir(&work)
        .env_clear()
        .env("HOME", &home)
        .env("PATH", &path)
        .env("NO_COLOR", "1")
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(Duration::from_secs(240), run)
        .await
        .expect("the chapter runs within 240 s")
        .expect("bash runs");
    // stdout carries the markers and what the steps print; the servers' logs go to stderr.
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(
        output.status.success(),
        "the chapter's commands failed ({}):\n--- stdout\n{stdout}\n--- stderr\n{stderr}",
        output.status
    );

    let mut outputs = vec![String::new(); steps.len()];
    let mut current = None;
    for line in stdout.lines() {
        if let Some(i) = line
            .strip_prefix("@@step ")
            .and_then(|rest| rest.strip_suffix("@@"))
        {
            current = Some(i.parse::<usize>().unwrap());
        } else if let Some(i) = current {
            outputs[i].push_str(line);
            outputs[i].push('\n');
        }
    }
    let mut checked = 0;
    for (i, step) in steps.iter().enumerate() {
        let Some(expected) = &step.expected else {
            continue;
        };
        for want in expected.lines().filter(|l| !l.trim().is_empty()) {
            assert!(
                outputs[i].lines().any(|got| got.contains(want)),
                "step {i} ({}) should print {want:?}; it printed:\n{}\n--- stderr\n{stderr}",
                step.script.lines().next().unwrap_or(""),
                outputs[i]
            );
            checked += 1;
        }
    }
    assert!(
        checked >= 4,
        "the chapter shows what its steps print ({checked} lines)"
    );

    // The fresh data directory holds both tools: the one forged on the command line and the
    // one the Python SDK forged over MCP through the .mcp.json server.
    let list = std::process::Command::new(BIN)
        .args(["--data-dir"])
        .arg(home.join("omniforge-trial"))
        .args(["tool", "list"])
        .output()
        .unwrap();
    let listed = String::from_utf8_lossy(&list.stdout);
    assert!(
        listed.contains("add_vat") && listed.contains("word_count"),
        "both tools are stored in the chapter's data directory: {listed}"
    );
}

/// Every `--flag` in `text` (help output or Markdown).
fn flags_in(text: &str) -> std::collections::BTreeSet<String> {
    let mut out = std::collections::BTreeSet::new();
    for (at, _) in text.match_indices("--") {
        let name: String = text[at + 2..]
            .chars()
            .take_while(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-')
            .collect();
        let before = text[..at].chars().last();
        if name.len() > 1 && before.is_none_or(|c| !c.is_ascii_alphanumeric() && c != '-') {
            out.insert(name.trim_end_matches('-').to_owned());
        }
    }
    out
}

#[test]
fn the_flags_reference_names_every_flag() {
    let reference =
        std::fs::read_to_string(repo_root().join("docs/src/reference/flags.md")).unwrap();
    let documented = flags_in(&reference);
    let mut missing = Vec::new();
    for args in [&["--help"][..], &["serve", "--help"]] {
        let help = std::process::Command::new(BIN).args(args).output().unwrap();
        assert!(help.status.success());
        for flag in flags_in(&String::from_utf8_lossy(&help.stdout)) {
            if !documented.contains(&flag) && !missing.contains(&flag) {
                missing.push(flag);
            }
        }
    }
    assert!(
        missing.is_empty(),
        "docs/src/reference/flags.md does not name these flags of `omniforge --help` and \
         `omniforge serve --help`: {missing:?}"
    );

    // Every command `omniforge --help` lists has its line (`omniforge NAME`).
    let help = std::process::Command::new(BIN)
        .arg("--help")
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&help.stdout).into_owned();
    let commands: Vec<&str> = help
        .lines()
        .skip_while(|line| !line.starts_with("Commands:"))
        .skip(1)
        .take_while(|line| line.starts_with("  "))
        .filter_map(|line| line.split_whitespace().next())
        .filter(|name| *name != "help")
        .collect();
    assert!(commands.len() > 10, "the commands of --help: {commands:?}");
    let undocumented: Vec<_> = commands
        .iter()
        .filter(|name| {
            !reference.contains(&format!("omniforge {name} "))
                && !reference.contains(&format!("omniforge [OPTIONS] {name} "))
        })
        .collect();
    assert!(
        undocumented.is_empty(),
        "docs/src/reference/flags.md has no `omniforge NAME` line for {undocumented:?}"
    );
}
