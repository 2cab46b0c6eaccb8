//! Pages of `tools/list` as rmcp `Tool`s, and the few a snapshot keeps.
//!
//! A catalog entry keeps its served `Tool` as JSON (compact: 100,000 stored tools, issue 14),
//! so a page is parsed back before rmcp serializes it again: about a millisecond for a page of
//! 1,000 small tools. A snapshot keeps the last [`CACHED_PAGES`] pages it built for callers
//! without pending versions of their own (whose view is the merge alone), keyed by offset,
//! size and the scopes the caller holds; a new snapshot (any change) starts with none.

use std::sync::{Arc, Mutex};

use rmcp::model::Tool;

use crate::auth::Scope;

/// How many pages a snapshot keeps (each about 3 MB for 1,000 small tools).
pub(crate) const CACHED_PAGES: usize = 2;

/// One page of `tools/list`.
#[derive(Debug)]
pub(crate) struct Page {
    /// The page's tools.
    pub(crate) tools: Vec<Tool>,
    /// Whether visible tools follow it.
    pub(crate) more: bool,
}

/// Which page, for whom: the offset, the page size and the scopes the caller holds
/// (`tools:call`, `tools:write`, `admin`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PageKey {
    pub(crate) offset: usize,
    pub(crate) size: usize,
    pub(crate) scopes: [bool; 3],
}

impl PageKey {
    /// The key of the page at `offset` of `size` tools for a caller allowed what `allows` says.
    pub(crate) fn new(offset: usize, size: usize, allows: impl Fn(Scope) -> bool) -> PageKey {
        PageKey {
            offset,
            size,
            scopes: [Scope::Call, Scope::Write, Scope::Admin].map(allows),
        }
    }
}

/// The pages a snapshot keeps, most recent last. A std lock, held for the lookup only.
#[derive(Debug, Default)]
pub(crate) struct PageCache {
    pages: Mutex<Vec<(PageKey, Arc<Page>)>>,
}

impl PageCache {
    /// The page `key`, built by `build` unless kept (`None`, past the end, is not kept).
    pub(crate) fn get_or_build(
        &self,
        key: PageKey,
        build: impl FnOnce() -> Option<Page>,
    ) -> Option<Arc<Page>> {
        if let Some((_, page)) = self.lock().iter().find(|(k, _)| *k == key) {
            return Some(page.clone());
        }
        // Built outside the lock: two callers may build the same page at once, both valid.
        let page = Arc::new(build()?);
        let mut pages = self.lock();
        if !pages.iter().any(|(k, _)| *k == key) {
            if pages.len() >= CACHED_PAGES {
                pages.remove(0);
            }
            pages.push((key, page.clone()));
        }
        Some(page)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<(PageKey, Arc<Page>)>> {
        self.pages.lock().unwrap_or_else(|e| e.into_inner())
    }
}
