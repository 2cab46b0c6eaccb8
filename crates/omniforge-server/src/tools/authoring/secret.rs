//! The secret built-ins (`admin` scope): `omniforge_set_secret`, `omniforge_delete_secret`,
//! `omniforge_list_secrets`, and the grants that let one tool version have a secret:
//! `omniforge_grant_secret`, `omniforge_revoke_secret`, `omniforge_list_secret_requests`. A
//! value is never echoed, logged or returned; errors name the secret and the rule, never the
//! value.
//!
//! A run gets a secret only through a grant an admin made for that exact tool version
//! (issue 11, finding 1): a writer may declare `secrets`, which stay pending requests. A
//! version written by an admin is granted the declared secrets that exist when it is written
//! ([`grant_declared`]): the admin's write is the admin's decision.

use omniforge_store::{Actor as StoreActor, SecretRequest, Store, StoreError};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::auth::Scope;
use crate::context::actor::Actor;
use crate::context::request::RequestCx;
use crate::error::AuthoringError;
use crate::tools::ops::{Hints, Operation, Outcome, ToolDef};

/// The longest secret value accepted over MCP, in bytes.
const MAX_SECRET_BYTES: usize = 64 * 1024;

/// `omniforge_set_secret`: stores a secret (never shown again; no `Debug`, so it cannot be
/// logged).
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct SetSecret {
    /// Secret name, also the environment variable: letters, digits and _, not starting with a
    /// digit, at most 64.
    name: String,
    /// The secret value (at most 64 KiB).
    value: String,
}

impl Operation for SetSecret {
    type Service = dyn Store;
    const TOOL: ToolDef = ToolDef {
        name: "omniforge_set_secret",
        title: None,
        description: "Store a secret (admin only). Tool versions that list its name in `secrets` and were granted it (omniforge_grant_secret) get the value as an environment variable; it never appears in tool definitions, logs or results (an exact value in a tool's output is redacted).",
        scope: Scope::Admin,
        hints: Hints::closed(false, true, true),
    };

    async fn apply(
        self,
        store: &Self::Service,
        actor: Actor<'_>,
    ) -> Result<Outcome, AuthoringError> {
        let SetSecret { name, value } = self;
        if value.len() > MAX_SECRET_BYTES {
            return Err(AuthoringError::invalid(
                "value",
                format!(
                    "at most {MAX_SECRET_BYTES} bytes (got {} bytes)",
                    value.len()
                ),
            ));
        }
        omniforge_store::validate_secret_name(&name)
            .map_err(|e| AuthoringError::invalid("name", e.to_string()))?;
        let existed = store.secret_names().await?.contains(&name);
        store.set_secret(&actor.cx.actor(), &name, &value).await?;
        tracing::info!(secret = %name, by = %actor.cx.author(), "secret set");
        let verb = if existed { "Replaced" } else { "Stored" };
        Ok(Outcome::done(format!(
            "{verb} secret {name}. Tool versions that declare it in `secrets` and were granted it (omniforge_grant_secret) get it as the environment variable {name} from their next call."
        )))
    }
}

/// `omniforge_delete_secret`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct DeleteSecret {
    name: String,
}

impl Operation for DeleteSecret {
    type Service = dyn Store;
    const TOOL: ToolDef = ToolDef {
        name: "omniforge_delete_secret",
        title: None,
        description: "Delete a secret (admin only). Tools that list it no longer get it.",
        scope: Scope::Admin,
        hints: Hints::closed(false, true, false),
    };

    async fn apply(
        self,
        store: &Self::Service,
        actor: Actor<'_>,
    ) -> Result<Outcome, AuthoringError> {
        store.delete_secret(&actor.cx.actor(), &self.name).await?;
        tracing::info!(secret = %self.name, by = %actor.cx.author(), "secret deleted");
        Ok(Outcome::done(format!("Deleted secret {}.", self.name)))
    }
}

/// `omniforge_list_secrets`: names and update times, never values.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListSecrets {}

impl Operation for ListSecrets {
    type Service = dyn Store;
    const TOOL: ToolDef = ToolDef {
        name: "omniforge_list_secrets",
        title: None,
        description: "List the stored secrets (admin only): names and when each was last set, never values.",
        scope: Scope::Admin,
        hints: Hints::READ,
    };

    async fn apply(self, store: &Self::Service, _: Actor<'_>) -> Result<Outcome, AuthoringError> {
        let secrets = store.secrets().await?;
        let list: Vec<Value> = secrets
            .iter()
            .map(|s| json!({"name": s.name, "updatedAtMs": s.updated_at_ms}))
            .collect();
        let data = json!({"secrets": list});
        Ok(Outcome::done(data.to_string()).with_data(data))
    }
}

/// `omniforge_grant_secret`: one tool version may have one secret.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct GrantSecret {
    secret: String,
    tool: String,
    /// Default: the tool's current version.
    #[schemars(range(min = 1))]
    version: Option<u32>,
}

impl GrantSecret {
    /// Grant `secret` to `version` of `tool` (default: its current version).
    pub(crate) fn new(secret: &str, tool: &str, version: Option<u32>) -> GrantSecret {
        GrantSecret {
            secret: secret.to_owned(),
            tool: tool.to_owned(),
            version,
        }
    }
}

impl Operation for GrantSecret {
    type Service = dyn Store;
    const TOOL: ToolDef = ToolDef {
        name: "omniforge_grant_secret",
        title: None,
        description: "Grant a secret to one version of a tool (admin only; default: its current version), which must declare it in `secrets`. Only that version gets it: a new version asks again.",
        scope: Scope::Admin,
        hints: Hints::closed(false, false, true),
    };

    async fn apply(
        self,
        store: &Self::Service,
        actor: Actor<'_>,
    ) -> Result<Outcome, AuthoringError> {
        let g = self;
        let actor = actor.cx.actor();
        let said = change_grant(store, &actor, &g.secret, &g.tool, g.version, true).await?;
        Ok(Outcome::done(said))
    }
}

/// `omniforge_revoke_secret`: the grant's arguments.
#[derive(Deserialize, JsonSchema)]
#[serde(transparent)]
pub(crate) struct RevokeSecret(GrantSecret);

impl Operation for RevokeSecret {
    type Service = dyn Store;
    const TOOL: ToolDef = ToolDef {
        name: "omniforge_revoke_secret",
        title: None,
        description: "Revoke a secret's grant from one version of a tool (admin only; default: its current version).",
        scope: Scope::Admin,
        hints: Hints::closed(false, true, false),
    };

    async fn apply(
        self,
        store: &Self::Service,
        actor: Actor<'_>,
    ) -> Result<Outcome, AuthoringError> {
        let g = self.0;
        let actor = actor.cx.actor();
        let said = change_grant(store, &actor, &g.secret, &g.tool, g.version, false).await?;
        Ok(Outcome::done(said))
    }
}

/// `omniforge_list_secret_requests`: for the current version of each tool (or of `tool`) that
/// declares secrets, each declared secret: set or not, granted or pending.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListSecretRequests {
    tool: Option<String>,
}

impl Operation for ListSecretRequests {
    type Service = dyn Store;
    const TOOL: ToolDef = ToolDef {
        name: "omniforge_list_secret_requests",
        title: None,
        description: "List the secrets the current version of each tool (or of `tool`) declares (admin only): whether each is set, and its grant, or null for a request that awaits an admin.",
        scope: Scope::Admin,
        hints: Hints::READ,
    };

    async fn apply(self, store: &Self::Service, _: Actor<'_>) -> Result<Outcome, AuthoringError> {
        let list = secret_requests(store, self.tool.as_deref()).await?;
        let data =
            json!({"requests": list.iter().map(DeclaredSecret::to_json).collect::<Vec<_>>()});
        Ok(Outcome::done(data.to_string()).with_data(data))
    }
}

/// Grants (`grant`) or revokes `secret` for `version` of `tool` (default: its current
/// version); returns a sentence saying what was done. Shared by the built-ins and the command
/// line (`omniforge secret grant|revoke`).
///
/// # Errors
/// No such tool, version, secret or grant; the version does not declare the secret; the store
/// failed.
pub async fn change_grant(
    store: &dyn Store,
    actor: &StoreActor,
    secret: &str,
    tool: &str,
    version: Option<u32>,
    grant: bool,
) -> Result<String, AuthoringError> {
    let version = match version {
        Some(v) => v,
        None => store
            .tool(tool)
            .await?
            .and_then(|t| t.current_version)
            .ok_or_else(|| {
                AuthoringError::invalid(
                    "tool",
                    format!("no tool named {tool:?} with a current version; name the version"),
                )
            })?,
    };
    if grant {
        let new = store.grant_secret(actor, secret, tool, version).await?;
        tracing::info!(%secret, %tool, version, by = %actor.principal, new, "secret granted");
        Ok(if new {
            format!("Granted secret {secret} to tool {tool} version {version}.")
        } else {
            format!("Tool {tool} version {version} already had secret {secret}.")
        })
    } else {
        store.revoke_secret(actor, secret, tool, version).await?;
        tracing::info!(%secret, %tool, version, by = %actor.principal, "secret revoked");
        Ok(format!(
            "Revoked secret {secret} from tool {tool} version {version}."
        ))
    }
}

/// A secret the current version of a tool declares: whether it is set, and its grant.
#[derive(Debug, Clone)]
pub struct DeclaredSecret {
    /// The tool.
    pub tool: String,
    /// Its current version.
    pub version: u32,
    /// The declared secret, whether it is set, and its grant (`None`: a pending request).
    pub request: SecretRequest,
}

impl DeclaredSecret {
    /// As `omniforge_list_secret_requests` lists it.
    fn to_json(&self) -> Value {
        let r = &self.request;
        json!({
            "tool": self.tool,
            "version": self.version,
            "secret": r.secret,
            "secretSet": r.exists,
            "granted": r.grant.as_ref().map(|g| json!({"by": g.granted_by, "atMs": g.granted_at_ms})),
        })
    }
}

/// For the current version of each tool (or of `tool` only) that declares secrets: each
/// declared secret, whether it is set, and its grant (`None`: a pending request).
///
/// # Errors
/// The store failed, or `tool` does not exist.
pub async fn secret_requests(
    store: &dyn Store,
    tool: Option<&str>,
) -> Result<Vec<DeclaredSecret>, StoreError> {
    let tools = match tool {
        Some(name) => match store.tool(name).await? {
            Some(t) => vec![t],
            None => {
                return Err(StoreError::NotFound {
                    kind: omniforge_store::NameKind::Tool,
                    name: name.to_owned(),
                    version: None,
                });
            }
        },
        None => store.tools().await?,
    };
    let mut out = Vec::new();
    for t in tools {
        let Some(version) = t.current_version else {
            continue;
        };
        for request in store.secret_requests(&t.name, version).await? {
            out.push(DeclaredSecret {
                tool: t.name.clone(),
                version,
                request,
            });
        }
    }
    Ok(out)
}

/// Grants a version written by an admin the secrets it declares that exist, and returns the
/// declared secrets left without a grant (missing ones). A writer's version gets nothing here:
/// its declarations stay pending requests.
///
/// # Errors
/// The store failed.
pub(crate) async fn grant_declared(
    store: &dyn Store,
    cx: &RequestCx<'_>,
    tool: &str,
    version: u32,
) -> Result<Vec<String>, StoreError> {
    let requests = store.secret_requests(tool, version).await?;
    let mut pending = Vec::new();
    let actor = cx.actor();
    for r in requests {
        if r.grant.is_some() {
            continue;
        }
        if r.exists && cx.allows(Scope::Admin) {
            store.grant_secret(&actor, &r.secret, tool, version).await?;
        } else {
            pending.push(r.secret);
        }
    }
    Ok(pending)
}

/// The secret built-ins, in catalog order.
pub(crate) fn entries(store: &std::sync::Arc<dyn Store>) -> Vec<crate::catalog::entry::Entry> {
    use crate::tools::ops::mcp::entry;
    vec![
        entry::<SetSecret>(store),
        entry::<DeleteSecret>(store),
        entry::<ListSecrets>(store),
        entry::<GrantSecret>(store),
        entry::<RevokeSecret>(store),
        entry::<ListSecretRequests>(store),
    ]
}
