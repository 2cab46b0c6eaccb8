//! What a runner says at start-up about the layers it lacks.

use super::level::{Layer, SandboxLevel};

/// The layers bubblewrap adds.
const BWRAP_LAYERS: &[&str] = &[
    "namespaces",
    "unprivileged-uid",
    "read-only-root",
    "no-network",
];

/// Facts about the machine the warnings need besides the layers.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Facts {
    /// bubblewrap is not installed at all (rather than installed but not working).
    pub(crate) bwrap_not_installed: bool,
    /// The runner's configuration left bubblewrap out (tests and measurements).
    pub(crate) bwrap_disabled: bool,
    /// The server's effective uid.
    pub(crate) server_uid: u32,
    /// Runs switch to a uid of their own (a root server without bubblewrap).
    pub(crate) uid_switch: bool,
}

/// The start-up warnings of a runner at `level` with `layers`: none when every layer is
/// active. Each names exactly the inactive layers, what adds the ones bubblewrap provides,
/// and what still holds.
pub(crate) fn warnings(level: SandboxLevel, layers: &[Layer], facts: Facts) -> Vec<String> {
    let active = |name: &str| layers.iter().any(|l| l.name == name && l.active);
    let missing: Vec<&str> = layers
        .iter()
        .filter(|l| !l.active)
        .map(|l| l.name)
        .collect();
    if missing.is_empty() {
        return Vec::new();
    }
    if level == SandboxLevel::Off {
        return vec![format!(
            "script sandbox: --sandbox off: scripts run as the server does ({}) with only a process group and rlimits",
            if facts.server_uid == 0 {
                "root, with every capability".to_owned()
            } else {
                format!("uid {}", facts.server_uid)
            }
        )];
    }
    let mut text = format!("script sandbox: missing layers: {}.", missing.join(", "));
    let from_bwrap: Vec<&str> = missing
        .iter()
        .copied()
        .filter(|m| BWRAP_LAYERS.contains(m))
        .collect();
    if !from_bwrap.is_empty() {
        if facts.bwrap_disabled {
            text.push_str(" (The runner's configuration leaves bubblewrap out.)");
        } else if facts.bwrap_not_installed {
            text.push_str(&format!(
                " `apt-get install bubblewrap` adds {}.",
                from_bwrap.join(", ")
            ));
        } else {
            text.push_str(&format!(
                " bubblewrap is installed but does not work here (see `omniforge doctor`), so {} stay missing.",
                from_bwrap.join(", ")
            ));
        }
    }
    let in_force: Vec<&str> = layers.iter().filter(|l| l.active).map(|l| l.name).collect();
    text.push_str(&format!(" In force: {}.", in_force.join(", ")));
    if !active("namespaces") {
        if facts.uid_switch {
            text.push_str(
                " Each run has a uid of its own, no capabilities, and a private /proc, /tmp and /dev/shm.",
            );
        } else if facts.server_uid != 0 {
            text.push_str(&format!(
                " The server is not root, so runs cannot get a uid of their own: they run as uid {}, the server's, without capabilities; Landlock keeps them out of the server's and each other's /proc environ and mem, but /proc/PID/cmdline of the server and of concurrent runs stays readable (keep credentials off the command line).",
                facts.server_uid
            ));
        }
        let mut holds = Vec::new();
        if active("landlock") {
            holds.push("Landlock keeps scripts to the system directories, their environment and their own files, and off TCP unless a tool allows network");
        }
        if active("seccomp") {
            holds.push("seccomp refuses every Unix socket of the host and, without network, every other socket");
        }
        if !holds.is_empty() {
            text.push(' ');
            text.push_str(&holds.join("; "));
            text.push('.');
        }
    }
    vec![text]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layers(inactive: &[&'static str]) -> Vec<Layer> {
        [
            "process-group",
            "rlimits",
            "namespaces",
            "unprivileged-uid",
            "read-only-root",
            "no-network",
            "cgroup-pids",
            "cgroup-kill",
            "landlock",
            "seccomp",
        ]
        .into_iter()
        .map(|name| Layer {
            name,
            active: !inactive.contains(&name),
            detail: String::new(),
        })
        .collect()
    }

    #[test]
    fn the_warning_names_exactly_what_is_missing_and_how_to_add_it() {
        let facts = Facts {
            bwrap_not_installed: true,
            bwrap_disabled: false,
            server_uid: 0,
            uid_switch: true,
        };
        let all = layers(&[]);
        assert!(warnings(SandboxLevel::Standard, &all, facts).is_empty());

        let without = layers(&["namespaces", "read-only-root", "no-network"]);
        let w = warnings(SandboxLevel::Standard, &without, facts);
        assert_eq!(w.len(), 1);
        let w = &w[0];
        assert!(
            w.starts_with("script sandbox: missing layers: namespaces, read-only-root, no-network. `apt-get install bubblewrap` adds namespaces, read-only-root, no-network."),
            "{w}"
        );
        assert!(w.contains("In force: process-group, rlimits, unprivileged-uid, cgroup-pids, cgroup-kill, landlock, seccomp."), "{w}");
        assert!(w.contains("a uid of its own"), "{w}");
        // The old claim is gone: Landlock and seccomp stop exactly that.
        assert!(!w.contains("can read the filesystem"), "{w}");
        assert!(!w.contains("use the network"), "{w}");

        let not_root = Facts {
            server_uid: 1000,
            uid_switch: false,
            ..facts
        };
        let w = &warnings(SandboxLevel::Standard, &without, not_root)[0];
        assert!(w.contains("cannot get a uid of their own"), "{w}");
        assert!(w.contains("cmdline"), "{w}");

        let installed = Facts {
            bwrap_not_installed: false,
            ..facts
        };
        let w = &warnings(SandboxLevel::Standard, &without, installed)[0];
        assert!(!w.contains("apt-get"), "{w}");
        assert!(w.contains("installed but does not work"), "{w}");

        let no_cgroups = layers(&["cgroup-pids"]);
        let w = &warnings(SandboxLevel::Standard, &no_cgroups, facts)[0];
        assert!(
            w.starts_with("script sandbox: missing layers: cgroup-pids."),
            "{w}"
        );
        assert!(!w.contains("apt-get"), "{w}");
    }
}
