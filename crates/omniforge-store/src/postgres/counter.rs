//! The change counter (`meta.data_version`), read on its own: for
//! [`ToolStore::current_seq`](crate::ToolStore::current_seq) and the `LISTEN` task's re-reads.

use sqlx::postgres::PgPool;

use super::rows::{corrupt, db};
use crate::error::StoreError;

/// The counter as stored (`i64`), for [`ToolStore::data_version`](crate::ToolStore::data_version).
pub(super) async fn data_version(pool: &PgPool) -> Result<i64, StoreError> {
    sqlx::query_scalar("SELECT value FROM meta WHERE key = 'data_version'")
        .fetch_one(pool)
        .await
        .map_err(db)
}

/// [`ToolStore::current_seq`](crate::ToolStore::current_seq).
pub(super) async fn current_seq(pool: &PgPool) -> Result<u64, StoreError> {
    let value = data_version(pool).await?;
    u64::try_from(value).map_err(|_| corrupt(format!("negative change counter {value}")))
}
