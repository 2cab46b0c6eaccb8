//! The authoring shapes of stored content: one definition of each, shared by the built-ins,
//! the command line and packs ([`ResourceArgs`], [`TemplateArgs`], [`PromptArgs`]), their
//! validation into what the store keeps, and back ([`ResourceArgs::from_stored`], ...).
//!
//! Placeholders: in a template's static text, each `{variable}` of its URI template is
//! replaced by the matched value; in a prompt's messages, each `{argument}` of a declared
//! argument is replaced in every string of the message (not in base64 `data`/`blob`). Other
//! braces are left as they are, so JSON text stays intact.

use std::collections::BTreeMap;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use omniforge_store::{
    NewPrompt, NewResource, NewTemplate, PromptArgumentSpec, ResourceBody, ScriptSpec, TemplateBody,
};
use rmcp::model::{ContentBlock, JsonObject, PromptMessage, ResourceContents};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::content::uri_template::parse_uri_template;
use crate::context::request::RequestCx;
use crate::error::AuthoringError;
use crate::script_host::host::ScriptHost;
use crate::script_host::prepare::TimeoutRule;

/// How long a template or completion script may run when it sets no `timeout_s`; also what
/// resources/read and completion/complete wait at most.
const DEFAULT_SCRIPT_TIMEOUT_S: f64 = 30.0;

// The argument types below are the built-ins' inputSchemas too: a field's doc comment is its
// description there, so fields the schema leaves undescribed carry plain comments.

/// The arguments of `omniforge_create_resource` (and a pack's `resources` entry).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ResourceArgs {
    /// Absolute URI, e.g. docs://handbook/intro (the omniforge: scheme is reserved).
    pub uri: String,
    // MCP `name`.
    pub name: String,
    // MCP `title`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    // MCP `description`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// e.g. text/plain, application/json, image/png.
    #[serde(default, rename = "mimeType", skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    /// Text content (give text or blob).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// Binary content, base64.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blob: Option<String>,
}

/// The arguments of `omniforge_create_resource_template` (and a pack's `resource_templates`
/// entry).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct TemplateArgs {
    /// RFC 6570 URI template with {var}, {+var} or {#var}, e.g. docs://pages/{id}.
    #[serde(rename = "uriTemplate")]
    pub uri_template: String,
    // MCP `name`.
    pub name: String,
    // MCP `title`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    // MCP `description`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    // MCP `mimeType` of what it produces.
    #[serde(default, rename = "mimeType", skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    /// Static contents; each {variable} of the URI template is replaced by the matched value
    /// (give text or code).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// Python: reads the variables as a JSON object on stdin and prints the contents; runs in
    /// the tools' sandbox.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    // PEP 508 requirements of `code` and `completion_code`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dependencies: Option<Vec<String>>,
    // Wall-clock limit of one script run, seconds (default 30).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("exclusiveMinimum" = 0))]
    pub timeout_s: Option<f64>,
    // Allow network access to the scripts (default false).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<bool>,
    /// Values per variable offered by completion/complete.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completions: Option<BTreeMap<String, Vec<String>>>,
    /// Python: reads {ref, argument: {name, value}, context: {arguments}} on stdin, prints a
    /// JSON array of values.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_code: Option<String>,
}

// One argument of [`PromptArgs`] (a plain comment: its schema is inlined, undescribed).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct PromptArgumentArgs {
    // Name, used as `{name}` in the messages.
    pub name: String,
    // MCP `title`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    // MCP `description`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    // Whether prompts/get must receive it (default false).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub required: Option<bool>,
    // Values offered by completion/complete.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub values: Option<Vec<String>>,
}

/// The arguments of `omniforge_create_prompt` (and a pack's `prompts` entry).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct PromptArgs {
    // 1 to 64 characters from `[a-zA-Z0-9_-]`.
    #[schemars(regex(pattern = r"^[a-zA-Z0-9_-]{1,64}$"))]
    pub name: String,
    // MCP `title`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    // MCP `description`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    // The arguments prompts/get takes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments: Option<Vec<PromptArgumentArgs>>,
    /// MCP PromptMessages {role: user|assistant, content: {type: text|image|audio|resource|resource_link, ...}};
    /// content may be a plain string; {argument} placeholders are replaced (give messages or
    /// code).
    // Exactly one of `messages` and `code`; each message is checked by `normalize_message`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(with = "Vec<JsonObject>")]
    pub messages: Vec<Value>,
    /// Python: reads the arguments as a JSON object on stdin and prints the messages (a JSON
    /// array of PromptMessages, or plain text for one user message); may ask the user with
    /// omniforge.elicit; runs in the tools' sandbox.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    /// Python: reads {ref, argument: {name, value}, context: {arguments}} on stdin, prints a
    /// JSON array of values.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_code: Option<String>,
    // PEP 508 requirements of `code` and `completion_code`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dependencies: Option<Vec<String>>,
    // Wall-clock limit of one run of `code` or `completion_code`, seconds (default 30).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("exclusiveMinimum" = 0))]
    pub timeout_s: Option<f64>,
    // Whether `code` and `completion_code` may use the network (default false).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<bool>,
}

/// A shape as its JSON object of arguments.
pub(crate) fn to_map(value: &impl Serialize) -> JsonObject {
    match serde_json::to_value(value) {
        Ok(Value::Object(map)) => map,
        _ => JsonObject::new(),
    }
}

/// A URI must be absolute (`scheme:...`), one line, without spaces; `omniforge:` is reserved
/// for the server's own resources.
pub(crate) fn check_uri(field: &'static str, uri: &str) -> Result<(), AuthoringError> {
    let scheme_end = uri.find(':').unwrap_or(0);
    let scheme = &uri[..scheme_end];
    let scheme_ok = !scheme.is_empty()
        && scheme.starts_with(|c: char| c.is_ascii_alphabetic())
        && scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    if !scheme_ok {
        return Err(AuthoringError::invalid(
            field,
            format!(
                "{uri:?} is not an absolute URI (it needs a scheme, as in docs://guide/intro or https://example.com/a)"
            ),
        ));
    }
    if uri.len() > 4096 || uri.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(AuthoringError::invalid(
            field,
            format!("{uri:?} must be at most 4096 bytes, without spaces or control characters"),
        ));
    }
    if scheme.eq_ignore_ascii_case("omniforge") {
        return Err(AuthoringError::invalid(
            field,
            "the omniforge: scheme is reserved for the server's own resources",
        ));
    }
    Ok(())
}

fn check_mime(
    field: impl Into<std::borrow::Cow<'static, str>>,
    mime: Option<&str>,
) -> Result<(), AuthoringError> {
    let Some(mime) = mime else { return Ok(()) };
    let ok = mime.split_once('/').is_some_and(|(t, s)| {
        !t.is_empty() && !s.is_empty() && !mime.contains(char::is_whitespace) && !s.contains('/')
    });
    if ok {
        Ok(())
    } else {
        Err(AuthoringError::invalid(
            field,
            format!("{mime:?} is not a media type (type/subtype, e.g. text/plain)"),
        ))
    }
}

fn check_name(field: &'static str, name: &str) -> Result<(), AuthoringError> {
    if name.trim().is_empty() {
        Err(AuthoringError::invalid(field, "must not be empty"))
    } else {
        Ok(())
    }
}

fn check_base64(
    field: impl Into<std::borrow::Cow<'static, str>>,
    data: &str,
) -> Result<Vec<u8>, AuthoringError> {
    BASE64.decode(data).map_err(|e| {
        AuthoringError::invalid(
            field,
            format!("not valid base64 (standard alphabet, padded): {e}"),
        )
    })
}

impl ResourceArgs {
    /// Validates and converts to what the store keeps.
    ///
    /// # Errors
    /// A text naming the field.
    pub(crate) fn validate(self) -> Result<NewResource, AuthoringError> {
        check_uri("uri", &self.uri)?;
        check_name("name", &self.name)?;
        check_mime("mimeType", self.mime_type.as_deref())?;
        let body = match (self.text, self.blob) {
            (Some(text), None) => ResourceBody::Text(text),
            (None, Some(blob)) => ResourceBody::Blob(check_base64("blob", &blob)?),
            _ => {
                return Err(AuthoringError::invalid(
                    "text, blob",
                    "give exactly one: text for UTF-8 content, blob for base64 bytes",
                ));
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
    pub(crate) fn from_stored(resource: &NewResource) -> ResourceArgs {
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

/// Checks one prompt message and brings it to the MCP shape (`content` as a string becomes a
/// text block).
pub(crate) fn normalize_message(i: usize, message: Value) -> Result<Value, AuthoringError> {
    let field: std::borrow::Cow<'static, str> = format!("messages[{i}]").into();
    let Value::Object(mut map) = message else {
        return Err(AuthoringError::invalid(
            field.clone(),
            "must be an object {\"role\": \"user\"|\"assistant\", \"content\": ...}",
        ));
    };
    if let Some(Value::String(text)) = map.get("content") {
        let text = text.clone();
        map.insert("content".into(), json!({"type": "text", "text": text}));
    }
    let value = Value::Object(map);
    let parsed: PromptMessage = serde_json::from_value(value.clone()).map_err(|e| {
        AuthoringError::invalid(field.clone(), format!(
            "not an MCP PromptMessage ({e}); expected {{\"role\": \"user\"|\"assistant\", \"content\": {{\"type\": \"text\"|\"image\"|\"audio\"|\"resource\"|\"resource_link\", ...}}}}"
        ))
    })?;
    match &parsed.content {
        ContentBlock::Image(image) => {
            check_base64(format!("{field}.content.data"), &image.data)?;
            check_mime(format!("{field}.content.mimeType"), Some(&image.mime_type))?;
        }
        ContentBlock::Audio(audio) => {
            check_base64(format!("{field}.content.data"), &audio.data)?;
            check_mime(format!("{field}.content.mimeType"), Some(&audio.mime_type))?;
        }
        ContentBlock::Resource(embedded) => {
            if let ResourceContents::BlobResourceContents { blob, .. } = &embedded.resource {
                check_base64(format!("{field}.content.resource.blob"), blob)?;
            }
        }
        _ => {}
    }
    Ok(value)
}

/// Checks and builds a script of a template or prompt (its environment too); `field` names
/// the code in error texts.
async fn prepare_script(
    host: &ScriptHost,
    field: &'static str,
    code: String,
    dependencies: Vec<String>,
    timeout_s: Option<f64>,
    network: Option<bool>,
    cx: &RequestCx<'_>,
) -> Result<ScriptSpec, AuthoringError> {
    let progress = cx.progress();
    let timeout = TimeoutRule {
        seconds: timeout_s,
        keep: None,
    };
    let prepared = host
        .prepare(field, &code, dependencies, timeout, &progress)
        .await?;
    Ok(ScriptSpec {
        code,
        dependencies: prepared.dependencies,
        lock: prepared.lock.requirements,
        env_id: prepared.lock.env_id,
        timeout_ms: u64::try_from(prepared.timeout.as_millis()).unwrap_or(u64::MAX),
        memory_bytes: host.settings().memory_bytes,
        network: network.unwrap_or(false),
    })
}

/// Builds the environment of a `completion_code`, when there is one.
async fn prepare_completion(
    host: &ScriptHost,
    code: Option<String>,
    dependencies: Vec<String>,
    timeout_s: Option<f64>,
    network: Option<bool>,
    cx: &RequestCx<'_>,
) -> Result<Option<ScriptSpec>, AuthoringError> {
    let Some(code) = code else { return Ok(None) };
    let script = prepare_script(
        host,
        "completion_code",
        code,
        dependencies,
        timeout_s,
        network,
        cx,
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

fn no_scheme() -> AuthoringError {
    AuthoringError::invalid(
        "uriTemplate",
        "must start with a URI scheme, as in docs://{id}",
    )
}

impl TemplateArgs {
    /// Validates and, for scripts, builds the environment; returns what the store keeps.
    ///
    /// # Errors
    /// A text naming the field.
    pub(crate) async fn validate(
        self,
        host: &ScriptHost,
        cx: &RequestCx<'_>,
    ) -> Result<NewTemplate, AuthoringError> {
        let (_, vars) = parse_uri_template("uriTemplate", &self.uri_template)?;
        if let Some(scheme_end) = self.uri_template.find(':') {
            check_uri("uriTemplate", &self.uri_template[..=scheme_end]).map_err(|_| no_scheme())?;
        } else {
            return Err(no_scheme());
        }
        if self
            .uri_template
            .to_ascii_lowercase()
            .starts_with("omniforge:")
        {
            return Err(AuthoringError::invalid(
                "uriTemplate",
                "the omniforge: scheme is reserved for the server's own resources",
            ));
        }
        check_name("name", &self.name)?;
        check_mime("mimeType", self.mime_type.as_deref())?;
        let completions = self.completions.unwrap_or_default();
        for key in completions.keys() {
            if !vars.contains(key) {
                return Err(AuthoringError::invalid(
                    "completions",
                    format!(
                        "{key:?} is not a variable of {:?} (its variables: {})",
                        self.uri_template,
                        vars.join(", ")
                    ),
                ));
            }
        }
        let dependencies = self.dependencies.unwrap_or_default();
        let timeout = Some(self.timeout_s.unwrap_or(DEFAULT_SCRIPT_TIMEOUT_S));
        let body = match (self.text, self.code) {
            (Some(text), None) => TemplateBody::Text(text),
            (None, Some(code)) => TemplateBody::Script(
                prepare_script(
                    host,
                    "code",
                    code,
                    dependencies.clone(),
                    timeout,
                    self.network,
                    cx,
                )
                .await?,
            ),
            _ => {
                return Err(AuthoringError::invalid(
                    "text, code",
                    "give exactly one: text (a pattern with {variable} placeholders) or code (Python that prints the contents)",
                ));
            }
        };
        let completion_script = prepare_completion(
            host,
            self.completion_code,
            dependencies,
            timeout,
            self.network,
            cx,
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
    pub(crate) fn from_stored(t: &NewTemplate) -> TemplateArgs {
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
    pub(crate) async fn validate(
        self,
        host: &ScriptHost,
        cx: &RequestCx<'_>,
    ) -> Result<NewPrompt, AuthoringError> {
        if omniforge_store::validate_tool_name(&self.name).is_err() {
            return Err(AuthoringError::invalid(
                "name",
                format!(
                    "invalid prompt name {:?}: expected 1 to 64 characters from [a-zA-Z0-9_-]",
                    self.name
                ),
            ));
        }
        let mut arguments = Vec::new();
        for (i, a) in self.arguments.unwrap_or_default().into_iter().enumerate() {
            let ok = !a.name.is_empty()
                && a.name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-'));
            if !ok {
                return Err(AuthoringError::invalid(
                    format!("arguments[{i}].name"),
                    format!(
                        "{:?} must be letters, digits, _ and - (it is used as {{name}} in the messages)",
                        a.name
                    ),
                ));
            }
            if arguments
                .iter()
                .any(|p: &PromptArgumentSpec| p.name == a.name)
            {
                return Err(AuthoringError::invalid(
                    format!("arguments[{i}].name"),
                    format!("{:?} is declared twice", a.name),
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
        let dependencies = self.dependencies.unwrap_or_default();
        if self.code.is_none() && self.completion_code.is_none() && !dependencies.is_empty() {
            return Err(AuthoringError::invalid(
                "dependencies",
                "only used by code or completion_code, neither of which is given",
            ));
        }
        let timeout = Some(self.timeout_s.unwrap_or(DEFAULT_SCRIPT_TIMEOUT_S));
        let (messages, script) = match (self.messages.is_empty(), self.code) {
            (false, None) => (
                self.messages
                    .into_iter()
                    .enumerate()
                    .map(|(i, m)| normalize_message(i, m))
                    .collect::<Result<Vec<_>, _>>()?,
                None,
            ),
            (true, Some(code)) => {
                let script = prepare_script(
                    host,
                    "code",
                    code,
                    dependencies.clone(),
                    timeout,
                    self.network,
                    cx,
                )
                .await?;
                (Vec::new(), Some(script))
            }
            _ => {
                return Err(AuthoringError::invalid(
                    "messages, code",
                    "give exactly one: messages (with {argument} placeholders) or code (Python that prints the messages)",
                ));
            }
        };
        let completion_script = prepare_completion(
            host,
            self.completion_code,
            dependencies,
            timeout,
            self.network,
            cx,
        )
        .await?;
        Ok(NewPrompt {
            name: self.name,
            title: self.title,
            description: self.description,
            arguments,
            messages,
            script,
            completion_script,
        })
    }

    /// The arguments that recreate `prompt`.
    pub(crate) fn from_stored(p: &NewPrompt) -> PromptArgs {
        let any_script = p.script.as_ref().or(p.completion_script.as_ref());
        let (dependencies, timeout_s) = script_args(any_script);
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
            code: p.script.as_ref().map(|s| s.code.clone()),
            completion_code: p.completion_script.as_ref().map(|s| s.code.clone()),
            dependencies,
            timeout_s,
            network: any_script.map(|s| s.network).filter(|n| *n),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris_and_messages_are_checked() {
        assert!(check_uri("uri", "test://static-text").is_ok());
        let err = |r: Result<(), AuthoringError>| r.unwrap_err().to_string();
        assert!(err(check_uri("uri", "no-scheme")).contains("not an absolute URI"));
        assert!(err(check_uri("uri", "omniforge://runs/x")).contains("reserved"));
        assert!(check_uri("uri", "a://b c").is_err());
        let ok = normalize_message(0, json!({"role": "user", "content": "hi"})).unwrap();
        assert_eq!(ok["content"], json!({"type": "text", "text": "hi"}));
        let err = normalize_message(2, json!({"role": "robot", "content": "hi"}))
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("messages[2]: not an MCP PromptMessage"),
            "{err}"
        );
        let err = normalize_message(
            1,
            json!({"role": "user", "content": {"type": "image", "data": "not base64!", "mimeType": "image/png"}}),
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.starts_with("messages[1].content.data: not valid base64"),
            "{err}"
        );
    }
}
