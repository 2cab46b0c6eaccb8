//! Example results: the `example_result` table, the last result of each example of a version,
//! replaced whole at every run. Not changes of the feed, not audit records.

use super::exec::{Conn, Row, q};
use super::rows::{corrupt, get_u32, version_not_found};
use super::{Engine, Lock};
use crate::error::StoreError;
use crate::model::{ExampleResult, ExampleTrigger, JsonObject};
use crate::validate::check_example_results;

/// How many examples version `number` of `name` has; `None` if there is no such version.
async fn example_count(
    conn: &mut dyn Conn,
    name: &str,
    number: u32,
) -> Result<Option<usize>, StoreError> {
    let examples: Option<String> =
        q("SELECT examples FROM tool_version WHERE tool = $1 AND number = $2")
            .bind(name)
            .bind(number)
            .scalar_opt(conn)
            .await?;
    examples
        .map(|text| {
            serde_json::from_str::<Vec<JsonObject>>(&text)
                .map(|list| list.len())
                .map_err(|e| corrupt(format!("examples of {name:?} v{number}: {e}")))
        })
        .transpose()
}

/// Inserts one `example_result` row.
pub(super) async fn insert_result(
    conn: &mut dyn Conn,
    name: &str,
    number: u32,
    r: &ExampleResult,
) -> Result<(), StoreError> {
    q(
        "INSERT INTO example_result (tool, version, idx, passed, actual, failure, run_trigger, \
       ran_by, ran_at_ms) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
    )
    .bind(name)
    .bind(number)
    .bind(r.index)
    .bind(r.passed)
    .bind(&r.actual)
    .bind(r.failure.as_deref())
    .bind(r.trigger.as_str())
    .bind(&r.ran_by)
    .bind(r.ran_at_ms)
    .execute(conn)
    .await?;
    Ok(())
}

/// [`ToolStore::record_example_results`](crate::ToolStore::record_example_results).
pub(crate) async fn record(
    core: &Engine,
    name: &str,
    number: u32,
    results: Vec<ExampleResult>,
) -> Result<(), StoreError> {
    let mut w = core.write_with(Lock::Side).await?;
    let count = example_count(w.conn(), name, number)
        .await?
        .ok_or_else(|| version_not_found(name, number))?;
    let results = check_example_results(results, count)?;
    q("DELETE FROM example_result WHERE tool = $1 AND version = $2")
        .bind(name)
        .bind(number)
        .execute(w.conn())
        .await?;
    for r in &results {
        insert_result(w.conn(), name, number, r).await?;
    }
    w.commit().await
}

/// An `example_result` row.
pub(super) fn result_from_row(row: &mut Row) -> Result<ExampleResult, StoreError> {
    let trigger: String = row.get("run_trigger")?;
    Ok(ExampleResult {
        index: get_u32(row, "idx")?,
        passed: row.get("passed")?,
        actual: row.get("actual")?,
        failure: row.get("failure")?,
        trigger: ExampleTrigger::parse(&trigger)
            .ok_or_else(|| corrupt(format!("unknown example trigger {trigger:?}")))?,
        ran_by: row.get("ran_by")?,
        ran_at_ms: row.get("ran_at_ms")?,
    })
}

/// [`ToolStore::example_results`](crate::ToolStore::example_results): one snapshot.
pub(crate) async fn read(
    core: &Engine,
    name: &str,
    number: u32,
) -> Result<Vec<ExampleResult>, StoreError> {
    let mut tx = core.db.snapshot().await?;
    if example_count(&mut *tx, name, number).await?.is_none() {
        return Err(version_not_found(name, number));
    }
    let rows = q(
        "SELECT idx, passed, actual, failure, run_trigger, ran_by, ran_at_ms \
         FROM example_result WHERE tool = $1 AND version = $2 ORDER BY idx",
    )
    .bind(name)
    .bind(number)
    .fetch_all(&mut *tx)
    .await?;
    rows.into_iter()
        .map(|mut row| result_from_row(&mut row))
        .collect()
}
