//! What every sqlx backend shares: `sqlx` errors as [`StoreError`]s, and column values out of
//! rows with the checks their decoding needs. Generic over the row type, so SQLite's and
//! PostgreSQL's table files read columns the same way.

use sqlx::{ColumnIndex, Decode, Row, Type};

use crate::error::{DatabaseError, StoreError};
use crate::rules::{corrupt, invalid};

/// Turns `sqlx` errors into [`StoreError`]s.
///
/// A uniqueness violation becomes [`StoreError::Conflict`], because only a concurrent writer can
/// cause one (existence is checked first inside the same write transaction). PostgreSQL's
/// refusal of a NUL character in text (SQLSTATE 22021, `character_not_in_repertoire`; 22P05)
/// becomes [`StoreError::Invalid`]: bad input, not a fault of the database.
pub(crate) fn db(e: sqlx::Error) -> StoreError {
    if let sqlx::Error::Database(d) = &e {
        if d.is_unique_violation() {
            return StoreError::Conflict {
                reason: d.message().to_owned(),
            };
        }
        if matches!(d.code().as_deref(), Some("22021" | "22P05")) {
            return invalid("text", d.message().to_owned());
        }
    }
    StoreError::Database(DatabaseError::sqlx(e))
}

/// A migration failure as a [`StoreError::Database`].
pub(crate) fn migrate(e: sqlx::migrate::MigrateError) -> StoreError {
    StoreError::Database(DatabaseError::migrate(e))
}

/// Column `column` of `row`; a value of the wrong type is [`StoreError::Corrupt`].
pub(crate) fn col<'r, T, R>(row: &'r R, column: &str) -> Result<T, StoreError>
where
    R: Row,
    T: Decode<'r, R::Database> + Type<R::Database>,
    for<'c> &'c str: ColumnIndex<R>,
{
    row.try_get(column)
        .map_err(|e| corrupt(format!("column {column}: {e}")))
}

/// An integer column that must fit a `u32`.
pub(crate) fn get_u32<R>(row: &R, column: &str) -> Result<u32, StoreError>
where
    R: Row,
    for<'r> i64: Decode<'r, R::Database> + Type<R::Database>,
    for<'c> &'c str: ColumnIndex<R>,
{
    let v: i64 = col(row, column)?;
    u32::try_from(v).map_err(|_| corrupt(format!("column {column}: {v} is not a u32")))
}

/// An integer column that must not be negative.
pub(crate) fn get_u64<R>(row: &R, column: &str) -> Result<u64, StoreError>
where
    R: Row,
    for<'r> i64: Decode<'r, R::Database> + Type<R::Database>,
    for<'c> &'c str: ColumnIndex<R>,
{
    let v: i64 = col(row, column)?;
    u64::try_from(v).map_err(|_| corrupt(format!("column {column}: {v} is negative")))
}

/// A JSON text column, decoded.
pub(crate) fn get_json<T, R>(row: &R, column: &str) -> Result<T, StoreError>
where
    R: Row,
    T: serde::de::DeserializeOwned,
    for<'r> String: Decode<'r, R::Database> + Type<R::Database>,
    for<'c> &'c str: ColumnIndex<R>,
{
    let text: String = col(row, column)?;
    serde_json::from_str(&text).map_err(|e| corrupt(format!("column {column}: {e}")))
}

/// A nullable JSON text column, decoded.
pub(crate) fn opt_json<T, R>(row: &R, column: &str) -> Result<Option<T>, StoreError>
where
    R: Row,
    T: serde::de::DeserializeOwned,
    for<'r> Option<String>: Decode<'r, R::Database> + Type<R::Database>,
    for<'c> &'c str: ColumnIndex<R>,
{
    let text: Option<String> = col(row, column)?;
    text.map(|t| serde_json::from_str(&t))
        .transpose()
        .map_err(|e| corrupt(format!("column {column}: {e}")))
}
