//! Kept outputs: the whole output of a call whose result text was cut, readable through the
//! resource link in that result (`omniforge://runs/{id}/output`) for a while (WIRE-30: clients
//! cap what they take from one result).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The URI prefix of kept outputs.
pub(crate) const RUN_OUTPUT_PREFIX: &str = "omniforge://runs/";

/// Whole outputs by resource URI, with when they were kept.
pub(crate) struct KeptOutputs {
    ttl: Duration,
    /// A std lock: held for map operations only.
    outputs: Mutex<HashMap<String, (Instant, String)>>,
}

impl KeptOutputs {
    /// Outputs kept for `ttl`.
    pub(crate) fn new(ttl: Duration) -> KeptOutputs {
        KeptOutputs {
            ttl,
            outputs: Mutex::default(),
        }
    }

    /// Keeps `text`; returns its `omniforge://runs/{id}/output` URI. Expired outputs go.
    pub(crate) fn keep(&self, text: String) -> String {
        let id = uuid::Uuid::new_v4().simple().to_string();
        let uri = format!("{RUN_OUTPUT_PREFIX}{id}/output");
        let mut outputs = self.outputs.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        outputs.retain(|_, (at, _)| now.duration_since(*at) < self.ttl);
        outputs.insert(uri.clone(), (now, text));
        uri
    }

    /// The output `uri` points to, while it lasts.
    pub(crate) fn read(&self, uri: &str) -> Option<String> {
        let outputs = self.outputs.lock().unwrap_or_else(|e| e.into_inner());
        outputs
            .get(uri)
            .filter(|(at, _)| at.elapsed() < self.ttl)
            .map(|(_, text)| text.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kept_until_the_ttl() {
        let kept = KeptOutputs::new(Duration::from_secs(3600));
        let uri = kept.keep("whole".into());
        assert!(uri.starts_with(RUN_OUTPUT_PREFIX) && uri.ends_with("/output"));
        assert_eq!(kept.read(&uri).as_deref(), Some("whole"));
        assert_eq!(kept.read("omniforge://runs/nope/output"), None);
        let gone = KeptOutputs::new(Duration::ZERO);
        let uri = gone.keep("x".into());
        assert_eq!(gone.read(&uri), None);
    }
}
