//! Stored resources, resource templates and prompts: what `resources/*`, `prompts/*` and
//! `completion/complete` serve, and how they are written.
//!
//! - [`args`]: the authoring shapes (one definition each, shared by the built-ins, the
//!   command line and packs) and their validation.
//! - [`uri_template`]: RFC 6570 parsing and matching (level 1-2), placeholder filling.
//! - [`snapshot`]: [`Content`](snapshot::Content), what is enabled now, reloaded on change,
//!   with the notifications a change sends; [`subscriptions`]: who is told a resource changed.
//! - [`read`], [`prompts`], [`completion`]: `resources/read`, `prompts/get`,
//!   `completion/complete`; [`run`]: a script template's or prompt's run through the call
//!   loop ([`runs`](crate::runs)).
//! - [`definitions`]: writing and removing definitions, and reading them back as arguments.
//!
//! Template and completion scripts run in the tools' sandbox through the
//! [script host](crate::script_host).

pub(crate) mod args;
pub(crate) mod completion;
pub(crate) mod definitions;
pub(crate) mod prompts;
pub(crate) mod read;
pub(crate) mod run;
pub(crate) mod snapshot;
pub(crate) mod subscriptions;
pub(crate) mod uri_template;
