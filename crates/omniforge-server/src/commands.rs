//! The one-shot actions of the command line (`omniforge tool add|edit|run|rollback|check|pending|approve|reject`, `resource`,
//! `prompt`, `pack`), through the same validation, environments and sandbox as MCP: the
//! built-ins' operations, their arguments built here, come [`Via::CommandLine`]. They answer
//! in plain types ([`Outcome`], [`CallOutput`] for a stored tool's run): what a person reads,
//! never an MCP wire type.

use omniforge_store::{ImportReport, StoreError, WriteMode};
use rmcp::model::{CallToolResult, JsonObject};
use serde_json::Value;

use crate::auth::{Principal, PrincipalId, Scope};
use crate::content::definitions::{Definition, Kind};
use crate::context::actor::{Actor, Via};
use crate::context::progress::ProgressSink;
use crate::context::request::RequestCx;
use crate::error::{AuthoringError, CallError, parse_arguments};
use crate::mcp::state::Stored;
use crate::mcp::to_wire;
use crate::pack::{self, PackError};
use crate::server::Server;
use crate::tools::Part;
use crate::tools::authoring::approval::{ApproveTool, ListPendingTools, RejectTool};
use crate::tools::authoring::draft::{CreateTool, UpdateTool};
use crate::tools::authoring::tool::{CheckTool, RollbackTool};
use crate::tools::ops::{self, Operation, Outcome};

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

/// The text of a stored tool's finished call, as an MCP client would read it.
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

    /// Runs built-in operation `op` as `caller`, come from the command line.
    async fn apply<O: Operation<Service: Part>>(&self, op: O, caller: &Caller) -> Outcome {
        let Ok(stored) = self.stored() else {
            return Outcome::refused("this server has no store");
        };
        let cx = caller.cx();
        let service = O::Service::of(&stored.authoring);
        Outcome::of(ops::run(op, service, Actor::new(&cx, Via::CommandLine)).await)
    }

    /// Creates a tool (`create`) or adds a version, from a definition read as
    /// `omniforge_create_tool` / `omniforge_update_tool` read their arguments.
    pub async fn write_tool(
        &self,
        definition: JsonObject,
        caller: &Caller,
        create: bool,
    ) -> Outcome {
        let written = if create {
            match parse_arguments::<CreateTool>(definition) {
                Ok(op) => return self.apply(op, caller).await,
                Err(e) => e,
            }
        } else {
            match parse_arguments::<UpdateTool>(definition) {
                Ok(op) => return self.apply(op, caller).await,
                Err(e) => e,
            }
        };
        Outcome::refused(written.to_string())
    }

    /// Makes live `version` of tool `name` current and enables the tool, after running its
    /// examples unless `force` (refused, with the failures, when one fails).
    pub async fn rollback_tool(
        &self,
        name: &str,
        version: u32,
        force: bool,
        caller: &Caller,
    ) -> Outcome {
        self.apply(RollbackTool::new(name, version, force), caller)
            .await
    }

    /// Runs the examples of version `version` of tool `name` (the current one if `None`) and
    /// records the outcome: one line per example, refused when one fails.
    pub async fn check_tool(&self, name: &str, version: Option<u32>, caller: &Caller) -> Outcome {
        self.apply(CheckTool::new(name, version), caller).await
    }

    /// The tool versions pending approval (issue 17): one line each.
    pub async fn pending_tools(&self, caller: &Caller) -> Outcome {
        self.apply(ListPendingTools {}, caller).await
    }

    /// Approves pending `version` of tool `name`, granting it exactly the secrets in `grants`.
    pub async fn approve_tool(
        &self,
        name: &str,
        version: u32,
        grants: &[String],
        caller: &Caller,
    ) -> Outcome {
        self.apply(ApproveTool::new(name, version, grants), caller)
            .await
    }

    /// Rejects pending (or draft) `version` of tool `name` with `reason`, keeping it.
    pub async fn reject_tool(
        &self,
        name: &str,
        version: u32,
        reason: &str,
        caller: &Caller,
    ) -> Outcome {
        self.apply(RejectTool::new(name, version, reason), caller)
            .await
    }

    /// Runs the current version of the stored tool `name` once (it must be enabled).
    pub async fn run_tool(&self, name: &str, arguments: JsonObject, caller: &Caller) -> CallOutput {
        let Ok(stored) = self.stored() else {
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

    /// Creates, updates or replaces a definition (`mode`) from its authoring arguments (a
    /// file's, read as the create built-in of `kind` reads its arguments); returns a sentence
    /// saying what was done.
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
        let stored = self.stored()?;
        let definition = Definition::parse(kind, arguments)?;
        Ok(stored.content().put(definition, mode, &caller.cx()).await?)
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
        let Ok(stored) = self.stored() else {
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
