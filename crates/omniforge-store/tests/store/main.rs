//! Integration tests of `omniforge-store` against real SQLite files in temporary directories.
//! All of them build into this one binary (like ripgrep's `tests/`); no mocks.
//!
//! - `tools`: create, versions, rollback, enable/disable, purge, ordering, names, env ids.
//! - `calls`: the call log (the call history) and its pruning.
//! - `changes`: the change feed: keys per write, other processes, pruning, the wake-up.
//! - `secrets`: secret storage and what listing reveals.
//! - `content`: resources, resource templates, prompts and pack imports.
//! - `processes`: several store instances on one file (as server and CLI are), backup under
//!   writes, concurrent writers and busy timeouts, and the `kill -9` durability test.

mod calls;
mod changes;
mod content;
mod copy;
mod listen;
mod processes;
mod secrets;
mod tools;
mod util;
