//! What an attack's script observed, and the verdict judged from it.

use super::*;

pub(super) fn short(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…[{} more bytes]", &text[..end], text.len() - end)
}

/// One probe the script reported: `{"probe", "ok", "exc", "errno", "detail"}`.
#[derive(Debug, Clone)]
pub(super) struct Obs {
    pub(super) probe: String,
    pub(super) ok: bool,
    pub(super) exc: String,
    pub(super) errno: String,
    pub(super) detail: String,
}

impl Obs {
    pub(super) fn what(&self) -> String {
        if self.ok {
            format!("{}: OK {}", self.probe, short(&self.detail, 160))
        } else {
            format!(
                "{}: {} {} ({})",
                self.probe,
                self.exc,
                self.errno,
                short(&self.detail, 160)
            )
        }
    }
}

pub(super) fn observations(text: &str) -> Vec<Obs> {
    text.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l.trim()).ok())
        .filter(|v| v["probe"].is_string())
        .map(|v| Obs {
            probe: v["probe"].as_str().unwrap_or("").to_owned(),
            ok: v["ok"] == true,
            exc: v["exc"].as_str().unwrap_or("").to_owned(),
            errno: v["errno"].as_str().unwrap_or("").to_owned(),
            detail: v["detail"].as_str().unwrap_or("").to_owned(),
        })
        .collect()
}

pub(super) fn find<'a>(obs: &'a [Obs], probe: &str) -> Option<&'a Obs> {
    obs.iter().find(|o| o.probe == probe)
}

/// The layer an error the script saw points to.
pub(super) fn layer_of(o: &Obs, mode: Mode) -> &'static str {
    match (o.exc.as_str(), o.errno.as_str()) {
        (_, "ENOENT") => mode.hides(),
        (_, "EACCES") => "unprivileged-uid or landlock (uid 65534; paths outside the ruleset)",
        (_, "EPERM") => "seccomp (denied system call or socket family) or unprivileged-uid",
        (_, "EROFS") => "read-only-root (read-only bind)",
        (_, "ENETUNREACH") => "no-network (empty net ns: no route)",
        (_, "ECONNREFUSED") => "no-network (empty net ns: its 127.0.0.1 is its own)",
        ("gaierror", _) => "no-network (no resolver reachable)",
        (_, "EAGAIN") => "cgroup-pids (pids.max)",
        ("MemoryError", _) => "rlimits (RLIMIT_AS)",
        (_, "EFBIG") => "rlimits (RLIMIT_FSIZE)",
        (_, "ENOSPC") => "size-capped tmpfs",
        _ => "unknown",
    }
}

/// Prints one `ESCAPE-SUMMARY` row (collected from `--no-capture` output).
pub(super) fn summary_row(attack: &str, status: &str, layer: &str, started: Instant) {
    eprintln!(
        "ESCAPE-SUMMARY | {attack:<34} | {status:<13} | {layer} | {:.2} s",
        started.elapsed().as_secs_f64()
    );
}

/// The verdict of one attack: collected while the attack runs, and only worth anything once
/// [`Verdict::finish`] (through [`Scene::finish`]) has judged it.
#[must_use = "a verdict judges nothing until it is finished (Scene::finish)"]
pub(super) struct Verdict {
    pub(super) attack: &'static str,
    pub(super) mode: Mode,
    /// What leaked or escaped (empty: contained).
    pub(super) leaks: Vec<String>,
    /// The layers that stopped it, from the script's observations.
    pub(super) layers: BTreeSet<String>,
    /// What the script (and the test) observed, for the report.
    pub(super) observed: Vec<String>,
    /// Problems that are not leaks (protocol, health, bounds).
    pub(super) problems: Vec<String>,
}

impl Verdict {
    pub(super) fn new(attack: &'static str, mode: Mode) -> Verdict {
        Verdict {
            attack,
            mode,
            leaks: Vec::new(),
            layers: BTreeSet::new(),
            observed: Vec::new(),
            problems: Vec::new(),
        }
    }

    pub(super) fn layer(&mut self, layer: impl Into<String>) {
        self.layers.insert(layer.into());
    }

    pub(super) fn leak(&mut self, what: impl Into<String>) {
        self.leaks.push(what.into());
    }

    pub(super) fn problem(&mut self, what: impl Into<String>) {
        self.problems.push(what.into());
    }

    pub(super) fn saw(&mut self, what: impl Into<String>) {
        self.observed.push(what.into());
    }

    pub(super) fn layer_text(&self) -> String {
        if self.layers.is_empty() {
            "(none identified)".to_owned()
        } else {
            self.layers.iter().cloned().collect::<Vec<_>>().join(" + ")
        }
    }

    /// Prints the summary row and fails with a precise message if anything is wrong.
    pub(super) fn finish(self, started: Instant) {
        let contained = self.leaks.is_empty();
        eprintln!("  observed ({}, {}):", self.attack, self.mode.label());
        for o in &self.observed {
            eprintln!("    {}", short(o, 400));
        }
        let status = match (contained, self.problems.len()) {
            (false, _) => "NOT CONTAINED".to_owned(),
            (true, 0) => "contained".to_owned(),
            (true, n) => format!("contained, {n} problem(s)"),
        };
        let attack = format!("{} ({})", self.attack, self.mode.label());
        summary_row(&attack, &status, &self.layer_text(), started);
        if contained && self.problems.is_empty() {
            return;
        }
        let mut msg = format!("attack `{attack}`: ");
        if contained {
            msg.push_str(&format!("contained by {}, but:", self.layer_text()));
        } else {
            msg.push_str(&format!(
                "NOT CONTAINED (layers that did act: {}). Leaked/escaped:",
                self.layer_text()
            ));
            for l in &self.leaks {
                msg.push_str(&format!("\n  - LEAK: {l}"));
            }
        }
        for p in &self.problems {
            msg.push_str(&format!("\n  - {p}"));
        }
        msg.push_str("\nwhat the script saw:");
        for o in &self.observed {
            msg.push_str(&format!("\n    {}", short(o, 600)));
        }
        panic!("{msg}");
    }
}
