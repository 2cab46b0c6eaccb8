//! The secret built-ins (`admin` scope): `omniforge_set_secret`, `omniforge_delete_secret`,
//! `omniforge_list_secrets`. A value is never echoed, logged or returned; errors name the
//! secret and the rule, never the value.

use std::sync::Arc;

use omniforge_store::Store;
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
            "{verb} secret {name}. Tools that list it in `secrets` get it as the environment variable {name} from their next call."
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
            "Store a secret (admin only). Tools that list its name in `secrets` get the value as an environment variable; it never appears in tool definitions, logs or results (an exact value in a tool's output is redacted).",
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
    ]
}
