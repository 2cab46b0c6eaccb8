//! The environment sizes the server page shows: measured by one bounded walk
//! ([`script_host::disk`](crate::script_host::disk)), at most once a minute whatever the
//! page loads, on a blocking thread; concurrent loads wait for the same walk.

use std::sync::Arc;
use std::time::{Duration, Instant};

use omniforge_store::{Store, StoreError};

use crate::script_host::disk::{EnvSizes, MAX_ENTRIES, env_sizes};
use crate::script_host::host::ScriptHost;

/// How long one measurement is shown before the next page load measures again.
const FRESH: Duration = Duration::from_secs(60);

/// The last measurement.
#[derive(Default)]
pub(crate) struct EnvSizeCache {
    last: tokio::sync::Mutex<Option<(Instant, Arc<EnvSizes>)>>,
}

/// A measurement and when it was made.
pub(crate) struct Measured {
    /// The sizes.
    pub(crate) sizes: Arc<EnvSizes>,
    /// How long ago they were measured.
    pub(crate) age: Duration,
}

impl EnvSizeCache {
    /// The sizes of `host`'s environments, measured now unless a measurement is under a
    /// minute old.
    ///
    /// # Errors
    /// The store cannot say which are in use, or the walk's thread failed.
    pub(crate) async fn get(
        &self,
        host: &Arc<ScriptHost>,
        store: &Arc<dyn Store>,
    ) -> Result<Measured, MeasureError> {
        let mut last = self.last.lock().await;
        if let Some((at, sizes)) = last.as_ref().filter(|(at, _)| at.elapsed() < FRESH) {
            return Ok(Measured {
                sizes: sizes.clone(),
                age: at.elapsed(),
            });
        }
        let in_use = store.env_ids_in_use().await.map_err(MeasureError::InUse)?;
        let layout = host.layout();
        let sizes = tokio::task::spawn_blocking(move || env_sizes(&layout, &in_use, MAX_ENTRIES))
            .await
            .map_err(MeasureError::Walk)?;
        let sizes = Arc::new(sizes);
        *last = Some((Instant::now(), sizes.clone()));
        Ok(Measured {
            sizes,
            age: Duration::ZERO,
        })
    }
}

/// Why the environments could not be measured.
#[derive(Debug, thiserror::Error)]
pub(crate) enum MeasureError {
    /// The store cannot say which environments are in use.
    #[error("reading the environments in use failed: {0}")]
    InUse(#[source] StoreError),
    /// The walk's blocking thread failed.
    #[error("measuring the environments failed")]
    Walk(#[source] tokio::task::JoinError),
}
