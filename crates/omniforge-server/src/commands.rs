//! The one-shot actions of the command line (`omniforge tool add|edit|run|rollback|check|pending|approve|reject`, `resource`,
//! `prompt`, `pack`), through the same validation, environments and sandbox as MCP. They
//! answer in plain types: what a person reads, never an MCP wire type.

use omniforge_store::{ImportReport, StoreError, WriteMode};
use rmcp::model::{CallToolResult, JsonObject};
use serde_json::Value;

use crate::auth::{Principal, PrincipalId, Scope};
use crate::content::definitions::Kind;
use crate::context::progress::ProgressSink;
use crate::context::request::RequestCx;
use crate::error::{AuthoringError, CallError};
use crate::mcp::state::Stored;
use crate::mcp::to_wire;
use crate::pack::{self, PackError};
use crate::server::Server;

/// Who runs a one-shot action (recorded as the author of what it writes; trusted with
/// everything, as the parent process of a stdio server is), and where its progress goes.
#[derive(Clone)]
pub struct Caller {
    principal: Principal,
    progress: Option<ProgressSink>,
}

impl Caller {
    /// `id`, e.g. `cli:USER` ([`PrincipalId::cli`]); progress messages are dropped.
    pub fn local(id: PrincipalId) -> Caller {
        Caller {
            principal: Principal::new(id, Scope::Admin),
            progress: None,
        }
    }

    /// `id`, with every progress message (environment builds, a script's own progress)
    /// going to `sink`.
    pub fn local_with_progress(id: PrincipalId, sink: ProgressSink) -> Caller {
        Caller {
            progress: Some(sink),
            ..Caller::local(id)
        }
    }

    fn cx(&self) -> RequestCx<'_> {
        RequestCx::local(&self.principal, self.progress.clone())
    }
}

/// The text of a finished call, as an MCP client would read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallOutput {
    /// Each text block of the result.
    pub texts: Vec<String>,
    /// Whether the result is an error (`isError`).
    pub is_error: bool,
}

impl CallOutput {
    fn of(result: Result<CallToolResult, CallError>) -> CallOutput {
        let result = result.unwrap_or_else(|e| to_wire::call_error(&e));
        CallOutput {
            texts: result
                .content
                .iter()
                .filter_map(|c| c.as_text().map(|t| t.text.clone()))
                .collect(),
            is_error: result.is_error == Some(true),
        }
    }

    fn refused(text: &str) -> CallOutput {
        CallOutput {
            texts: vec![text.to_owned()],
            is_error: true,
        }
    }
}

/// What a one-shot action could not do.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CommandError {
    /// The definition was refused; the text names the field.
    #[error(transparent)]
    Refused(#[from] AuthoringError),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The server serves manifest tools only (no store).
    #[error("this server has no store")]
    NoStore,
}

impl Server {
    fn stored(&self) -> Result<&Stored, CommandError> {
        self.shared.stored.as_deref().ok_or(CommandError::NoStore)
    }

    /// Creates a tool (`create`) or adds a version, from the arguments of
    /// `omniforge_create_tool` / `omniforge_update_tool`.
    pub async fn write_tool(
        &self,
        arguments: JsonObject,
        caller: &Caller,
        create: bool,
    ) -> CallOutput {
        let Some(stored) = self.shared.stored.as_deref() else {
            return CallOutput::refused("this server has no store");
        };
        CallOutput::of(
            stored
                .authoring
                .tools
                .create_or_update(arguments, &caller.cx(), create)
                .await,
        )
    }

    /// Makes live `version` of tool `name` current and enables the tool, after running its
    /// examples unless `force` (refused, with the failures, when one fails).
    pub async fn rollback_tool(
        &self,
        name: &str,
        version: u32,
        force: bool,
        caller: &Caller,
    ) -> CallOutput {
        let Some(stored) = self.shared.stored.as_deref() else {
            return CallOutput::refused("this server has no store");
        };
        let mut arguments = JsonObject::new();
        arguments.insert("name".into(), Value::from(name));
        arguments.insert("version".into(), Value::from(version));
        arguments.insert("force".into(), Value::from(force));
        CallOutput::of(
            stored
                .authoring
                .tools
                .rollback(arguments, &caller.cx())
                .await,
        )
    }

    /// Runs the examples of version `version` of tool `name` (the current one if `None`) and
    /// records the outcome: one line per example, an error when one fails.
    pub async fn check_tool(
        &self,
        name: &str,
        version: Option<u32>,
        caller: &Caller,
    ) -> CallOutput {
        let Some(stored) = self.shared.stored.as_deref() else {
            return CallOutput::refused("this server has no store");
        };
        let mut arguments = JsonObject::new();
        arguments.insert("name".into(), Value::from(name));
        if let Some(version) = version {
            arguments.insert("version".into(), Value::from(version));
        }
        CallOutput::of(stored.authoring.tools.check(arguments, &caller.cx()).await)
    }

    /// The tool versions pending approval (issue 17): one line each.
    pub async fn pending_tools(&self, caller: &Caller) -> CallOutput {
        let Some(stored) = self.shared.stored.as_deref() else {
            return CallOutput::refused("this server has no store");
        };
        CallOutput::of(stored.authoring.approval.list(&caller.cx(), false).await)
    }

    /// Approves pending `version` of tool `name`, granting it exactly the secrets in `grants`.
    pub async fn approve_tool(
        &self,
        name: &str,
        version: u32,
        grants: &[String],
        caller: &Caller,
    ) -> CallOutput {
        let Some(stored) = self.shared.stored.as_deref() else {
            return CallOutput::refused("this server has no store");
        };
        let mut arguments = JsonObject::new();
        arguments.insert("name".into(), Value::from(name));
        arguments.insert("version".into(), Value::from(version));
        arguments.insert("grants".into(), Value::from(grants.to_vec()));
        CallOutput::of(
            stored
                .authoring
                .approval
                .approve_call(arguments, &caller.cx())
                .await,
        )
    }

    /// Rejects pending (or draft) `version` of tool `name` with `reason`, keeping it.
    pub async fn reject_tool(
        &self,
        name: &str,
        version: u32,
        reason: &str,
        caller: &Caller,
    ) -> CallOutput {
        let Some(stored) = self.shared.stored.as_deref() else {
            return CallOutput::refused("this server has no store");
        };
        let mut arguments = JsonObject::new();
        arguments.insert("name".into(), Value::from(name));
        arguments.insert("version".into(), Value::from(version));
        arguments.insert("reason".into(), Value::from(reason));
        CallOutput::of(
            stored
                .authoring
                .approval
                .reject_call(arguments, &caller.cx())
                .await,
        )
    }

    /// Runs the current version of the stored tool `name` once (it must be enabled).
    pub async fn run_tool(&self, name: &str, arguments: JsonObject, caller: &Caller) -> CallOutput {
        let Some(stored) = self.shared.stored.as_deref() else {
            return CallOutput::refused("this server has no store");
        };
        CallOutput::of(stored.source.run(name, arguments, &caller.cx()).await)
    }

    /// The stored definition of `kind` under `key`, as its authoring arguments.
    ///
    /// # Errors
    /// The store failed.
    pub async fn definition(
        &self,
        kind: Kind,
        key: &str,
    ) -> Result<Option<JsonObject>, CommandError> {
        Ok(self.stored()?.content().definition(kind, key).await?)
    }

    /// Creates, updates or replaces a definition (`mode`) from its authoring arguments; returns
    /// a sentence saying what was done.
    ///
    /// # Errors
    /// A text naming the field that is wrong.
    pub async fn write_definition(
        &self,
        kind: Kind,
        arguments: JsonObject,
        mode: WriteMode,
        caller: &Caller,
    ) -> Result<String, CommandError> {
        Ok(self
            .stored()?
            .content()
            .write(kind, arguments, mode, &caller.cx())
            .await?)
    }

    /// Removes a definition; returns a sentence saying so.
    ///
    /// # Errors
    /// It does not exist, or the store failed.
    pub async fn remove_definition(
        &self,
        kind: Kind,
        key: &str,
        caller: &Caller,
    ) -> Result<String, CommandError> {
        Ok(self
            .stored()?
            .content()
            .remove(kind, key, &caller.cx())
            .await?)
    }

    /// Imports a parsed pack (format 1): every entry is validated (tool environments built)
    /// before one write transaction.
    ///
    /// # Errors
    /// Every problem found; when there is any, nothing was written.
    pub async fn import_pack(
        &self,
        pack: Value,
        caller: &Caller,
    ) -> Result<ImportReport, PackError> {
        let Some(stored) = self.shared.stored.as_deref() else {
            return Err(PackError {
                problems: vec!["this server has no store".into()],
            });
        };
        pack::import(
            &stored.authoring.tools,
            &stored.host,
            &*stored.store,
            pack,
            &caller.cx(),
        )
        .await
    }
}
