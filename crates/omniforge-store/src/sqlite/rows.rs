//! Column values in and out of SQLite rows, and the errors their checks raise: shared by every
//! table family.

use std::time::{SystemTime, UNIX_EPOCH};

use sqlx::Row;
use sqlx::sqlite::SqliteRow;

use crate::error::{DatabaseError, StoreError};

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

/// The current time, unix milliseconds. A clock before 1970 reads as 0.
pub(super) fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// A [`StoreError::Invalid`] for `field`.
pub(super) fn invalid(field: impl Into<String>, reason: impl Into<String>) -> StoreError {
    StoreError::Invalid {
        field: field.into(),
        reason: reason.into(),
    }
}

/// A [`StoreError::Corrupt`].
pub(super) fn corrupt(reason: impl Into<String>) -> StoreError {
    StoreError::Corrupt {
        reason: reason.into(),
    }
}

/// `value` as an SQLite integer, or [`StoreError::Invalid`] naming `field`.
pub(super) fn checked_i64(field: &str, value: u64) -> Result<i64, StoreError> {
    i64::try_from(value).map_err(|_| invalid(field, format!("{value} exceeds {}", i64::MAX)))
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
