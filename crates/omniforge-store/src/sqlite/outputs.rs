//! Kept outputs on SQLite: the `kept_output` table (migration 0009). A row past its expiry is
//! treated as absent by every read, and deleted by the next purge.

use async_trait::async_trait;
use sqlx::sqlite::SqliteRow;

use super::SqliteStore;
use super::rows::{col, db, now_ms};
use crate::error::{NameKind, StoreError};
use crate::model::{KeptOutput, NewKeptOutput, OutputReader};
use crate::store::OutputStore;
use crate::validate::check_output;

fn output_from_row(row: &SqliteRow) -> Result<KeptOutput, StoreError> {
    Ok(KeptOutput {
        run_id: col(row, "run_id")?,
        owner: col(row, "owner")?,
        tool: col(row, "tool")?,
        stdout: col(row, "stdout")?,
        stderr: col(row, "stderr")?,
        created_at_ms: col(row, "created_at_ms")?,
        expires_at_ms: col(row, "expires_at_ms")?,
    })
}

fn output_not_found(run_id: &str) -> StoreError {
    StoreError::NotFound {
        kind: NameKind::Output,
        name: run_id.to_owned(),
        version: None,
    }
}

#[async_trait]
impl OutputStore for SqliteStore {
    async fn keep_output(&self, output: NewKeptOutput) -> Result<KeptOutput, StoreError> {
        let now = now_ms();
        let expires_at_ms = check_output(&output, now)?;
        let mut w = self.write().await?;
        // An expired row of the same id is gone already for readers; make room for the new one.
        sqlx::query("DELETE FROM kept_output WHERE run_id = ? AND expires_at_ms <= ?")
            .bind(&output.run_id)
            .bind(now)
            .execute(w.conn())
            .await
            .map_err(db)?;
        let done = sqlx::query(
            "INSERT INTO kept_output (run_id, owner, tool, stdout, stderr, created_at_ms, \
             expires_at_ms) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (run_id) DO NOTHING",
        )
        .bind(&output.run_id)
        .bind(&output.owner)
        .bind(&output.tool)
        .bind(&output.stdout)
        .bind(&output.stderr)
        .bind(now)
        .bind(expires_at_ms)
        .execute(w.conn())
        .await
        .map_err(db)?;
        if done.rows_affected() == 0 {
            return Err(StoreError::Duplicate {
                kind: NameKind::Output,
                name: output.run_id,
            });
        }
        w.commit().await?;
        Ok(KeptOutput {
            run_id: output.run_id,
            owner: output.owner,
            tool: output.tool,
            stdout: output.stdout,
            stderr: output.stderr,
            created_at_ms: now,
            expires_at_ms,
        })
    }

    async fn kept_output(
        &self,
        run_id: &str,
        reader: OutputReader<'_>,
    ) -> Result<Option<KeptOutput>, StoreError> {
        // The owner check is part of the query: another principal's row is never read.
        let row = sqlx::query(
            "SELECT run_id, owner, tool, stdout, stderr, created_at_ms, expires_at_ms \
             FROM kept_output WHERE run_id = ? AND expires_at_ms > ? AND (? OR owner = ?)",
        )
        .bind(run_id)
        .bind(now_ms())
        .bind(reader.read_all)
        .bind(reader.principal)
        .fetch_optional(&self.reader)
        .await
        .map_err(db)?;
        row.as_ref().map(output_from_row).transpose()
    }

    async fn extend_output_expiry(
        &self,
        run_id: &str,
        expires_at_ms: i64,
    ) -> Result<i64, StoreError> {
        let mut w = self.write().await?;
        let expiry: Option<i64> = sqlx::query_scalar(
            "UPDATE kept_output SET expires_at_ms = max(expires_at_ms, ?) \
             WHERE run_id = ? AND expires_at_ms > ? RETURNING expires_at_ms",
        )
        .bind(expires_at_ms)
        .bind(run_id)
        .bind(now_ms())
        .fetch_optional(w.conn())
        .await
        .map_err(db)?;
        let expiry = expiry.ok_or_else(|| output_not_found(run_id))?;
        w.commit().await?;
        Ok(expiry)
    }

    async fn purge_expired_outputs(&self) -> Result<u64, StoreError> {
        let mut w = self.write().await?;
        let done = sqlx::query("DELETE FROM kept_output WHERE expires_at_ms <= ?")
            .bind(now_ms())
            .execute(w.conn())
            .await
            .map_err(db)?;
        w.commit().await?;
        Ok(done.rows_affected())
    }
}
