//! What every backend checks and encodes the same way, apart from SQL: the checks a write makes
//! before its transaction, the errors for missing things, the call outcome's stored spelling,
//! the call error cut, and the time.
//!
//! A backend turns model values into columns of its own types; the rules of what may be written,
//! and the errors a caller sees, are here once so that every backend answers alike.

use std::time::{SystemTime, UNIX_EPOCH};

use crate::error::{NameKind, StoreError};
use crate::model::{
    CallOutcome, ChangeKind, MAX_CALL_ERROR_BYTES, NewVersion, WriteMode, validate_secret_name,
    validate_tool_name,
};

/// The current time, unix milliseconds. A clock before 1970 reads as 0.
pub(crate) fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// A [`StoreError::Invalid`] for `field`.
pub(crate) fn invalid(field: impl Into<String>, reason: impl Into<String>) -> StoreError {
    StoreError::Invalid {
        field: field.into(),
        reason: reason.into(),
    }
}

/// A [`StoreError::Corrupt`].
pub(crate) fn corrupt(reason: impl Into<String>) -> StoreError {
    StoreError::Corrupt {
        reason: reason.into(),
    }
}

/// `value` as a signed 64-bit database integer, or [`StoreError::Invalid`] naming `field`.
pub(crate) fn checked_i64(field: &str, value: u64) -> Result<i64, StoreError> {
    i64::try_from(value).map_err(|_| invalid(field, format!("{value} exceeds {}", i64::MAX)))
}

/// `value` as compact JSON text for a JSON column.
pub(crate) fn to_json(field: &str, value: &impl serde::Serialize) -> Result<String, StoreError> {
    // Cannot fail for JSON values and strings; mapped anyway rather than unwrapped.
    serde_json::to_string(value).map_err(|e| invalid(field, e.to_string()))
}

/// The checks of a [`NewVersion`] before any transaction begins: each dependency one non-empty
/// line, secret names valid, an environment id.
pub(crate) fn check_spec(spec: &NewVersion) -> Result<(), StoreError> {
    for (i, dep) in spec.dependencies.iter().enumerate() {
        if dep.trim().is_empty() || dep.contains(['\n', '\r']) {
            return Err(invalid(
                format!("dependencies[{i}]"),
                "must be one non-empty line",
            ));
        }
    }
    for name in &spec.secrets {
        validate_secret_name(name)?;
    }
    if spec.env_id.is_empty() {
        return Err(invalid("env_id", "must not be empty"));
    }
    Ok(())
}

/// A [`NewVersion`] checked and turned into column values, before any transaction begins.
pub(crate) struct EncodedSpec<'a> {
    pub(crate) spec: &'a NewVersion,
    pub(crate) input_schema: String,
    pub(crate) output_schema: Option<String>,
    pub(crate) dependencies: String,
    pub(crate) secrets: String,
    pub(crate) timeout_ms: i64,
    pub(crate) memory_bytes: i64,
}

/// Checks `spec` ([`check_spec`]) and encodes its JSON and integer columns.
pub(crate) fn encode_spec(spec: &NewVersion) -> Result<EncodedSpec<'_>, StoreError> {
    check_spec(spec)?;
    Ok(EncodedSpec {
        spec,
        input_schema: to_json("input_schema", &spec.input_schema)?,
        output_schema: spec
            .output_schema
            .as_ref()
            .map(|s| to_json("output_schema", s))
            .transpose()?,
        dependencies: to_json("dependencies", &spec.dependencies)?,
        secrets: to_json("secrets", &spec.secrets)?,
        timeout_ms: checked_i64("limits.timeout_ms", spec.limits.timeout_ms)?,
        memory_bytes: checked_i64("limits.memory_bytes", spec.limits.memory_bytes)?,
    })
}

/// Tool `name` does not exist.
pub(crate) fn tool_not_found(name: &str) -> StoreError {
    StoreError::NotFound {
        kind: NameKind::Tool,
        name: name.to_owned(),
        version: None,
    }
}

/// Version `number` of tool `name` does not exist (or the tool does not).
pub(crate) fn version_not_found(name: &str, number: u32) -> StoreError {
    StoreError::NotFound {
        kind: NameKind::Tool,
        name: name.to_owned(),
        version: Some(number),
    }
}

/// The resource, template or prompt `key` of `kind` does not exist.
pub(crate) fn not_found(kind: NameKind, key: &str) -> StoreError {
    StoreError::NotFound {
        kind,
        name: key.to_owned(),
        version: None,
    }
}

/// The key rule of a resource (URI), resource template (URI template) or prompt (name).
pub(crate) fn check_key(kind: NameKind, key: &str) -> Result<(), StoreError> {
    let ok = match kind {
        NameKind::Prompt => validate_tool_name(key).is_ok(),
        _ => (1..=4096).contains(&key.len()),
    };
    if ok {
        Ok(())
    } else {
        Err(StoreError::InvalidName {
            kind,
            name: key.to_owned(),
        })
    }
}

/// Whether a write in `mode` may go on, given whether its key `exists`.
pub(crate) fn check_mode(
    kind: NameKind,
    key: &str,
    mode: WriteMode,
    exists: bool,
) -> Result<(), StoreError> {
    match (mode, exists) {
        (WriteMode::Create, true) => Err(StoreError::Duplicate {
            kind,
            name: key.to_owned(),
        }),
        (WriteMode::Update, false) => Err(not_found(kind, key)),
        _ => Ok(()),
    }
}

/// The feed's kind for a key's kind.
pub(crate) fn change_kind(kind: NameKind) -> ChangeKind {
    match kind {
        NameKind::ResourceTemplate => ChangeKind::ResourceTemplate,
        NameKind::Prompt => ChangeKind::Prompt,
        NameKind::Tool => ChangeKind::Tool,
        NameKind::Secret => ChangeKind::Secret,
        NameKind::Resource => ChangeKind::Resource,
    }
}

/// `error` cut to at most [`MAX_CALL_ERROR_BYTES`], at a character boundary.
pub(crate) fn cut_error(error: &str) -> &str {
    if error.len() <= MAX_CALL_ERROR_BYTES {
        return error;
    }
    let mut end = MAX_CALL_ERROR_BYTES;
    while !error.is_char_boundary(end) {
        end -= 1;
    }
    &error[..end]
}

/// A call outcome as its stored columns: `outcome` text and the exit code (set exactly for
/// `exit`).
pub(crate) fn encode_outcome(outcome: CallOutcome) -> (&'static str, Option<i64>) {
    match outcome {
        CallOutcome::Ok => ("ok", None),
        CallOutcome::Error => ("error", None),
        CallOutcome::Exit(code) => ("exit", Some(i64::from(code))),
        CallOutcome::Timeout => ("timeout", None),
        CallOutcome::Cancelled => ("cancelled", None),
    }
}

/// The outcome [`encode_outcome`] stored.
pub(crate) fn decode_outcome(
    outcome: &str,
    exit_code: Option<i64>,
) -> Result<CallOutcome, StoreError> {
    Ok(match (outcome, exit_code) {
        ("ok", None) => CallOutcome::Ok,
        ("error", None) => CallOutcome::Error,
        ("timeout", None) => CallOutcome::Timeout,
        ("cancelled", None) => CallOutcome::Cancelled,
        ("exit", Some(code)) => CallOutcome::Exit(
            i32::try_from(code).map_err(|_| corrupt(format!("exit code {code} is not an i32")))?,
        ),
        (o, c) => {
            return Err(corrupt(format!(
                "unknown call outcome {o:?} (exit code {c:?})"
            )));
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_errors_are_cut_at_a_character_boundary() {
        assert_eq!(cut_error("short"), "short");
        let long = "é".repeat(MAX_CALL_ERROR_BYTES);
        let cut = cut_error(&long);
        assert!(cut.len() <= MAX_CALL_ERROR_BYTES && cut.len() >= MAX_CALL_ERROR_BYTES - 1);
        assert!(cut.chars().all(|c| c == 'é'));
    }

    #[test]
    fn outcomes_round_trip_their_columns() {
        for outcome in [
            CallOutcome::Ok,
            CallOutcome::Error,
            CallOutcome::Exit(-9),
            CallOutcome::Timeout,
            CallOutcome::Cancelled,
        ] {
            let (text, code) = encode_outcome(outcome);
            assert_eq!(decode_outcome(text, code).unwrap(), outcome);
        }
        assert!(decode_outcome("exit", None).is_err());
        assert!(decode_outcome("ok", Some(1)).is_err());
    }
}
