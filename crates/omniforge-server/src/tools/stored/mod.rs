//! Stored (script) tools: forged by agents, kept in the store, run in the sandbox through the
//! call loop ([`runs`](crate::runs)).
//!
//! - [`source`]: the enabled tools as catalog entries; one entry updated per change.
//! - [`call`]: one call: secrets, the run, the result shaped and redacted, the call log.
//! - [`versions`]: the versions calls run, read from the store at call time (LRU cache).
//! - [`shape`]: a run's output to a result (helper result, outputSchema, size cap).
//! - [`kept`]: the whole output behind a cut result's resource link.

pub(crate) mod call;
pub(crate) mod kept;
pub(crate) mod shape;
pub(crate) mod source;
pub(crate) mod versions;
