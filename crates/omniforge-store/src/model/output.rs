//! Kept outputs: the whole captured output of a script result that was cut for the client,
//! readable later by its owner only (issue 11 finding 8), with an expiry (issue 14).

use std::time::Duration;

use crate::error::{NameKind, StoreError};

/// The most bytes kept per stream (stdout, stderr): 1 MiB.
pub const MAX_KEPT_STREAM_BYTES: usize = 1 << 20;

/// The longest run id, in bytes.
pub const MAX_RUN_ID_LEN: usize = 128;

/// A captured output to keep.
#[derive(Clone, PartialEq, Eq)]
pub struct NewKeptOutput {
    /// The run's id, unique (the `{id}` of `omniforge://runs/{id}/output`): 1 to
    /// [`MAX_RUN_ID_LEN`] characters from `[a-zA-Z0-9_.:-]`.
    pub run_id: String,
    /// The principal that made the call: the only one (besides an admin reader) that may read
    /// it back.
    pub owner: String,
    /// The tool that produced it, for listings.
    pub tool: String,
    /// The script's whole stdout, at most [`MAX_KEPT_STREAM_BYTES`].
    pub stdout: String,
    /// The script's whole stderr, at most [`MAX_KEPT_STREAM_BYTES`].
    pub stderr: String,
    /// How long to keep it from now.
    pub ttl: Duration,
}

/// A kept output as read back.
#[derive(Clone, PartialEq, Eq)]
pub struct KeptOutput {
    /// The run's id.
    pub run_id: String,
    /// The principal that made the call.
    pub owner: String,
    /// The tool that produced it.
    pub tool: String,
    /// The script's whole stdout.
    pub stdout: String,
    /// The script's whole stderr.
    pub stderr: String,
    /// When it was kept, unix milliseconds (UTC).
    pub created_at_ms: i64,
    /// When it expires, unix milliseconds (UTC); it is unreadable from then on and removed by
    /// the next [`purge_expired_outputs`](crate::OutputStore::purge_expired_outputs).
    pub expires_at_ms: i64,
}

/// Outputs can hold anything a script printed: `Debug` shows their sizes, not their text.
impl std::fmt::Debug for KeptOutput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeptOutput")
            .field("run_id", &self.run_id)
            .field("owner", &self.owner)
            .field("tool", &self.tool)
            .field("stdout_bytes", &self.stdout.len())
            .field("stderr_bytes", &self.stderr.len())
            .field("created_at_ms", &self.created_at_ms)
            .field("expires_at_ms", &self.expires_at_ms)
            .finish()
    }
}

impl std::fmt::Debug for NewKeptOutput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NewKeptOutput")
            .field("run_id", &self.run_id)
            .field("owner", &self.owner)
            .field("tool", &self.tool)
            .field("stdout_bytes", &self.stdout.len())
            .field("stderr_bytes", &self.stderr.len())
            .field("ttl", &self.ttl)
            .finish()
    }
}

/// Who reads a kept output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutputReader<'a> {
    /// The reader's principal.
    pub principal: &'a str,
    /// Whether the reader may read every principal's outputs (the server sets it for `admin`).
    /// Without it, another principal's output reads as not found.
    pub read_all: bool,
}

impl<'a> OutputReader<'a> {
    /// A reader who sees its own outputs only.
    pub fn owner(principal: &'a str) -> OutputReader<'a> {
        OutputReader {
            principal,
            read_all: false,
        }
    }
}

/// Checks a run id: 1 to [`MAX_RUN_ID_LEN`] characters from `[a-zA-Z0-9_.:-]`.
///
/// # Errors
/// [`StoreError::InvalidName`] with [`NameKind::Output`].
pub fn validate_run_id(run_id: &str) -> Result<(), StoreError> {
    let ok = (1..=MAX_RUN_ID_LEN).contains(&run_id.len())
        && run_id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b':' | b'-'));
    if ok {
        Ok(())
    } else {
        Err(StoreError::InvalidName {
            kind: NameKind::Output,
            name: run_id.to_owned(),
        })
    }
}
