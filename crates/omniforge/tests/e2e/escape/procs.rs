//! The host's view of the processes an attack leaves: the test's marker in their argv.

use super::*;

/// Live, non-zombie processes whose argv contains `marker`: (pid, cmdline).
pub(super) fn marked(marker: &str) -> Vec<(i32, String)> {
    let mut found = Vec::new();
    let me = std::process::id() as i32;
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return found;
    };
    for entry in dir.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<i32>().ok())
        else {
            continue;
        };
        if pid == me {
            continue;
        }
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if !cmdline.contains(marker) {
            continue;
        }
        let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        if stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'))
        {
            continue;
        }
        found.push((pid, cmdline));
    }
    found
}

/// Watches /proc for `marker` processes from a thread until dropped: the most seen at once.
pub(super) struct Watch {
    pub(super) stop: Arc<AtomicBool>,
    pub(super) max: Arc<AtomicUsize>,
    pub(super) thread: Option<std::thread::JoinHandle<()>>,
}

impl Watch {
    pub(super) fn start(marker: &str) -> Watch {
        let stop = Arc::new(AtomicBool::new(false));
        let max = Arc::new(AtomicUsize::new(0));
        let thread = std::thread::spawn({
            let (stop, max, marker) = (stop.clone(), max.clone(), marker.to_owned());
            move || {
                while !stop.load(Ordering::Relaxed) {
                    max.fetch_max(marked(&marker).len(), Ordering::Relaxed);
                    // scenario: sampling /proc every 15 ms for the most marked processes at once
                    std::thread::sleep(Duration::from_millis(15));
                }
            }
        });
        Watch {
            stop,
            max,
            thread: Some(thread),
        }
    }

    pub(super) fn finish(mut self) -> usize {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        self.max.load(Ordering::Relaxed)
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Waits up to `grace` for every `marker` process to be gone; kills (by pid) and returns the
/// ones still alive then. They carry this test's unique marker, so they are this test's.
pub(super) async fn leftovers(marker: &str, grace: Duration) -> Vec<String> {
    let gone = try_eventually(grace, async || {
        let left = marked(marker);
        if left.is_empty() {
            Ok(())
        } else {
            Err(left.len().to_string())
        }
    })
    .await;
    let left = if gone.is_ok() {
        Vec::new()
    } else {
        marked(marker)
    };
    for (pid, _) in &left {
        let _ = std::process::Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status();
    }
    left.into_iter()
        .map(|(pid, cmd)| format!("pid {pid}: {cmd}"))
        .collect()
}
