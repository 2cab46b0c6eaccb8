//! Kept outputs: the `kept_output` table. A row past its expiry is treated as absent by every
//! read, and deleted by the next purge. Not changes of the feed, not audit records.

use async_trait::async_trait;

use super::exec::{Conn, Row, q};
use super::rows::now_ms;
use super::{Engine, Lock};
use crate::error::{NameKind, StoreError};
use crate::model::{KeptOutput, NewKeptOutput, OutputReader};
use crate::store::OutputStore;
use crate::validate::check_output;

/// The columns [`output_from_row`] reads.
macro_rules! output_columns {
    () => {
        "run_id, owner, tool, stdout, stderr, created_at_ms, expires_at_ms"
    };
}
pub(super) use output_columns;

/// A `kept_output` row.
pub(super) fn output_from_row(row: &mut Row) -> Result<KeptOutput, StoreError> {
    Ok(KeptOutput {
        run_id: row.get("run_id")?,
        owner: row.get("owner")?,
        tool: row.get("tool")?,
        stdout: row.get("stdout")?,
        stderr: row.get("stderr")?,
        created_at_ms: row.get("created_at_ms")?,
        expires_at_ms: row.get("expires_at_ms")?,
    })
}

/// Inserts an output row unless its run id is taken; returns whether it did.
pub(super) async fn insert_output(conn: &mut dyn Conn, o: &KeptOutput) -> Result<bool, StoreError> {
    let done = q(concat!(
        "INSERT INTO kept_output (",
        output_columns!(),
        ") VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (run_id) DO NOTHING"
    ))
    .bind(&o.run_id)
    .bind(&o.owner)
    .bind(&o.tool)
    .bind(&o.stdout)
    .bind(&o.stderr)
    .bind(o.created_at_ms)
    .bind(o.expires_at_ms)
    .execute(conn)
    .await?;
    Ok(done > 0)
}

/// [`OutputStore::kept_output`](crate::OutputStore::kept_output): the owner check is part of
/// the query, so another principal's row is never read.
pub(crate) async fn read(
    core: &Engine,
    run_id: &str,
    reader: OutputReader<'_>,
) -> Result<Option<KeptOutput>, StoreError> {
    let row = q(concat!(
        "SELECT ",
        output_columns!(),
        " FROM kept_output WHERE run_id = $1 AND expires_at_ms > $2 AND ($3 OR owner = $4)"
    ))
    .bind(run_id)
    .bind(now_ms())
    .bind(reader.read_all)
    .bind(reader.principal)
    .fetch_optional(&mut *core.db.read().await?)
    .await?;
    row.map(|mut row| output_from_row(&mut row)).transpose()
}

#[async_trait]
impl OutputStore for Engine {
    async fn keep_output(&self, output: NewKeptOutput) -> Result<KeptOutput, StoreError> {
        let core = self;
        let now = now_ms();
        let expires_at_ms = check_output(&output, now)?;
        let kept = KeptOutput {
            run_id: output.run_id,
            owner: output.owner,
            tool: output.tool,
            stdout: output.stdout,
            stderr: output.stderr,
            created_at_ms: now,
            expires_at_ms,
        };
        let mut w = core.write_with(Lock::None).await?;
        // An expired row of the same id is gone already for readers; make room for the new one.
        q("DELETE FROM kept_output WHERE run_id = $1 AND expires_at_ms <= $2")
            .bind(&kept.run_id)
            .bind(now)
            .execute(w.conn())
            .await?;
        if !insert_output(w.conn(), &kept).await? {
            return Err(StoreError::Duplicate {
                kind: NameKind::Output,
                name: kept.run_id,
            });
        }
        w.commit().await?;
        Ok(kept)
    }

    async fn kept_output(
        &self,
        run_id: &str,
        reader: OutputReader<'_>,
    ) -> Result<Option<KeptOutput>, StoreError> {
        read(self, run_id, reader).await
    }

    async fn purge_expired_outputs(&self) -> Result<u64, StoreError> {
        let core = self;
        let mut w = core.write_with(Lock::None).await?;
        let done = q("DELETE FROM kept_output WHERE expires_at_ms <= $1")
            .bind(now_ms())
            .execute(w.conn())
            .await?;
        w.commit().await?;
        Ok(done)
    }
}
