//! Column values in and out of rows, with the checks their decoding needs: shared by every
//! table family.

use super::exec::Row;
pub(super) use crate::clock::now_ms;
use crate::error::{NameKind, StoreError};
pub(super) use crate::validate::{corrupt, invalid};

/// `value` as compact JSON text for a JSON column.
pub(super) fn to_json(field: &str, value: &impl serde::Serialize) -> Result<String, StoreError> {
    // Cannot fail for JSON values and strings; mapped anyway rather than unwrapped.
    serde_json::to_string(value).map_err(|e| invalid(field, e.to_string()))
}

/// `value`, if any, as JSON text for a nullable JSON column (the write side of [`opt_json`]).
pub(super) fn to_opt_json(
    field: &str,
    value: Option<&impl serde::Serialize>,
) -> Result<Option<String>, StoreError> {
    value.map(|v| to_json(field, v)).transpose()
}

/// An integer column that must fit a `u32`.
pub(super) fn get_u32(row: &mut Row, column: &str) -> Result<u32, StoreError> {
    let v: i64 = row.get(column)?;
    u32::try_from(v).map_err(|_| corrupt(format!("column {column}: {v} is not a u32")))
}

/// A nullable integer column that must fit a `u32`.
pub(super) fn opt_u32(row: &mut Row, column: &str) -> Result<Option<u32>, StoreError> {
    let v: Option<i64> = row.get(column)?;
    v.map(|v| u32::try_from(v).map_err(|_| corrupt(format!("column {column}: {v} is not a u32"))))
        .transpose()
}

/// An integer column that must not be negative.
pub(super) fn get_u64(row: &mut Row, column: &str) -> Result<u64, StoreError> {
    let v: i64 = row.get(column)?;
    u64::try_from(v).map_err(|_| corrupt(format!("column {column}: {v} is negative")))
}

/// A JSON text column, decoded.
pub(super) fn get_json<T: serde::de::DeserializeOwned>(
    row: &mut Row,
    column: &str,
) -> Result<T, StoreError> {
    let text: String = row.get(column)?;
    serde_json::from_str(&text).map_err(|e| corrupt(format!("column {column}: {e}")))
}

/// A nullable JSON text column, decoded.
pub(super) fn opt_json<T: serde::de::DeserializeOwned>(
    row: &mut Row,
    column: &str,
) -> Result<Option<T>, StoreError> {
    let text: Option<String> = row.get(column)?;
    text.map(|t| serde_json::from_str(&t))
        .transpose()
        .map_err(|e| corrupt(format!("column {column}: {e}")))
}

/// A `u64` as a database integer, where the caller checked it fits (counts the store itself
/// bounds); saturates rather than wrap.
pub(super) fn sat_i64(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

/// A [`StoreError::NotFound`] of a tool.
pub(super) fn tool_not_found(name: &str) -> StoreError {
    StoreError::NotFound {
        kind: NameKind::Tool,
        name: name.to_owned(),
        version: None,
    }
}

/// A [`StoreError::NotFound`] of one version of a tool.
pub(super) fn version_not_found(name: &str, number: u32) -> StoreError {
    StoreError::NotFound {
        kind: NameKind::Tool,
        name: name.to_owned(),
        version: Some(number),
    }
}

/// A [`StoreError::NotFound`] of another kind.
pub(super) fn not_found(kind: NameKind, key: &str) -> StoreError {
    StoreError::NotFound {
        kind,
        name: key.to_owned(),
        version: None,
    }
}
