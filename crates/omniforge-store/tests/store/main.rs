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
//! - `status`: pending, draft and rejected versions, approval, the transitions the database
//!   allows, examples and their results.
//! - `grants`: secret grants per tool version, requests, revocation, packs, the feed.
//! - `at_rest`: sealed secrets, tampering, key rotation, no key, the plain-text upgrade,
//!   backups without the key.
//! - `audit`: one record per action with its principal, in the action's transaction,
//!   append-only, queries and the retention prune.
//! - `outputs`: kept outputs, readable by their owner only, expiry and purge.
//! - `tasks`: durable tasks: ownership, input in parts, cancels on the feed, leases, TTLs,
//!   restarts.
//! - `hours`: the call log of every source, digests and texts, and the hourly statistics.
//! - `migrations`: a database of the previous schema opens with its data intact.

mod at_rest;
mod audit;
mod calls;
mod changes;
mod content;
mod copy;
mod grants;
mod hours;
mod listen;
mod migrations;
mod outputs;
mod processes;
mod schema;
mod secrets;
mod status;
mod tasks;
mod tools;
mod util;
