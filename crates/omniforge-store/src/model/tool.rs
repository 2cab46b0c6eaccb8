//! Tools and their immutable versions.

use std::fmt;

use super::JsonObject;

/// A tool as a whole: its switches and which version is current. Its code lives in
/// [`ToolVersion`]s.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tool {
    /// The unique name (see [`validate_tool_name`](crate::validate_tool_name)).
    pub name: String,
    /// Disabled tools keep their versions but are left out of [`list_enabled`](crate::ToolStore::list_enabled).
    pub enabled: bool,
    /// The number of the version that runs: always a [`Live`](VersionStatus::Live) one. `None`
    /// while the tool has no live version yet (its first version is pending approval or a
    /// draft): such a tool is served to nobody but its author and admins.
    pub current_version: Option<u32>,
    /// When the tool was created, unix milliseconds (UTC).
    pub created_at_ms: i64,
    /// When the tool last changed (new version, rollback, enable/disable), unix milliseconds (UTC).
    pub updated_at_ms: i64,
}

/// A tool together with its current version, as the catalog needs it. Only tools that have a
/// current version come as a `StoredTool`.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredTool {
    /// The tool.
    pub tool: Tool,
    /// Its current version (`Some(current.number) == tool.current_version`).
    pub current: ToolVersion,
}

/// One immutable version of a tool, as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolVersion {
    /// The tool's name.
    pub tool: String,
    /// 1 for the version that created the tool, then one more than the highest existing number
    /// (numbers are never reused while the tool exists, even after a rollback).
    pub number: u32,
    /// When the version was written, unix milliseconds (UTC).
    pub created_at_ms: i64,
    /// Everything else, exactly as given to [`create_tool`](crate::ToolStore::create_tool) or
    /// [`add_version`](crate::ToolStore::add_version). Immutable.
    pub spec: NewVersion,
    /// Where the version stands: live, pending approval, draft or rejected. The only part of a
    /// version that changes, and only along [`VersionStatus::can_become`].
    pub state: VersionState,
}

/// Where a version stands in the approval workflow (issue 17).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum VersionStatus {
    /// Went live: written without the gate or by an admin, or approved. Only live versions
    /// can be current, and only they may receive secrets.
    Live,
    /// Awaiting an admin's approval: visible to its author and admins only.
    Pending,
    /// Kept although its examples failed (`--keep-failed-drafts`); never becomes current.
    Draft,
    /// Rejected by an admin (or superseded by a newer pending version of the same author).
    Rejected,
}

impl VersionStatus {
    /// Every status, in a fixed order.
    pub const ALL: [VersionStatus; 4] = [
        VersionStatus::Live,
        VersionStatus::Pending,
        VersionStatus::Draft,
        VersionStatus::Rejected,
    ];

    /// The stored spelling: `live`, `pending`, `draft`, `rejected`.
    pub fn as_str(self) -> &'static str {
        match self {
            VersionStatus::Live => "live",
            VersionStatus::Pending => "pending",
            VersionStatus::Draft => "draft",
            VersionStatus::Rejected => "rejected",
        }
    }

    /// The status a stored spelling names.
    pub fn parse(s: &str) -> Option<VersionStatus> {
        VersionStatus::ALL.into_iter().find(|v| v.as_str() == s)
    }

    /// Whether a version may move from `self` to `next`: `pending → live` (approve),
    /// `pending → rejected` and `draft → rejected` (reject). Nothing leaves `live` or
    /// `rejected`. The database enforces the same rule with a trigger.
    pub fn can_become(self, next: VersionStatus) -> bool {
        matches!(
            (self, next),
            (VersionStatus::Pending, VersionStatus::Live)
                | (VersionStatus::Pending, VersionStatus::Rejected)
                | (VersionStatus::Draft, VersionStatus::Rejected)
        )
    }
}

impl fmt::Display for VersionStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A version's status with the decision that set it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VersionState {
    /// The status.
    pub status: VersionStatus,
    /// Why: a draft's failure (given when it was written), a rejection's reason, or
    /// `superseded by version N`. `None` for live and pending versions.
    pub reason: Option<String>,
    /// The principal that approved or rejected it; `None` until then.
    pub decided_by: Option<String>,
    /// When it was approved or rejected, unix milliseconds (UTC); `None` until then.
    pub decided_at_ms: Option<i64>,
}

impl VersionState {
    /// A live version nobody had to approve.
    pub fn live() -> VersionState {
        VersionState {
            status: VersionStatus::Live,
            reason: None,
            decided_by: None,
            decided_at_ms: None,
        }
    }
}

/// The status a new version is written with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NewStatus {
    /// Live at once: it becomes the tool's current version.
    Live,
    /// Pending an admin's approval: the current version stays as it was (a new tool has none).
    /// An older pending version of the same tool by the same author is rejected in the same
    /// write, with the reason `superseded by version N`.
    Pending,
    /// A draft whose examples failed, kept with the failure as its reason; never current.
    Draft {
        /// What failed (cut to [`MAX_STATUS_REASON_BYTES`]).
        reason: String,
    },
}

/// The longest status reason kept (rejection reason, draft failure), in bytes; longer ones are
/// cut at a character boundary.
pub const MAX_STATUS_REASON_BYTES: usize = 4096;

/// The content of a version: everything but its tool name, number and creation time.
#[derive(Debug, Clone, PartialEq)]
pub struct NewVersion {
    /// Human-readable display name (MCP `title`); `None` leaves it to the client.
    pub title: Option<String>,
    /// What the tool does, for the model (MCP `description`).
    pub description: String,
    /// JSON Schema of the arguments (MCP `inputSchema`).
    pub input_schema: JsonObject,
    /// JSON Schema of structured results (MCP `outputSchema`), if the tool declares one.
    pub output_schema: Option<JsonObject>,
    /// MCP tool annotations (hints).
    pub annotations: Annotations,
    /// The language the code runs in.
    pub runtime: Runtime,
    /// The script source.
    pub code: String,
    /// PEP 508 requirement strings as the author wrote them (for example `httpx>=0.27`). The store
    /// checks only that each is a non-empty single line; resolving them is the runner's job.
    pub dependencies: Vec<String>,
    /// Resource limits for one call.
    pub limits: Limits,
    /// The resolved, hash-pinned requirements text the environment was built from.
    pub lock: String,
    /// Identifier of the built environment; versions with identical locks share one.
    pub env_id: String,
    /// Names of the secrets the code needs (see [`validate_secret_name`](crate::validate_secret_name)); may be empty.
    pub secrets: Vec<String>,
    /// Who wrote the version: the bearer token's name, or `stdio`.
    pub author: String,
    /// Example calls the version carries (issue 17), each an object such as
    /// `{"arguments": {...}, "expect": {...}}`; their shape is the server's to check. Part of the
    /// immutable definition. May be empty.
    pub examples: Vec<JsonObject>,
    /// Whether and when its calls run as tasks (issue 13). Part of the immutable definition.
    pub execution: Execution,
}

/// How a tool's calls may run as tasks (MCP Tasks extension, SEP-2663).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Execution {
    /// Whether a call may or must be a task.
    pub task_support: TaskSupport,
    /// When a call that runs as a task becomes one.
    pub task_start: TaskStart,
}

/// Whether a tool's calls may run as tasks (`taskSupport`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TaskSupport {
    /// Never: every call answers inline (the default).
    #[default]
    Forbidden,
    /// A call is a task when the client declared the extension, inline otherwise.
    Optional,
    /// Only as a task: a client that did not declare the extension gets -32021.
    Required,
}

impl TaskSupport {
    /// Every value, in a fixed order.
    pub const ALL: [TaskSupport; 3] = [
        TaskSupport::Forbidden,
        TaskSupport::Optional,
        TaskSupport::Required,
    ];

    /// The stored and authored spelling: `forbidden`, `optional`, `required`.
    pub fn as_str(self) -> &'static str {
        match self {
            TaskSupport::Forbidden => "forbidden",
            TaskSupport::Optional => "optional",
            TaskSupport::Required => "required",
        }
    }

    /// The value a spelling names, if any.
    pub fn parse(s: &str) -> Option<TaskSupport> {
        TaskSupport::ALL.into_iter().find(|t| t.as_str() == s)
    }
}

/// When a call that runs as a task becomes one (`taskStart`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TaskStart {
    /// Before the script starts: the client gets the task at once (the default).
    #[default]
    Call,
    /// When the script calls `omniforge.start_task()`: what it asks before runs as an
    /// ordinary request (input-required rounds), the rest as the task.
    Script,
}

impl TaskStart {
    /// Every value, in a fixed order.
    pub const ALL: [TaskStart; 2] = [TaskStart::Call, TaskStart::Script];

    /// The stored and authored spelling: `call`, `script`.
    pub fn as_str(self) -> &'static str {
        match self {
            TaskStart::Call => "call",
            TaskStart::Script => "script",
        }
    }

    /// The value a spelling names, if any.
    pub fn parse(s: &str) -> Option<TaskStart> {
        TaskStart::ALL.into_iter().find(|t| t.as_str() == s)
    }
}

/// MCP tool annotations. Each hint is optional; `None` means "not said".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Annotations {
    /// The tool does not modify its environment.
    pub read_only_hint: Option<bool>,
    /// The tool may perform destructive updates.
    pub destructive_hint: Option<bool>,
    /// Repeating a call with the same arguments has no additional effect.
    pub idempotent_hint: Option<bool>,
    /// The tool interacts with an open world of external entities.
    pub open_world_hint: Option<bool>,
}

/// Resource limits for one call of a version. The store keeps them; the runner enforces them.
///
/// Both numbers must fit in an `i64` (SQLite integers are signed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Wall-clock limit for one call, milliseconds.
    pub timeout_ms: u64,
    /// Memory limit for one call, bytes.
    pub memory_bytes: u64,
    /// Whether the script may use the network.
    pub network: bool,
}

/// The language a version's code runs in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Runtime {
    /// CPython, with dependencies installed by the runner.
    Python,
}

impl Runtime {
    /// The stored spelling: `python`.
    pub fn as_str(self) -> &'static str {
        match self {
            Runtime::Python => "python",
        }
    }

    pub(crate) fn parse(s: &str) -> Option<Runtime> {
        match s {
            "python" => Some(Runtime::Python),
            _ => None,
        }
    }
}

impl fmt::Display for Runtime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
