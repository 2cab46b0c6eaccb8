//! [`eventually`]: the one way the tests wait for something to become true. No fixed sleeps:
//! a condition is polled with a short backoff until it holds or the deadline passes, and a
//! timeout panics with what was awaited and the last reason it did not hold.

use std::fmt::Display;
use std::time::Duration;

/// What one attempt of [`eventually`] may return: `Some`/`Ok` ends the wait with its value,
/// `None`/`Err` means "not yet" (an `Err` says why, for the timeout message).
pub(crate) trait Attempt<T> {
    /// The value, or why there is none yet.
    fn into_attempt(self) -> Result<T, String>;
}

impl<T> Attempt<T> for Option<T> {
    fn into_attempt(self) -> Result<T, String> {
        self.ok_or_else(|| "not yet".to_owned())
    }
}

impl<T, E: Display> Attempt<T> for Result<T, E> {
    fn into_attempt(self) -> Result<T, String> {
        self.map_err(|e| e.to_string())
    }
}

/// The first pause between attempts; it doubles up to [`MAX_PAUSE`].
const FIRST_PAUSE: Duration = Duration::from_millis(10);
/// The longest pause between attempts.
const MAX_PAUSE: Duration = Duration::from_millis(200);

/// Runs `f` until it gives a value (`Some`/`Ok`), pausing 10 ms, 20 ms, ... up to 200 ms
/// between attempts, and returns that value. Panics after `deadline` (counted from the
/// call) with `what` and the last error; an attempt still running at the deadline is cut off.
pub(crate) async fn eventually<T, A, F>(deadline: Duration, what: &str, f: F) -> T
where
    A: Attempt<T>,
    F: AsyncFnMut() -> A,
{
    match try_eventually(deadline, f).await {
        Ok(value) => value,
        Err(NotYet { attempts, last }) => {
            panic!("{what}: not within {deadline:?} ({attempts} attempts); last: {last}")
        }
    }
}

/// Why [`try_eventually`] gave up: how often it tried, and the last attempt's reason.
#[derive(Debug)]
pub(crate) struct NotYet {
    pub(crate) attempts: u32,
    pub(crate) last: String,
}

/// [`eventually`] for a wait whose timeout is an outcome the test reports itself (a process
/// that should be gone but is not): `Err` after `deadline` instead of a panic.
pub(crate) async fn try_eventually<T, A, F>(deadline: Duration, mut f: F) -> Result<T, NotYet>
where
    A: Attempt<T>,
    F: AsyncFnMut() -> A,
{
    let end = tokio::time::Instant::now() + deadline;
    let mut pause = FIRST_PAUSE;
    let mut attempts = 0u32;
    loop {
        attempts += 1;
        let last = match tokio::time::timeout_at(end, f()).await {
            Ok(attempt) => match attempt.into_attempt() {
                Ok(value) => return Ok(value),
                Err(e) => e,
            },
            Err(_) => "the last attempt was still running".to_owned(),
        };
        let now = tokio::time::Instant::now();
        if now >= end {
            return Err(NotYet { attempts, last });
        }
        tokio::time::sleep(pause.min(end - now)).await;
        pause = (pause * 2).min(MAX_PAUSE);
    }
}
