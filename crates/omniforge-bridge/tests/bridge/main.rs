//! Integration tests of `omniforge-bridge`; all of them build into this one binary.
//!
//! - `upstream`: calls against real HTTP servers on 127.0.0.1 (a `std::net::TcpListener` in a
//!   thread, speaking HTTP/1.1 by hand so that a test controls every byte): the response size
//!   cap while streaming a gigabyte, declared lengths, the exact boundary, and redirects.
//! - `manifest_props`: property tests of the manifest loader (`proptest`): arbitrary input never
//!   panics, and whatever loads obeys the manifest rules.
//!
//! The end-to-end tests against the real Connect fixture service live in the binary's e2e
//! suite (`crates/omniforge/tests/e2e/manifest_tools.rs`).

mod manifest_props;
mod upstream;
