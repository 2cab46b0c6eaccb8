//! A running template's two watchers: the control socket's reader, which routes the
//! template's messages (a spare's socket, a child's exit status) to whoever waits for them,
//! and the process watcher, which marks the template dead when bubblewrap exits.

use std::sync::Weak;
use std::time::Duration;

use serde::Deserialize;
use tokio_util::sync::CancellationToken;

use super::{Template, lock};
use crate::warm::wire;

/// The template's messages on its control socket (besides its boot report).
#[derive(Debug, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub(super) enum FromTemplate {
    /// A spare was forked (its socket attached), or could not be.
    Spare { id: u64, error: Option<String> },
    /// A child exited: its wait status.
    Exit { id: u64, status: i32 },
}

/// Routes the template's messages until it closes its control socket or is stopped.
pub(super) async fn read_control(template: Weak<Template>, dead: CancellationToken) {
    loop {
        let Some(t) = template.upgrade() else { return };
        let message = tokio::select! {
            m = wire::recv(&t.ctl) => m,
            () = dead.cancelled() => return,
        };
        let message = match message {
            Ok(Some(m)) => m,
            Ok(None) | Err(_) => {
                t.dead.cancel();
                return;
            }
        };
        match message.parse::<FromTemplate>() {
            Ok(FromTemplate::Spare { id, .. }) => {
                if let Some(tx) = lock(&t.replies).remove(&id) {
                    let _ = tx.send(message);
                }
            }
            Ok(FromTemplate::Exit { id, status }) => {
                if let Some(tx) = lock(&t.exits).remove(&id) {
                    let _ = tx.send(status);
                }
            }
            Err(e) => tracing::debug!(error = %e, "warm template: message ignored"),
        }
    }
}

/// Marks the template dead when bubblewrap exits.
pub(super) async fn watch_process(template: Weak<Template>) {
    loop {
        let Some(t) = template.upgrade() else { return };
        let exited = {
            let mut guard = lock(&t.process);
            match guard.as_mut() {
                Some(p) => !matches!(p.try_wait(), Ok(None)),
                None => true,
            }
        };
        if exited {
            t.dead.cancel();
            return;
        }
        let dead = t.dead.clone();
        drop(t);
        tokio::select! {
            () = tokio::time::sleep(Duration::from_millis(250)) => {}
            () = dead.cancelled() => return,
        }
    }
}
