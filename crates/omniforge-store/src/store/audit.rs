//! [`AuditLog`]: reading the audit records every authoring and admin write appends, and their
//! retention prune.

use async_trait::async_trait;

use super::tools::ToolStore;
use crate::error::StoreError;
use crate::model::{Actor, AuditFilter, AuditRecord};

/// The audit log (issue 11): one [`AuditRecord`] per authoring or admin action, appended by the
/// action's own write (see [`store`](crate::store)), never updated, and deleted only by
/// [`prune_audit`](AuditLog::prune_audit).
#[async_trait]
pub trait AuditLog: ToolStore {
    /// Records that match `filter`, newest first.
    ///
    /// # Errors
    /// [`StoreError::Invalid`] if a number does not fit the database; [`StoreError::Corrupt`],
    /// [`StoreError::Database`].
    async fn audit(&self, filter: &AuditFilter) -> Result<Vec<AuditRecord>, StoreError>;

    /// Deletes the records older than `before_ms` (retention), and, if it deleted any, records
    /// that it did so (`prune` of `audit_log`, with `before_ms` and `removed` in the detail), in
    /// one transaction. The cut only moves forward: a `before_ms` below an earlier cut deletes
    /// nothing more. Prunes run one at a time across processes and replicas (PostgreSQL: a
    /// transaction-level advisory lock; SQLite: the file's write lock), so replicas pruning
    /// together take turns and the later one removes nothing and records nothing. Returns how
    /// many records were deleted.
    ///
    /// # Errors
    /// [`StoreError::Invalid`] (actor); [`StoreError::Database`].
    async fn prune_audit(&self, actor: &Actor, before_ms: i64) -> Result<u64, StoreError>;
}
