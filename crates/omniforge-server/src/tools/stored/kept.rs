//! Kept outputs: the whole output of a call whose result text was cut, readable through the
//! resource link in that result (`omniforge://runs/{id}/output`) for a while (WIRE-30: clients
//! cap what they take from one result).
//!
//! They live in the store's [`OutputStore`](omniforge_store::OutputStore), so they outlast a
//! restart and every replica serves them. Each belongs to the principal that made the call
//! (issue 11, finding 8): only that principal, or an admin, reads it; anyone else gets the
//! same answer as for an unknown id (the owner check is in the store's query).

use std::sync::Arc;
use std::time::Duration;

use omniforge_store::{MAX_KEPT_STREAM_BYTES, NewKeptOutput, OutputReader, Store};

use crate::auth::Scope;
use crate::context::request::RequestCx;

/// The URI prefix of kept outputs.
pub(crate) const RUN_OUTPUT_PREFIX: &str = "omniforge://runs/";

/// Whole outputs in the store, kept for `ttl`.
pub(crate) struct KeptOutputs {
    store: Arc<dyn Store>,
    ttl: Duration,
}

impl KeptOutputs {
    /// Outputs kept in `store` for `ttl`.
    pub(crate) fn new(store: Arc<dyn Store>, ttl: Duration) -> KeptOutputs {
        KeptOutputs { store, ttl }
    }

    /// How long a call's output is kept (`--output-ttl`); a task's lives as long as the task.
    pub(crate) fn ttl(&self) -> Duration {
        self.ttl
    }

    /// Keeps `text` (its first MiB) for the caller of `cx`, from a call of `tool`; returns its
    /// `omniforge://runs/{id}/output` URI, or `None` when the store refused it (logged).
    /// Expired outputs go first.
    pub(crate) async fn keep(&self, cx: &RequestCx<'_>, tool: &str, text: &str) -> Option<String> {
        if let Err(error) = self.store.purge_expired_outputs().await {
            tracing::warn!(%error, "removing expired kept outputs failed");
        }
        let id = uuid::Uuid::new_v4().simple().to_string();
        let output = NewKeptOutput {
            run_id: id.clone(),
            owner: cx.author().to_owned(),
            tool: tool.to_owned(),
            stdout: cut(text, MAX_KEPT_STREAM_BYTES).to_owned(),
            stderr: String::new(),
            // A task's result (and so its link) is readable for the task's TTL.
            ttl: cx.task_ttl().map_or(self.ttl, |task| task.max(self.ttl)),
        };
        match self.store.keep_output(output).await {
            Ok(_) => Some(format!("{RUN_OUTPUT_PREFIX}{id}/output")),
            Err(error) => {
                tracing::warn!(%error, %tool, "keeping a cut output failed");
                None
            }
        }
    }

    /// The output `uri` points to, while it lasts, if the caller of `cx` made it or is an
    /// admin; `None` otherwise, exactly as for an unknown id.
    pub(crate) async fn read(&self, uri: &str, cx: &RequestCx<'_>) -> Option<String> {
        let id = uri
            .strip_prefix(RUN_OUTPUT_PREFIX)?
            .strip_suffix("/output")?;
        let principal = cx.principal()?;
        let reader = OutputReader {
            principal: principal.as_str(),
            read_all: cx.allows(Scope::Admin),
        };
        match self.store.kept_output(id, reader).await {
            Ok(found) => found.map(|o| o.stdout),
            Err(error) => {
                // A malformed id is refused by the store's checks: the same answer as unknown.
                tracing::debug!(%error, "reading a kept output failed");
                None
            }
        }
    }
}

/// `text` cut to at most `max` bytes at a character boundary.
fn cut(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}
