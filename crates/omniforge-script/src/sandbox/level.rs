//! The sandbox levels, the layers each requires, and what a layer is.

/// How much isolation a [`Runner`](crate::Runner) insists on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SandboxLevel {
    /// Refuse to start without the `namespaces` layer (bubblewrap working).
    Strict,
    /// Use the best layers available and log which.
    Standard,
    /// Process group and rlimits only: for trusted code and for measuring overhead.
    Off,
}

impl SandboxLevel {
    /// The level's name as people type it: `strict`, `standard`, `off`.
    pub fn as_str(self) -> &'static str {
        match self {
            SandboxLevel::Strict => "strict",
            SandboxLevel::Standard => "standard",
            SandboxLevel::Off => "off",
        }
    }

    /// The layers (by [`Layer::name`]) a runner at this level must have: without one of
    /// them [`Runner::new`](crate::Runner::new) fails with
    /// [`RunError::SandboxUnavailable`](crate::RunError::SandboxUnavailable), and `omniforge
    /// doctor` exits non-zero.
    ///
    /// - `strict`: `process-group`, `rlimits`, `namespaces`, `unprivileged-uid`,
    ///   `read-only-root`, `no-network` (bubblewrap working);
    /// - `standard`: `process-group`, `rlimits`, `unprivileged-uid`: a script never runs as
    ///   root or with capabilities, whatever is installed (without bubblewrap a root server
    ///   switches each run to a uid of its own; a server that is not root runs scripts as
    ///   itself, without capabilities);
    /// - `off`: `process-group`, `rlimits` (for trusted code and measurements: scripts run as
    ///   the server does).
    pub fn required_layers(self) -> &'static [&'static str] {
        match self {
            SandboxLevel::Strict => &[
                "process-group",
                "rlimits",
                "namespaces",
                "unprivileged-uid",
                "read-only-root",
                "no-network",
            ],
            SandboxLevel::Standard => &["process-group", "rlimits", "unprivileged-uid"],
            SandboxLevel::Off => &["process-group", "rlimits"],
        }
    }

    /// The [`required_layers`](Self::required_layers) that are not active in `layers` (as
    /// [`doctor`](crate::doctor) or [`Runner::layers`](crate::Runner::layers) report them),
    /// in the order of the requirement.
    pub fn missing_layers(self, layers: &[Layer]) -> Vec<&'static str> {
        self.required_layers()
            .iter()
            .copied()
            .filter(|n| !layers.iter().any(|l| l.name == *n && l.active))
            .collect()
    }
}

impl std::fmt::Display for SandboxLevel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One isolation layer and whether this runner uses it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layer {
    /// Stable name: `process-group`, `rlimits`, `namespaces`, `unprivileged-uid`,
    /// `read-only-root`, `no-network`, `cgroup-pids`, `cgroup-kill`, `cgroup-memory`, `landlock`,
    /// `seccomp`.
    pub name: &'static str,
    /// Whether runs use it.
    pub active: bool,
    /// How, or why not.
    pub detail: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layer(name: &'static str, active: bool) -> Layer {
        Layer {
            name,
            active,
            detail: String::new(),
        }
    }

    #[test]
    fn each_level_names_what_it_requires() {
        let layers = [
            layer("process-group", true),
            layer("rlimits", true),
            layer("namespaces", false),
            layer("unprivileged-uid", false),
            layer("read-only-root", false),
            layer("no-network", false),
        ];
        assert_eq!(
            SandboxLevel::Strict.missing_layers(&layers),
            [
                "namespaces",
                "unprivileged-uid",
                "read-only-root",
                "no-network"
            ]
        );
        assert_eq!(
            SandboxLevel::Standard.missing_layers(&layers),
            ["unprivileged-uid"]
        );
        assert!(SandboxLevel::Off.missing_layers(&layers).is_empty());
        // A layer that is not reported at all is missing too.
        assert_eq!(
            SandboxLevel::Off.missing_layers(&layers[1..]),
            ["process-group"]
        );
        assert_eq!(
            [
                SandboxLevel::Strict,
                SandboxLevel::Standard,
                SandboxLevel::Off
            ]
            .map(|l| l.to_string()),
            ["strict", "standard", "off"]
        );
    }
}
