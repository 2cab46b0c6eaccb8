//! Example results on SQLite: the `example_result` table (migration 0005), the last result of
//! each example of a version, replaced whole at every run. Not changes of the feed, not audit
//! records.

use sqlx::sqlite::SqliteRow;

use super::SqliteStore;
use super::rows::{col, corrupt, db, get_u32};
use super::tools::version_not_found;
use crate::error::StoreError;
use crate::model::{ExampleResult, ExampleTrigger};
use crate::validate::check_example_results;

/// How many examples version `number` of `name` has; `None` if there is no such version.
async fn example_count(
    conn: &mut sqlx::sqlite::SqliteConnection,
    name: &str,
    number: u32,
) -> Result<Option<usize>, StoreError> {
    let count: Option<i64> = sqlx::query_scalar(
        "SELECT json_array_length(examples) FROM tool_version WHERE tool = ? AND number = ?",
    )
    .bind(name)
    .bind(i64::from(number))
    .fetch_optional(conn)
    .await
    .map_err(db)?;
    count
        .map(|n| usize::try_from(n).map_err(|_| corrupt(format!("{n} examples"))))
        .transpose()
}

/// [`ToolStore::record_example_results`](crate::ToolStore::record_example_results).
pub(super) async fn record(
    store: &SqliteStore,
    name: &str,
    number: u32,
    results: Vec<ExampleResult>,
) -> Result<(), StoreError> {
    let mut w = store.write().await?;
    let count = example_count(w.conn(), name, number)
        .await?
        .ok_or_else(|| version_not_found(name, number))?;
    let results = check_example_results(results, count)?;
    sqlx::query("DELETE FROM example_result WHERE tool = ? AND version = ?")
        .bind(name)
        .bind(i64::from(number))
        .execute(w.conn())
        .await
        .map_err(db)?;
    for r in &results {
        sqlx::query(
            "INSERT INTO example_result (tool, version, idx, passed, actual, failure, run_trigger, \
             ran_by, ran_at_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        )
        .bind(name)
        .bind(i64::from(number))
        .bind(i64::from(r.index))
        .bind(r.passed)
        .bind(&r.actual)
        .bind(r.failure.as_deref())
        .bind(r.trigger.as_str())
        .bind(&r.ran_by)
        .bind(r.ran_at_ms)
        .execute(w.conn())
        .await
        .map_err(db)?;
    }
    w.commit().await
}

fn result_from_row(row: &SqliteRow) -> Result<ExampleResult, StoreError> {
    let trigger: String = col(row, "run_trigger")?;
    Ok(ExampleResult {
        index: get_u32(row, "idx")?,
        passed: col(row, "passed")?,
        actual: col(row, "actual")?,
        failure: col(row, "failure")?,
        trigger: ExampleTrigger::parse(&trigger)
            .ok_or_else(|| corrupt(format!("unknown example trigger {trigger:?}")))?,
        ran_by: col(row, "ran_by")?,
        ran_at_ms: col(row, "ran_at_ms")?,
    })
}

/// [`ToolStore::example_results`](crate::ToolStore::example_results): one snapshot.
pub(super) async fn read(
    store: &SqliteStore,
    name: &str,
    number: u32,
) -> Result<Vec<ExampleResult>, StoreError> {
    let mut tx = store.read().await?;
    if example_count(&mut tx, name, number).await?.is_none() {
        return Err(version_not_found(name, number));
    }
    let rows = sqlx::query(
        "SELECT idx, passed, actual, failure, run_trigger, ran_by, ran_at_ms FROM example_result \
         WHERE tool = ? AND version = ? ORDER BY idx",
    )
    .bind(name)
    .bind(i64::from(number))
    .fetch_all(&mut *tx)
    .await
    .map_err(db)?;
    rows.iter().map(result_from_row).collect()
}
