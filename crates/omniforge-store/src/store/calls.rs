//! [`CallLog`]: one record per finished call of any tool, and hourly statistics that outlive
//! the log's row limit.

use async_trait::async_trait;

use super::tools::ToolStore;
use crate::error::StoreError;
use crate::model::{CallFilter, CallRecord, CallSource, HourStats, LoggedCall, ToolActivity};

/// The call log of built-in, manifest and stored tools, and its hourly statistics (issues 16
/// and 17).
///
/// The log keeps the last [`StoreConfig::call_log_max_rows`](crate::StoreConfig::call_log_max_rows)
/// calls, pruned in each write's transaction. Each write also adds its calls to their tools'
/// hours in the statistics (count, errors, duration histogram, latest call), which are kept for
/// [`StoreConfig::call_stats_max_age`](crate::StoreConfig::call_stats_max_age) however many
/// calls there are, so that charts of the last 24 hours stay whole. Hours are UTC hours of the
/// calls' start times.
///
/// Neither the log nor the statistics are changes of the feed or audit records.
#[async_trait]
pub trait CallLog: ToolStore {
    /// Appends finished calls to the log and their hours in **one** transaction: the group
    /// commit of the server's call-log writer, which gathers the calls of a few milliseconds
    /// and writes them at once (one commit, one sync, instead of one per call). Each call is
    /// checked, and its texts longer than their limit are cut ([`error`](CallRecord::error) to
    /// [`MAX_CALL_ERROR_BYTES`](crate::MAX_CALL_ERROR_BYTES), the arguments and result texts to
    /// [`MAX_CALL_TEXT_BYTES`](crate::MAX_CALL_TEXT_BYTES), their `total_bytes` keeping the
    /// whole length); a call that fails its
    /// checks (or names a version that does not exist) is left out and its error returned, in
    /// the calls' order, while the others are written. The log is pruned, and old hours
    /// deleted, once per batch. An empty batch writes nothing.
    ///
    /// # Errors
    /// [`StoreError::Database`] (nothing of the batch is written); the refusals of single
    /// calls are the `Ok` value, not an error.
    async fn record_calls(&self, calls: Vec<CallRecord>) -> Result<Vec<StoreError>, StoreError>;

    /// The last `limit` calls of stored tool `name`, newest first (by the order they were
    /// recorded): the call history that `omniforge tool calls` and `omniforge_get_tool` show.
    /// At most [`StoreConfig::call_log_max_rows`](crate::StoreConfig::call_log_max_rows) calls
    /// are kept over all tools, so fewer may come back. `limit` 0 returns none.
    ///
    /// # Errors
    /// [`StoreError::NotFound`] if the stored tool does not exist; [`StoreError::Corrupt`],
    /// [`StoreError::Database`].
    async fn recent_calls(&self, name: &str, limit: u32) -> Result<Vec<CallRecord>, StoreError>;

    /// Logged calls of any source that match `filter`, newest first, with their ids (for
    /// paging with [`CallFilter::before_id`] and for [`call`](CallLog::call)).
    ///
    /// # Errors
    /// [`StoreError::Corrupt`], [`StoreError::Database`].
    async fn calls(&self, filter: &CallFilter) -> Result<Vec<LoggedCall>, StoreError>;

    /// One logged call by id; `None` if it was never recorded or was pruned.
    ///
    /// # Errors
    /// [`StoreError::Corrupt`], [`StoreError::Database`].
    async fn call(&self, id: u64) -> Result<Option<LoggedCall>, StoreError>;

    /// Per hour from the hour holding `since_ms` on, oldest first: the calls of one tool
    /// (`Some((source, name))`), or of all tools together (`None`). Hours without calls are
    /// left out. For "the last 24 hours", pass now minus 24 hours: the first hour is then the
    /// partly elapsed one a day ago.
    ///
    /// # Errors
    /// [`StoreError::Corrupt`], [`StoreError::Database`].
    async fn call_hours(
        &self,
        tool: Option<(CallSource, &str)>,
        since_ms: i64,
    ) -> Result<Vec<HourStats>, StoreError>;

    /// Per tool that was called from the hour holding `since_ms` on: calls, errors and the
    /// latest call's start, by source then name. The catalog's "calls and errors over the last
    /// day".
    ///
    /// # Errors
    /// [`StoreError::Corrupt`], [`StoreError::Database`].
    async fn call_activity(&self, since_ms: i64) -> Result<Vec<ToolActivity>, StoreError>;
}
