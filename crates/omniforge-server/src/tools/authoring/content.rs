//! The content built-ins: create, update and delete of resources, resource templates and
//! prompts, and `omniforge_get_definition`. They write through
//! [`Content`](crate::content::snapshot::Content)'s definitions, as the command line does.

use std::sync::Arc;

use omniforge_store::WriteMode;
use rmcp::model::{CallToolResult, ContentBlock, JsonObject, ToolAnnotations};
use serde_json::{Value, json};

use crate::auth::Scope;
use crate::catalog::call::{Call, CallFuture, ToolCall, running};
use crate::catalog::entry::{Entry, object_schema};
use crate::content::definitions::Kind;
use crate::content::snapshot::Content;
use crate::context::request::RequestCx;
use crate::error::AuthoringError;

/// One content built-in.
#[derive(Debug, Clone, Copy)]
enum Op {
    /// Create or update one kind.
    Write(Kind, WriteMode),
    /// Delete one kind.
    Delete(Kind),
    /// `omniforge_get_definition`.
    Get,
}

struct ContentBuiltin {
    op: Op,
    content: Arc<Content>,
}

impl ToolCall for ContentBuiltin {
    fn call<'a>(&'a self, call: Call<'a>) -> CallFuture<'a> {
        running(async move {
            let text = match self.op {
                Op::Write(kind, mode) => {
                    self.content
                        .write(kind, call.arguments, mode, call.cx)
                        .await?
                }
                Op::Delete(kind) => self.delete(kind, call.arguments, call.cx).await?,
                Op::Get => self.get_definition(call.arguments).await?,
            };
            Ok(CallToolResult::success(vec![ContentBlock::text(text)]))
        })
    }
}

impl ContentBuiltin {
    async fn delete(
        &self,
        kind: Kind,
        arguments: JsonObject,
        cx: &RequestCx<'_>,
    ) -> Result<String, AuthoringError> {
        let key_field = kind.key_field();
        match arguments.get(key_field).and_then(Value::as_str) {
            Some(key) if arguments.len() == 1 => self.content.remove(kind, key, cx).await,
            _ => Err(AuthoringError::invalid(
                "arguments",
                format!("exactly {{\"{key_field}\": ...}}"),
            )),
        }
    }

    async fn get_definition(&self, arguments: JsonObject) -> Result<String, AuthoringError> {
        let (kind, key) = match (
            arguments.get("uri").and_then(Value::as_str),
            arguments.get("uriTemplate").and_then(Value::as_str),
            arguments.get("prompt").and_then(Value::as_str),
        ) {
            (Some(k), None, None) => (Kind::Resource, k),
            (None, Some(k), None) => (Kind::Template, k),
            (None, None, Some(k)) => (Kind::Prompt, k),
            _ => {
                return Err(AuthoringError::invalid(
                    "arguments",
                    "give exactly one of uri, uriTemplate, prompt",
                ));
            }
        };
        match self.content.definition(kind, key).await? {
            Some(map) => Ok(serde_json::to_string_pretty(&Value::Object(map)).unwrap_or_default()),
            None => Err(AuthoringError::invalid(
                kind.key_field(),
                format!("no {} {key:?}", kind.label()),
            )),
        }
    }
}

/// The content built-ins, in catalog order.
pub(crate) fn entries(content: &Arc<Content>) -> Vec<Entry> {
    let object = object_schema;
    let resource_props = json!({
        "uri": {"type": "string", "description": "Absolute URI, e.g. docs://handbook/intro (the omniforge: scheme is reserved)."},
        "name": {"type": "string"},
        "title": {"type": "string"},
        "description": {"type": "string"},
        "mimeType": {"type": "string", "description": "e.g. text/plain, application/json, image/png."},
        "text": {"type": "string", "description": "Text content (give text or blob)."},
        "blob": {"type": "string", "description": "Binary content, base64."}
    });
    let template_props = json!({
        "uriTemplate": {"type": "string", "description": "RFC 6570 URI template with {var}, {+var} or {#var}, e.g. docs://pages/{id}."},
        "name": {"type": "string"},
        "title": {"type": "string"},
        "description": {"type": "string"},
        "mimeType": {"type": "string"},
        "text": {"type": "string", "description": "Static contents; each {variable} of the URI template is replaced by the matched value (give text or code)."},
        "code": {"type": "string", "description": "Python: reads the variables as a JSON object on stdin and prints the contents; runs in the tools' sandbox."},
        "dependencies": {"type": "array", "items": {"type": "string"}},
        "timeout_s": {"type": "number", "exclusiveMinimum": 0},
        "network": {"type": "boolean"},
        "completions": {"type": "object", "additionalProperties": {"type": "array", "items": {"type": "string"}}, "description": "Values per variable offered by completion/complete."},
        "completion_code": {"type": "string", "description": "Python: reads {ref, argument: {name, value}, context: {arguments}} on stdin, prints a JSON array of values."}
    });
    let prompt_props = json!({
        "name": {"type": "string", "pattern": "^[a-zA-Z0-9_-]{1,64}$"},
        "title": {"type": "string"},
        "description": {"type": "string"},
        "arguments": {"type": "array", "items": {"type": "object", "properties": {
            "name": {"type": "string"}, "title": {"type": "string"}, "description": {"type": "string"},
            "required": {"type": "boolean"}, "values": {"type": "array", "items": {"type": "string"}}},
            "required": ["name"], "additionalProperties": false}},
        "messages": {"type": "array", "items": {"type": "object"}, "description": "MCP PromptMessages {role: user|assistant, content: {type: text|image|audio|resource|resource_link, ...}}; content may be a plain string; {argument} placeholders are replaced (give messages or code)."},
        "code": {"type": "string", "description": "Python: reads the arguments as a JSON object on stdin and prints the messages (a JSON array of PromptMessages, or plain text for one user message); may ask the user with omniforge.elicit; runs in the tools' sandbox."},
        "completion_code": {"type": "string", "description": "Python: reads {ref, argument: {name, value}, context: {arguments}} on stdin, prints a JSON array of values."},
        "dependencies": {"type": "array", "items": {"type": "string"}},
        "timeout_s": {"type": "number", "exclusiveMinimum": 0},
        "network": {"type": "boolean"}
    });
    let schema = |props: &Value, required: &[&str]| {
        object(
            json!({"type": "object", "properties": props, "required": required, "additionalProperties": false}),
        )
    };
    let key_only = |key: &str| {
        object(
            json!({"type": "object", "properties": {key: {"type": "string"}}, "required": [key], "additionalProperties": false}),
        )
    };
    let writing = ToolAnnotations::new()
        .read_only(false)
        .destructive(false)
        .idempotent(false)
        .open_world(false);
    let deleting = ToolAnnotations::new()
        .read_only(false)
        .destructive(true)
        .idempotent(true)
        .open_world(false);
    let tool = |op: Op,
                name: &'static str,
                description: &'static str,
                schema: Arc<JsonObject>,
                annotations: ToolAnnotations| {
        let call = Arc::new(ContentBuiltin {
            op,
            content: content.clone(),
        });
        Entry::builtin(name, description, schema, annotations, Scope::Write, call)
    };
    // The create, update and delete built-ins of one kind, keyed by `key`.
    let edits = |kind: Kind,
                 props: &Value,
                 create_required: &[&str],
                 described: [(&'static str, &'static str); 3]| {
        let key = kind.key_field();
        let [
            (create, create_text),
            (update, update_text),
            (delete, delete_text),
        ] = described;
        [
            tool(
                Op::Write(kind, WriteMode::Create),
                create,
                create_text,
                schema(props, create_required),
                writing.clone(),
            ),
            tool(
                Op::Write(kind, WriteMode::Update),
                update,
                update_text,
                schema(props, &[key]),
                writing.clone(),
            ),
            tool(
                Op::Delete(kind),
                delete,
                delete_text,
                key_only(key),
                deleting.clone(),
            ),
        ]
    };
    let mut tools = Vec::new();
    tools.extend(edits(
        Kind::Resource,
        &resource_props,
        &["uri", "name"],
        [
            ("omniforge_create_resource", "Store a resource (text or base64 blob) served by resources/list and resources/read; subscribers get notifications/resources/updated when it changes."),
            ("omniforge_update_resource", "Change a stored resource (by uri); fields left out are kept. Sessions subscribed to it get notifications/resources/updated."),
            ("omniforge_delete_resource", "Remove a stored resource."),
        ],
    ));
    tools.extend(edits(
        Kind::Template,
        &template_props,
        &["uriTemplate", "name"],
        [
            ("omniforge_create_resource_template", "Store a resource template (RFC 6570): resources/read of a matching URI answers with the text pattern filled in, or with what the Python code prints for the variables."),
            ("omniforge_update_resource_template", "Change a resource template (by uriTemplate); fields left out are kept."),
            ("omniforge_delete_resource_template", "Remove a resource template."),
        ],
    ));
    tools.extend(edits(
        Kind::Prompt,
        &prompt_props,
        &["name"],
        [
            ("omniforge_create_prompt", "Store a prompt served by prompts/list and prompts/get: messages with {argument} placeholders, or Python code that prints the messages; arguments with optional completion values."),
            ("omniforge_update_prompt", "Change a prompt (by name); fields left out are kept."),
            ("omniforge_delete_prompt", "Remove a prompt."),
        ],
    ));
    tools.push(
        tool(
            Op::Get,
            "omniforge_get_definition",
            "Show a stored resource (uri), resource template (uriTemplate) or prompt (prompt: name) as the arguments that would create it.",
            object(
                json!({"type": "object", "properties": {"uri": {"type": "string"}, "uriTemplate": {"type": "string"}, "prompt": {"type": "string"}}, "additionalProperties": false}),
            ),
            ToolAnnotations::new()
                .read_only(true)
                .destructive(false)
                .idempotent(true)
                .open_world(false),
        ),
    );
    tools
}
