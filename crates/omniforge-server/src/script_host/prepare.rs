//! Turning code and dependencies into something runnable, with progress for the caller:
//! the syntax check, PEP 723 dependencies, the timeout rule, the hash-pinned lock and the
//! environment build. Used by tool authoring, `omniforge_test_tool`, and template and
//! completion scripts alike.

use std::time::Duration;

use omniforge_script::{Env, Lock, SYNTAX_CHECK_TIMEOUT, pep723_dependencies};
use tokio::sync::mpsc;

use crate::context::progress::Progress;
use crate::error::AuthoringError;
use crate::script_host::host::ScriptHost;
use crate::telemetry::spans;
use tracing::Instrument as _;

/// A script ready to run: its environment is built.
pub(crate) struct Prepared {
    /// The lock the environment was built from.
    pub(crate) lock: Lock,
    /// The environment.
    pub(crate) env: Env,
    /// The dependencies as given plus those of the code's PEP 723 block.
    pub(crate) dependencies: Vec<String>,
    /// The run's time limit.
    pub(crate) timeout: Duration,
}

/// A script's time limit: as asked (checked against the maximum; the default when not
/// asked), or kept from an earlier version when not asked.
#[derive(Debug, Clone, Copy)]
pub(crate) struct TimeoutRule {
    /// `timeout_s` as given.
    pub(crate) seconds: Option<f64>,
    /// What to keep when `seconds` is not given.
    pub(crate) keep: Option<Duration>,
}

impl ScriptHost {
    /// The time limit for `seconds` (the default when `None`).
    ///
    /// # Errors
    /// `timeout_s` out of range.
    pub(crate) fn timeout(&self, seconds: Option<f64>) -> Result<Duration, AuthoringError> {
        let Some(seconds) = seconds else {
            return Ok(self.settings().default_timeout);
        };
        let max = self.settings().max_timeout.as_secs_f64();
        if !(seconds > 0.0 && seconds <= max) {
            return Err(AuthoringError::invalid(
                "timeout_s",
                format!("must be more than 0 and at most {max} seconds, got {seconds}"),
            ));
        }
        Ok(Duration::from_secs_f64(seconds))
    }

    /// Checks `code` (named `field` in errors), reads its PEP 723 dependencies, applies the
    /// timeout rule and builds the environment, reporting progress.
    ///
    /// # Errors
    /// A text naming `field`, `environment`, `dependencies` or `timeout_s`.
    pub(crate) async fn prepare(
        &self,
        field: &'static str,
        code: &str,
        mut dependencies: Vec<String>,
        timeout: TimeoutRule,
        progress: &Progress,
    ) -> Result<Prepared, AuthoringError> {
        let envs = self.envs().await.map_err(AuthoringError::Environment)?;
        envs.config()
            .python
            .check_syntax(code, SYNTAX_CHECK_TIMEOUT)
            .await
            .map_err(|e| AuthoringError::invalid(field, e.to_string()))?;
        for dep in
            pep723_dependencies(code).map_err(|e| AuthoringError::invalid(field, e.to_string()))?
        {
            if !dependencies.contains(&dep) {
                dependencies.push(dep);
            }
        }
        let timeout = match timeout {
            TimeoutRule {
                seconds: None,
                keep: Some(kept),
            } => kept,
            TimeoutRule { seconds, .. } => self.timeout(seconds)?,
        };
        progress.send(0.0, "resolving dependencies".into()).await;
        let lock = envs
            .lock(&dependencies)
            .await
            .map_err(AuthoringError::Dependencies)?;
        let started = std::time::Instant::now();
        let span = spans::environment_build(dependencies.len());
        let env = {
            let (tx, mut rx) = mpsc::unbounded_channel::<String>();
            let build = envs
                .build(&lock, move |event| {
                    let _ = tx.send(event.to_string());
                })
                .instrument(span.clone());
            tokio::pin!(build);
            let mut step = 1.0;
            let built = loop {
                tokio::select! {
                    // Messages first, so none is left behind when the build ends.
                    biased;
                    Some(message) = rx.recv() => {
                        progress.send(step, message).await;
                        step += 1.0;
                    }
                    result = &mut build => break result,
                }
            };
            // What the build said in its last moment, before its result.
            while let Ok(message) = rx.try_recv() {
                progress.send(step, message).await;
                step += 1.0;
            }
            self.metrics()
                .environment_build(built.is_ok(), started.elapsed());
            if built.is_err() {
                span.record("error.type", "install_failed");
            }
            built.map_err(AuthoringError::Install)?
        };
        Ok(Prepared {
            lock,
            env,
            dependencies,
            timeout,
        })
    }
}
