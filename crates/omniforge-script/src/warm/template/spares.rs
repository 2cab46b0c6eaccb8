//! A template's spare children: made ahead of calls (`replenish`), or on a call's time when
//! none is ready (`take_spare`). Making one has three steps: the template forks it and sends
//! its socket (`fork_spare`); the spare makes its private directories and sends their handles
//! (`its_directories`); it is confined to them with a Landlock ruleset built here
//! (`confine`) while it is moved into its call's cgroups (`move_in`).

use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::Ordering;
use std::sync::{Arc, PoisonError};
use std::time::{Duration, Instant};

use serde_json::json;
use tokio::io::unix::AsyncFd;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use super::control::FromTemplate;
use super::{FromSpare, Spare, Template, lock};
use crate::sandbox::{CgroupLimits, RunCgroups};
use crate::warm::types::WarmError;
use crate::warm::wire::{self, Received};

/// How long a spare may take to be forked, confined and moved.
const SPARE_TIMEOUT: Duration = Duration::from_secs(20);

/// A spare's call cgroups being moved into (on a blocking thread), with the outcome.
type Moving = JoinHandle<(RunCgroups, std::io::Result<()>)>;

impl Template {
    /// A ready spare, or a new one made now (fork, confinement and cgroup moves on the
    /// caller's time).
    ///
    /// # Errors
    /// [`WarmError`] when the template is gone or the spare cannot be made.
    pub(crate) async fn take_spare(self: &Arc<Self>) -> Result<Spare, WarmError> {
        *self
            .last_used
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Instant::now();
        let ready = lock(&self.spares).pop_front();
        match ready {
            Some(spare) => Ok(spare),
            None => self.make_spare().await,
        }
    }

    /// Makes spares until `target_spares` are ready or being made (in the background).
    pub(crate) fn replenish(self: &Arc<Self>) {
        loop {
            let have = lock(&self.spares).len() + self.making.load(Ordering::Acquire);
            if have >= self.target_spares || self.dead.is_cancelled() {
                return;
            }
            self.making.fetch_add(1, Ordering::AcqRel);
            let template = Arc::clone(self);
            tokio::spawn(async move {
                let spare = template.make_spare().await;
                template.making.fetch_sub(1, Ordering::AcqRel);
                match spare {
                    Ok(spare) if !template.dead.is_cancelled() => {
                        lock(&template.spares).push_back(spare);
                    }
                    Ok(_) => {}
                    Err(e) if !template.dead.is_cancelled() => {
                        tracing::warn!(error = %e, "a warm template could not make a spare");
                    }
                    Err(_) => {}
                }
            });
        }
    }

    /// Forks a spare, has it confined, and moves it into its call's cgroups.
    async fn make_spare(self: &Arc<Self>) -> Result<Spare, WarmError> {
        let made = tokio::time::timeout(SPARE_TIMEOUT, self.make_spare_now());
        tokio::select! {
            r = made => r.map_err(|_| WarmError::Spare("the spare was not ready in time".to_owned()))?,
            () = self.dead.cancelled() => Err(WarmError::Gone),
        }
    }

    async fn make_spare_now(self: &Arc<Self>) -> Result<Spare, WarmError> {
        let (sock, exit) = self.fork_spare().await?;
        // Its directories, then its confinement; meanwhile its call's cgroups.
        let (pid, tag, dirs) = its_directories(&sock).await?;
        let moving = self.move_in(pid);
        self.confine(&sock, &dirs).await?;
        drop(dirs);
        let ready = expect(&sock, Some(pid)).await?;
        if !matches!(ready.parse::<FromSpare>(), Ok(FromSpare::Ready)) {
            return Err(WarmError::Spare("the spare was not confined".to_owned()));
        }
        let cgroups = match moving {
            Some(task) => {
                let (c, result) = task
                    .await
                    .map_err(|e| WarmError::Spare(format!("moving the spare: {e}")))?;
                result.map_err(WarmError::io("moving the spare into its call's cgroups"))?;
                c
            }
            None => RunCgroups::none(),
        };
        Ok(Spare {
            pid,
            sock,
            tag,
            cgroups,
            exit,
        })
    }

    /// Asks the template to fork a spare: its socket, and its wait status when it is reaped.
    async fn fork_spare(&self) -> Result<(AsyncFd<OwnedFd>, oneshot::Receiver<i32>), WarmError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (reply_tx, reply_rx) = oneshot::channel();
        let (exit_tx, exit_rx) = oneshot::channel();
        lock(&self.replies).insert(id, reply_tx);
        lock(&self.exits).insert(id, exit_tx);
        let forget = |t: &Self| {
            lock(&t.replies).remove(&id);
            lock(&t.exits).remove(&id);
        };
        let sent = wire::send(&self.ctl, &json!({"op": "spare", "id": id}), &[]).await;
        if let Err(e) = sent {
            forget(self);
            return Err(WarmError::Spare(format!("asking for a spare: {e}")));
        }
        let mut reply = reply_rx.await.map_err(|_| WarmError::Gone)?;
        let Some(fd) = reply.fds.pop() else {
            forget(self);
            let said = reply.parse::<FromTemplate>().ok();
            return Err(WarmError::Spare(match said {
                Some(FromTemplate::Spare {
                    error: Some(error), ..
                }) => format!("the template could not fork: {error}"),
                _ => "no socket came with the spare".to_owned(),
            }));
        };
        let sock = wire::async_socket(fd).map_err(WarmError::io("the spare's socket"))?;
        Ok((sock, exit_rx))
    }

    /// Starts moving the spare `pid` into fresh call cgroups (unless that layer is off for
    /// measurements, or the template has no cgroups any more).
    fn move_in(&self, pid: i32) -> Option<Moving> {
        let limits = CgroupLimits::run(self.spec.max_processes, self.spec.memory_bytes);
        let cgroups = self.call_cgroups.then(|| {
            let guard = lock(&self.cgroups);
            guard.as_ref().map(|(t, _)| t.create_call(limits))
        });
        cgroups.flatten().map(|c| {
            tokio::task::spawn_blocking(move || {
                let result = c.move_in(pid);
                (c, result)
            })
        })
    }

    /// Sends the spare its call's Landlock ruleset, built from its directories' handles
    /// (`dirs`).
    async fn confine(&self, sock: &AsyncFd<OwnedFd>, dirs: &Received) -> Result<(), WarmError> {
        if self.call_landlock {
            let ruleset = self
                .rules
                .for_call(&dirs.fds, self.spec.network)
                .map_err(|e| WarmError::Spare(e.to_string()))?;
            wire::send(sock, &json!({"op": "confine"}), &[ruleset.as_fd()])
                .await
                .map_err(WarmError::io("confining the spare"))
        } else {
            // Measurements only (`WarmConfig::disabled_call_layers`): no call domain.
            wire::send(sock, &json!({"op": "confine", "skip": true}), &[])
                .await
                .map_err(WarmError::io("readying the spare"))
        }
    }
}

/// A new spare's first message: its host pid (from the kernel's credentials), the tag of its
/// directories, and their two handles (in the message).
async fn its_directories(sock: &AsyncFd<OwnedFd>) -> Result<(i32, String, Received), WarmError> {
    let dirs = expect(sock, None).await?;
    let pid = dirs.pid.filter(|p| *p > 0).ok_or_else(|| {
        WarmError::Spare("no credentials on the spare's first message".to_owned())
    })?;
    let tag = match dirs.parse::<FromSpare>() {
        Ok(FromSpare::Dirs { tag })
            if tag.len() == 24 && tag.bytes().all(|b| b.is_ascii_hexdigit()) =>
        {
            tag
        }
        _ => return Err(WarmError::Spare("an unexpected first message".to_owned())),
    };
    if dirs.fds.len() != 2 {
        return Err(WarmError::Spare(
            "the spare sent no directory handles".to_owned(),
        ));
    }
    Ok((pid, tag, dirs))
}

/// Reads the next message of a spare, which must come from `pid` when given.
async fn expect(sock: &AsyncFd<OwnedFd>, pid: Option<i32>) -> Result<Received, WarmError> {
    let m = wire::recv(sock)
        .await
        .map_err(WarmError::io("reading the spare"))?
        .ok_or_else(|| WarmError::Spare("the spare exited".to_owned()))?;
    if pid.is_some() && m.pid != pid {
        return Err(WarmError::Spare(
            "a message from another process".to_owned(),
        ));
    }
    Ok(m)
}
