//! How much disk the tool environments take: one bounded walk of `<data_dir>/envs`, for the
//! console's server page. Which environments are in use is what [`gc`](super::gc) asks the
//! store (`env_ids_in_use`); an environment outside that set is what the next collection (or
//! `omniforge gc`) removes.

use std::collections::HashSet;
use std::path::Path;

use omniforge_script::Layout;

/// The most directory entries one walk looks at, over all environments. Past it the sizes
/// are lower bounds and the report says so (a venv holds a few thousand files; this covers
/// dozens of large ones without letting a page load walk a huge tree).
pub(crate) const MAX_ENTRIES: u64 = 200_000;

/// One environment directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct EnvSize {
    /// The directory's name: the environment id (or a `.tmp-*` build in progress).
    pub(crate) env_id: String,
    /// Bytes of the regular files below it (as far as the walk got).
    pub(crate) bytes: u64,
    /// Whether a stored version, template or prompt uses it.
    pub(crate) in_use: bool,
    /// Whether the build finished (its marker file exists).
    pub(crate) built: bool,
}

/// Every environment and their total.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct EnvSizes {
    /// Largest first.
    pub(crate) envs: Vec<EnvSize>,
    /// The sum of `envs`.
    pub(crate) total_bytes: u64,
    /// The walk stopped at [`MAX_ENTRIES`]: the sizes are lower bounds.
    pub(crate) truncated: bool,
}

/// Measures every directory in `layout`'s environments directory, looking at `max_entries`
/// entries at most. Blocking: run it on a blocking thread. Symbolic links are counted as
/// links, never followed. A missing directory measures as empty; unreadable entries are
/// skipped.
pub(crate) fn env_sizes(layout: &Layout, in_use: &HashSet<String>, max_entries: u64) -> EnvSizes {
    let mut budget = max_entries;
    let mut out = EnvSizes::default();
    let Ok(entries) = std::fs::read_dir(layout.envs_dir()) else {
        return out;
    };
    for entry in entries.flatten() {
        let Ok(name) = entry.file_name().into_string() else {
            continue;
        };
        if !entry.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let path = entry.path();
        let bytes = walk(&path, &mut budget);
        out.total_bytes += bytes;
        out.envs.push(EnvSize {
            built: layout.env(&name).is_built(),
            in_use: in_use.contains(&name),
            env_id: name,
            bytes,
        });
    }
    out.truncated = budget == 0;
    out.envs
        .sort_by(|a, b| b.bytes.cmp(&a.bytes).then(a.env_id.cmp(&b.env_id)));
    out
}

/// The bytes of the regular files below `dir`, spending one unit of `budget` per entry.
fn walk(dir: &Path, budget: &mut u64) -> u64 {
    let mut bytes = 0;
    let mut stack = vec![dir.to_owned()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            if *budget == 0 {
                return bytes;
            }
            *budget -= 1;
            // `file_type` and `symlink_metadata` do not follow links.
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if kind.is_dir() {
                stack.push(entry.path());
            } else if kind.is_file() {
                bytes += entry.metadata().map_or(0, |m| m.len());
            }
        }
    }
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_each_environment_marks_use_and_stops_at_the_cap() {
        let dir = tempfile::tempdir().unwrap();
        let layout = Layout::new(dir.path());
        let used = layout.env_dir("used");
        std::fs::create_dir_all(used.join("lib/deep")).unwrap();
        std::fs::write(used.join("lib/deep/a.py"), vec![b'x'; 3000]).unwrap();
        std::fs::write(used.join("b"), vec![b'x'; 1000]).unwrap();
        std::fs::write(used.join(".omniforge-env"), b"").unwrap();
        let stale = layout.env_dir("stale");
        std::fs::create_dir_all(&stale).unwrap();
        std::fs::write(stale.join("c"), vec![b'x'; 500]).unwrap();
        // A link to a big file outside is counted as a link, not followed.
        let outside = dir.path().join("big");
        std::fs::write(&outside, vec![b'x'; 100_000]).unwrap();
        std::os::unix::fs::symlink(&outside, stale.join("link")).unwrap();

        let in_use: HashSet<String> = ["used".to_owned()].into();
        let sizes = env_sizes(&layout, &in_use, MAX_ENTRIES);
        assert!(!sizes.truncated);
        assert_eq!(sizes.total_bytes, 4500);
        assert_eq!(
            sizes.envs,
            vec![
                EnvSize {
                    env_id: "used".into(),
                    bytes: 4000,
                    in_use: true,
                    built: true
                },
                EnvSize {
                    env_id: "stale".into(),
                    bytes: 500,
                    in_use: false,
                    built: false
                },
            ]
        );
        let capped = env_sizes(&layout, &in_use, 2);
        assert!(capped.truncated);
        assert!(capped.total_bytes < 4500);

        let none = env_sizes(&Layout::new(dir.path().join("nowhere")), &in_use, 10);
        assert_eq!(none, EnvSizes::default());
    }
}
