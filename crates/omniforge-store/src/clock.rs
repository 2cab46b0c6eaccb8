//! The store's clock: times are unix milliseconds (UTC) in `i64`, by the writer's clock.

use std::time::{SystemTime, UNIX_EPOCH};

/// The current time, unix milliseconds. A clock before 1970 reads as 0.
pub(crate) fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// Milliseconds in an hour.
pub(crate) const HOUR_MS: i64 = 3_600_000;

/// The start of the UTC hour holding `at_ms`.
pub(crate) fn hour_start_ms(at_ms: i64) -> i64 {
    at_ms - at_ms.rem_euclid(HOUR_MS)
}
