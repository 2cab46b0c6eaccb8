//! How each manifest's upstream has answered lately, from the calls themselves (no probing
//! traffic): the outcome of the last call, and counts since start. The console's server page
//! shows it.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime};

/// The longest failure text kept (the rest is cut, on a character boundary).
const MAX_DETAIL: usize = 300;

/// One manifest's upstream.
#[derive(Debug)]
pub(crate) struct UpstreamHealth {
    /// The manifest file.
    pub(crate) manifest: PathBuf,
    /// The service's base URL without any user information (empty: not configured).
    pub(crate) base_url: String,
    answered: AtomicU64,
    failed: AtomicU64,
    last: Mutex<Option<LastCall>>,
}

/// The outcome of the last call to an upstream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LastCall {
    /// When it ended.
    pub(crate) at: SystemTime,
    /// The RPC, `/pkg.Service/Method`.
    pub(crate) procedure: String,
    /// `ok`, `connect_error` (the service answered with a Connect error) or `failure` (no
    /// answer: refused, timed out, not Connect).
    pub(crate) outcome: &'static str,
    /// The Connect code, or the failure's text (cut to a few hundred characters).
    pub(crate) detail: String,
    /// How long the call took.
    pub(crate) elapsed: Duration,
}

/// A snapshot of one upstream for a page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct UpstreamReport {
    /// The manifest file.
    pub(crate) manifest: PathBuf,
    /// The base URL (user information removed).
    pub(crate) base_url: String,
    /// Calls the service answered (a reply or a Connect error).
    pub(crate) answered: u64,
    /// Calls that got no answer.
    pub(crate) failed: u64,
    /// The last call, if any since start.
    pub(crate) last: Option<LastCall>,
}

impl UpstreamHealth {
    /// The record of the upstream at `base_url` serving `manifest`.
    pub(crate) fn new(manifest: PathBuf, base_url: &str) -> Arc<UpstreamHealth> {
        Arc::new(UpstreamHealth {
            manifest,
            base_url: without_userinfo(base_url),
            answered: AtomicU64::new(0),
            failed: AtomicU64::new(0),
            last: Mutex::new(None),
        })
    }

    /// Records one call's outcome (`outcome` as the metrics name it).
    pub(crate) fn record(
        &self,
        procedure: &str,
        outcome: &'static str,
        detail: &str,
        elapsed: Duration,
    ) {
        let counter = if outcome == "failure" {
            &self.failed
        } else {
            &self.answered
        };
        counter.fetch_add(1, Ordering::Relaxed);
        let mut cut = detail.len().min(MAX_DETAIL);
        while !detail.is_char_boundary(cut) {
            cut -= 1;
        }
        let call = LastCall {
            at: SystemTime::now(),
            procedure: procedure.to_owned(),
            outcome,
            detail: detail[..cut].to_owned(),
            elapsed,
        };
        *self.last.lock().unwrap_or_else(PoisonError::into_inner) = Some(call);
    }

    /// What the page shows.
    pub(crate) fn report(&self) -> UpstreamReport {
        UpstreamReport {
            manifest: self.manifest.clone(),
            base_url: self.base_url.clone(),
            answered: self.answered.load(Ordering::Relaxed),
            failed: self.failed.load(Ordering::Relaxed),
            last: self
                .last
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone(),
        }
    }
}

/// `scheme://user:pass@host/...` → `scheme://host/...`: credentials in a base URL never reach
/// a page (a URL that does not parse is not shown at all; none configured stays empty).
fn without_userinfo(url: &str) -> String {
    if url.is_empty() {
        return String::new();
    }
    let Ok(mut parsed) = reqwest::Url::parse(url) else {
        return "(not a URL)".to_owned();
    };
    // Both only fail for URLs that cannot have credentials (no host).
    let _ = parsed.set_username("");
    let _ = parsed.set_password(None);
    parsed.as_str().trim_end_matches('/').to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_the_last_outcome_and_hides_credentials() {
        let h = UpstreamHealth::new("m.json".into(), "http://user:secret@127.0.0.1:9/base");
        assert_eq!(h.base_url, "http://127.0.0.1:9/base");
        assert_eq!(h.report().last, None);
        h.record("/p.S/A", "ok", "", Duration::from_millis(3));
        h.record(
            "/p.S/B",
            "failure",
            &"é".repeat(400),
            Duration::from_millis(5),
        );
        let r = h.report();
        assert_eq!((r.answered, r.failed), (1, 1));
        let last = r.last.unwrap();
        assert_eq!(
            (last.procedure.as_str(), last.outcome),
            ("/p.S/B", "failure")
        );
        assert!(last.detail.len() <= MAX_DETAIL && last.detail.starts_with('é'));
        assert_eq!(without_userinfo("https://h:1"), "https://h:1");
        assert_eq!(without_userinfo(""), "");
    }
}
