//! Closing idle sessions (issue 11, findings 3 and 4): every tick, the sessions the
//! [`SessionBook`] names as idle for the timeout are closed through the session manager, which
//! ends rmcp's worker and drops the session's handler, channels and caches; the session's peer
//! leaves the list-changed registry ([`Peers::prune_closed`]). Then the freed heap
//! goes back to the system (`memory.rs`), or the process would keep its high-water mark after a
//! burst of sessions.

use std::sync::{Arc, Weak};
use std::time::Duration;

use rmcp::transport::streamable_http_server::SessionManager;

use crate::peers::Peers;
use crate::transport::http::memory;
use crate::transport::http::resume::ResumableSessions;
use crate::transport::http::sessions::SessionBook;

/// How often idle sessions are looked for: a quarter of the timeout, within 50 ms..5 s.
fn tick_of(idle_timeout: Duration) -> Duration {
    (idle_timeout / 4).clamp(Duration::from_millis(50), Duration::from_secs(5))
}

/// Closes sessions idle for `idle_timeout`, until the book is dropped.
pub(super) async fn expire(
    book: Weak<SessionBook>,
    manager: Arc<ResumableSessions>,
    peers: Arc<Peers>,
    idle_timeout: Duration,
) {
    let mut tick = tokio::time::interval(tick_of(idle_timeout));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // Workers end on their own tasks after the close: what they free after this tick's trim
    // is trimmed on the next one.
    let mut trim_again = false;
    loop {
        tick.tick().await;
        let Some(book) = book.upgrade() else { return };
        let expired = book.expired(idle_timeout);
        drop(book);
        if expired.is_empty() {
            if std::mem::take(&mut trim_again) {
                peers.prune_closed();
                memory::release_free_heap();
            }
            continue;
        }
        tracing::debug!(sessions = expired.len(), "closing idle sessions");
        for id in &expired {
            if let Err(error) = manager.close_session(&Arc::from(id.as_str())).await {
                tracing::debug!(%error, "closing an idle session failed");
            }
        }
        peers.prune_closed();
        memory::release_free_heap();
        trim_again = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_follow_the_timeout_within_bounds() {
        assert_eq!(tick_of(Duration::from_secs(1)), Duration::from_millis(250));
        assert_eq!(tick_of(Duration::from_millis(1)), Duration::from_millis(50));
        assert_eq!(tick_of(Duration::from_secs(300)), Duration::from_secs(5));
    }
}
