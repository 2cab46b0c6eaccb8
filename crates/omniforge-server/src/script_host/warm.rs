//! Warm templates on the server side: the script crate's [`WarmPool`] behind the script host.
//!
//! A call of a stored tool's current version runs on the template of its key (the version
//! and the calling principal, so that what calls of one template share never connects two
//! principals); every other run (test runs, drafts, resource and completion scripts) is cold.
//! The server tells the pool which version of each tool is current: a version that stops
//! being current (update, rollback), a tool disabled or deleted, here or in another process
//! (the change feed reloads the tool through the same source), retires its templates. A call
//! of a version that is no longer current (it was routed before the change) runs cold and
//! starts no template.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Mutex, PoisonError};

use omniforge_script::{
    Prepared, RunError, RunOutput, RunSpec, Runner, TemplateState, WarmConfig, WarmKey, WarmPool,
};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

/// The pool and what it was told about each tool's current version.
pub(crate) struct Warm {
    pool: WarmPool,
    /// Tool name → the key of its current version (`name@N`), for the tools the catalog
    /// publishes.
    current: Mutex<HashMap<String, String>>,
}

/// The pool's name for version `number` of `tool`.
pub(crate) fn version_key(tool: &str, number: u32) -> String {
    format!("{tool}@{number}")
}

impl Warm {
    /// The pool in front of `runner` (off with `config.max_templates` 0, or without the
    /// layers per-call isolation needs).
    pub(crate) fn new(runner: Runner, config: WarmConfig) -> Warm {
        Warm {
            pool: WarmPool::new(runner, config),
            current: Mutex::new(HashMap::new()),
        }
    }

    /// The runner, for cold runs.
    pub(crate) fn runner(&self) -> &Runner {
        self.pool.runner()
    }

    /// Runs a call of `version` (of `tool`) by `principal`: warm when it is the tool's
    /// current version, cold (starting no template) otherwise.
    ///
    /// # Errors
    /// As [`Runner::run`]; the pool itself never fails a call.
    pub(crate) async fn run(
        &self,
        tool: &str,
        version: &str,
        principal: &str,
        spec: RunSpec,
        ct: CancellationToken,
    ) -> Result<RunOutput, RunError> {
        if !self.is_current(tool, version) {
            return self.pool.runner().run(spec, ct).await;
        }
        let output = self
            .pool
            .run(&WarmKey::new(version, principal), spec, ct)
            .await;
        // A cold call starts its key's template after it answered; if the version stopped
        // being current meanwhile, that template retires now.
        if !self.is_current(tool, version) {
            self.retire(version);
        }
        output
    }

    /// Starts the template of (`version`, `principal`) and waits until it is ready, or the
    /// pool decided its calls run cold (logged). Called once a version became current,
    /// before the write is answered, so that the author's first call is warm.
    pub(crate) async fn prepare(&self, tool: &str, version: &str, principal: &str, spec: &RunSpec) {
        if !self.pool.is_on() || !self.is_current(tool, version) {
            return;
        }
        match self
            .pool
            .prepare(&WarmKey::new(version, principal), spec)
            .await
        {
            Prepared::Ready => tracing::debug!(%version, "warm template ready"),
            Prepared::Cold(why) => tracing::info!(%version, reason = %why, "calls run cold"),
        }
        // The version stopped being current while its template started: it retires now
        // rather than idle until expiry.
        if !self.is_current(tool, version) {
            self.retire(version);
        }
    }

    /// `tool`'s current version is now `version`: the templates of the one before retire.
    pub(crate) fn set_current(&self, tool: &str, version: String) {
        let old = lock(&self.current).insert(tool.to_owned(), version.clone());
        if let Some(old) = old.filter(|old| *old != version) {
            self.retire(&old);
        }
    }

    /// `tool` is no longer published (disabled, deleted): its templates retire.
    pub(crate) fn set_gone(&self, tool: &str) {
        let old = lock(&self.current).remove(tool);
        if let Some(old) = old {
            self.retire(&old);
        }
    }

    /// The whole list of published tools and their current versions (a full reload): every
    /// template of another version retires.
    pub(crate) fn set_all(&self, current: HashMap<String, String>) {
        // Compared in place: a copy of 100,000 names and versions only to compare them stayed
        // in the heap as a replica's RSS.
        let stale: Vec<String> = {
            let mut map = lock(&self.current);
            let old = std::mem::replace(&mut *map, current);
            old.into_iter()
                .filter(|(tool, version)| map.get(tool) != Some(version))
                .map(|(_, version)| version)
                .collect()
        };
        for version in stale {
            self.retire(&version);
        }
    }

    /// Stops the templates running on the environment at `env_dir` (about to be removed).
    pub(crate) fn retire_env(&self, env_dir: &Path) {
        let n = self.pool.retire_env(env_dir);
        if n > 0 {
            tracing::debug!(env = %env_dir.display(), templates = n, "warm templates retired");
        }
    }

    /// Stops every template (shutdown).
    pub(crate) fn retire_all(&self) {
        self.pool.retire_all();
    }

    fn retire(&self, version: &str) {
        let n = self.pool.retire(version);
        if n > 0 {
            tracing::debug!(%version, templates = n, "warm templates retired");
        }
    }

    fn is_current(&self, tool: &str, version: &str) -> bool {
        lock(&self.current).get(tool).is_some_and(|v| v == version)
    }

    /// The `warm` object of `/healthz`: on or why off, the limit, the templates by state,
    /// their memory, and with `detail` (an `admin` asks) each template: its key (tool
    /// version and principal names), state, host pid, calls, idle seconds, memory.
    pub(crate) fn report(&self, detail: bool) -> Value {
        let report = self.pool.report();
        let (mut starting, mut ready, mut cold) = (0, 0, 0);
        let templates: Vec<Value> = report
            .templates
            .iter()
            .map(|t| {
                let (state, reason) = match &t.state {
                    TemplateState::Starting => {
                        starting += 1;
                        ("starting", None)
                    }
                    TemplateState::Ready => {
                        ready += 1;
                        ("ready", None)
                    }
                    TemplateState::Cold(why) => {
                        cold += 1;
                        ("cold", Some(why.as_str()))
                    }
                    _ => ("unknown", None),
                };
                json!({
                    "version": t.key.version,
                    "principal": t.key.partition,
                    "state": state,
                    "cold_reason": reason,
                    "pid": t.pid,
                    "calls": t.calls,
                    "running": t.running,
                    "idle_s": t.idle_for.as_secs_f64(),
                    "boot_ms": t.boot.map(|b| b.as_secs_f64() * 1000.0),
                    "spares": t.spares,
                    "template_rss_bytes": t.template_rss_bytes,
                    "spares_rss_bytes": t.spares_rss_bytes,
                    "pss_bytes": t.pss_bytes,
                })
            })
            .collect();
        let mut out = json!({
            "on": report.off.is_none(),
            "off_reason": report.off,
            "max_templates": report.max_templates,
            "starting": starting,
            "ready": ready,
            "cold": cold,
            "rss_bytes": report.rss_bytes,
            "pss_bytes": report.pss_bytes,
        });
        if detail {
            out["templates"] = Value::Array(templates);
        }
        out
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Drop for Warm {
    fn drop(&mut self) {
        // The pool's clones (its expiry task) hold no template; stop them all now.
        self.pool.retire_all();
    }
}
