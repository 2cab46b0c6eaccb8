//! Stored resources, resource templates and prompts: what `resources/*`, `prompts/*` and
//! `completion/complete` serve, the authoring built-ins that write them, and the change
//! notifications (`notifications/resources/updated`, `.../resources/list_changed`,
//! `.../prompts/list_changed`).
//!
//! The store ([`ContentStore`]) keeps the rows; this module validates what authors write (one
//! definition of each shape, shared by the built-ins, the CLI and packs: [`ResourceArgs`],
//! [`TemplateArgs`], [`PromptArgs`]), keeps an in-memory snapshot of what is enabled, and
//! re-reads it when the store's change counter moves (polled every second, so the CLI's
//! writes are seen too). Template and completion scripts run in the tools' sandbox through
//! [`Forge`].
//!
//! Placeholders: in a template's static text, each `{variable}` of its URI template is
//! replaced by the matched value; in a prompt's messages, each `{argument}` of a declared
//! argument is replaced in every string of the message (not in base64 `data`/`blob`). Other
//! braces are left as they are, so JSON text stays intact.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use omniforge_store::{
    Actor, ContentStore, NewPrompt, NewResource, NewTemplate, PromptArgumentSpec, ResourceBody,
    ResourceInfo, ScriptSpec, StoreError, StoredPrompt, StoredTemplate, TemplateBody, WriteMode,
};
use rmcp::model::{
    CallToolResult, CompleteRequestParams, CompleteResult, CompletionInfo, ContentBlock, ErrorData,
    GetPromptRequestParams, GetPromptResult, JsonObject, Prompt, PromptArgument, PromptMessage,
    Reference, ResourceContents, ResourceTemplate, ToolAnnotations,
};
use rmcp::service::{Peer, RoleServer, SubscriptionSink};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;
use uri_template_ex::UriTemplate;

use crate::auth::Scope;
use crate::catalog::{CatalogTool, object_schema};
use crate::forge::{Caller, Forge};
use crate::peers::Peers;

/// Names of the authoring built-ins of this module.
pub mod names {
    /// Create a stored resource.
    pub const CREATE_RESOURCE: &str = "omniforge_create_resource";
    /// Replace fields of a stored resource.
    pub const UPDATE_RESOURCE: &str = "omniforge_update_resource";
    /// Remove a stored resource.
    pub const DELETE_RESOURCE: &str = "omniforge_delete_resource";
    /// Create a resource template.
    pub const CREATE_TEMPLATE: &str = "omniforge_create_resource_template";
    /// Replace fields of a resource template.
    pub const UPDATE_TEMPLATE: &str = "omniforge_update_resource_template";
    /// Remove a resource template.
    pub const DELETE_TEMPLATE: &str = "omniforge_delete_resource_template";
    /// Create a prompt.
    pub const CREATE_PROMPT: &str = "omniforge_create_prompt";
    /// Replace fields of a prompt.
    pub const UPDATE_PROMPT: &str = "omniforge_update_prompt";
    /// Remove a prompt.
    pub const DELETE_PROMPT: &str = "omniforge_delete_prompt";
    /// Show a stored prompt, resource or template as its authoring arguments.
    pub const GET_DEFINITION: &str = "omniforge_get_definition";

    /// Every name above.
    pub const ALL: &[&str] = &[
        CREATE_RESOURCE,
        UPDATE_RESOURCE,
        DELETE_RESOURCE,
        CREATE_TEMPLATE,
        UPDATE_TEMPLATE,
        DELETE_TEMPLATE,
        CREATE_PROMPT,
        UPDATE_PROMPT,
        DELETE_PROMPT,
        GET_DEFINITION,
    ];
}

/// Whether `name` is one of this module's built-ins.
pub fn is_builtin(name: &str) -> bool {
    names::ALL.contains(&name)
}

/// Most values one `completion/complete` answer carries (the spec's limit).
pub const MAX_COMPLETIONS: usize = 100;

/// How long a template or completion script may run when it sets no `timeout_s`; also what
/// resources/read and completion/complete wait at most.
const DEFAULT_SCRIPT_TIMEOUT_S: f64 = 30.0;

// ---------------------------------------------------------------------------------------
// The authoring shapes (built-ins, CLI, packs)
// ---------------------------------------------------------------------------------------

/// The arguments of `omniforge_create_resource` (and a pack's `resources` entry).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResourceArgs {
    /// Absolute URI, e.g. `docs://handbook/intro`.
    pub uri: String,
    /// MCP `name`.
    pub name: String,
    /// MCP `title`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// MCP `description`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// MCP `mimeType`.
    #[serde(default, rename = "mimeType", skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    /// Text content (exactly one of `text` and `blob`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// Binary content, base64.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blob: Option<String>,
}

/// The arguments of `omniforge_create_resource_template` (and a pack's `resource_templates`
/// entry).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TemplateArgs {
    /// RFC 6570 URI template (level 1 and 2: `{var}`, `{+var}`, `{#var}`).
    #[serde(rename = "uriTemplate")]
    pub uri_template: String,
    /// MCP `name`.
    pub name: String,
    /// MCP `title`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// MCP `description`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// MCP `mimeType` of what it produces.
    #[serde(default, rename = "mimeType", skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    /// Static text with `{variable}` placeholders (exactly one of `text` and `code`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// Python that reads the variables as a JSON object on stdin and prints the contents.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    /// PEP 508 requirements of `code` and `completion_code`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dependencies: Option<Vec<String>>,
    /// Wall-clock limit of one script run, seconds (default 30).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_s: Option<f64>,
    /// Allow network access to the scripts (default false).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<bool>,
    /// Declared values per variable, for completion/complete.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completions: Option<BTreeMap<String, Vec<String>>>,
    /// Python that completes a variable (see the guide).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_code: Option<String>,
}

/// One argument of [`PromptArgs`].
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PromptArgumentArgs {
    /// Name, used as `{name}` in the messages.
    pub name: String,
    /// MCP `title`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// MCP `description`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Whether prompts/get must receive it (default false).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub required: Option<bool>,
    /// Values offered by completion/complete.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub values: Option<Vec<String>>,
}

/// The arguments of `omniforge_create_prompt` (and a pack's `prompts` entry).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PromptArgs {
    /// 1 to 64 characters from `[a-zA-Z0-9_-]`.
    pub name: String,
    /// MCP `title`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// MCP `description`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The arguments prompts/get takes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments: Option<Vec<PromptArgumentArgs>>,
    /// MCP `PromptMessage`s `{role, content}`; `content` may be a plain string for text.
    pub messages: Vec<Value>,
    /// Python that completes an argument (see the guide).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_code: Option<String>,
    /// PEP 508 requirements of `completion_code`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dependencies: Option<Vec<String>>,
    /// Wall-clock limit of one completion run, seconds (default 30).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_s: Option<f64>,
}

fn parse<T: for<'de> Deserialize<'de>>(arguments: Map<String, Value>) -> Result<T, String> {
    serde_json::from_value(Value::Object(arguments)).map_err(|e| format!("arguments: {e}"))
}

fn to_map(value: &impl Serialize) -> Map<String, Value> {
    match serde_json::to_value(value) {
        Ok(Value::Object(map)) => map,
        _ => Map::new(),
    }
}

/// A URI must be absolute (`scheme:...`), one line, without spaces; `omniforge:` is reserved
/// for the server's own resources.
pub fn check_uri(field: &str, uri: &str) -> Result<(), String> {
    let scheme_end = uri.find(':').unwrap_or(0);
    let scheme = &uri[..scheme_end];
    let scheme_ok = !scheme.is_empty()
        && scheme.starts_with(|c: char| c.is_ascii_alphabetic())
        && scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    if !scheme_ok {
        return Err(format!(
            "{field}: {uri:?} is not an absolute URI (it needs a scheme, as in docs://guide/intro or https://example.com/a)"
        ));
    }
    if uri.len() > 4096 || uri.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(format!(
            "{field}: {uri:?} must be at most 4096 bytes, without spaces or control characters"
        ));
    }
    if scheme.eq_ignore_ascii_case("omniforge") {
        return Err(format!(
            "{field}: the omniforge: scheme is reserved for the server's own resources"
        ));
    }
    Ok(())
}

fn check_mime(field: &str, mime: Option<&str>) -> Result<(), String> {
    let Some(mime) = mime else { return Ok(()) };
    let ok = mime.split_once('/').is_some_and(|(t, s)| {
        !t.is_empty() && !s.is_empty() && !mime.contains(char::is_whitespace) && !s.contains('/')
    });
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{field}: {mime:?} is not a media type (type/subtype, e.g. text/plain)"
        ))
    }
}

fn check_name(field: &str, name: &str) -> Result<(), String> {
    if name.trim().is_empty() {
        Err(format!("{field}: must not be empty"))
    } else {
        Ok(())
    }
}

fn check_base64(field: &str, data: &str) -> Result<Vec<u8>, String> {
    BASE64
        .decode(data)
        .map_err(|e| format!("{field}: not valid base64 (standard alphabet, padded): {e}"))
}

impl ResourceArgs {
    /// Validates and converts to what the store keeps.
    ///
    /// # Errors
    /// A text naming the field.
    pub fn validate(self) -> Result<NewResource, String> {
        check_uri("uri", &self.uri)?;
        check_name("name", &self.name)?;
        check_mime("mimeType", self.mime_type.as_deref())?;
        let body = match (self.text, self.blob) {
            (Some(text), None) => ResourceBody::Text(text),
            (None, Some(blob)) => ResourceBody::Blob(check_base64("blob", &blob)?),
            _ => {
                return Err(
                    "text, blob: give exactly one: text for UTF-8 content, blob for base64 bytes"
                        .into(),
                );
            }
        };
        Ok(NewResource {
            uri: self.uri,
            name: self.name,
            title: self.title,
            description: self.description,
            mime_type: self.mime_type,
            body,
        })
    }

    /// The arguments that recreate `resource`.
    pub fn from_stored(resource: &NewResource) -> ResourceArgs {
        let (text, blob) = match &resource.body {
            ResourceBody::Text(t) => (Some(t.clone()), None),
            ResourceBody::Blob(b) => (None, Some(BASE64.encode(b))),
        };
        ResourceArgs {
            uri: resource.uri.clone(),
            name: resource.name.clone(),
            title: resource.title.clone(),
            description: resource.description.clone(),
            mime_type: resource.mime_type.clone(),
            text,
            blob,
        }
    }
}

/// Parses an RFC 6570 URI template; only level 1 and 2 expressions (`{var}`, `{+var}`,
/// `{#var}`, one variable each) are supported, since those are the ones a URI can be matched
/// against. Returns the template and its variable names.
///
/// # Errors
/// A text naming `field` and the bad expression.
pub fn parse_uri_template(field: &str, text: &str) -> Result<(UriTemplate, Vec<String>), String> {
    let mut vars = Vec::new();
    let mut rest = text;
    while let Some(open) = rest.find('{') {
        let Some(close) = rest[open..].find('}') else {
            return Err(format!("{field}: unclosed {{ in {text:?}"));
        };
        let expr = &rest[open + 1..open + close];
        let var = expr.strip_prefix(['+', '#']).unwrap_or(expr);
        let var_ok = !var.is_empty()
            && var
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '%'));
        if !var_ok {
            return Err(format!(
                "{field}: unsupported expression {{{expr}}} in {text:?}: only {{var}}, {{+var}} and {{#var}} with one variable name of letters, digits, _ and . can be matched"
            ));
        }
        if vars.iter().any(|v| v == var) {
            return Err(format!(
                "{field}: variable {var:?} appears twice in {text:?}"
            ));
        }
        vars.push(var.to_owned());
        rest = &rest[open + close + 1..];
    }
    if rest.contains('}') {
        return Err(format!("{field}: unmatched }} in {text:?}"));
    }
    if vars.is_empty() {
        return Err(format!(
            "{field}: {text:?} has no {{variable}}; a fixed URI is a resource (omniforge_create_resource)"
        ));
    }
    let template =
        UriTemplate::new(text).map_err(|e| format!("{field}: not an RFC 6570 template: {e}"))?;
    Ok((template, vars))
}

/// The variables of `uri` when it matches `template`, decoded.
pub fn match_uri(template: &UriTemplate, uri: &str) -> Option<BTreeMap<String, String>> {
    let captures = template.captures(uri)?;
    let mut vars = BTreeMap::new();
    for (name, m) in captures.iter() {
        let value = match m {
            Some(m) => m.value().ok()?.into_owned(),
            None => String::new(),
        };
        vars.insert(name.to_owned(), value);
    }
    Some(vars)
}

/// Replaces each `{name}` of `values` in `text`; other braces are left alone.
pub fn substitute(text: &str, values: &BTreeMap<String, String>) -> String {
    let mut out = text.to_owned();
    for (name, value) in values {
        out = out.replace(&format!("{{{name}}}"), value);
    }
    out
}

/// Substitutes in every string of a prompt message content, except base64 payloads and type
/// tags.
fn substitute_value(value: &mut Value, values: &BTreeMap<String, String>) {
    match value {
        Value::String(s) => *s = substitute(s, values),
        Value::Array(items) => items.iter_mut().for_each(|v| substitute_value(v, values)),
        Value::Object(map) => {
            for (key, v) in map.iter_mut() {
                if !matches!(key.as_str(), "data" | "blob" | "type" | "mimeType") {
                    substitute_value(v, values);
                }
            }
        }
        _ => {}
    }
}

/// Checks one prompt message and brings it to the MCP shape (`content` as a string becomes a
/// text block).
fn normalize_message(i: usize, message: Value) -> Result<Value, String> {
    let field = format!("messages[{i}]");
    let Value::Object(mut map) = message else {
        return Err(format!(
            "{field}: must be an object {{\"role\": \"user\"|\"assistant\", \"content\": ...}}"
        ));
    };
    if let Some(Value::String(text)) = map.get("content") {
        let text = text.clone();
        map.insert("content".into(), json!({"type": "text", "text": text}));
    }
    let value = Value::Object(map);
    let parsed: PromptMessage = serde_json::from_value(value.clone()).map_err(|e| {
        format!(
            "{field}: not an MCP PromptMessage ({e}); expected {{\"role\": \"user\"|\"assistant\", \"content\": {{\"type\": \"text\"|\"image\"|\"audio\"|\"resource\"|\"resource_link\", ...}}}}"
        )
    })?;
    match &parsed.content {
        ContentBlock::Image(image) => {
            check_base64(&format!("{field}.content.data"), &image.data)?;
            check_mime(&format!("{field}.content.mimeType"), Some(&image.mime_type))?;
        }
        ContentBlock::Audio(audio) => {
            check_base64(&format!("{field}.content.data"), &audio.data)?;
            check_mime(&format!("{field}.content.mimeType"), Some(&audio.mime_type))?;
        }
        ContentBlock::Resource(embedded) => {
            if let ResourceContents::BlobResourceContents { blob, .. } = &embedded.resource {
                check_base64(&format!("{field}.content.resource.blob"), blob)?;
            }
        }
        _ => {}
    }
    Ok(value)
}

/// Builds the environment of a `completion_code`, when there is one.
async fn prepare_completion(
    forge: &Forge,
    code: Option<String>,
    dependencies: Vec<String>,
    timeout_s: Option<f64>,
    network: Option<bool>,
    caller: &Caller,
) -> Result<Option<ScriptSpec>, String> {
    let Some(code) = code else { return Ok(None) };
    let script = forge
        .prepare_script(
            "completion_code",
            code,
            dependencies,
            timeout_s,
            network,
            caller,
        )
        .await?;
    Ok(Some(script))
}

/// The `dependencies` and `timeout_s` arguments that recreate `script`'s.
fn script_args(script: Option<&ScriptSpec>) -> (Option<Vec<String>>, Option<f64>) {
    let dependencies = script
        .map(|s| s.dependencies.clone())
        .filter(|d| !d.is_empty());
    (dependencies, script.map(|s| s.timeout_ms as f64 / 1000.0))
}

impl TemplateArgs {
    /// Validates and, for scripts, builds the environment; returns what the store keeps.
    ///
    /// # Errors
    /// A text naming the field.
    pub async fn validate(self, forge: &Forge, caller: &Caller) -> Result<NewTemplate, String> {
        let (_, vars) = parse_uri_template("uriTemplate", &self.uri_template)?;
        if let Some(scheme_end) = self.uri_template.find(':') {
            check_uri("uriTemplate", &self.uri_template[..=scheme_end])
                .map_err(|_| "uriTemplate: must start with a URI scheme, as in docs://{id}")?;
        } else {
            return Err("uriTemplate: must start with a URI scheme, as in docs://{id}".into());
        }
        if self
            .uri_template
            .to_ascii_lowercase()
            .starts_with("omniforge:")
        {
            return Err(
                "uriTemplate: the omniforge: scheme is reserved for the server's own resources"
                    .into(),
            );
        }
        check_name("name", &self.name)?;
        check_mime("mimeType", self.mime_type.as_deref())?;
        let completions = self.completions.unwrap_or_default();
        for key in completions.keys() {
            if !vars.contains(key) {
                return Err(format!(
                    "completions: {key:?} is not a variable of {:?} (its variables: {})",
                    self.uri_template,
                    vars.join(", ")
                ));
            }
        }
        let dependencies = self.dependencies.unwrap_or_default();
        let timeout = Some(self.timeout_s.unwrap_or(DEFAULT_SCRIPT_TIMEOUT_S));
        let body = match (self.text, self.code) {
            (Some(text), None) => TemplateBody::Text(text),
            (None, Some(code)) => TemplateBody::Script(
                forge
                    .prepare_script(
                        "code",
                        code,
                        dependencies.clone(),
                        timeout,
                        self.network,
                        caller,
                    )
                    .await?,
            ),
            _ => {
                return Err("text, code: give exactly one: text (a pattern with {variable} placeholders) or code (Python that prints the contents)".into());
            }
        };
        let completion_script = prepare_completion(
            forge,
            self.completion_code,
            dependencies,
            timeout,
            self.network,
            caller,
        )
        .await?;
        Ok(NewTemplate {
            uri_template: self.uri_template,
            name: self.name,
            title: self.title,
            description: self.description,
            mime_type: self.mime_type,
            body,
            completions,
            completion_script,
        })
    }

    /// The arguments that recreate `template`.
    pub fn from_stored(t: &NewTemplate) -> TemplateArgs {
        let script = match &t.body {
            TemplateBody::Script(s) => Some(s),
            TemplateBody::Text(_) => None,
        };
        let any_script = script.or(t.completion_script.as_ref());
        let (dependencies, timeout_s) = script_args(any_script);
        TemplateArgs {
            uri_template: t.uri_template.clone(),
            name: t.name.clone(),
            title: t.title.clone(),
            description: t.description.clone(),
            mime_type: t.mime_type.clone(),
            text: match &t.body {
                TemplateBody::Text(text) => Some(text.clone()),
                TemplateBody::Script(_) => None,
            },
            code: script.map(|s| s.code.clone()),
            dependencies,
            timeout_s,
            network: any_script.map(|s| s.network).filter(|n| *n),
            completions: Some(t.completions.clone()).filter(|c| !c.is_empty()),
            completion_code: t.completion_script.as_ref().map(|s| s.code.clone()),
        }
    }
}

impl PromptArgs {
    /// Validates and, with `completion_code`, builds its environment.
    ///
    /// # Errors
    /// A text naming the field.
    pub async fn validate(self, forge: &Forge, caller: &Caller) -> Result<NewPrompt, String> {
        if omniforge_store::validate_tool_name(&self.name).is_err() {
            return Err(format!(
                "name: invalid prompt name {:?}: expected 1 to 64 characters from [a-zA-Z0-9_-]",
                self.name
            ));
        }
        let mut arguments = Vec::new();
        for (i, a) in self.arguments.unwrap_or_default().into_iter().enumerate() {
            let ok = !a.name.is_empty()
                && a.name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-'));
            if !ok {
                return Err(format!(
                    "arguments[{i}].name: {:?} must be letters, digits, _ and - (it is used as {{name}} in the messages)",
                    a.name
                ));
            }
            if arguments
                .iter()
                .any(|p: &PromptArgumentSpec| p.name == a.name)
            {
                return Err(format!(
                    "arguments[{i}].name: {:?} is declared twice",
                    a.name
                ));
            }
            arguments.push(PromptArgumentSpec {
                name: a.name,
                title: a.title,
                description: a.description,
                required: a.required.unwrap_or(false),
                values: a.values.unwrap_or_default(),
            });
        }
        if self.messages.is_empty() {
            return Err("messages: a prompt needs at least one message".into());
        }
        let messages = self
            .messages
            .into_iter()
            .enumerate()
            .map(|(i, m)| normalize_message(i, m))
            .collect::<Result<Vec<_>, _>>()?;
        if self.completion_code.is_none() && self.dependencies.is_some() {
            return Err("dependencies: only used by completion_code, which is not given".into());
        }
        let completion_script = prepare_completion(
            forge,
            self.completion_code,
            self.dependencies.unwrap_or_default(),
            Some(self.timeout_s.unwrap_or(DEFAULT_SCRIPT_TIMEOUT_S)),
            None,
            caller,
        )
        .await?;
        Ok(NewPrompt {
            name: self.name,
            title: self.title,
            description: self.description,
            arguments,
            messages,
            completion_script,
        })
    }

    /// The arguments that recreate `prompt`.
    pub fn from_stored(p: &NewPrompt) -> PromptArgs {
        let (dependencies, timeout_s) = script_args(p.completion_script.as_ref());
        PromptArgs {
            name: p.name.clone(),
            title: p.title.clone(),
            description: p.description.clone(),
            arguments: Some(
                p.arguments
                    .iter()
                    .map(|a| PromptArgumentArgs {
                        name: a.name.clone(),
                        title: a.title.clone(),
                        description: a.description.clone(),
                        required: Some(a.required),
                        values: Some(a.values.clone()).filter(|v| !v.is_empty()),
                    })
                    .collect(),
            )
            .filter(|a: &Vec<_>| !a.is_empty()),
            messages: p.messages.clone(),
            completion_code: p.completion_script.as_ref().map(|s| s.code.clone()),
            dependencies,
            timeout_s,
        }
    }
}

/// Declared values starting with `prefix` (case-insensitive), then the script's, without
/// duplicates; at most [`MAX_COMPLETIONS`], with `total` and `hasMore`.
pub fn complete_from(declared: &[String], extra: Vec<String>, prefix: &str) -> CompletionInfo {
    let lower = prefix.to_lowercase();
    let mut all: Vec<String> = Vec::new();
    for value in declared
        .iter()
        .filter(|v| v.to_lowercase().starts_with(&lower))
        .cloned()
        .chain(extra)
    {
        if !all.contains(&value) {
            all.push(value);
        }
    }
    let total = all.len();
    all.truncate(MAX_COMPLETIONS);
    let mut info = CompletionInfo::default();
    info.values = all;
    info.total = Some(u32::try_from(total).unwrap_or(u32::MAX));
    info.has_more = Some(total > MAX_COMPLETIONS);
    info
}

// ---------------------------------------------------------------------------------------
// The server-side state
// ---------------------------------------------------------------------------------------

/// What is enabled now.
#[derive(Default)]
struct Snapshot {
    resources: Vec<ResourceInfo>,
    templates: Vec<(StoredTemplate, Arc<UriTemplate>)>,
    prompts: Vec<StoredPrompt>,
}

impl Snapshot {
    /// The `resources/list` entries.
    fn resource_entries(&self) -> Vec<rmcp::model::Resource> {
        self.resources.iter().map(list_entry).collect()
    }

    /// The `resources/templates/list` entries.
    fn template_entries(&self) -> Vec<ResourceTemplate> {
        self.templates
            .iter()
            .map(|(t, _)| template_entry(t))
            .collect()
    }

    /// The `prompts/list` entries.
    fn prompt_entries(&self) -> Vec<Prompt> {
        self.prompts.iter().map(prompt_entry).collect()
    }
}

/// The stored resources, templates and prompts of one server.
pub struct Content {
    store: Arc<dyn ContentStore>,
    forge: Arc<Forge>,
    peers: Arc<Peers>,
    snapshot: RwLock<Arc<Snapshot>>,
    /// The store's change counter at the last reload.
    seen_version: AtomicI64,
    /// One reload at a time (a built-in's own reload and the poller may meet).
    reloading: tokio::sync::Mutex<()>,
    /// Sessions subscribed to each URI (`resources/subscribe`), by handler id. A std lock held
    /// for map operations only.
    subscriptions: Mutex<HashMap<String, HashMap<u64, Peer<RoleServer>>>>,
    /// 2026-07-28 `subscriptions/listen` streams that accepted resource URIs, until their
    /// token is cancelled. A std lock held for vector operations only.
    sinks: Mutex<Vec<(Vec<String>, SubscriptionSink, CancellationToken)>>,
}

impl Content {
    /// Loads what is stored and starts watching the store's change counter (every second).
    ///
    /// # Errors
    /// The store cannot be read.
    pub async fn start(
        store: Arc<dyn ContentStore>,
        forge: Arc<Forge>,
        peers: Arc<Peers>,
    ) -> Result<Arc<Content>, StoreError> {
        let content = Arc::new(Content {
            store,
            forge,
            peers,
            snapshot: RwLock::default(),
            seen_version: AtomicI64::new(i64::MIN),
            reloading: tokio::sync::Mutex::new(()),
            subscriptions: Mutex::default(),
            sinks: Mutex::default(),
        });
        content.reload().await?;
        tokio::spawn(poll(Arc::downgrade(&content)));
        Ok(content)
    }

    fn snapshot(&self) -> Arc<Snapshot> {
        self.snapshot
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Re-reads the store if its change counter moved, and tells peers what changed: list
    /// changes to everyone, content changes to the sessions subscribed to that URI.
    ///
    /// # Errors
    /// The store cannot be read.
    pub async fn reload(&self) -> Result<(), StoreError> {
        let _one = self.reloading.lock().await;
        let version = self.store.data_version().await?;
        if version == self.seen_version.load(Ordering::Acquire) {
            return Ok(());
        }
        let resources: Vec<ResourceInfo> = self
            .store
            .list_resources()
            .await?
            .into_iter()
            .filter(|r| r.state.enabled)
            .collect();
        let mut templates = Vec::new();
        for t in self.store.list_templates().await? {
            if !t.state.enabled {
                continue;
            }
            match parse_uri_template("uriTemplate", &t.spec.uri_template) {
                Ok((parsed, _)) => templates.push((t, Arc::new(parsed))),
                Err(error) => tracing::warn!(%error, "skipping a stored resource template"),
            }
        }
        let prompts: Vec<StoredPrompt> = self
            .store
            .list_prompts()
            .await?
            .into_iter()
            .filter(|p| p.state.enabled)
            .collect();
        let new = Arc::new(Snapshot {
            resources,
            templates,
            prompts,
        });
        let first = self.seen_version.swap(version, Ordering::AcqRel) == i64::MIN;
        let old = std::mem::replace(
            &mut *self.snapshot.write().unwrap_or_else(|e| e.into_inner()),
            new.clone(),
        );
        if first {
            return Ok(());
        }
        let resource_list = |s: &Snapshot| (s.resource_entries(), s.template_entries());
        if resource_list(&old) != resource_list(&new) {
            self.peers.notify_resource_list_changed().await;
        }
        if old.prompt_entries() != new.prompt_entries() {
            self.peers.notify_prompt_list_changed().await;
        }
        let before: HashMap<&str, i64> = old
            .resources
            .iter()
            .map(|r| (r.uri.as_str(), r.state.updated_seq))
            .collect();
        for r in &new.resources {
            if before
                .get(r.uri.as_str())
                .is_some_and(|seq| *seq != r.state.updated_seq)
            {
                self.notify_updated(&r.uri).await;
            }
        }
        Ok(())
    }

    async fn notify_updated(&self, uri: &str) {
        let peers: Vec<Peer<RoleServer>> = {
            let mut subs = self.subscriptions.lock().unwrap_or_else(|e| e.into_inner());
            match subs.get_mut(uri) {
                Some(by_handler) => {
                    by_handler.retain(|_, p| !p.is_transport_closed());
                    by_handler.values().cloned().collect()
                }
                None => Vec::new(),
            }
        };
        let sinks: Vec<SubscriptionSink> = {
            let mut sinks = self.sinks.lock().unwrap_or_else(|e| e.into_inner());
            sinks.retain(|(_, _, ended)| !ended.is_cancelled());
            sinks
                .iter()
                .filter(|(uris, _, _)| uris.iter().any(|u| u == uri))
                .map(|(_, sink, _)| sink.clone())
                .collect()
        };
        for sink in sinks {
            if let Err(error) = sink.notify_resource_updated(uri).await {
                tracing::debug!(%error, "resources/updated not delivered to a subscription");
            }
        }
        for peer in peers {
            let param = rmcp::model::ResourceUpdatedNotificationParam::new(uri);
            if let Err(error) = peer.notify_resource_updated(param).await {
                tracing::debug!(%error, "resources/updated not delivered");
            }
        }
    }

    /// Whether `uri` is a stored resource or matches a template.
    pub fn is_known(&self, uri: &str) -> bool {
        let snapshot = self.snapshot();
        snapshot.resources.iter().any(|r| r.uri == uri)
            || snapshot
                .templates
                .iter()
                .any(|(_, t)| match_uri(t, uri).is_some())
    }

    /// A 2026-07-28 `subscriptions/listen` stream that accepted `uris`: it gets
    /// `notifications/resources/updated` for them until `ended` is cancelled.
    pub fn add_sink(&self, uris: Vec<String>, sink: SubscriptionSink, ended: CancellationToken) {
        let mut sinks = self.sinks.lock().unwrap_or_else(|e| e.into_inner());
        sinks.retain(|(_, _, ended)| !ended.is_cancelled());
        sinks.push((uris, sink, ended));
    }

    /// `resources/subscribe` from handler `handler`: `uri` must be a stored resource or match a
    /// template.
    ///
    /// # Errors
    /// -32002 for an unknown URI.
    pub fn subscribe(
        &self,
        handler: u64,
        uri: &str,
        peer: Peer<RoleServer>,
    ) -> Result<(), ErrorData> {
        if !self.is_known(uri) {
            return Err(not_found(uri));
        }
        let mut subs = self.subscriptions.lock().unwrap_or_else(|e| e.into_inner());
        // Forget sessions that have gone, so the map does not grow with every past session.
        subs.retain(|_, by_handler| {
            by_handler.retain(|_, p| !p.is_transport_closed());
            !by_handler.is_empty()
        });
        subs.entry(uri.to_owned())
            .or_default()
            .insert(handler, peer);
        Ok(())
    }

    /// `resources/unsubscribe`: forgets the subscription (unknown ones are fine).
    pub fn unsubscribe(&self, handler: u64, uri: &str) {
        let mut subs = self.subscriptions.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(by_handler) = subs.get_mut(uri) {
            by_handler.remove(&handler);
            if by_handler.is_empty() {
                subs.remove(uri);
            }
        }
    }

    /// The enabled stored resources, by URI.
    pub fn list_resources(&self) -> Vec<rmcp::model::Resource> {
        self.snapshot().resource_entries()
    }

    /// The enabled resource templates.
    pub fn list_templates(&self) -> Vec<ResourceTemplate> {
        self.snapshot().template_entries()
    }

    /// The enabled prompts, by name.
    pub fn list_prompts(&self) -> Vec<Prompt> {
        self.snapshot().prompt_entries()
    }

    /// `resources/read` of a stored resource or a URI that matches a template; `None` when
    /// nothing matches.
    ///
    /// # Errors
    /// A template script failed (-32603, with its output), or the store failed.
    pub async fn read(
        &self,
        uri: &str,
        ct: tokio_util::sync::CancellationToken,
    ) -> Result<Option<ResourceContents>, ErrorData> {
        let snapshot = self.snapshot();
        if snapshot.resources.iter().any(|r| r.uri == uri) {
            let stored = self.store.get_resource(uri).await.map_err(internal)?;
            if let Some(stored) = stored.filter(|s| s.state.enabled) {
                let spec = stored.spec;
                let contents = match spec.body {
                    ResourceBody::Text(text) => ResourceContents::text(text, uri),
                    ResourceBody::Blob(bytes) => ResourceContents::blob(BASE64.encode(bytes), uri),
                };
                return Ok(Some(with_mime(contents, spec.mime_type)));
            }
        }
        for (template, parsed) in &snapshot.templates {
            let Some(vars) = match_uri(parsed, uri) else {
                continue;
            };
            let spec = &template.spec;
            let text = match &spec.body {
                TemplateBody::Text(pattern) => substitute(pattern, &vars),
                TemplateBody::Script(script) => {
                    let input = Value::Object(
                        vars.iter()
                            .map(|(k, v)| (k.clone(), Value::String(v.clone())))
                            .collect(),
                    );
                    self.forge
                        .run_script(script, input, ct.clone())
                        .await
                        .map_err(|e| {
                            ErrorData::internal_error(
                                format!(
                                    "resource template {} failed for {uri}: {e}",
                                    spec.uri_template
                                ),
                                None,
                            )
                        })?
                }
            };
            let contents = ResourceContents::text(text, uri);
            return Ok(Some(with_mime(contents, spec.mime_type.clone())));
        }
        Ok(None)
    }

    /// `prompts/get`.
    ///
    /// # Errors
    /// -32602 for an unknown prompt, a missing required argument or an undeclared one.
    pub fn get_prompt(
        &self,
        request: &GetPromptRequestParams,
    ) -> Result<GetPromptResult, ErrorData> {
        let snapshot = self.snapshot();
        let Some(prompt) = snapshot
            .prompts
            .iter()
            .find(|p| p.spec.name == request.name)
        else {
            return Err(ErrorData::invalid_params(
                format!(
                    "unknown prompt {:?} (prompts/list shows the available ones)",
                    request.name
                ),
                None,
            ));
        };
        let spec = &prompt.spec;
        let given = request.arguments.clone().unwrap_or_default();
        let mut values = BTreeMap::new();
        let mut problems = Vec::new();
        for (name, value) in &given {
            if !spec.arguments.iter().any(|a| &a.name == name) {
                problems.push(format!("unknown argument {name:?}"));
                continue;
            }
            let text = match value {
                Value::String(s) => s.clone(),
                Value::Null => continue,
                other => other.to_string(),
            };
            values.insert(name.clone(), text);
        }
        let missing: Vec<&str> = spec
            .arguments
            .iter()
            .filter(|a| a.required && !values.contains_key(&a.name))
            .map(|a| a.name.as_str())
            .collect();
        if !missing.is_empty() {
            problems.push(format!(
                "missing required argument{} {}",
                if missing.len() == 1 { "" } else { "s" },
                missing.join(", ")
            ));
        }
        if !problems.is_empty() {
            let declared: Vec<String> = spec
                .arguments
                .iter()
                .map(|a| {
                    if a.required {
                        format!("{} (required)", a.name)
                    } else {
                        a.name.clone()
                    }
                })
                .collect();
            return Err(ErrorData::invalid_params(
                format!(
                    "prompt {}: {}; its arguments: {}",
                    spec.name,
                    problems.join("; "),
                    if declared.is_empty() {
                        "none".to_owned()
                    } else {
                        declared.join(", ")
                    }
                ),
                None,
            ));
        }
        // Optional arguments left out read as empty text.
        for a in &spec.arguments {
            values.entry(a.name.clone()).or_default();
        }
        let mut messages = Vec::new();
        for message in &spec.messages {
            let mut message = message.clone();
            substitute_value(&mut message, &values);
            let parsed: PromptMessage = serde_json::from_value(message).map_err(|e| {
                ErrorData::internal_error(format!("stored prompt message unreadable: {e}"), None)
            })?;
            messages.push(parsed);
        }
        let mut result = GetPromptResult::new(messages);
        result.description = spec.description.clone();
        Ok(result)
    }

    /// `completion/complete` for a prompt argument or a template variable.
    ///
    /// # Errors
    /// -32602 for an unknown prompt, template or argument; -32603 when the script fails.
    pub async fn complete(
        &self,
        request: &CompleteRequestParams,
        ct: tokio_util::sync::CancellationToken,
    ) -> Result<CompleteResult, ErrorData> {
        let snapshot = self.snapshot();
        let argument = &request.argument;
        let (declared, script): (Vec<String>, Option<&ScriptSpec>) = match &request.r#ref {
            Reference::Prompt(p) => {
                let Some(prompt) = snapshot.prompts.iter().find(|s| s.spec.name == p.name) else {
                    return Err(ErrorData::invalid_params(
                        format!("unknown prompt {:?}", p.name),
                        None,
                    ));
                };
                let Some(arg) = prompt
                    .spec
                    .arguments
                    .iter()
                    .find(|a| a.name == argument.name)
                else {
                    return Err(ErrorData::invalid_params(
                        format!("prompt {} has no argument {:?}", p.name, argument.name),
                        None,
                    ));
                };
                (arg.values.clone(), prompt.spec.completion_script.as_ref())
            }
            Reference::Resource(r) => {
                let Some((template, parsed)) = snapshot
                    .templates
                    .iter()
                    .find(|(t, _)| t.spec.uri_template == r.uri)
                else {
                    return Err(ErrorData::invalid_params(
                        format!("unknown resource template {:?}", r.uri),
                        None,
                    ));
                };
                if !parsed.var_names().any(|v| v == argument.name) {
                    return Err(ErrorData::invalid_params(
                        format!(
                            "resource template {} has no variable {:?}",
                            r.uri, argument.name
                        ),
                        None,
                    ));
                }
                (
                    template
                        .spec
                        .completions
                        .get(&argument.name)
                        .cloned()
                        .unwrap_or_default(),
                    template.spec.completion_script.as_ref(),
                )
            }
            _ => {
                return Err(ErrorData::invalid_params(
                    "unsupported reference type",
                    None,
                ));
            }
        };
        let extra = match script {
            Some(script) => {
                let input = json!({
                    "ref": request.r#ref,
                    "argument": {"name": argument.name, "value": argument.value},
                    "context": {"arguments": request.context.as_ref().and_then(|c| c.arguments.clone()).unwrap_or_default()},
                });
                let out = self
                    .forge
                    .run_script(script, input, ct)
                    .await
                    .map_err(|e| {
                        ErrorData::internal_error(format!("completion script failed: {e}"), None)
                    })?;
                parse_completion_output(&out).map_err(|e| {
                    ErrorData::internal_error(format!("completion script: {e}"), None)
                })?
            }
            None => Vec::new(),
        };
        Ok(CompleteResult::new(complete_from(
            &declared,
            extra,
            &argument.value,
        )))
    }
}

/// A completion script prints a JSON array of strings, or `{"values": [...]}`, or one value
/// per line.
fn parse_completion_output(out: &str) -> Result<Vec<String>, String> {
    let trimmed = out.trim();
    let strings = |items: &[Value]| -> Result<Vec<String>, String> {
        items
            .iter()
            .map(|v| {
                v.as_str()
                    .map(str::to_owned)
                    .ok_or_else(|| format!("values must be strings, got {v}"))
            })
            .collect()
    };
    match serde_json::from_str::<Value>(trimmed) {
        Ok(Value::Array(items)) => strings(&items),
        Ok(Value::Object(map)) => match map.get("values") {
            Some(Value::Array(items)) => strings(items),
            _ => Err("a JSON object must have \"values\": [...]".into()),
        },
        _ => Ok(trimmed
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(str::to_owned)
            .collect()),
    }
}

fn with_mime(contents: ResourceContents, mime_type: Option<String>) -> ResourceContents {
    match mime_type {
        Some(mime) => contents.with_mime_type(mime),
        None => contents,
    }
}

fn not_found(uri: &str) -> ErrorData {
    ErrorData::resource_not_found(
        format!("resource not found: {uri}"),
        Some(json!({"uri": uri})),
    )
}

fn internal(e: StoreError) -> ErrorData {
    tracing::warn!(error = %e, "store read failed");
    ErrorData::internal_error("the store could not be read", None)
}

fn list_entry(r: &ResourceInfo) -> rmcp::model::Resource {
    let mut raw = rmcp::model::Resource::new(r.uri.clone(), r.name.clone());
    raw.title.clone_from(&r.title);
    raw.description.clone_from(&r.description);
    raw.mime_type.clone_from(&r.mime_type);
    raw.size = Some(r.size);
    raw
}

fn template_entry(t: &StoredTemplate) -> ResourceTemplate {
    let s = &t.spec;
    let mut template = ResourceTemplate::new(s.uri_template.clone(), s.name.clone());
    template.title.clone_from(&s.title);
    template.description.clone_from(&s.description);
    template.mime_type.clone_from(&s.mime_type);
    template
}

fn prompt_entry(p: &StoredPrompt) -> Prompt {
    let s = &p.spec;
    let arguments: Vec<PromptArgument> = s
        .arguments
        .iter()
        .map(|a| {
            let mut arg = PromptArgument::new(a.name.clone()).with_required(a.required);
            arg.title.clone_from(&a.title);
            arg.description.clone_from(&a.description);
            arg
        })
        .collect();
    let mut prompt = Prompt::new(
        s.name.clone(),
        s.description.clone(),
        (!arguments.is_empty()).then_some(arguments),
    );
    prompt.title.clone_from(&s.title);
    prompt
}

async fn poll(content: std::sync::Weak<Content>) {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let Some(content) = content.upgrade() else {
            return;
        };
        if let Err(error) = content.reload().await {
            tracing::warn!(%error, "reloading stored resources and prompts failed");
        }
    }
}

// ---------------------------------------------------------------------------------------
// The authoring built-ins
// ---------------------------------------------------------------------------------------

/// The kinds of definitions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A stored resource (key: `uri`).
    Resource,
    /// A resource template (key: `uriTemplate`).
    Template,
    /// A prompt (key: `name`).
    Prompt,
}

impl Kind {
    fn key_field(self) -> &'static str {
        match self {
            Kind::Resource => "uri",
            Kind::Template => "uriTemplate",
            Kind::Prompt => "name",
        }
    }

    fn label(self) -> &'static str {
        match self {
            Kind::Resource => "resource",
            Kind::Template => "resource template",
            Kind::Prompt => "prompt",
        }
    }
}

/// The create, update and delete built-ins: the kind each edits, and how it writes (`None`:
/// it deletes).
const EDITS: [(&str, Kind, Option<WriteMode>); 9] = [
    (
        names::CREATE_RESOURCE,
        Kind::Resource,
        Some(WriteMode::Create),
    ),
    (
        names::UPDATE_RESOURCE,
        Kind::Resource,
        Some(WriteMode::Update),
    ),
    (names::DELETE_RESOURCE, Kind::Resource, None),
    (
        names::CREATE_TEMPLATE,
        Kind::Template,
        Some(WriteMode::Create),
    ),
    (
        names::UPDATE_TEMPLATE,
        Kind::Template,
        Some(WriteMode::Update),
    ),
    (names::DELETE_TEMPLATE, Kind::Template, None),
    (names::CREATE_PROMPT, Kind::Prompt, Some(WriteMode::Create)),
    (names::UPDATE_PROMPT, Kind::Prompt, Some(WriteMode::Update)),
    (names::DELETE_PROMPT, Kind::Prompt, None),
];

impl Content {
    /// Runs one of this module's built-ins.
    pub async fn call_builtin(
        &self,
        name: &str,
        arguments: Map<String, Value>,
        caller: &Caller,
    ) -> CallToolResult {
        let action = EDITS.iter().find(|(n, ..)| *n == name);
        let outcome = match action {
            Some(&(_, kind, Some(mode))) => self.write(kind, arguments, mode, caller).await,
            Some(&(_, kind, None)) => self.delete(kind, arguments, caller).await,
            None if name == names::GET_DEFINITION => self.get_definition(arguments).await,
            None => Err("Unknown or inactive tool".to_owned()),
        };
        match outcome {
            Ok(text) => CallToolResult::success(vec![ContentBlock::text(text)]),
            Err(text) => CallToolResult::error(vec![ContentBlock::text(text)]),
        }
    }

    /// The stored definition of `kind` under `key`, as its authoring arguments.
    ///
    /// # Errors
    /// The store failed.
    pub async fn definition(
        &self,
        kind: Kind,
        key: &str,
    ) -> Result<Option<Map<String, Value>>, String> {
        Ok(match kind {
            Kind::Resource => self
                .store
                .get_resource(key)
                .await
                .map_err(|e| e.to_string())?
                .map(|r| to_map(&ResourceArgs::from_stored(&r.spec))),
            Kind::Template => self
                .store
                .list_templates()
                .await
                .map_err(|e| e.to_string())?
                .into_iter()
                .find(|t| t.spec.uri_template == key)
                .map(|t| to_map(&TemplateArgs::from_stored(&t.spec))),
            Kind::Prompt => self
                .store
                .list_prompts()
                .await
                .map_err(|e| e.to_string())?
                .into_iter()
                .find(|p| p.spec.name == key)
                .map(|p| to_map(&PromptArgs::from_stored(&p.spec))),
        })
    }

    /// Creates or updates a definition from its authoring arguments. An update keeps every
    /// field it leaves out (giving `text` drops a stored `blob` or `code`, and the other way
    /// round). Returns a sentence saying what was done.
    ///
    /// # Errors
    /// A text naming the field that is wrong.
    pub async fn write(
        &self,
        kind: Kind,
        mut arguments: Map<String, Value>,
        mode: WriteMode,
        caller: &Caller,
    ) -> Result<String, String> {
        let key_field = kind.key_field();
        let Some(key) = arguments
            .get(key_field)
            .and_then(Value::as_str)
            .map(str::to_owned)
        else {
            return Err(format!("{key_field}: required (a string)"));
        };
        let existed = match mode {
            WriteMode::Create => false,
            WriteMode::Update => true,
            WriteMode::Upsert => self.definition(kind, &key).await?.is_some(),
        };
        if mode == WriteMode::Update {
            let Some(mut merged) = self.definition(kind, &key).await? else {
                return Err(format!(
                    "{key_field}: no {} {key:?}; create it first",
                    kind.label()
                ));
            };
            for exclusive in [["text", "blob"], ["text", "code"]] {
                if exclusive.iter().any(|k| arguments.contains_key(*k)) {
                    for k in exclusive {
                        merged.remove(k);
                    }
                }
            }
            merged.extend(std::mem::take(&mut arguments));
            arguments = merged;
        }
        let result = match kind {
            Kind::Resource => {
                let resource = parse::<ResourceArgs>(arguments)?.validate()?;
                self.store
                    .put_resource(&Actor::new(&caller.author), resource, mode)
                    .await
            }
            Kind::Template => {
                let template = parse::<TemplateArgs>(arguments)?
                    .validate(&self.forge, caller)
                    .await?;
                self.store
                    .put_template(&Actor::new(&caller.author), template, mode)
                    .await
            }
            Kind::Prompt => {
                let prompt = parse::<PromptArgs>(arguments)?
                    .validate(&self.forge, caller)
                    .await?;
                self.store
                    .put_prompt(&Actor::new(&caller.author), prompt, mode)
                    .await
            }
        };
        let changed = result.map_err(|e| match e {
            StoreError::Duplicate { .. } => format!(
                "{key_field}: a {} {key:?} already exists; use the update tool to change it",
                kind.label()
            ),
            other => other.to_string(),
        })?;
        self.reload().await.map_err(|e| e.to_string())?;
        let verb = match (existed, changed) {
            (_, false) => "Unchanged",
            (false, true) => "Created",
            (true, true) => "Updated",
        };
        let listed = match kind {
            Kind::Resource => "resources/list",
            Kind::Template => "resources/templates/list",
            Kind::Prompt => "prompts/list",
        };
        Ok(format!(
            "{verb} {} {key}. It is listed in {listed} now.",
            kind.label()
        ))
    }

    /// Removes a definition.
    ///
    /// # Errors
    /// It does not exist, or the store failed.
    pub async fn remove(&self, kind: Kind, key: &str, caller: &Caller) -> Result<String, String> {
        let actor = Actor::new(&caller.author);
        let result = match kind {
            Kind::Resource => self.store.delete_resource(&actor, key).await,
            Kind::Template => self.store.delete_template(&actor, key).await,
            Kind::Prompt => self.store.delete_prompt(&actor, key).await,
        };
        result.map_err(|e| format!("{}: {e}", kind.key_field()))?;
        self.reload().await.map_err(|e| e.to_string())?;
        Ok(format!("Deleted {} {key}.", kind.label()))
    }

    async fn delete(
        &self,
        kind: Kind,
        arguments: Map<String, Value>,
        caller: &Caller,
    ) -> Result<String, String> {
        let key_field = kind.key_field();
        match arguments.get(key_field).and_then(Value::as_str) {
            Some(key) if arguments.len() == 1 => self.remove(kind, key, caller).await,
            _ => Err(format!("arguments: exactly {{\"{key_field}\": ...}}")),
        }
    }

    async fn get_definition(&self, arguments: Map<String, Value>) -> Result<String, String> {
        let (kind, key) = match (
            arguments.get("uri").and_then(Value::as_str),
            arguments.get("uriTemplate").and_then(Value::as_str),
            arguments.get("prompt").and_then(Value::as_str),
        ) {
            (Some(k), None, None) => (Kind::Resource, k),
            (None, Some(k), None) => (Kind::Template, k),
            (None, None, Some(k)) => (Kind::Prompt, k),
            _ => return Err("arguments: give exactly one of uri, uriTemplate, prompt".into()),
        };
        match self.definition(kind, key).await? {
            Some(map) => Ok(serde_json::to_string_pretty(&Value::Object(map)).unwrap_or_default()),
            None => Err(format!("{}: no {} {key:?}", kind.key_field(), kind.label())),
        }
    }
}

/// The built-ins of this module, in catalog order; none without `authoring`.
pub fn builtin_tools(authoring: bool) -> Vec<CatalogTool> {
    if !authoring {
        return Vec::new();
    }
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
        "messages": {"type": "array", "items": {"type": "object"}, "description": "MCP PromptMessages {role: user|assistant, content: {type: text|image|audio|resource|resource_link, ...}}; content may be a plain string; {argument} placeholders are replaced."},
        "completion_code": {"type": "string", "description": "Python: reads {ref, argument: {name, value}, context: {arguments}} on stdin, prints a JSON array of values."},
        "dependencies": {"type": "array", "items": {"type": "string"}},
        "timeout_s": {"type": "number", "exclusiveMinimum": 0}
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
    let tool =
        |name: &str, description: &str, schema: Arc<JsonObject>, annotations: ToolAnnotations| {
            CatalogTool::builtin(name, description, schema, annotations, Scope::Write)
        };
    // The create, update and delete built-ins of one kind, keyed by `key`.
    let edits =
        |key: &str, props: &Value, create_required: &[&str], described: [(&str, &str); 3]| {
            let [
                (create, create_text),
                (update, update_text),
                (delete, delete_text),
            ] = described;
            [
                tool(
                    create,
                    create_text,
                    schema(props, create_required),
                    writing.clone(),
                ),
                tool(update, update_text, schema(props, &[key]), writing.clone()),
                tool(delete, delete_text, key_only(key), deleting.clone()),
            ]
        };
    let mut tools = Vec::new();
    tools.extend(edits(
        "uri",
        &resource_props,
        &["uri", "name"],
        [
            (names::CREATE_RESOURCE, "Store a resource (text or base64 blob) served by resources/list and resources/read; subscribers get notifications/resources/updated when it changes."),
            (names::UPDATE_RESOURCE, "Change a stored resource (by uri); fields left out are kept. Sessions subscribed to it get notifications/resources/updated."),
            (names::DELETE_RESOURCE, "Remove a stored resource."),
        ],
    ));
    tools.extend(edits(
        "uriTemplate",
        &template_props,
        &["uriTemplate", "name"],
        [
            (names::CREATE_TEMPLATE, "Store a resource template (RFC 6570): resources/read of a matching URI answers with the text pattern filled in, or with what the Python code prints for the variables."),
            (names::UPDATE_TEMPLATE, "Change a resource template (by uriTemplate); fields left out are kept."),
            (names::DELETE_TEMPLATE, "Remove a resource template."),
        ],
    ));
    tools.extend(edits(
        "name",
        &prompt_props,
        &["name", "messages"],
        [
            (names::CREATE_PROMPT, "Store a prompt served by prompts/list and prompts/get: messages with {argument} placeholders, arguments with optional completion values."),
            (names::UPDATE_PROMPT, "Change a prompt (by name); fields left out are kept."),
            (names::DELETE_PROMPT, "Remove a prompt."),
        ],
    ));
    tools.push(
        tool(
            names::GET_DEFINITION,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_match_and_fill_in() {
        let (t, vars) = parse_uri_template("uriTemplate", "test://template/{id}/data").unwrap();
        assert_eq!(vars, ["id"]);
        let got = match_uri(&t, "test://template/123/data").unwrap();
        assert_eq!(got.get("id").map(String::as_str), Some("123"));
        assert!(match_uri(&t, "test://template/123/other").is_none());
        assert!(
            match_uri(&t, "test://template/1/2/data").is_none(),
            "{{id}} stops at /"
        );
        let text = substitute(
            r#"{"id":"{id}","templateTest":true,"data":"Data for ID: {id}"}"#,
            &got,
        );
        assert_eq!(
            text,
            r#"{"id":"123","templateTest":true,"data":"Data for ID: 123"}"#
        );
        let decoded = match_uri(&t, "test://template/a%20b/data").unwrap();
        assert_eq!(decoded["id"], "a b");
        let (t, _) = parse_uri_template("u", "file:///{+path}").unwrap();
        assert_eq!(match_uri(&t, "file:///a/b.txt").unwrap()["path"], "a/b.txt");
    }

    #[test]
    fn template_errors_name_the_expression() {
        for (text, want) in [
            ("test://{?q}", "unsupported expression {?q}"),
            ("test://{a,b}", "unsupported expression {a,b}"),
            ("test://{id}/{id}", "appears twice"),
            ("test://{id", "unclosed {"),
            ("test://fixed", "has no {variable}"),
        ] {
            let err = parse_uri_template("uriTemplate", text).unwrap_err();
            assert!(err.starts_with("uriTemplate: "), "{err}");
            assert!(err.contains(want), "{text}: {err}");
        }
    }

    #[test]
    fn prompt_placeholders_skip_payloads_and_unknown_braces() {
        let values = BTreeMap::from([("arg1".to_owned(), "hello".to_owned())]);
        let mut content = json!({"role": "user", "content": {"type": "resource", "resource": {
            "uri": "test://{arg1}", "text": "{arg1} {other} {\"json\": 1}", "mimeType": "text/{arg1}"}}});
        substitute_value(&mut content, &values);
        assert_eq!(content["content"]["resource"]["uri"], "test://hello");
        assert_eq!(
            content["content"]["resource"]["text"],
            "hello {other} {\"json\": 1}"
        );
        assert_eq!(content["content"]["resource"]["mimeType"], "text/{arg1}");
    }

    #[test]
    fn completion_filters_by_prefix_and_caps() {
        let declared: Vec<String> = ["paris", "Park", "lyon"].map(String::from).to_vec();
        let info = complete_from(&declared, vec!["party".into(), "paris".into()], "pa");
        assert_eq!(info.values, ["paris", "Park", "party"]);
        assert_eq!((info.total, info.has_more), (Some(3), Some(false)));
        let many: Vec<String> = (0..150).map(|i| format!("v{i}")).collect();
        let info = complete_from(&many, Vec::new(), "");
        assert_eq!(info.values.len(), MAX_COMPLETIONS);
        assert_eq!((info.total, info.has_more), (Some(150), Some(true)));
    }

    #[test]
    fn uris_and_messages_are_checked() {
        assert!(check_uri("uri", "test://static-text").is_ok());
        assert!(
            check_uri("uri", "no-scheme")
                .unwrap_err()
                .contains("not an absolute URI")
        );
        assert!(
            check_uri("uri", "omniforge://runs/x")
                .unwrap_err()
                .contains("reserved")
        );
        assert!(check_uri("uri", "a://b c").is_err());
        let ok = normalize_message(0, json!({"role": "user", "content": "hi"})).unwrap();
        assert_eq!(ok["content"], json!({"type": "text", "text": "hi"}));
        let err = normalize_message(2, json!({"role": "robot", "content": "hi"})).unwrap_err();
        assert!(
            err.starts_with("messages[2]: not an MCP PromptMessage"),
            "{err}"
        );
        let err = normalize_message(
            1,
            json!({"role": "user", "content": {"type": "image", "data": "not base64!", "mimeType": "image/png"}}),
        )
        .unwrap_err();
        assert!(
            err.starts_with("messages[1].content.data: not valid base64"),
            "{err}"
        );
    }

    #[test]
    fn completion_script_output_shapes() {
        assert_eq!(
            parse_completion_output("[\"a\", \"b\"]").unwrap(),
            ["a", "b"]
        );
        assert_eq!(
            parse_completion_output("{\"values\": [\"a\"]}").unwrap(),
            ["a"]
        );
        assert_eq!(parse_completion_output("a\n b \n\n").unwrap(), ["a", "b"]);
        assert!(parse_completion_output("[1]").is_err());
    }
}
