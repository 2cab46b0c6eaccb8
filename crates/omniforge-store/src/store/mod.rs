//! The store traits, the API boundary, one file per family: [`ToolStore`] (tools, versions and
//! their status, example results, the change feed, backups), [`SecretStore`] (secrets, grants,
//! the keyring), [`CallLog`] (calls and hourly statistics), [`AuditLog`], [`OutputStore`] (kept
//! outputs), [`TaskStore`] (durable tasks) and [`ContentStore`] (resources, resource templates, prompts, pack imports).
//! [`Store`] is all of them: what the server holds as `Arc<dyn Store>`.
//!
//! They name only [`model`](crate::model) types and [`StoreError`](crate::StoreError): no SQL
//! and no backend's types, so that another backend (PostgreSQL) can sit beside
//! [`SqliteStore`](crate::SqliteStore).
//!
//! # Transactions
//! Every method that changes something runs in one transaction and returns only after it is
//! durable (committed and synced). Reads see one consistent snapshot per call.
//!
//! # Audit
//! Every authoring or admin write takes an [`Actor`](crate::Actor) and appends its
//! [`AuditRecord`](crate::AuditRecord)s in its own transaction: the action and its record
//! commit together or not at all. A write that fails leaves no record; a record that cannot be
//! written fails the write. Writes that are not actions (the call log, kept outputs, example
//! results) take no actor.

mod audit;
mod calls;
mod content;
mod outputs;
mod secrets;
mod tasks;
mod tools;

pub use audit::AuditLog;
pub use calls::CallLog;
pub use content::ContentStore;
pub use outputs::OutputStore;
pub use secrets::SecretStore;
pub use tasks::TaskStore;
pub use tools::ToolStore;

/// The whole store: every trait of this module. Implemented for every type that implements
/// them all, so `Arc<Engine>` coerces to `Arc<dyn Store>`.
pub trait Store: ContentStore + SecretStore + CallLog + AuditLog + OutputStore + TaskStore {}

impl<T> Store for T where
    T: ContentStore + SecretStore + CallLog + AuditLog + OutputStore + TaskStore + ?Sized
{
}
