//! A private PostgreSQL cluster for the replica benchmarks (issue 14), started as the tests
//! start theirs (`omniforge-testpg`: Debian's binaries, a temporary directory, a free port of
//! 127.0.0.1, as the `postgres` user when root).
//!
//!     pg-cluster STATE_DIR DATABASE
//!
//! Prints the database's URL on one line, then holds the cluster until stdin closes; stops it
//! and removes it then.

use std::io::Read;
use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let state = PathBuf::from(args.next().ok_or("usage: pg-cluster STATE_DIR DATABASE")?);
    let name = args.next().ok_or("usage: pg-cluster STATE_DIR DATABASE")?;
    std::fs::create_dir_all(&state)?;
    let cluster = omniforge_testpg::Cluster::private(&state)?;
    let db = cluster.database(&name)?;
    println!("{}", db.url());
    let mut rest = Vec::new();
    let _ = std::io::stdin().read_to_end(&mut rest);
    drop(db);
    drop(cluster);
    Ok(())
}
