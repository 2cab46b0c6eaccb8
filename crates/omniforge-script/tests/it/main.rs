//! Integration tests of `omniforge-script`: real interpreters, real uv, real bubblewrap.
//!
//! One binary (`it`), one module per area. Environments are built with the product's own
//! `EnvBuilder` into `$CARGO_TARGET_TMPDIR`; the base environment (no dependencies) is shared
//! by all tests and processes (identical locks share one env, built atomically). Tests that
//! need a layer assert that the layer is active on this machine instead of skipping.

mod envs;
mod escape;
mod layers;
mod privilege;
mod runs;
mod sandbox;
mod side_channel;
mod util;
mod warm;
