//! Times for people: the one renderer of a stored time (unix milliseconds) as text, used by
//! the console and the command line alike. humantime does the calendar; the wire's own
//! timestamps (RFC 3339, tasks) are `mcp::tasks`'.

use std::time::{Duration, SystemTime};

/// A time stored as unix milliseconds, as `2025-12-01 15:35:02 UTC`, to the second. A time
/// before 1970 or past year 9999 (which no clock of ours writes) shows the raw number,
/// `-5 ms`.
pub fn utc(unix_ms: i64) -> String {
    // humantime's formatter fails (and `to_string` would panic) past year 9999.
    let Some(ms) = u64::try_from(unix_ms)
        .ok()
        .filter(|ms| ms / 1000 <= LAST_SECOND_OF_9999)
    else {
        return format!("{unix_ms} ms");
    };
    let at = SystemTime::UNIX_EPOCH + Duration::from_millis(ms);
    // `2025-12-01T15:35:02Z`
    let rfc3339 = humantime::format_rfc3339_seconds(at).to_string();
    match rfc3339.strip_suffix('Z') {
        Some(text) => format!("{} UTC", text.replacen('T', " ", 1)),
        None => format!("{unix_ms} ms"),
    }
}

/// `9999-12-31T23:59:59Z`: the last second humantime's RFC 3339 formatter can write.
const LAST_SECOND_OF_9999: u64 = 253_402_300_799;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_read_as_utc_dates() {
        assert_eq!(utc(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(utc(1_764_600_000_000), "2025-12-01 14:40:00 UTC");
        assert_eq!(utc(1_764_603_302_123), "2025-12-01 15:35:02 UTC");
        assert_eq!(utc(951_782_400_000), "2000-02-29 00:00:00 UTC");
        assert_eq!(utc(253_402_300_799_999), "9999-12-31 23:59:59 UTC");
    }

    #[test]
    fn times_outside_the_calendar_show_the_number() {
        assert_eq!(utc(-5), "-5 ms");
        assert_eq!(utc(253_402_300_800_000), "253402300800000 ms");
        assert_eq!(utc(i64::MAX), format!("{} ms", i64::MAX));
    }
}
