//! Warm templates (issue 15): a call of a stored tool version forks a child of an interpreter
//! that already started, in the full sandbox, and imported the version's dependencies,
//! instead of starting Python (and the sandbox) from nothing.
//!
//! A [`WarmPool`] wraps a [`Runner`]. [`WarmPool::run`] runs a call on the template of its
//! [`WarmKey`] when one is ready and falls back to [`Runner::run`] otherwise (the result is
//! the same either way, and a call never fails because of the pool). Templates are started
//! by [`WarmPool::prepare`] (when a version is created or enabled) or after a cold call that
//! found none, never before a call answers; they are stopped by [`WarmPool::retire`], idle
//! expiry, or the pool's capacity.
//!
//! # Layers: which applies where
//!
//! | layer | the template (once) | each call's child |
//! |---|---|---|
//! | namespaces (user, pid, mount, net, ipc, uts, cgroup) | bubblewrap, the cold call's command line | inherited: the calls of a template share them |
//! | unprivileged-uid | bubblewrap's uid 65534; under a root server a host uid leased for the template | inherited |
//! | read-only-root | bubblewrap's binds, one size-capped `/tmp` and `/dev/shm` | its own Landlock domain: writable only `/tmp/c-R` and `/dev/shm/c-R` (its `HOME`, `TMPDIR` and working directory) and `/dev/null`, `zero`, `full` |
//! | no-network | the empty network namespace | inherited, and TCP bind/connect handled by its Landlock domain |
//! | seccomp | loaded by bubblewrap | inherited (filters survive `fork`) |
//! | landlock | the helper's domain, as a cold call's | a second, nested domain of its own: the above, no named Unix sockets, signals and abstract sockets scoped to the call |
//! | rlimits | address space, file size, open files, core, nice, real-time | CPU time (timeout + 1 s), address space and file size of the call |
//! | cgroup-pids | the template's own `pids.max` | a fresh per-call cgroup, entered while it waits as a spare |
//! | cgroup-kill | the template's cgroup (retirement kills it all) | its call's cgroup, killed when the call ends, times out or is cancelled |
//! | cgroup-memory | none (its pages are shared with its calls, and stay charged where they are) | its call's cgroup, capped at the call's memory limit for everything the call allocates |
//! | process-group | bubblewrap's process group | its own session (`setsid`), killed with its cgroup |
//!
//! # What a fork shares
//!
//! The calls of one template share its hash seed (`PYTHONHASHSEED` is random per template, not
//! per call), its address-space layout (ASLR is per `exec`) and stack canary, its PID
//! namespace (a call's pid is not 2, and pids count on across calls), its `/tmp` tmpfs
//! (space, not files), and whatever the dependencies' import-time code did in the template.
//! `random` and numpy's global generator are reseeded in each child; a generator a library
//! seeded at import is not. Templates are keyed by [`WarmKey`], a tool version *and a
//! partition*: the server uses the calling principal as the partition, so that what one
//! principal's calls can observe of these (a pid counter, a tmpfs's free space) never comes
//! from another principal's calls.
//!
//! # Layout
//!
//! - here: [`WarmPool`], [`WarmConfig`], [`WarmKey`], the report types; the pool's lifecycle;
//! - `template`: one template (start, control socket, spares, stop, memory);
//! - `call`: one call on a spare;
//! - `confine`: the per-call Landlock ruleset;
//! - `wire`: the messages and descriptor passing;
//! - `template.py`: the driver the template runs.

mod call;
mod confine;
mod template;
mod types;
mod wire;

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use self::call::Called;
use self::template::{Started, Template, TemplateSpec};
pub use self::types::{
    DEFAULT_MAX_TEMPLATES, DEFAULT_WARM_IDLE, Prepared, TemplateReport, TemplateState, WarmConfig,
    WarmError, WarmKey, WarmReport,
};
use crate::run::{Exit, RunError, RunOutput, RunSpec, Runner};

/// Warm templates in front of a [`Runner`]; cheap to clone (clones share the pool).
///
/// Needs a tokio runtime (it spawns its expiry task on the current one).
#[derive(Debug, Clone)]
pub struct WarmPool {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    runner: Runner,
    config: WarmConfig,
    off: Option<String>,
    entries: Mutex<HashMap<WarmKey, Entry>>,
    generation: std::sync::atomic::AtomicU64,
    stop: CancellationToken,
}

#[derive(Debug)]
enum Entry {
    Starting {
        fingerprint: String,
        generation: u64,
        since: Instant,
        done: watch::Receiver<Option<Prepared>>,
    },
    Ready {
        fingerprint: String,
        template: Arc<Template>,
        crashes: Vec<Instant>,
    },
    Cold {
        fingerprint: String,
        reason: String,
    },
}

impl Entry {
    fn fingerprint(&self) -> &str {
        match self {
            Entry::Starting { fingerprint, .. }
            | Entry::Ready { fingerprint, .. }
            | Entry::Cold { fingerprint, .. } => fingerprint,
        }
    }

    fn counts(&self) -> bool {
        !matches!(self, Entry::Cold { .. })
    }
}

/// A key's entry as the report reads it: key, state, template, since when starting.
type Snapshot = (
    WarmKey,
    TemplateState,
    Option<Arc<Template>>,
    Option<Instant>,
);

/// Crashes of one template within [`CRASH_WINDOW`] after which its key runs cold.
const MAX_CRASHES: usize = 3;
const CRASH_WINDOW: Duration = Duration::from_secs(600);

impl Drop for Inner {
    fn drop(&mut self) {
        self.stop.cancel();
        let entries = std::mem::take(&mut *lock(&self.entries));
        for (_, entry) in entries {
            if let Entry::Ready { template, .. } = entry {
                template.stop();
            }
        }
    }
}

impl WarmPool {
    /// A pool in front of `runner`. It is off (every call cold, [`WarmReport::off`] says
    /// why) when `max_templates` is 0, or when the runner lacks what per-call isolation needs
    /// in a shared template: the `namespaces`, `landlock` (with Landlock ABI 6 for the
    /// scopes) and `cgroup-kill` layers.
    pub fn new(runner: Runner, config: WarmConfig) -> WarmPool {
        let off = off_reason(&runner, &config);
        match &off {
            Some(why) => tracing::info!(reason = %why, "warm pool off: every call runs cold"),
            None => tracing::debug!(
                max_templates = config.max_templates,
                idle = ?config.idle,
                "warm pool on"
            ),
        }
        let inner = Arc::new(Inner {
            runner,
            config,
            off,
            entries: Mutex::new(HashMap::new()),
            generation: std::sync::atomic::AtomicU64::new(0),
            stop: CancellationToken::new(),
        });
        if inner.off.is_none() {
            match tokio::runtime::Handle::try_current() {
                Ok(rt) => {
                    rt.spawn(expire(Arc::downgrade(&inner), inner.stop.clone()));
                }
                Err(_) => {
                    tracing::warn!("warm pool without a tokio runtime: idle templates never expire")
                }
            }
        }
        WarmPool { inner }
    }

    /// The runner behind the pool (cold runs: test runs, drafts, scripts of resources).
    pub fn runner(&self) -> &Runner {
        &self.inner.runner
    }

    /// Whether the pool can run calls warm (see [`WarmPool::new`]).
    pub fn is_on(&self) -> bool {
        self.inner.off.is_none()
    }

    /// Runs one call of `key`: on its template when one is ready for exactly this version
    /// (the spec's interpreter, environment, code and limits), else cold as
    /// [`Runner::run`] does, starting the template after the call has answered. Admission
    /// (slots, queue, [`RunError::Busy`]) is the runner's either way.
    ///
    /// # Errors
    /// As [`Runner::run`]; a failure of the pool is never an error (the call runs cold).
    pub async fn run(
        &self,
        key: &WarmKey,
        spec: RunSpec,
        cancel: CancellationToken,
    ) -> Result<RunOutput, RunError> {
        if self.inner.off.is_some() {
            return self.inner.runner.run(spec, cancel).await;
        }
        let started = Instant::now();
        let fingerprint = fingerprint(&spec);
        let template = self.ready_template(key, &fingerprint);
        let runner = &self.inner.runner;
        let Some(admission) = runner.admit(&cancel).await? else {
            return Ok(RunOutput::empty(Exit::Cancelled, started.elapsed()));
        };
        if let Some(template) = template {
            crate::run::check_spec(&spec)?;
            match template.take_spare().await {
                Ok(spare) => match call::call(&template, spare, &spec, &cancel, started).await {
                    Called::Ran(output) => return Ok(output),
                    Called::NotRun(why) => {
                        tracing::warn!(version = %key.version, reason = %why, "warm call fell back to a cold start");
                    }
                },
                Err(e) => {
                    tracing::warn!(version = %key.version, error = %e, "no warm spare; the call runs cold");
                }
            }
        }
        let template_spec = TemplateSpec::of(&spec);
        let output = runner.run_admitted(&admission, spec, cancel, started).await;
        drop(admission);
        // Only now, with the call answered: start its template if it has none.
        if self.needs_start(key, &fingerprint) {
            let pool = self.clone();
            let key = key.clone();
            tokio::spawn(async move {
                pool.start(key, template_spec, fingerprint).await;
            });
        }
        output
    }

    /// Starts `key`'s template for `spec` (arguments and environment unused) unless it has
    /// one, and waits until it is ready or the pool decides its calls run cold. Call it when
    /// a version is created or enabled, so that its first call finds the template ready.
    pub async fn prepare(&self, key: &WarmKey, spec: &RunSpec) -> Prepared {
        if let Some(why) = &self.inner.off {
            return Prepared::Cold(format!("the warm pool is off: {why}"));
        }
        let fingerprint = fingerprint(spec);
        loop {
            let waiting = {
                let entries = lock(&self.inner.entries);
                match entries.get(key) {
                    Some(e) if e.fingerprint() != fingerprint => None,
                    Some(Entry::Ready { .. }) => return Prepared::Ready,
                    Some(Entry::Cold { reason, .. }) => return Prepared::Cold(reason.clone()),
                    Some(Entry::Starting { done, .. }) => Some(done.clone()),
                    None => None,
                }
            };
            match waiting {
                Some(mut done) => {
                    let _ = done.wait_for(Option::is_some).await;
                    if let Some(p) = done.borrow().clone() {
                        return p;
                    }
                }
                None => {
                    return self
                        .start(key.clone(), TemplateSpec::of(spec), fingerprint.clone())
                        .await;
                }
            }
        }
    }

    /// Stops the templates of `version` (every partition), e.g. when it stops being the
    /// current version, or the tool is disabled or deleted. Calls running on them finish;
    /// later calls of that version run cold (and start a new template). Returns how many
    /// keys were removed.
    pub fn retire(&self, version: &str) -> usize {
        self.retire_where(|k, _| k.version == version)
    }

    /// Stops the templates started on the environment at `env_dir` (it is being rebuilt or
    /// removed). Returns how many keys were removed.
    pub fn retire_env(&self, env_dir: &Path) -> usize {
        self.retire_where(|_, t| t.is_some_and(|t| t.spec.env_dir == env_dir))
    }

    /// Stops every template.
    pub fn retire_all(&self) -> usize {
        self.retire_where(|_, _| true)
    }

    fn retire_where(&self, mut select: impl FnMut(&WarmKey, Option<&Template>) -> bool) -> usize {
        let removed: Vec<Entry> = {
            let mut entries = lock(&self.inner.entries);
            let keys: Vec<WarmKey> = entries
                .iter()
                .filter(|(k, e)| {
                    let t = match e {
                        Entry::Ready { template, .. } => Some(&**template),
                        _ => None,
                    };
                    select(k, t)
                })
                .map(|(k, _)| k.clone())
                .collect();
            keys.iter().filter_map(|k| entries.remove(k)).collect()
        };
        let n = removed.len();
        for entry in removed {
            if let Entry::Ready { template, .. } = entry {
                retire_template(template);
            }
        }
        n
    }

    /// Each key's template, its calls and its memory, and the pool's totals.
    pub fn report(&self) -> WarmReport {
        let entries: Vec<Snapshot> = {
            let entries = lock(&self.inner.entries);
            entries
                .iter()
                .map(|(k, e)| match e {
                    Entry::Starting { since, .. } => {
                        (k.clone(), TemplateState::Starting, None, Some(*since))
                    }
                    Entry::Ready { template, .. } => (
                        k.clone(),
                        TemplateState::Ready,
                        Some(Arc::clone(template)),
                        None,
                    ),
                    Entry::Cold { reason, .. } => {
                        (k.clone(), TemplateState::Cold(reason.clone()), None, None)
                    }
                })
                .collect()
        };
        let mut report = WarmReport {
            off: self.inner.off.clone(),
            max_templates: self.inner.config.max_templates,
            templates: Vec::new(),
            rss_bytes: 0,
            pss_bytes: 0,
        };
        for (key, state, template, since) in entries {
            let mut t = TemplateReport {
                key,
                state,
                pid: None,
                calls: 0,
                running: 0,
                idle_for: since.map(|s| s.elapsed()).unwrap_or_default(),
                boot: None,
                spares: 0,
                template_rss_bytes: 0,
                spares_rss_bytes: 0,
                pss_bytes: 0,
            };
            if let Some(template) = template {
                let (own, spares) = template.memory();
                t.pid = template.pid();
                t.calls = template.calls.load(std::sync::atomic::Ordering::Relaxed);
                t.running = template
                    .in_flight
                    .load(std::sync::atomic::Ordering::Acquire);
                t.idle_for = template.last_used().elapsed();
                t.boot = Some(template.boot_time);
                t.spares = template.ready_spares();
                t.template_rss_bytes = own.rss;
                t.spares_rss_bytes = spares.rss;
                t.pss_bytes = own.pss + spares.pss;
                report.rss_bytes += own.rss + spares.rss;
                report.pss_bytes += t.pss_bytes;
            }
            report.templates.push(t);
        }
        report.templates.sort_by(|a, b| a.key.cmp(&b.key));
        report
    }

    /// The key's template, if one is ready for this fingerprint; a template for another
    /// fingerprint (the key's code or limits changed) is retired.
    fn ready_template(&self, key: &WarmKey, fingerprint: &str) -> Option<Arc<Template>> {
        let stale = {
            let mut entries = lock(&self.inner.entries);
            match entries.get(key) {
                Some(Entry::Ready {
                    fingerprint: f,
                    template,
                    ..
                }) if f == fingerprint => {
                    if template.dead.is_cancelled() {
                        None
                    } else {
                        return Some(Arc::clone(template));
                    }
                }
                Some(e) if e.fingerprint() != fingerprint => entries.remove(key),
                _ => None,
            }
        };
        if let Some(Entry::Ready { template, .. }) = stale {
            retire_template(template);
        }
        None
    }

    fn needs_start(&self, key: &WarmKey, fingerprint: &str) -> bool {
        match lock(&self.inner.entries).get(key) {
            None => true,
            Some(e) => e.fingerprint() != fingerprint,
        }
    }

    /// Starts `key`'s template (replacing an entry of another fingerprint), makes room for
    /// it, and records what came of it.
    async fn start(&self, key: WarmKey, spec: TemplateSpec, fingerprint: String) -> Prepared {
        let inner = &self.inner;
        let generation = inner
            .generation
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let (tx, rx) = watch::channel(None);
        enum Already {
            Starting(watch::Receiver<Option<Prepared>>),
            Done(Prepared),
        }
        let already = {
            let entries = lock(&inner.entries);
            match entries.get(&key) {
                Some(Entry::Starting {
                    fingerprint: f,
                    done,
                    ..
                }) if *f == fingerprint => Some(Already::Starting(done.clone())),
                Some(Entry::Cold {
                    fingerprint: f,
                    reason,
                }) if *f == fingerprint => Some(Already::Done(Prepared::Cold(reason.clone()))),
                Some(Entry::Ready { fingerprint: f, .. }) if *f == fingerprint => {
                    Some(Already::Done(Prepared::Ready))
                }
                _ => None,
            }
        };
        match already {
            Some(Already::Done(p)) => return p,
            Some(Already::Starting(mut done)) => {
                let _ = done.wait_for(Option::is_some).await;
                let outcome = done.borrow().clone();
                return outcome.unwrap_or(Prepared::Cold("the start was abandoned".to_owned()));
            }
            None => {}
        }
        let evicted = {
            let mut entries = lock(&inner.entries);
            let old = entries.remove(&key);
            let in_use = entries.values().filter(|e| e.counts()).count();
            let mut evicted = Vec::new();
            evicted.extend(old);
            if in_use >= inner.config.max_templates {
                match least_recently_used(&entries) {
                    Some(victim) => evicted.extend(entries.remove(&victim)),
                    None => {
                        return Prepared::Cold(format!(
                            "the warm pool is full ({} templates, all running calls)",
                            inner.config.max_templates
                        ));
                    }
                }
            }
            entries.insert(
                key.clone(),
                Entry::Starting {
                    fingerprint: fingerprint.clone(),
                    generation,
                    since: Instant::now(),
                    done: rx,
                },
            );
            evicted
        };
        for entry in evicted {
            if let Entry::Ready { template, .. } = entry {
                retire_template(template);
            }
        }
        let outcome = Template::start(&inner.runner, &spec, &inner.config).await;
        let (entry, prepared) = match outcome {
            Ok(Started::Ready(template)) => (
                Entry::Ready {
                    fingerprint: fingerprint.clone(),
                    template,
                    crashes: Vec::new(),
                },
                Prepared::Ready,
            ),
            Ok(Started::Cold(reason)) => {
                tracing::info!(version = %key.version, %reason, "this version's calls run cold");
                (
                    Entry::Cold {
                        fingerprint: fingerprint.clone(),
                        reason: reason.clone(),
                    },
                    Prepared::Cold(reason),
                )
            }
            Err(e) => {
                tracing::warn!(version = %key.version, error = %e, "warm template failed; this version's calls run cold");
                let reason = e.to_string();
                (
                    Entry::Cold {
                        fingerprint: fingerprint.clone(),
                        reason: reason.clone(),
                    },
                    Prepared::Cold(reason),
                )
            }
        };
        self.install(key, generation, entry);
        let _ = tx.send(Some(prepared.clone()));
        prepared
    }

    /// Puts a started template in place of its `Starting` entry, unless the key was retired
    /// or restarted meanwhile (then it is stopped); watches it for a crash.
    fn install(&self, key: WarmKey, generation: u64, entry: Entry) {
        let mut entries = lock(&self.inner.entries);
        let current = matches!(entries.get(&key), Some(Entry::Starting { generation: g, .. }) if *g == generation);
        if !current || self.inner.stop.is_cancelled() {
            drop(entries);
            if let Entry::Ready { template, .. } = entry {
                template.stop();
            }
            return;
        }
        if let Entry::Ready { template, .. } = &entry {
            tokio::spawn(watch_crash(
                Arc::downgrade(&self.inner),
                key.clone(),
                Arc::downgrade(template),
                template.dead.clone(),
            ));
        }
        entries.insert(key, entry);
    }
}

/// Why a pool in front of `runner` would be off.
fn off_reason(runner: &Runner, config: &WarmConfig) -> Option<String> {
    warm_off_reason(runner.layers(), config.max_templates)
}

/// Why a pool of at most `max_templates` templates over a runner with these `layers` (as
/// [`crate::doctor`] reports them) would be off, or `None` when it would run calls warm
/// (for `omniforge doctor`; [`WarmReport::off`] says the same of a running pool).
pub fn warm_off_reason(layers: &[crate::Layer], max_templates: usize) -> Option<String> {
    if max_templates == 0 {
        return Some("--warm-pool 0".to_owned());
    }
    let active = |name: &str| layers.iter().any(|l| l.name == name && l.active);
    let missing: Vec<&str> = ["namespaces", "landlock", "cgroup-kill"]
        .into_iter()
        .filter(|l| !active(l))
        .collect();
    if !missing.is_empty() {
        return Some(format!(
            "a shared template needs the {} layer{} to keep its calls apart",
            missing.join(", "),
            if missing.len() > 1 { "s" } else { "" }
        ));
    }
    if let Err(e) = confine::available() {
        return Some(format!(
            "per-call Landlock domains need Landlock ABI 6 (scopes): {e}"
        ));
    }
    None
}

/// What must match for a call to use a template: the interpreter, the environment, the code
/// and the limits that shape the template's sandbox.
fn fingerprint(spec: &RunSpec) -> String {
    let mut h = Sha256::new();
    for part in [
        spec.python.as_os_str().as_encoded_bytes(),
        spec.env_dir.as_os_str().as_encoded_bytes(),
        spec.code.as_bytes(),
    ] {
        h.update((part.len() as u64).to_le_bytes());
        h.update(part);
    }
    h.update([u8::from(spec.network)]);
    h.update(spec.memory_bytes.to_le_bytes());
    h.update(spec.max_file_bytes.to_le_bytes());
    h.update(spec.max_processes.to_le_bytes());
    h.finalize()
        .iter()
        .take(16)
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn least_recently_used(entries: &HashMap<WarmKey, Entry>) -> Option<WarmKey> {
    entries
        .iter()
        .filter_map(|(k, e)| match e {
            Entry::Ready { template, .. }
                if template
                    .in_flight
                    .load(std::sync::atomic::Ordering::Acquire)
                    == 0 =>
            {
                Some((k.clone(), template.last_used()))
            }
            _ => None,
        })
        .min_by_key(|(_, used)| *used)
        .map(|(k, _)| k)
}

/// Stops a template once the calls running on it have finished.
fn retire_template(template: Arc<Template>) {
    if template
        .in_flight
        .load(std::sync::atomic::Ordering::Acquire)
        == 0
    {
        template.stop();
        return;
    }
    tokio::spawn(async move {
        while template
            .in_flight
            .load(std::sync::atomic::Ordering::Acquire)
            > 0
            && !template.dead.is_cancelled()
        {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        template.stop();
    });
}

/// Stops templates unused for [`WarmConfig::idle`].
async fn expire(pool: Weak<Inner>, stop: CancellationToken) {
    loop {
        let tick = match pool.upgrade() {
            Some(inner) => {
                (inner.config.idle / 4).clamp(Duration::from_secs(1), Duration::from_secs(30))
            }
            None => return,
        };
        tokio::select! {
            () = tokio::time::sleep(tick) => {}
            () = stop.cancelled() => return,
        }
        let Some(inner) = pool.upgrade() else { return };
        let idle = inner.config.idle;
        let expired: Vec<Arc<Template>> = {
            let mut entries = lock(&inner.entries);
            let keys: Vec<WarmKey> = entries
                .iter()
                .filter(|(_, e)| {
                    matches!(e, Entry::Ready { template, .. }
                    if template.in_flight.load(std::sync::atomic::Ordering::Acquire) == 0
                        && template.last_used().elapsed() >= idle)
                })
                .map(|(k, _)| k.clone())
                .collect();
            keys.iter()
                .filter_map(|k| match entries.remove(k) {
                    Some(Entry::Ready { template, .. }) => Some(template),
                    _ => None,
                })
                .collect()
        };
        for t in expired {
            tracing::debug!("warm template idle: stopped");
            t.stop();
        }
    }
}

/// Replaces a template that died without being stopped (its calls fell back to cold
/// starts); after [`MAX_CRASHES`] within [`CRASH_WINDOW`] its key runs cold.
async fn watch_crash(
    pool: Weak<Inner>,
    key: WarmKey,
    template: Weak<Template>,
    dead: CancellationToken,
) {
    dead.cancelled().await;
    let (Some(inner), Some(t)) = (pool.upgrade(), template.upgrade()) else {
        return;
    };
    if t.was_stopped() || inner.stop.is_cancelled() {
        return;
    }
    t.stop();
    let spec = t.spec.clone();
    let restart = {
        let mut entries = lock(&inner.entries);
        let Some(Entry::Ready {
            fingerprint,
            template: current,
            crashes,
        }) = entries.get(&key)
        else {
            return;
        };
        if !Arc::ptr_eq(current, &t) {
            return;
        }
        let fingerprint = fingerprint.clone();
        let mut crashes: Vec<Instant> = crashes
            .iter()
            .copied()
            .filter(|c| c.elapsed() < CRASH_WINDOW)
            .collect();
        crashes.push(Instant::now());
        tracing::warn!(version = %key.version, crashes = crashes.len(), "warm template died; replacing it");
        if crashes.len() >= MAX_CRASHES {
            entries.insert(
                key.clone(),
                Entry::Cold {
                    fingerprint,
                    reason: format!(
                        "its template died {} times in {:?}",
                        crashes.len(),
                        CRASH_WINDOW
                    ),
                },
            );
            None
        } else {
            entries.remove(&key);
            Some((fingerprint, crashes))
        }
    };
    drop(t);
    if let Some((fingerprint, crashes)) = restart {
        let pool = WarmPool { inner };
        if pool.start(key.clone(), spec, fingerprint).await == Prepared::Ready
            && let Some(Entry::Ready { crashes: c, .. }) = lock(&pool.inner.entries).get_mut(&key)
        {
            *c = crashes;
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}
