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

use std::sync::Arc;

use omniforge_store::{Actor, Store, StoreError};
use rmcp::model::{CallToolResult, ContentBlock, JsonObject, ToolAnnotations};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::auth::Scope;
use crate::catalog::call::{Call, CallFuture, CallResult, ToolCall, running};
use crate::catalog::entry::{Entry, object_schema};
use crate::context::request::RequestCx;
use crate::error::{AuthoringError, parse_arguments};

/// The longest secret value accepted over MCP, in bytes.
const MAX_SECRET_BYTES: usize = 64 * 1024;

/// One secret built-in.
#[derive(Debug, Clone, Copy)]
enum Op {
    Set,
    Delete,
    List,
    Grant,
    Revoke,
    Requests,
}

struct SecretBuiltin {
    op: Op,
    store: Arc<dyn Store>,
}

impl ToolCall for SecretBuiltin {
    fn call<'a>(&'a self, call: Call<'a>) -> CallFuture<'a> {
        running(async move {
            match self.op {
                Op::Set => self.set(call.arguments, call.cx).await,
                Op::Delete => self.delete(call.arguments, call.cx).await,
                Op::List => self.list(call.arguments).await,
                Op::Grant => self.grant(call.arguments, call.cx, true).await,
                Op::Revoke => self.grant(call.arguments, call.cx, false).await,
                Op::Requests => self.requests(call.arguments).await,
            }
        })
    }
}

impl SecretBuiltin {
    /// `omniforge_set_secret {name, value}`.
    async fn set(&self, arguments: JsonObject, cx: &RequestCx<'_>) -> CallResult {
        let (Some(Value::String(name)), Some(Value::String(value)), 2) = (
            arguments.get("name"),
            arguments.get("value"),
            arguments.len(),
        ) else {
            return Err(AuthoringError::invalid(
                "arguments",
                "exactly `name` and `value`, both strings",
            )
            .into());
        };
        if value.len() > MAX_SECRET_BYTES {
            return Err(AuthoringError::invalid(
                "value",
                format!(
                    "at most {MAX_SECRET_BYTES} bytes (got {} bytes)",
                    value.len()
                ),
            )
            .into());
        }
        omniforge_store::validate_secret_name(name)
            .map_err(|e| AuthoringError::invalid("name", e.to_string()))?;
        let existed = self
            .store
            .secret_names()
            .await
            .map_err(AuthoringError::from)?
            .contains(name);
        self.store
            .set_secret(&cx.actor(), name, value)
            .await
            .map_err(AuthoringError::from)?;
        tracing::info!(secret = %name, by = %cx.author(), "secret set");
        let verb = if existed { "Replaced" } else { "Stored" };
        Ok(CallToolResult::success(vec![ContentBlock::text(format!(
            "{verb} secret {name}. Tool versions that declare it in `secrets` and were granted it (omniforge_grant_secret) get it as the environment variable {name} from their next call."
        ))]))
    }

    /// `omniforge_delete_secret {name}`.
    async fn delete(&self, arguments: JsonObject, cx: &RequestCx<'_>) -> CallResult {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Args {
            name: String,
        }
        let args: Args = parse_arguments(arguments)?;
        self.store
            .delete_secret(&cx.actor(), &args.name)
            .await
            .map_err(AuthoringError::from)?;
        tracing::info!(secret = %args.name, by = %cx.author(), "secret deleted");
        Ok(CallToolResult::success(vec![ContentBlock::text(format!(
            "Deleted secret {}.",
            args.name
        ))]))
    }

    /// `omniforge_list_secrets`: names and update times, never values.
    async fn list(&self, arguments: JsonObject) -> CallResult {
        if !arguments.is_empty() {
            return Err(AuthoringError::invalid("arguments", "none are taken").into());
        }
        let secrets = self.store.secrets().await.map_err(AuthoringError::from)?;
        let list: Vec<Value> = secrets
            .iter()
            .map(|s| json!({"name": s.name, "updatedAtMs": s.updated_at_ms}))
            .collect();
        let structured = json!({"secrets": list});
        let mut result = CallToolResult::success(vec![ContentBlock::text(structured.to_string())]);
        result.structured_content = Some(structured);
        Ok(result)
    }
}

/// The arguments of `omniforge_grant_secret` and `omniforge_revoke_secret`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct GrantArgs {
    secret: String,
    tool: String,
    /// Default: the tool's current version.
    #[serde(default)]
    version: Option<u32>,
}

impl SecretBuiltin {
    /// `omniforge_grant_secret` (`grant`) or `omniforge_revoke_secret`.
    async fn grant(&self, arguments: JsonObject, cx: &RequestCx<'_>, grant: bool) -> CallResult {
        let args: GrantArgs = parse_arguments(arguments)?;
        let actor = cx.actor();
        let sentence = change_grant(
            &*self.store,
            &actor,
            &args.secret,
            &args.tool,
            args.version,
            grant,
        )
        .await?;
        Ok(CallToolResult::success(vec![ContentBlock::text(sentence)]))
    }

    /// `omniforge_list_secret_requests {tool?}`: for the current version of each tool (or of
    /// `tool`) that declares secrets, each declared secret: set or not, granted or pending.
    async fn requests(&self, arguments: JsonObject) -> CallResult {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Args {
            #[serde(default)]
            tool: Option<String>,
        }
        let args: Args = parse_arguments(arguments)?;
        let list = secret_requests(&*self.store, args.tool.as_deref())
            .await
            .map_err(AuthoringError::from)?;
        let structured = json!({"requests": list});
        let mut result = CallToolResult::success(vec![ContentBlock::text(structured.to_string())]);
        result.structured_content = Some(structured);
        Ok(result)
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
    actor: &Actor,
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

/// For the current version of each tool (or of `tool` only) that declares secrets: each
/// declared secret, whether it is set, and its grant (`null`: a pending request).
///
/// # Errors
/// The store failed, or `tool` does not exist.
pub async fn secret_requests(
    store: &dyn Store,
    tool: Option<&str>,
) -> Result<Vec<Value>, StoreError> {
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
        for r in store.secret_requests(&t.name, version).await? {
            out.push(json!({
                "tool": t.name,
                "version": version,
                "secret": r.secret,
                "secretSet": r.exists,
                "granted": r.grant.as_ref().map(|g| json!({"by": g.granted_by, "atMs": g.granted_at_ms})),
            }));
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
pub(crate) fn entries(store: &Arc<dyn Store>) -> Vec<Entry> {
    let entry = |op: Op,
                 name: &'static str,
                 description: &'static str,
                 schema: Value,
                 annotations: ToolAnnotations| {
        let call = Arc::new(SecretBuiltin {
            op,
            store: store.clone(),
        });
        Entry::builtin(
            name,
            description,
            object_schema(schema),
            annotations,
            Scope::Admin,
            call,
        )
    };
    vec![
        entry(
            Op::Set,
            "omniforge_set_secret",
            "Store a secret (admin only). Tool versions that list its name in `secrets` and were granted it (omniforge_grant_secret) get the value as an environment variable; it never appears in tool definitions, logs or results (an exact value in a tool's output is redacted).",
            json!({"type": "object", "properties": {
                "name": {"type": "string", "description": "Secret name, also the environment variable: letters, digits and _, not starting with a digit, at most 64."},
                "value": {"type": "string", "description": "The secret value (at most 64 KiB)."}},
                "required": ["name", "value"], "additionalProperties": false}),
            ToolAnnotations::new()
                .read_only(false)
                .destructive(true)
                .idempotent(true)
                .open_world(false),
        ),
        entry(
            Op::Delete,
            "omniforge_delete_secret",
            "Delete a secret (admin only). Tools that list it no longer get it.",
            json!({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"], "additionalProperties": false}),
            ToolAnnotations::new()
                .read_only(false)
                .destructive(true)
                .idempotent(false)
                .open_world(false),
        ),
        entry(
            Op::List,
            "omniforge_list_secrets",
            "List the stored secrets (admin only): names and when each was last set, never values.",
            json!({"type": "object", "properties": {}, "additionalProperties": false}),
            ToolAnnotations::new()
                .read_only(true)
                .destructive(false)
                .idempotent(true)
                .open_world(false),
        ),
        entry(
            Op::Grant,
            "omniforge_grant_secret",
            "Grant a secret to one version of a tool (admin only; default: its current version), which must declare it in `secrets`. Only that version gets it: a new version asks again.",
            json!({"type": "object", "properties": {
                "secret": {"type": "string"}, "tool": {"type": "string"},
                "version": {"type": "integer", "minimum": 1, "description": "Default: the tool's current version."}},
                "required": ["secret", "tool"], "additionalProperties": false}),
            ToolAnnotations::new()
                .read_only(false)
                .destructive(false)
                .idempotent(true)
                .open_world(false),
        ),
        entry(
            Op::Revoke,
            "omniforge_revoke_secret",
            "Revoke a secret's grant from one version of a tool (admin only; default: its current version).",
            json!({"type": "object", "properties": {
                "secret": {"type": "string"}, "tool": {"type": "string"},
                "version": {"type": "integer", "minimum": 1, "description": "Default: the tool's current version."}},
                "required": ["secret", "tool"], "additionalProperties": false}),
            ToolAnnotations::new()
                .read_only(false)
                .destructive(true)
                .idempotent(false)
                .open_world(false),
        ),
        entry(
            Op::Requests,
            "omniforge_list_secret_requests",
            "List the secrets the current version of each tool (or of `tool`) declares (admin only): whether each is set, and its grant, or null for a request that awaits an admin.",
            json!({"type": "object", "properties": {"tool": {"type": "string"}}, "additionalProperties": false}),
            ToolAnnotations::new()
                .read_only(true)
                .destructive(false)
                .idempotent(true)
                .open_world(false),
        ),
    ]
}
