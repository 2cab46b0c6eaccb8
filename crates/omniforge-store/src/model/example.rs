//! The last result of each example call of a tool version (issue 17). Unlike the version's
//! examples, which are part of its immutable definition, results are replaced at every run.

use std::fmt;

/// The longest [`ExampleResult::actual`] and [`ExampleResult::failure`] kept, in bytes; longer
/// ones are cut at a character boundary when recorded.
pub const MAX_EXAMPLE_TEXT_BYTES: usize = 2048;

/// Why examples ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ExampleTrigger {
    /// Before creating the tool.
    Create,
    /// Before adding a version.
    Update,
    /// On demand (`omniforge tool check`, `omniforge_check_tool`, the console).
    Check,
    /// Before a rollback to the version.
    Rollback,
    /// Before a pack import.
    Import,
}

impl ExampleTrigger {
    /// Every trigger, in a fixed order.
    pub const ALL: [ExampleTrigger; 5] = [
        ExampleTrigger::Create,
        ExampleTrigger::Update,
        ExampleTrigger::Check,
        ExampleTrigger::Rollback,
        ExampleTrigger::Import,
    ];

    /// The stored spelling: `create`, `update`, `check`, `rollback`, `import`.
    pub fn as_str(self) -> &'static str {
        match self {
            ExampleTrigger::Create => "create",
            ExampleTrigger::Update => "update",
            ExampleTrigger::Check => "check",
            ExampleTrigger::Rollback => "rollback",
            ExampleTrigger::Import => "import",
        }
    }

    /// The trigger a stored spelling names.
    pub fn parse(s: &str) -> Option<ExampleTrigger> {
        ExampleTrigger::ALL.into_iter().find(|t| t.as_str() == s)
    }
}

impl fmt::Display for ExampleTrigger {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How one example call of a version went, the last time it ran.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExampleResult {
    /// Which example: its index in the version's `examples` (from 0).
    pub index: u32,
    /// Whether the result met the example's `expect`.
    pub passed: bool,
    /// The result text as a client got it (runs of examples get no secrets), cut to
    /// [`MAX_EXAMPLE_TEXT_BYTES`].
    pub actual: String,
    /// What did not match, for a failed example; cut to [`MAX_EXAMPLE_TEXT_BYTES`].
    pub failure: Option<String>,
    /// Why it ran.
    pub trigger: ExampleTrigger,
    /// Who made it run.
    pub ran_by: String,
    /// When it ran, unix milliseconds (UTC).
    pub ran_at_ms: i64,
}
