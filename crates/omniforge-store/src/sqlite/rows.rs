//! Column values in and out of SQLite rows, and the errors their checks raise: shared by every
//! table family.

use sqlx::Row;
use sqlx::sqlite::SqliteRow;

pub(super) use crate::clock::now_ms;
use crate::error::{DatabaseError, StoreError};
pub(super) use crate::validate::invalid;

/// Turns `sqlx` errors into [`StoreError`]s; a uniqueness violation becomes
/// [`StoreError::Conflict`] because only a concurrent writer can cause one (existence is
/// checked first inside the same write transaction).
pub(super) fn db(e: sqlx::Error) -> StoreError {
    if let sqlx::Error::Database(d) = &e
        && d.is_unique_violation()
    {
        return StoreError::Conflict {
            reason: d.message().to_owned(),
        };
    }
    StoreError::Database(DatabaseError::sqlx(e))
}

/// A migration failure as a [`StoreError::Database`].
pub(super) fn migrate(e: sqlx::migrate::MigrateError) -> StoreError {
    StoreError::Database(DatabaseError::migrate(e))
}

/// A [`StoreError::Corrupt`].
pub(super) fn corrupt(reason: impl Into<String>) -> StoreError {
    StoreError::Corrupt {
        reason: reason.into(),
    }
}

/// `value` as compact JSON text for a JSON column.
pub(super) fn to_json(field: &str, value: &impl serde::Serialize) -> Result<String, StoreError> {
    // Cannot fail for JSON values and strings; mapped anyway rather than unwrapped.
    serde_json::to_string(value).map_err(|e| invalid(field, e.to_string()))
}

/// Column `column` of `row`; a value of the wrong type is [`StoreError::Corrupt`].
pub(super) fn col<'r, T>(row: &'r SqliteRow, column: &str) -> Result<T, StoreError>
where
    T: sqlx::Decode<'r, sqlx::Sqlite> + sqlx::Type<sqlx::Sqlite>,
{
    row.try_get(column)
        .map_err(|e| corrupt(format!("column {column}: {e}")))
}

/// An integer column that must fit a `u32`.
pub(super) fn get_u32(row: &SqliteRow, column: &str) -> Result<u32, StoreError> {
    let v: i64 = col(row, column)?;
    u32::try_from(v).map_err(|_| corrupt(format!("column {column}: {v} is not a u32")))
}

/// An integer column that must not be negative.
pub(super) fn get_u64(row: &SqliteRow, column: &str) -> Result<u64, StoreError> {
    let v: i64 = col(row, column)?;
    u64::try_from(v).map_err(|_| corrupt(format!("column {column}: {v} is negative")))
}

/// A JSON text column, decoded.
pub(super) fn get_json<T: serde::de::DeserializeOwned>(
    row: &SqliteRow,
    column: &str,
) -> Result<T, StoreError> {
    let text: String = col(row, column)?;
    serde_json::from_str(&text).map_err(|e| corrupt(format!("column {column}: {e}")))
}

/// A `u64` as an SQLite integer parameter, where the caller checked it fits (counts the store
/// itself bounds); saturates rather than wrap.
pub(super) fn sat_i64(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

/// A nullable JSON text column, decoded.
pub(super) fn opt_json<T: serde::de::DeserializeOwned>(
    row: &SqliteRow,
    column: &str,
) -> Result<Option<T>, StoreError> {
    let text: Option<String> = col(row, column)?;
    text.map(|t| serde_json::from_str(&t))
        .transpose()
        .map_err(|e| corrupt(format!("column {column}: {e}")))
}
