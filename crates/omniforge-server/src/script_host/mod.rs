//! The one script host that stored tools and content share (the script crate does the work;
//! this is how the server drives it).
//!
//! - [`host`]: [`ScriptHost`](host::ScriptHost), the sandbox runner and the environment
//!   builder (made on first use), and running a stored script to its stdout.
//! - [`prepare`]: turning code and dependencies into something runnable: the syntax check (the
//!   script crate's), PEP 723 dependencies, the timeout rule, the lock and the environment build
//!   with progress.
//! - [`install`]: environments of versions made through another replica, installed from
//!   their stored locks as soon as this server hears of them; a run waits for its own.
//! - [`gc`]: the hourly removal of environments no version uses.
//! - [`disk`]: what the environments take on disk (a bounded walk, for the console).
//! - [`warm`]: the warm templates of stored calls (the script crate's pool), told which
//!   version of each tool is current.

pub(crate) mod disk;
pub(crate) mod gc;
pub(crate) mod host;
pub(crate) mod install;
pub(crate) mod prepare;
pub(crate) mod warm;
