//! The approval gate (issue 17): with `--require-approval`, a tool version written by a
//! principal without `admin` is stored **pending** (`tool.rs` asks [`Approval::status_for`]).
//! Its author sees and calls it (the catalog keeps it as that author's entry), everyone else
//! keeps the current version, it runs without secrets, and nothing is announced. An admin
//! approves it (it becomes current for everyone; `list_changed` goes out; only the secrets the
//! admin names are granted) or rejects it (kept in the history with the reason). The store
//! writes each step's audit records in the same transaction.
//!
//! The built-ins `omniforge_list_pending_tools` (`tools:write`: an author's own; `admin`:
//! all), `omniforge_approve_tool` and `omniforge_reject_tool` (`admin`), the command line
//! (`omniforge tool pending|approve|reject`) and the console all go through [`Approval`].

use std::sync::Arc;

use omniforge_store::{NewStatus, SecretRequest, Store, ToolVersion, VersionStatus};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::auth::Scope;
use crate::catalog::entry::Entry;
use crate::context::actor::{Actor, Via};
use crate::context::request::RequestCx;
use crate::error::AuthoringError;
use crate::tools::ops::{Hints, Operation, Outcome, ToolDef};
use crate::tools::stored::source::StoredSource;

/// The approval gate's service: the decision of a new version's status, the pending list,
/// approve and reject.
pub(crate) struct Approval {
    store: Arc<dyn Store>,
    source: Arc<StoredSource>,
    /// `--require-approval`: versions by principals without `admin` wait for an admin.
    required: bool,
}

/// One pending version, for the pending list and the console's approvals page.
#[derive(Debug, Clone)]
pub(crate) struct PendingVersion {
    /// The pending version (`spec.author` is its author).
    pub(crate) version: ToolVersion,
    /// The tool's current (live) version, the base of a diff; `None` for a new tool.
    pub(crate) current: Option<ToolVersion>,
    /// Each secret the version declares: whether it is set, and its grant (`None`: requested).
    pub(crate) requests: Vec<SecretRequest>,
}

impl Approval {
    /// The gate over `store`, publishing through `source`; `required`: `--require-approval`.
    pub(crate) fn new(store: Arc<dyn Store>, source: Arc<StoredSource>, required: bool) -> Self {
        Approval {
            store,
            source,
            required,
        }
    }

    /// Whether the gate is on (`--require-approval`).
    pub(crate) fn required(&self) -> bool {
        self.required
    }

    /// The status a version written by `cx` (whose examples passed) is stored with: pending
    /// under the gate unless the writer holds `admin`, else live.
    pub(crate) fn status_for(&self, cx: &RequestCx<'_>) -> NewStatus {
        if self.required && !cx.allows(Scope::Admin) {
            NewStatus::Pending
        } else {
            NewStatus::Live
        }
    }

    /// The pending versions `cx` may see: every one for an admin, its own for anyone else;
    /// by tool name, then number.
    ///
    /// # Errors
    /// The store failed.
    pub(crate) async fn pending(
        &self,
        cx: &RequestCx<'_>,
    ) -> Result<Vec<PendingVersion>, AuthoringError> {
        let author = (!cx.allows(Scope::Admin)).then(|| cx.author());
        let versions = self
            .store
            .versions_with_status(VersionStatus::Pending, author)
            .await?;
        let mut out = Vec::with_capacity(versions.len());
        for version in versions {
            let current = self.store.get(&version.tool).await?.map(|t| t.current);
            let requests = self
                .store
                .secret_requests(&version.tool, version.number)
                .await?;
            out.push(PendingVersion {
                version,
                current,
                requests,
            });
        }
        Ok(out)
    }

    /// Approves pending version `number` of tool `name`: it becomes current for everyone
    /// (announced with `list_changed`), and each secret in `grants` (only those) is granted
    /// to it, in one store transaction with the audit records.
    ///
    /// # Errors
    /// `cx` lacks `admin`; the version does not exist or is not pending; a grant names a
    /// secret the version does not declare or that is not set; the store failed.
    pub(crate) async fn approve(
        &self,
        cx: &RequestCx<'_>,
        name: &str,
        number: u32,
        grants: &[String],
    ) -> Result<ToolVersion, AuthoringError> {
        require_admin(cx, "approving a tool version")?;
        let version = self
            .store
            .approve(&cx.actor(), name, number, grants)
            .await?;
        self.source.reload(name).await?;
        Ok(version)
    }

    /// Rejects pending (or draft) version `number` of tool `name`, keeping it and the history
    /// with `reason`.
    ///
    /// # Errors
    /// `cx` lacks `admin`; an empty reason; the version does not exist, or is live or
    /// already rejected; the store failed.
    pub(crate) async fn reject(
        &self,
        cx: &RequestCx<'_>,
        name: &str,
        number: u32,
        reason: &str,
    ) -> Result<ToolVersion, AuthoringError> {
        require_admin(cx, "rejecting a tool version")?;
        if reason.trim().is_empty() {
            return Err(AuthoringError::invalid(
                "reason",
                "say why the version is rejected",
            ));
        }
        let version = self.store.reject(&cx.actor(), name, number, reason).await?;
        self.source.reload(name).await?;
        Ok(version)
    }

    /// `omniforge_list_pending_tools`, `omniforge tool pending`: one line per pending version,
    /// and the list as data. `serving`: this is the serving process, whose
    /// `--require-approval` is worth mentioning when nothing waits (a one-shot command's is not).
    ///
    /// # Errors
    /// The store failed.
    async fn list(&self, cx: &RequestCx<'_>, serving: bool) -> Result<Outcome, AuthoringError> {
        let pending = self.pending(cx).await?;
        let items: Vec<Value> = pending.iter().map(pending_json).collect();
        let mut lines = Vec::with_capacity(pending.len() + 1);
        if pending.is_empty() {
            lines.push(if self.required() || !serving {
                "No version is pending approval.".to_owned()
            } else {
                "No version is pending approval (the approval gate is off: serve \
                 --require-approval turns it on)."
                    .to_owned()
            });
        }
        for p in &pending {
            let v = &p.version;
            let current = p
                .current
                .as_ref()
                .map_or("new tool".to_owned(), |c| format!("current {}", c.number));
            let requested: Vec<&str> = p
                .requests
                .iter()
                .filter(|r| r.grant.is_none())
                .map(|r| r.secret.as_str())
                .collect();
            let secrets = if requested.is_empty() {
                String::new()
            } else {
                format!("; requests secrets {}", requested.join(", "))
            };
            let network = network_note(p);
            lines.push(format!(
                "{} version {} by {} ({current}){network}{secrets}",
                v.tool, v.number, v.spec.author
            ));
        }
        Ok(Outcome::done(lines.join("\n")).with_data(json!({ "pending": items })))
    }
}

/// `omniforge_list_pending_tools`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListPendingTools {}

impl Operation for ListPendingTools {
    type Service = Approval;
    const TOOL: ToolDef = ToolDef {
        name: "omniforge_list_pending_tools",
        title: None,
        description: "List the tool versions pending approval (with --require-approval, versions written without the admin scope wait for an admin): yours, or every one for an admin; with each version's current version, whether it may use the network, and the secrets it requests.",
        scope: Scope::Write,
        hints: Hints::READ,
    };

    async fn apply(self, approval: &Approval, actor: Actor<'_>) -> Result<Outcome, AuthoringError> {
        // A one-shot command is not the serving process: its gate says nothing of the server's.
        let serving = actor.via != Via::CommandLine;
        approval.list(actor.cx, serving).await
    }
}

/// `omniforge_approve_tool`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ApproveTool {
    name: String,
    #[schemars(range(min = 1))]
    version: u32,
    /// Secrets the version requests that it may have; none unless named.
    grants: Option<Vec<String>>,
}

impl ApproveTool {
    /// Approve pending `version` of tool `name`, granting it exactly `grants`.
    pub(crate) fn new(name: &str, version: u32, grants: &[String]) -> ApproveTool {
        ApproveTool {
            name: name.to_owned(),
            version,
            grants: Some(grants.to_vec()),
        }
    }
}

impl Operation for ApproveTool {
    type Service = Approval;
    const TOOL: ToolDef = ToolDef {
        name: "omniforge_approve_tool",
        title: None,
        description: "Approve a pending tool version (admin): it becomes current for everyone and tools/list_changed is sent. Only the secrets named in grants are granted to it.",
        scope: Scope::Admin,
        hints: Hints::WRITE,
    };

    async fn apply(self, approval: &Approval, actor: Actor<'_>) -> Result<Outcome, AuthoringError> {
        let grants = self.grants.unwrap_or_default();
        let version = approval
            .approve(actor.cx, &self.name, self.version, &grants)
            .await?;
        Ok(Outcome::done(
            approved_sentence(&approval.store, &version, &grants).await,
        ))
    }
}

/// `omniforge_reject_tool`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct RejectTool {
    name: String,
    #[schemars(range(min = 1))]
    version: u32,
    #[schemars(length(min = 1))]
    reason: String,
}

impl RejectTool {
    /// Reject pending (or draft) `version` of tool `name` with `reason`.
    pub(crate) fn new(name: &str, version: u32, reason: &str) -> RejectTool {
        RejectTool {
            name: name.to_owned(),
            version,
            reason: reason.to_owned(),
        }
    }
}

impl Operation for RejectTool {
    type Service = Approval;
    const TOOL: ToolDef = ToolDef {
        name: "omniforge_reject_tool",
        title: None,
        description: "Reject a pending tool version (admin), with the reason; it stays in the tool's history and the current version is unchanged.",
        scope: Scope::Admin,
        hints: Hints::WRITE,
    };

    async fn apply(self, approval: &Approval, actor: Actor<'_>) -> Result<Outcome, AuthoringError> {
        let version = approval
            .reject(actor.cx, &self.name, self.version, &self.reason)
            .await?;
        Ok(Outcome::done(rejected_sentence(&version)))
    }
}

/// What `omniforge_approve_tool` and `omniforge tool approve` say.
async fn approved_sentence(
    store: &Arc<dyn Store>,
    version: &ToolVersion,
    grants: &[String],
) -> String {
    let mut s = format!(
        "Approved version {} of tool {}: it is current for everyone now.",
        version.number, version.tool
    );
    if !grants.is_empty() {
        s.push_str(&format!(" Granted secrets: {}.", grants.join(", ")));
    }
    if let Ok(requests) = store.secret_requests(&version.tool, version.number).await {
        let left: Vec<&str> = requests
            .iter()
            .filter(|r| r.grant.is_none())
            .map(|r| r.secret.as_str())
            .collect();
        if !left.is_empty() {
            s.push_str(&format!(
                " Not granted (it runs without them until an admin grants them): {}.",
                left.join(", ")
            ));
        }
    }
    s
}

/// What `omniforge_reject_tool` and `omniforge tool reject` say.
fn rejected_sentence(version: &ToolVersion) -> String {
    format!(
        "Rejected version {} of tool {} ({}); it stays in the tool's history and the current \
         version is unchanged.",
        version.number,
        version.tool,
        version.state.reason.as_deref().unwrap_or("no reason")
    )
}

/// What the author of a version stored pending is told.
pub(crate) fn submitted_sentence(
    version: &ToolVersion,
    checked: &str,
    requested: &[String],
) -> String {
    let mut s = format!(
        "Submitted version {} of tool {} for approval.{checked} It is pending until an admin \
         approves it: you see it in tools/list and can call it now (directly or with \
         omniforge_call_tool); everyone else keeps the current version (or does not see a new \
         tool) and is told nothing until then.",
        version.number, version.tool
    );
    if !requested.is_empty() {
        s.push_str(&format!(
            " Secrets {} are requested: a pending version runs without secrets, and the admin \
             decides on each when approving.",
            requested.join(", ")
        ));
    }
    s
}

fn require_admin(cx: &RequestCx<'_>, what: &str) -> Result<(), AuthoringError> {
    if cx.allows(Scope::Admin) {
        Ok(())
    } else {
        Err(AuthoringError::invalid(
            "scope",
            format!("{what} needs the admin scope"),
        ))
    }
}

/// One pending version as the built-in lists it.
/// `; network access` when the version may use the network (`; network access, new` when
/// its current version may not), `; network access removed` when only the current one may.
fn network_note(p: &PendingVersion) -> &'static str {
    let now = p.current.as_ref().map(|c| c.spec.limits.network);
    match (p.version.spec.limits.network, now) {
        (true, Some(true)) | (true, None) => "; network access",
        (true, Some(false)) => "; network access, new",
        (false, Some(true)) => "; network access removed",
        (false, _) => "",
    }
}

fn pending_json(p: &PendingVersion) -> Value {
    let v = &p.version;
    json!({
        "tool": v.tool,
        "version": v.number,
        "author": v.spec.author,
        "createdAtMs": v.created_at_ms,
        "description": v.spec.description,
        "network": v.spec.limits.network,
        "timeoutMs": v.spec.limits.timeout_ms,
        "currentVersion": p.current.as_ref().map(|c| c.number),
        "secretRequests": p.requests.iter().map(|r| json!({
            "secret": r.secret,
            "exists": r.exists,
            "granted": r.grant.is_some(),
        })).collect::<Vec<_>>(),
    })
}

/// The approval built-ins, in catalog order.
pub(crate) fn entries(approval: &Arc<Approval>) -> Vec<Entry> {
    use crate::tools::ops::mcp::entry;
    vec![
        entry::<ListPendingTools>(approval),
        entry::<ApproveTool>(approval),
        entry::<RejectTool>(approval),
    ]
}
