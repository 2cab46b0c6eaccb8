//! The tool sources, each publishing [`Entry`]s whose calls implement the one
//! [`ToolCall`](crate::catalog::call::ToolCall) trait:
//! - [`builtin`]: `omniforge_instructions`, the discovery built-ins and `omniforge_call_tool`;
//! - [`authoring`]: the authoring built-ins (tools, secrets, content);
//! - [`manifest`]: RPCs of operator-configured forge manifests;
//! - [`stored`]: script tools kept in the store.
//!
//! [`ops`]: the built-ins as typed operations, their derived inputSchemas and their one MCP
//! adapter. [`builtins`] is the one place built-ins are registered, in catalog order.

pub(crate) mod authoring;
pub(crate) mod builtin;
pub(crate) mod manifest;
pub(crate) mod ops;
pub(crate) mod stored;

use std::sync::Arc;

use omniforge_store::Store;

use crate::catalog::entry::Entry;
use crate::content::snapshot::Content;
use crate::tools::authoring::approval::Approval;
use crate::tools::authoring::tool::ToolAuthoring;
use crate::tools::builtin::search::{Discovery, GetToolSchemas, SearchTools};

/// What the authoring built-ins work on: each family's operations work on one part
/// ([`Part`]).
pub(crate) struct Authoring {
    /// The tool built-ins' service.
    pub(crate) tools: Arc<ToolAuthoring>,
    /// The approval gate's service.
    pub(crate) approval: Arc<Approval>,
    /// The store of secrets.
    pub(crate) store: Arc<dyn Store>,
    /// Stored resources, templates and prompts.
    pub(crate) content: Arc<Content>,
}

/// Every built-in, in catalog order: `omniforge_instructions`, the discovery built-ins
/// (`omniforge_search_tools`, `omniforge_get_tool_schemas`), the tool, approval and secret
/// authoring built-ins, `omniforge_call_tool`, the content authoring built-ins. Without
/// `authoring`, only the first three and `omniforge_call_tool`.
pub(crate) fn builtins(authoring: Option<&Authoring>, discovery: &Arc<Discovery>) -> Vec<Entry> {
    let mut entries = vec![
        builtin::instructions::entry(),
        ops::mcp::entry::<SearchTools>(discovery),
        ops::mcp::entry::<GetToolSchemas>(discovery),
    ];
    if let Some(a) = authoring {
        entries.extend(authoring::tool::entries(&a.tools));
        entries.extend(authoring::approval::entries(&a.approval));
        entries.extend(authoring::secret::entries(&a.store));
    }
    entries.push(builtin::forward::entry());
    if let Some(a) = authoring {
        entries.extend(authoring::content::entries(&a.content));
    }
    entries
}

/// A part of [`Authoring`] an operation works on (its
/// [`Service`](ops::Operation::Service)): how the command line and the console, which hold
/// the whole, find it.
pub(crate) trait Part {
    /// This part of `authoring`.
    fn of(authoring: &Authoring) -> &Self;
}

impl Part for ToolAuthoring {
    fn of(authoring: &Authoring) -> &Self {
        &authoring.tools
    }
}

impl Part for Approval {
    fn of(authoring: &Authoring) -> &Self {
        &authoring.approval
    }
}

impl Part for dyn Store {
    fn of(authoring: &Authoring) -> &Self {
        &*authoring.store
    }
}

impl Part for Content {
    fn of(authoring: &Authoring) -> &Self {
        &authoring.content
    }
}
