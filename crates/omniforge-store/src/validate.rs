//! The checks every backend applies before it writes, backend-neutral: version fields, call
//! records, example results, kept outputs, and cutting long texts. Each returns a typed
//! [`StoreError`] naming the field, and runs before any transaction begins.

use crate::digest::is_sha256_hex;
use crate::error::StoreError;
use crate::model::{
    CallRecord, CallSource, CapturedText, ExampleResult, MAX_CALL_ERROR_BYTES, MAX_CALL_TEXT_BYTES,
    MAX_CALL_TOOL_BYTES, MAX_EXAMPLE_TEXT_BYTES, MAX_KEPT_STREAM_BYTES, MAX_REPLICA_ID_LEN,
    NewKeptOutput, NewStatus, NewTask, NewVersion, validate_principal, validate_run_id,
    validate_secret_name, validate_task_id,
};

/// A [`StoreError::Invalid`] for `field`.
pub(crate) fn invalid(field: impl Into<String>, reason: impl Into<String>) -> StoreError {
    StoreError::Invalid {
        field: field.into(),
        reason: reason.into(),
    }
}

/// A [`StoreError::Corrupt`]: the database holds something the store never writes.
pub(crate) fn corrupt(reason: impl Into<String>) -> StoreError {
    StoreError::Corrupt {
        reason: reason.into(),
    }
}

/// `value` as a signed 64-bit database integer, or [`StoreError::Invalid`] naming `field`.
pub(crate) fn checked_i64(field: &str, value: u64) -> Result<i64, StoreError> {
    i64::try_from(value).map_err(|_| invalid(field, format!("{value} exceeds {}", i64::MAX)))
}

/// `text` cut to at most `max` bytes, at a character boundary.
pub(crate) fn cut(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// Checks the fields of a version the store itself relies on (the server validates the rest):
/// dependencies are non-empty single lines, secret names follow their rule, the environment id
/// is set, limits fit a database integer.
///
/// # Errors
/// [`StoreError::InvalidName`] for a secret name; [`StoreError::Invalid`] naming the field.
pub(crate) fn check_version(spec: &NewVersion) -> Result<(), StoreError> {
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
    checked_i64("limits.timeout_ms", spec.limits.timeout_ms)?;
    checked_i64("limits.memory_bytes", spec.limits.memory_bytes)?;
    Ok(())
}

/// The reason a draft is written with, cut to
/// [`MAX_STATUS_REASON_BYTES`](crate::MAX_STATUS_REASON_BYTES).
pub(crate) fn status_reason(status: &NewStatus) -> Option<&str> {
    match status {
        NewStatus::Draft { reason } => Some(cut(reason, crate::MAX_STATUS_REASON_BYTES)),
        NewStatus::Live | NewStatus::Pending => None,
    }
}

/// Checks a call record and cuts its texts to their limits.
///
/// # Errors
/// [`StoreError::Invalid`] naming the field (see
/// [`CallLog::record_call`](crate::CallLog::record_call)).
pub(crate) fn check_call(mut call: CallRecord) -> Result<CallRecord, StoreError> {
    checked_i64("duration_ms", call.duration_ms)?;
    checked_i64("bytes_out", call.bytes_out)?;
    if call.tool.is_empty() || call.tool.len() > MAX_CALL_TOOL_BYTES {
        return Err(invalid(
            "tool",
            format!("must be 1 to {MAX_CALL_TOOL_BYTES} bytes"),
        ));
    }
    match (call.source, call.version) {
        (CallSource::Stored, None) => {
            return Err(invalid("version", "a stored tool's call names its version"));
        }
        (CallSource::Stored, Some(0)) => {
            return Err(invalid("version", "versions start at 1"));
        }
        (CallSource::BuiltIn | CallSource::Manifest, Some(_)) => {
            return Err(invalid(
                "version",
                "only stored tools' calls have a version",
            ));
        }
        _ => {}
    }
    if let Some(digest) = &call.arguments {
        if !is_sha256_hex(&digest.sha256) {
            return Err(invalid(
                "arguments.sha256",
                "must be 64 lowercase hex digits",
            ));
        }
        checked_i64("arguments.bytes", digest.bytes)?;
    }
    if let Some(error) = &mut call.error {
        let len = cut(error, MAX_CALL_ERROR_BYTES).len();
        error.truncate(len);
    }
    for (field, text) in [
        ("arguments_text", &mut call.arguments_text),
        ("result_text", &mut call.result_text),
    ] {
        if let Some(t) = text {
            cut_captured(t);
            checked_i64(field, t.total_bytes)?;
        }
    }
    Ok(call)
}

fn cut_captured(t: &mut CapturedText) {
    let whole = t.text.len() as u64;
    let len = cut(&t.text, MAX_CALL_TEXT_BYTES).len();
    t.text.truncate(len);
    t.total_bytes = t.total_bytes.max(whole);
}

/// Checks the results of one run of a version's `examples` examples and cuts their texts.
///
/// # Errors
/// [`StoreError::Invalid`] for an index out of range or repeated, or a bad `ran_by`.
pub(crate) fn check_example_results(
    mut results: Vec<ExampleResult>,
    examples: usize,
) -> Result<Vec<ExampleResult>, StoreError> {
    let mut seen = std::collections::HashSet::new();
    for (i, r) in results.iter_mut().enumerate() {
        if usize::try_from(r.index).map_or(true, |idx| idx >= examples) {
            return Err(invalid(
                format!("results[{i}].index"),
                format!("the version has {examples} examples"),
            ));
        }
        if !seen.insert(r.index) {
            return Err(invalid(format!("results[{i}].index"), "repeated"));
        }
        validate_principal(&format!("results[{i}].ran_by"), &r.ran_by)?;
        let len = cut(&r.actual, MAX_EXAMPLE_TEXT_BYTES).len();
        r.actual.truncate(len);
        if let Some(failure) = &mut r.failure {
            let len = cut(failure, MAX_EXAMPLE_TEXT_BYTES).len();
            failure.truncate(len);
        }
    }
    results.sort_by_key(|r| r.index);
    Ok(results)
}

/// Checks an output to keep; returns its expiry for a creation at `now_ms`.
///
/// # Errors
/// As [`OutputStore::keep_output`](crate::OutputStore::keep_output).
pub(crate) fn check_output(output: &NewKeptOutput, now_ms: i64) -> Result<i64, StoreError> {
    validate_run_id(&output.run_id)?;
    validate_principal("owner", &output.owner)?;
    for (field, text) in [("stdout", &output.stdout), ("stderr", &output.stderr)] {
        if text.len() > MAX_KEPT_STREAM_BYTES {
            return Err(invalid(
                field,
                format!(
                    "{} bytes; at most {MAX_KEPT_STREAM_BYTES} are kept",
                    text.len()
                ),
            ));
        }
    }
    let ttl_ms = i64::try_from(output.ttl.as_millis()).unwrap_or(i64::MAX);
    // The year 10000 in unix milliseconds: far enough, and far from overflow.
    const LATEST_MS: i64 = 253_402_300_800_000;
    match now_ms.checked_add(ttl_ms) {
        Some(expires) if expires <= LATEST_MS => Ok(expires),
        _ => Err(invalid("ttl", "expires after the year 10000")),
    }
}

/// Checks a new task; returns its TTL and expiry in milliseconds (both `None` without a TTL).
///
/// # Errors
/// [`StoreError::InvalidName`] for a bad task id; [`StoreError::Invalid`] for an owner that
/// breaks the principal rule, a tool name empty or over
/// [`MAX_CALL_TOOL_BYTES`], a version given for a manifest tool or missing (or 0) for a stored
/// one, a source other than stored or manifest, a replica id empty or over
/// [`MAX_REPLICA_ID_LEN`], a zero TTL or one past the year 10000.
pub(crate) fn check_task(
    task: &NewTask,
    now_ms: i64,
) -> Result<(Option<i64>, Option<i64>), StoreError> {
    validate_task_id(&task.task_id)?;
    validate_principal("owner", &task.owner)?;
    if task.tool.is_empty() || task.tool.len() > MAX_CALL_TOOL_BYTES {
        return Err(invalid(
            "tool",
            format!("must be 1 to {MAX_CALL_TOOL_BYTES} bytes"),
        ));
    }
    match (task.source, task.version) {
        (CallSource::Stored, Some(v)) if v >= 1 => {}
        (CallSource::Manifest, None) => {}
        (CallSource::Stored | CallSource::Manifest, _) => {
            return Err(invalid(
                "version",
                "a stored tool's task names its version (1 or more), a manifest tool's none",
            ));
        }
        (other, _) => {
            return Err(invalid(
                "source",
                format!("{} tools do not run as tasks", other.as_str()),
            ));
        }
    }
    if task.replica.is_empty() || task.replica.len() > MAX_REPLICA_ID_LEN {
        return Err(invalid(
            "replica",
            format!("must be 1 to {MAX_REPLICA_ID_LEN} bytes"),
        ));
    }
    let Some(ttl) = task.ttl else {
        return Ok((None, None));
    };
    let ttl_ms = i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX);
    if ttl_ms == 0 {
        return Err(invalid("ttl", "must be at least 1 ms"));
    }
    // The year 10000 in unix milliseconds, as for kept outputs.
    const LATEST_MS: i64 = 253_402_300_800_000;
    match now_ms.checked_add(ttl_ms) {
        Some(expires) if expires <= LATEST_MS => Ok((Some(ttl_ms), Some(expires))),
        _ => Err(invalid("ttl", "expires after the year 10000")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuts_at_character_boundaries() {
        assert_eq!(cut("short", 10), "short");
        let long = "é".repeat(MAX_CALL_ERROR_BYTES);
        let cut = cut(&long, MAX_CALL_ERROR_BYTES);
        assert!(cut.len() <= MAX_CALL_ERROR_BYTES && cut.len() >= MAX_CALL_ERROR_BYTES - 1);
        assert!(cut.chars().all(|c| c == 'é'));
    }
}
