//! Whole-store reads and writes on PostgreSQL: backups.

use std::path::Path;

use super::PgStore;
use crate::error::StoreError;
use crate::rules::invalid;

/// [`ToolStore::backup`](crate::ToolStore::backup).
pub(super) async fn backup(_store: &PgStore, _dest: &Path) -> Result<(), StoreError> {
    Err(invalid(
        "backup",
        "not available on PostgreSQL yet: use pg_dump",
    ))
}
