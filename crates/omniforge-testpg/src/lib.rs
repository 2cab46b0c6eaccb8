//! A throwaway PostgreSQL cluster for tests, started by the tests themselves from Debian's
//! PostgreSQL binaries (`initdb`, `pg_ctl`, `psql` in `/usr/lib/postgresql/15/bin`, installed by
//! `scripts/bootstrap`), in a temporary directory, on a free port of 127.0.0.1. Nothing relies on
//! a service that is already running.
//!
//! # One cluster per run, one database per test
//! [`shared`] gives every test process of a run (`cargo test` runs one process per test binary,
//! nextest one per test) the same cluster: the first process that asks starts it, the others
//! find it; each test then asks for its own database ([`Cluster::database`]), created from
//! `template0` by file copy (tens of milliseconds) and dropped when the [`TestDb`] is dropped.
//! [`Cluster::private`] starts a cluster of one's own, for a test that restarts or stops it.
//!
//! # Stopped at the end, whatever happens
//! A process that uses a cluster holds a shared `flock` on the cluster's `users.lock` for the
//! rest of its life; the kernel releases it when the process exits, panics or is killed. A small
//! reaper (`sh` + `flock`, started with the cluster, in its own process group so a test
//! runner's kill does not reach it) waits for the exclusive lock, that is, for the last user to
//! be gone, lets 2 seconds pass for the next test process of the run, and then, if still nobody
//! uses it, stops the cluster (`pg_ctl stop -m immediate`) and removes its directory. A new
//! user arriving while it stops waits, then starts a new cluster.
//!
//! # Root
//! `initdb` refuses to run as root, and CI runs as root: then every server command runs as the
//! `postgres` user (`runuser -u postgres`), and the data directory (in `/tmp`, 0700) belongs to
//! it. As another user, they run as that user.
//!
//! The cluster trusts local connections (`-A trust`) on 127.0.0.1 only, and runs without
//! `fsync` (a test cluster never outlives the machine's uptime); connect as `postgres`.

#![deny(missing_docs)]
#![cfg_attr(not(test), warn(clippy::unwrap_used, clippy::expect_used))]

use std::fs::{self, File, OpenOptions};
use std::io;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use rustix::fs::{FlockOperation, flock};

/// Where Debian's PostgreSQL 15 puts its server binaries.
pub const DEFAULT_BIN_DIR: &str = "/usr/lib/postgresql/15/bin";

/// Grace before the reaper stops a cluster nobody uses: the gap between two test processes.
const REAPER_GRACE_SECS: u32 = 2;

/// A running cluster: where it listens and lives.
#[derive(Debug)]
pub struct Cluster {
    port: u16,
    /// The directory with `data/`, the server log and the socket.
    dir: PathBuf,
    bin: PathBuf,
    /// How long starting it took (`initdb` + `pg_ctl start`), or zero when it was found running.
    started_in: Duration,
    /// The shared lock on `users.lock`, held as long as this value lives.
    _user: File,
}

/// One test's database on a cluster; dropped (`DROP DATABASE ... WITH (FORCE)`) with this value.
#[derive(Debug)]
pub struct TestDb<'c> {
    cluster: &'c Cluster,
    name: String,
}

/// The cluster every test process of this run shares, started by the first one that asks.
/// `state_dir` holds the locks and the cluster's address: pass the same directory from every
/// test crate (their `env!("CARGO_TARGET_TMPDIR")`, the workspace's `target/tmp`).
///
/// # Errors
/// The PostgreSQL binaries are missing (run `scripts/bootstrap`), or `initdb`/`pg_ctl` failed:
/// the error carries their output.
pub fn shared(state_dir: &Path) -> io::Result<&'static Cluster> {
    static SHARED: OnceLock<Result<Cluster, String>> = OnceLock::new();
    SHARED
        .get_or_init(|| {
            Cluster::open(&state_dir.join("omniforge-testpg"), true).map_err(|e| e.to_string())
        })
        .as_ref()
        .map_err(|e| io::Error::other(e.clone()))
}

impl Cluster {
    /// A cluster of the caller's own, stopped when this value is dropped (and by the reaper
    /// if the process dies first). Its state lives in a new directory under `state_dir`.
    ///
    /// # Errors
    /// As [`shared`].
    pub fn private(state_dir: &Path) -> io::Result<Cluster> {
        fs::create_dir_all(state_dir)?;
        let dir = tempfile::Builder::new()
            .prefix("omniforge-testpg-private-")
            .tempdir_in(state_dir)?
            .keep();
        Cluster::open(&dir, false)
    }

    /// The port it listens on, on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// How long this process waited for the cluster to start: `initdb` plus `pg_ctl start`, or
    /// zero when another process had started it.
    pub fn started_in(&self) -> Duration {
        self.started_in
    }

    /// The URL of database `name` as the superuser `postgres`.
    pub fn url(&self, name: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{name}", self.port)
    }

    /// A new, empty database for one test, named after `label` (letters, digits, `_`; the
    /// rest is replaced), this process and a counter, so tests never share one.
    ///
    /// # Errors
    /// `CREATE DATABASE` failed (its `psql` output is in the error).
    pub fn database(&self, label: &str) -> io::Result<TestDb<'_>> {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let label: String = label
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() {
                    c.to_ascii_lowercase()
                } else {
                    '_'
                }
            })
            .take(30)
            .collect();
        let name = format!(
            "t_{label}_{}_{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        self.sql(&format!(
            "CREATE DATABASE {name} TEMPLATE template0 STRATEGY FILE_COPY"
        ))?;
        Ok(TestDb {
            cluster: self,
            name,
        })
    }

    /// Runs SQL on the `postgres` database with `psql`, returning its unaligned output.
    ///
    /// # Errors
    /// `psql` failed; its stderr is in the error.
    pub fn sql(&self, sql: &str) -> io::Result<String> {
        self.sql_on("postgres", sql)
    }

    /// Runs SQL on database `name` with `psql`, returning its unaligned, tuples-only output.
    ///
    /// # Errors
    /// `psql` failed; its stderr is in the error.
    pub fn sql_on(&self, name: &str, sql: &str) -> io::Result<String> {
        let out = Command::new(self.bin.join("psql"))
            .args([
                "-X",
                "-v",
                "ON_ERROR_STOP=1",
                "-Atq",
                "-h",
                "127.0.0.1",
                "-U",
                "postgres",
            ])
            .arg("-p")
            .arg(self.port.to_string())
            .arg("-d")
            .arg(name)
            .arg("-c")
            .arg(sql)
            .stdin(Stdio::null())
            .output()?;
        checked("psql", out).map(|o| String::from_utf8_lossy(&o.stdout).trim_end().to_owned())
    }

    /// Restarts the server ([`stop`](Cluster::stop), then [`start_again`](Cluster::start_again)):
    /// every connection is cut. Only for a [`private`](Cluster::private) cluster: other tests
    /// share the [`shared`] one. (Not `pg_ctl restart`: the server it starts writes its log to
    /// pg_ctl's stdout, the pipe this process reads to the end, so the call never returned.)
    ///
    /// # Errors
    /// `pg_ctl` failed.
    pub fn restart(&self) -> io::Result<()> {
        self.stop()?;
        self.start_again()
    }

    /// Stops the server now (`pg_ctl stop -m fast`), for a test of a database that is down;
    /// [`start_again`](Cluster::start_again) brings it back on the same port.
    ///
    /// # Errors
    /// `pg_ctl` failed.
    pub fn stop(&self) -> io::Result<()> {
        self.pg_ctl(&["stop", "-m", "fast", "-w", "-t", "60"])
    }

    /// Starts a [`stop`](Cluster::stop)ped server again, on the same port.
    ///
    /// # Errors
    /// `pg_ctl` failed.
    pub fn start_again(&self) -> io::Result<()> {
        start_server(&self.bin, &self.dir, self.port)
    }

    fn pg_ctl(&self, args: &[&str]) -> io::Result<()> {
        let data = self.dir.join("data");
        let mut cmd = as_server_user(&self.bin.join("pg_ctl"));
        cmd.args(args).arg("-D").arg(&data).stdin(Stdio::null());
        checked("pg_ctl", cmd.output()?).map(drop)
    }

    /// Takes the user lock of the cluster whose state is in `state`, starting the cluster
    /// unless `reuse` finds one running.
    fn open(state: &Path, reuse: bool) -> io::Result<Cluster> {
        fs::create_dir_all(state)?;
        let bin = bin_dir()?;
        // Setups one at a time; a user lock is taken (and waits while a reaper stops the
        // cluster) before the address is read.
        let setup = lock_file(&state.join("setup.lock"))?;
        flock(&setup, FlockOperation::LockExclusive)?;
        let user = lock_file(&state.join("users.lock"))?;
        flock(&user, FlockOperation::LockShared)?;
        let address = state.join("cluster");
        if reuse && let Some((port, dir)) = read_address(&address) {
            let found = Cluster {
                port,
                dir,
                bin: bin.clone(),
                started_in: Duration::ZERO,
                _user: user.try_clone()?,
            };
            if found.sql("SELECT 1").is_ok() {
                return Ok(found);
            }
        }
        let started = Instant::now();
        let dir = tempfile::Builder::new()
            .prefix("omniforge-testpg-")
            .tempdir_in("/tmp")?
            .keep();
        let (port, result) = init_and_start(&bin, &dir);
        if let Err(e) = result {
            let _ = fs::remove_dir_all(&dir);
            return Err(e);
        }
        fs::write(&address, format!("{port}\n{}\n", dir.display()))?;
        spawn_reaper(state, &dir, &bin)?;
        let started_in = started.elapsed();
        eprintln!(
            "omniforge-testpg: PostgreSQL cluster on 127.0.0.1:{port} started in {started_in:.2?}"
        );
        drop(setup);
        Ok(Cluster {
            port,
            dir,
            bin,
            started_in,
            _user: user,
        })
    }
}

impl TestDb<'_> {
    /// The database's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its URL, as the superuser `postgres`.
    pub fn url(&self) -> String {
        self.cluster.url(&self.name)
    }

    /// The cluster it is on.
    pub fn cluster(&self) -> &Cluster {
        self.cluster
    }

    /// Runs SQL on this database with `psql` (see [`Cluster::sql_on`]).
    ///
    /// # Errors
    /// `psql` failed.
    pub fn sql(&self, sql: &str) -> io::Result<String> {
        self.cluster.sql_on(&self.name, sql)
    }
}

impl Drop for TestDb<'_> {
    fn drop(&mut self) {
        // Best effort: the whole cluster goes at the end of the run anyway.
        let _ = self.cluster.sql(&format!(
            "DROP DATABASE IF EXISTS {} WITH (FORCE)",
            self.name
        ));
    }
}

/// The server binaries: `$OMNIFORGE_PG_BIN`, else [`DEFAULT_BIN_DIR`].
fn bin_dir() -> io::Result<PathBuf> {
    let dir = std::env::var_os("OMNIFORGE_PG_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(DEFAULT_BIN_DIR));
    if dir.join("initdb").is_file() && dir.join("pg_ctl").is_file() && dir.join("psql").is_file() {
        Ok(dir)
    } else {
        Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!(
                "PostgreSQL's initdb, pg_ctl and psql are not in {} (run scripts/bootstrap, which installs Debian's postgresql, or set OMNIFORGE_PG_BIN)",
                dir.display()
            ),
        ))
    }
}

fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// `program` as the user that runs the server: `postgres` when we are root.
fn as_server_user(program: &Path) -> Command {
    if is_root() {
        let mut cmd = Command::new("runuser");
        cmd.args(["-u", "postgres", "--"]).arg(program);
        cmd
    } else {
        Command::new(program)
    }
}

/// `initdb` in `dir/data`, then the server on a free port (another try on a new port if a
/// race took it). Returns the port.
fn init_and_start(bin: &Path, dir: &Path) -> (u16, io::Result<()>) {
    let result = (|| {
        if is_root() {
            checked(
                "chown",
                Command::new("chown")
                    .arg("postgres:postgres")
                    .arg(dir)
                    .output()?,
            )?;
        }
        let mut initdb = as_server_user(&bin.join("initdb"));
        initdb
            .arg("-D")
            .arg(dir.join("data"))
            .args([
                "-U",
                "postgres",
                "-A",
                "trust",
                "-N",
                "-E",
                "UTF8",
                "--locale=C.UTF-8",
            ])
            .stdin(Stdio::null());
        checked("initdb", initdb.output()?).map(drop)
    })();
    if let Err(e) = result {
        return (0, Err(e));
    }
    let mut last = io::Error::other("no port tried");
    for _ in 0..3 {
        let port = match free_port() {
            Ok(port) => port,
            Err(e) => return (0, Err(e)),
        };
        match start_server(bin, dir, port) {
            Ok(()) => return (port, Ok(())),
            Err(e) => last = e,
        }
    }
    (0, Err(last))
}

/// `pg_ctl start` of `dir/data` on `port`, in its own process group (a test runner that kills
/// a test's group must not kill the shared server), waiting until it accepts connections.
fn start_server(bin: &Path, dir: &Path, port: u16) -> io::Result<()> {
    use std::os::unix::process::CommandExt;
    let settings = format!(
        "-c listen_addresses=127.0.0.1 -p {port} -c unix_socket_directories={} \
         -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=400",
        dir.display()
    );
    let mut cmd = as_server_user(&bin.join("pg_ctl"));
    cmd.arg("start")
        .arg("-D")
        .arg(dir.join("data"))
        .arg("-l")
        .arg(dir.join("server.log"))
        .args(["-w", "-t", "60", "-o"])
        .arg(settings)
        .stdin(Stdio::null())
        .process_group(0);
    let out = cmd.output()?;
    checked("pg_ctl start", out).map(drop).map_err(|e| {
        let log = fs::read_to_string(dir.join("server.log")).unwrap_or_default();
        io::Error::new(e.kind(), format!("{e}\nserver log:\n{log}"))
    })
}

/// Starts the reaper of the cluster in `dir` (see the crate docs), detached from this process:
/// its own process group, no inherited output.
fn spawn_reaper(state: &Path, dir: &Path, bin: &Path) -> io::Result<()> {
    use std::os::unix::process::CommandExt;
    const SCRIPT: &str = r#"
state=$1 dir=$2 pgctl=$3 grace=$4 asuser=$5
while :; do
    flock -x "$state/users.lock" true
    sleep "$grace"
    if flock -xn "$state/users.lock" sh -c '
        if [ -n "$4" ]; then runuser -u postgres -- "$3" stop -D "$2/data" -m immediate -w -t 60
        else "$3" stop -D "$2/data" -m immediate -w -t 60; fi
        rm -f "$1/cluster"; rm -rf "$2"' sh "$state" "$dir" "$pgctl" "$asuser" >/dev/null 2>&1
    then exit 0; fi
done
"#;
    Command::new("sh")
        .args(["-c", SCRIPT, "omniforge-testpg-reaper"])
        .arg(state)
        .arg(dir)
        .arg(bin.join("pg_ctl"))
        .arg(REAPER_GRACE_SECS.to_string())
        .arg(if is_root() { "root" } else { "" })
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .map(drop)
}

fn lock_file(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
}

fn read_address(path: &Path) -> Option<(u16, PathBuf)> {
    let text = fs::read_to_string(path).ok()?;
    let mut lines = text.lines();
    let port = lines.next()?.parse().ok()?;
    Some((port, PathBuf::from(lines.next()?)))
}

/// A port of 127.0.0.1 that was free a moment ago.
fn free_port() -> io::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// `out` if the command succeeded, else an error with its stderr and stdout.
fn checked(what: &str, out: Output) -> io::Result<Output> {
    if out.status.success() {
        Ok(out)
    } else {
        Err(io::Error::other(format!(
            "{what} failed ({}): {}{}",
            out.status,
            String::from_utf8_lossy(&out.stderr),
            String::from_utf8_lossy(&out.stdout)
        )))
    }
}
