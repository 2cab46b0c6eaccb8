//! Reading a run's output pipes.

use tokio::io::{AsyncRead, AsyncReadExt};
use tokio_util::sync::CancellationToken;

/// Reads `pipe` to its end (or until `stop`), keeping the first `cap` bytes and counting the
/// rest.
pub(crate) async fn capture(
    pipe: Option<impl AsyncRead + Unpin>,
    cap: usize,
    stop: CancellationToken,
) -> (Vec<u8>, u64) {
    let mut kept = Vec::new();
    let mut dropped = 0u64;
    let Some(mut pipe) = pipe else {
        return (kept, dropped);
    };
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = tokio::select! {
            r = pipe.read(&mut buf) => match r {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            },
            () = stop.cancelled() => break,
        };
        let take = cap.saturating_sub(kept.len()).min(n);
        kept.extend_from_slice(&buf[..take]);
        dropped += (n - take) as u64;
    }
    (kept, dropped)
}
