//! End-to-end tests: the real `omniforge` binary, driven over stdio and Streamable HTTP.
//!
//! All end-to-end tests build into this one test binary (`e2e`), like ripgrep's `tests/`:
//! `support` starts servers (each with its own temp data dir) and speaks the transports, and
//! `wire` replays the interop wire cases from `tests/data/wire-cases.jsonl` as data.
//!
//! Run: `cargo nextest run -p omniforge --test e2e` (or `cargo test -p omniforge --test e2e`).

mod approval;
mod audit_retention;
mod authoring_audit;
mod call_log;
mod cli;
mod client_features;
mod clients;
mod connections;
mod console;
mod console_oauth;
mod container;
mod content;
mod escape;
mod examples;
mod input_required;
mod key_rotation;
mod kubernetes;
mod manifest_tools;
mod metrics;
mod oauth;
mod postgres;
mod replicas;
mod robustness;
mod schema_profile;
mod script_tools;
mod search;
mod secrets;
mod server;
mod sessions;
mod stateless;
mod stateless_replicas;
mod support;
mod tasks;
mod tidy;
mod traces;
mod walkthrough;
mod warm;
mod wire;
