//! [`Backend`]: everything a store backend implements, the store traits and whole-store copies.

use async_trait::async_trait;

use crate::store::ContentStore;

/// A whole store backend: [`ContentStore`] (and so [`ToolStore`](crate::ToolStore)). What
/// [`open`](crate::open) returns; `Arc<dyn Backend>` upcasts to `Arc<dyn ContentStore>` and
/// `Arc<dyn ToolStore>`.
#[async_trait]
pub trait Backend: ContentStore {
    /// `"sqlite"` or `"postgres"`, for logs.
    fn kind(&self) -> &'static str;
}
