//! [`OutputStore`]: kept outputs of cut script results, readable by their owner only, until
//! they expire.

use async_trait::async_trait;

use super::tools::ToolStore;
use crate::error::StoreError;
use crate::model::{KeptOutput, NewKeptOutput, OutputReader};

/// Kept outputs (issues 11 and 14): in the database, so that any replica can serve
/// `omniforge://runs/{id}/output` to the principal that made the call. Not actions (no audit)
/// and not changes of the feed.
#[async_trait]
pub trait OutputStore: ToolStore {
    /// Keeps an output until now plus its TTL; returns it as stored.
    ///
    /// # Errors
    /// [`StoreError::InvalidName`] for a bad run id; [`StoreError::Invalid`] for an owner that
    /// breaks the principal rule, a stream over
    /// [`MAX_KEPT_STREAM_BYTES`](crate::MAX_KEPT_STREAM_BYTES) or a TTL past the year 10000;
    /// [`StoreError::Duplicate`] (kind [`Output`](crate::NameKind::Output)) if the run id is
    /// taken; [`StoreError::Database`].
    async fn keep_output(&self, output: NewKeptOutput) -> Result<KeptOutput, StoreError>;

    /// The output of run `run_id` if `reader` may read it: its owner, or any reader with
    /// [`read_all`](OutputReader::read_all). Anyone else, like an unknown or expired id, gets
    /// `None`: the answer never tells that the output exists.
    ///
    /// # Errors
    /// [`StoreError::Corrupt`], [`StoreError::Database`].
    async fn kept_output(
        &self,
        run_id: &str,
        reader: OutputReader<'_>,
    ) -> Result<Option<KeptOutput>, StoreError>;

    /// Deletes every expired output; returns how many. The server calls it periodically;
    /// expired outputs are unreadable before that anyway.
    ///
    /// # Errors
    /// [`StoreError::Database`].
    async fn purge_expired_outputs(&self) -> Result<u64, StoreError>;
}
