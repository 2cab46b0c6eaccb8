//! `notifications/progress` for one request, when the client gave a progress token.

use std::sync::{Arc, Mutex};

use rmcp::model::{ProgressNotificationParam, ProgressToken};
use rmcp::service::{Peer, RoleServer};

/// Receives every progress message of the work done for a caller without an MCP peer
/// (environment builds, a script's own progress): the command line shows them on stderr.
pub type ProgressSink = Arc<dyn Fn(&str) + Send + Sync>;

/// Sends progress for one request; values that do not increase are dropped (the spec
/// requires progress to increase with each notification).
pub(crate) struct Progress {
    /// Also gets every message, increasing or not.
    sink: Option<ProgressSink>,
    token: Option<ProgressToken>,
    peer: Option<Peer<RoleServer>>,
    /// A std lock held for one comparison.
    last: Mutex<f64>,
}

impl Progress {
    /// Progress to `peer` under `token`; silent when either is missing.
    pub(crate) fn new(token: Option<ProgressToken>, peer: Option<Peer<RoleServer>>) -> Progress {
        Progress {
            sink: None,
            token,
            peer,
            last: Mutex::new(f64::MIN),
        }
    }

    /// Progress whose messages go to `sink` only.
    pub(crate) fn to_sink(sink: Option<ProgressSink>) -> Progress {
        Progress {
            sink,
            ..Progress::new(None, None)
        }
    }

    /// A step with a message.
    pub(crate) async fn send(&self, done: f64, message: String) {
        self.send_raw(done, None, Some(message)).await;
    }

    /// A "still running" notification, slightly above the last value sent.
    pub(crate) async fn heartbeat(&self) {
        let next = {
            let last = *self.last.lock().unwrap_or_else(|e| e.into_inner());
            if last == f64::MIN { 0.0 } else { last + 0.001 }
        };
        self.send_raw(next, None, Some("still running".to_owned()))
            .await;
    }

    /// Sends a progress value unless it does not increase.
    pub(crate) async fn send_raw(&self, done: f64, total: Option<f64>, message: Option<String>) {
        if let (Some(sink), Some(message)) = (&self.sink, &message) {
            sink(message);
        }
        let (Some(token), Some(peer)) = (&self.token, &self.peer) else {
            return;
        };
        {
            let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
            if done <= *last {
                return;
            }
            *last = done;
        }
        let mut param = ProgressNotificationParam::new(token.clone(), done);
        if let Some(total) = total {
            param = param.with_total(total);
        }
        if let Some(message) = message {
            param = param.with_message(message);
        }
        if let Err(error) = peer.notify_progress(param).await {
            tracing::debug!(%error, "progress not delivered");
        }
    }
}
