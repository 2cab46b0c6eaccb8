//! [`ContentStore`]: resources, resource templates, prompts, and pack imports.

use async_trait::async_trait;

use super::tools::ToolStore;
use crate::error::StoreError;
use crate::model::{
    Actor, ImportBatch, ImportReport, NewPrompt, NewResource, NewTemplate, ResourceInfo,
    StoredPrompt, StoredResource, StoredTemplate, WriteMode,
};

/// Persistence for resources, resource templates and prompts, on the same database (and change
/// feed) as the tools.
///
/// Every write that changes something is one change of the feed
/// ([`ToolStore::changes_since`]), keyed by the URI, URI template or prompt name, and one audit
/// record (`create` or `update` with the definition's hash, or `delete`); a write that changes
/// nothing (same content, already enabled) is neither.
///
/// Writes take the same write lock as tool writes and are durable when they return. Keys are
/// checked for length and, for prompts, [`validate_tool_name`](crate::validate_tool_name)'s rule; everything else is the
/// server's job to validate. Writing a row enables it.
#[async_trait]
pub trait ContentStore: ToolStore {
    /// Every resource without its body, enabled or not, by URI.
    ///
    /// # Errors
    /// [`StoreError::Corrupt`], [`StoreError::Database`].
    async fn list_resources(&self) -> Result<Vec<ResourceInfo>, StoreError>;

    /// One resource with its body.
    ///
    /// # Errors
    /// [`StoreError::Corrupt`], [`StoreError::Database`].
    async fn get_resource(&self, uri: &str) -> Result<Option<StoredResource>, StoreError>;

    /// Writes a resource; returns whether anything changed.
    ///
    /// # Errors
    /// [`StoreError::Duplicate`] / [`StoreError::NotFound`] as `mode` says;
    /// [`StoreError::InvalidName`] for an empty or too long URI; [`StoreError::Invalid`]
    /// (actor); [`StoreError::Database`].
    async fn put_resource(
        &self,
        actor: &Actor,
        resource: NewResource,
        mode: WriteMode,
    ) -> Result<bool, StoreError>;

    /// Removes a resource.
    ///
    /// # Errors
    /// [`StoreError::NotFound`], [`StoreError::Invalid`] (actor), [`StoreError::Database`].
    async fn delete_resource(&self, actor: &Actor, uri: &str) -> Result<(), StoreError>;

    /// Every resource template, enabled or not, by URI template.
    ///
    /// # Errors
    /// [`StoreError::Corrupt`], [`StoreError::Database`].
    async fn list_templates(&self) -> Result<Vec<StoredTemplate>, StoreError>;

    /// Writes a resource template; returns whether anything changed.
    ///
    /// # Errors
    /// As [`put_resource`](ContentStore::put_resource).
    async fn put_template(
        &self,
        actor: &Actor,
        template: NewTemplate,
        mode: WriteMode,
    ) -> Result<bool, StoreError>;

    /// Removes a resource template.
    ///
    /// # Errors
    /// [`StoreError::NotFound`], [`StoreError::Invalid`] (actor), [`StoreError::Database`].
    async fn delete_template(&self, actor: &Actor, uri_template: &str) -> Result<(), StoreError>;

    /// Every prompt, enabled or not, by name.
    ///
    /// # Errors
    /// [`StoreError::Corrupt`], [`StoreError::Database`].
    async fn list_prompts(&self) -> Result<Vec<StoredPrompt>, StoreError>;

    /// Writes a prompt; returns whether anything changed.
    ///
    /// # Errors
    /// As [`put_resource`](ContentStore::put_resource); [`StoreError::InvalidName`] for a bad name.
    async fn put_prompt(
        &self,
        actor: &Actor,
        prompt: NewPrompt,
        mode: WriteMode,
    ) -> Result<bool, StoreError>;

    /// Removes a prompt.
    ///
    /// # Errors
    /// [`StoreError::NotFound`], [`StoreError::Invalid`] (actor), [`StoreError::Database`].
    async fn delete_prompt(&self, actor: &Actor, name: &str) -> Result<(), StoreError>;

    /// One prompt, enabled or not.
    ///
    /// # Errors
    /// [`StoreError::Corrupt`], [`StoreError::Database`].
    async fn get_prompt(&self, name: &str) -> Result<Option<StoredPrompt>, StoreError>;

    /// Writes a whole pack in one transaction: every entry is upserted (a tool whose current
    /// version equals the given one, author aside, gets no new version; a disabled one is
    /// enabled). New tool versions are live; they get no grants (an admin grants after the
    /// import). Either everything is written or, on any error, nothing. Each entry that
    /// changed is one change of the feed and one audit record (with `via: import` in the
    /// detail); an import that changes nothing leaves the counter. Every import, even one that
    /// changes nothing, writes one `import` record of `pack`, with `changed` and `unchanged` in
    /// the detail.
    ///
    /// # Errors
    /// The first failing entry's error (names validated, [`StoreError::Invalid`] fields);
    /// [`StoreError::Invalid`] (actor); [`StoreError::Database`].
    async fn import(&self, actor: &Actor, batch: ImportBatch) -> Result<ImportReport, StoreError>;
}
