//! Environments on every replica: a tool created through another replica (or another process
//! on another machine) arrives here as a stored version with a hash-pinned lock and an
//! environment id, but without the environment. This replica installs it from that lock as soon
//! as it hears of the version (`ScriptHost::install_in_background`, called when a catalog entry
//! is made), and a run that arrives before the install ends waits for it, reporting the
//! install's progress (`ScriptHost::ready`). [`Installs`] keeps the installs in progress; the
//! script host hands it the environment builder.
//!
//! Installing an already-made lock is the only network use outside the tool's own creation: uv
//! fetches exactly the pinned files (`--require-hashes`) from the package index; a script
//! never uses the network at call time.
//!
//! One install per environment id at a time (later askers join it), and one install at a time
//! per server (a semaphore): a replica that starts against a store of many tools installs them
//! one after the other, and a call's own environment jumps no queue but is never installed
//! twice.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};

use omniforge_script::{EnvBuilder, EnvError, Lock};
use omniforge_store::StoreError;
use tokio::sync::{Semaphore, watch};

use crate::context::progress::Progress;
use crate::error::InstallError;
use crate::telemetry::metrics::Metrics;

/// What one install has said so far, and how it ended.
#[derive(Debug, Clone, Default)]
pub(crate) struct InstallState {
    /// Progress lines (uv's own lines among them), oldest first.
    said: Vec<String>,
    /// `Some` once it ended.
    done: Option<Result<(), InstallError>>,
}

/// The installs in progress on this server.
#[derive(Debug)]
pub(crate) struct Installs {
    /// Environment id → the install building it. An entry is removed when its install ends,
    /// so a failed install is tried again by the next asker.
    running: Mutex<HashMap<String, watch::Receiver<InstallState>>>,
    /// One install at a time: builds are CPU- and disk-heavy, and calls share the machine.
    slots: Arc<Semaphore>,
    /// Where each install's duration is recorded.
    metrics: Arc<Metrics>,
}

impl Installs {
    /// No install running yet.
    pub(crate) fn new(metrics: Arc<Metrics>) -> Installs {
        Installs {
            running: Mutex::new(HashMap::new()),
            slots: Arc::new(Semaphore::new(1)),
            metrics,
        }
    }

    /// Waits until the install of `env_id` ends, starting one from `lock` (asked for only
    /// then) if nobody is installing it; sends the install's lines to `progress`.
    ///
    /// # Errors
    /// The lock cannot be read, or the install failed.
    pub(crate) async fn wait<F, B>(
        self: &Arc<Self>,
        env_id: &str,
        lock: F,
        builder: B,
        progress: &Progress,
    ) -> Result<(), InstallError>
    where
        F: AsyncFnOnce() -> Result<String, StoreError>,
        B: Future<Output = Result<EnvBuilder, EnvError>> + Send + 'static,
    {
        let running = self.joined(env_id);
        let mut rx = match running {
            Some(rx) => rx,
            None => {
                let lock = lock().await.map_err(|e| InstallError::Lock(Arc::new(e)))?;
                self.join_or_start(env_id, &lock, builder)
            }
        };
        progress
            .send(
                0.0,
                "installing the tool's environment on this server".into(),
            )
            .await;
        let mut seen = 0;
        loop {
            let state = rx.borrow_and_update().clone();
            for (i, line) in state.said.iter().enumerate().skip(seen) {
                progress.send((i + 1) as f64, line.clone()).await;
            }
            seen = state.said.len();
            if let Some(done) = state.done {
                return done;
            }
            if rx.changed().await.is_err() {
                // The install task ended without a result (the server is stopping).
                return Err(InstallError::Stopped);
            }
        }
    }

    /// The install of `env_id` in progress, if any.
    fn joined(&self, env_id: &str) -> Option<watch::Receiver<InstallState>> {
        let running = self.running.lock().unwrap_or_else(|p| p.into_inner());
        running.get(env_id).cloned()
    }

    /// The install of `env_id` in progress, or a new one from `lock` with the builder that
    /// `builder` gives.
    pub(crate) fn join_or_start<B>(
        self: &Arc<Self>,
        env_id: &str,
        lock: &str,
        builder: B,
    ) -> watch::Receiver<InstallState>
    where
        B: Future<Output = Result<EnvBuilder, EnvError>> + Send + 'static,
    {
        let mut running = self.running.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(rx) = running.get(env_id) {
            return rx.clone();
        }
        let (tx, rx) = watch::channel(InstallState::default());
        running.insert(env_id.to_owned(), rx.clone());
        drop(running);
        let installs = self.clone();
        let lock = Lock {
            requirements: lock.to_owned(),
            env_id: env_id.to_owned(),
        };
        tokio::spawn(async move {
            let result = match installs.slots.clone().acquire_owned().await {
                Ok(_slot) => match builder.await {
                    Ok(envs) => {
                        let started = std::time::Instant::now();
                        let result = install(&envs, &lock, &tx).await;
                        installs
                            .metrics
                            .environment_build(result.is_ok(), started.elapsed());
                        result
                    }
                    Err(e) => Err(e),
                }
                .map_err(|e| InstallError::Build(Arc::new(e))),
                Err(_) => Err(InstallError::Stopped),
            };
            match &result {
                Ok(()) => {
                    tracing::info!(env_id = %lock.env_id, "installed a stored tool's environment")
                }
                Err(error) => {
                    tracing::warn!(env_id = %lock.env_id, %error, "installing a stored tool's environment failed")
                }
            }
            tx.send_modify(|s| s.done = Some(result));
            installs
                .running
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&lock.env_id);
        });
        rx
    }
}

/// Builds `lock` under its stored id, telling `tx` each step.
async fn install(
    envs: &EnvBuilder,
    lock: &Lock,
    tx: &watch::Sender<InstallState>,
) -> Result<(), EnvError> {
    // The id covers the interpreter and the helper module: a replica with another Python
    // (or another OmniForge build) would name the same lock differently. The stored id is the
    // one runs and `gc` use, so the environment goes there; say so once.
    let here = envs
        .lock_from_requirements(lock.requirements.clone())
        .env_id;
    if here != lock.env_id {
        tracing::warn!(
            stored = %lock.env_id,
            here = %here,
            "this server's interpreter or build differs from the one that locked the tool; \
             installing under the stored id"
        );
    }
    envs.build(lock, |event| {
        tx.send_modify(|s| s.said.push(event.to_string()));
    })
    .await
    .map(|_| ())
}
