//! The content built-ins: create, update and delete of resources, resource templates and
//! prompts, and `omniforge_get_definition`. They write through
//! [`Content`](crate::content::snapshot::Content)'s definitions, as the command line does.
//!
//! A create takes the kind's authoring shape ([`Create`]); an update the fields to change
//! ([`Patch`]: the key and what else is given, checked as a whole definition once merged with
//! what is stored); a delete the key.

use std::borrow::Cow;
use std::marker::PhantomData;
use std::sync::Arc;

use omniforge_store::WriteMode;
use rmcp::model::JsonObject;
use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer};
use serde_json::Value;

use crate::auth::Scope;
use crate::catalog::entry::Entry;
use crate::content::args::{PromptArgs, ResourceArgs, TemplateArgs};
use crate::content::definitions::{Definition, Kind};
use crate::content::snapshot::Content;
use crate::context::actor::Actor;
use crate::error::AuthoringError;
use crate::tools::ops::mcp::entry;
use crate::tools::ops::schema::requiring;
use crate::tools::ops::{Hints, Operation, Outcome, ToolDef};

/// An authoring shape of stored content, with how its built-ins are listed.
pub(crate) trait Shape: DeserializeOwned + JsonSchema + Send + 'static {
    /// Its kind.
    const KIND: Kind;
    /// Its create built-in.
    const CREATE: ToolDef;
    /// Its update built-in.
    const UPDATE: ToolDef;

    /// As a definition.
    fn definition(self) -> Definition;
}

/// A content built-in that writes (each call anew).
const fn writing(name: &'static str, description: &'static str) -> ToolDef {
    ToolDef {
        name,
        title: None,
        description,
        scope: Scope::Write,
        hints: Hints::WRITE,
    }
}

/// A content built-in that deletes.
const fn deleting(name: &'static str, description: &'static str) -> ToolDef {
    ToolDef {
        name,
        title: None,
        description,
        scope: Scope::Write,
        hints: Hints::closed(false, true, true),
    }
}

impl Shape for ResourceArgs {
    const KIND: Kind = Kind::Resource;
    const CREATE: ToolDef = writing(
        "omniforge_create_resource",
        "Store a resource (text or base64 blob) served by resources/list and resources/read; subscribers get notifications/resources/updated when it changes.",
    );
    const UPDATE: ToolDef = writing(
        "omniforge_update_resource",
        "Change a stored resource (by uri); fields left out are kept. Sessions subscribed to it get notifications/resources/updated.",
    );

    fn definition(self) -> Definition {
        Definition::Resource(self)
    }
}

impl Shape for TemplateArgs {
    const KIND: Kind = Kind::Template;
    const CREATE: ToolDef = writing(
        "omniforge_create_resource_template",
        "Store a resource template (RFC 6570): resources/read of a matching URI answers with the text pattern filled in, or with what the Python code prints for the variables.",
    );
    const UPDATE: ToolDef = writing(
        "omniforge_update_resource_template",
        "Change a resource template (by uriTemplate); fields left out are kept.",
    );

    fn definition(self) -> Definition {
        Definition::Template(self)
    }
}

impl Shape for PromptArgs {
    const KIND: Kind = Kind::Prompt;
    const CREATE: ToolDef = writing(
        "omniforge_create_prompt",
        "Store a prompt served by prompts/list and prompts/get: messages with {argument} placeholders, or Python code that prints the messages; arguments with optional completion values.",
    );
    const UPDATE: ToolDef = writing(
        "omniforge_update_prompt",
        "Change a prompt (by name); fields left out are kept.",
    );

    fn definition(self) -> Definition {
        Definition::Prompt(self)
    }
}

/// `omniforge_create_*`: a whole definition of shape `S`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(transparent)]
pub(crate) struct Create<S>(pub(crate) S);

impl<S: Shape> Operation for Create<S> {
    type Service = Content;
    const TOOL: ToolDef = S::CREATE;

    async fn apply(self, content: &Content, actor: Actor<'_>) -> Result<Outcome, AuthoringError> {
        let said = content
            .put(self.0.definition(), WriteMode::Create, actor.cx)
            .await?;
        Ok(Outcome::done(said))
    }
}

/// `omniforge_update_*`: the fields of a definition of shape `S` to change, its key among
/// them. Its schema is `S`'s with only the key required.
#[derive(Debug)]
pub(crate) struct Patch<S> {
    fields: JsonObject,
    shape: PhantomData<fn() -> S>,
}

impl<'de, S> Deserialize<'de> for Patch<S> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Ok(Patch {
            fields: JsonObject::deserialize(deserializer)?,
            shape: PhantomData,
        })
    }
}

impl<S: Shape> JsonSchema for Patch<S> {
    fn schema_name() -> Cow<'static, str> {
        format!("Patch_of_{}", S::schema_name()).into()
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        requiring(S::json_schema(generator), &[S::KIND.key_field()])
    }
}

impl<S: Shape> Operation for Patch<S> {
    type Service = Content;
    const TOOL: ToolDef = S::UPDATE;

    async fn apply(self, content: &Content, actor: Actor<'_>) -> Result<Outcome, AuthoringError> {
        let said = content.patch(S::KIND, self.fields, actor.cx).await?;
        Ok(Outcome::done(said))
    }
}

/// `omniforge_delete_resource`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct DeleteResource {
    uri: String,
}

/// `omniforge_delete_resource_template`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct DeleteTemplate {
    #[serde(rename = "uriTemplate")]
    uri_template: String,
}

/// `omniforge_delete_prompt`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct DeletePrompt {
    name: String,
}

/// Removes the definition of `kind` under `key`.
async fn delete(
    content: &Content,
    kind: Kind,
    key: &str,
    actor: Actor<'_>,
) -> Result<Outcome, AuthoringError> {
    Ok(Outcome::done(content.remove(kind, key, actor.cx).await?))
}

impl Operation for DeleteResource {
    type Service = Content;
    const TOOL: ToolDef = deleting("omniforge_delete_resource", "Remove a stored resource.");

    async fn apply(self, content: &Content, actor: Actor<'_>) -> Result<Outcome, AuthoringError> {
        delete(content, Kind::Resource, &self.uri, actor).await
    }
}

impl Operation for DeleteTemplate {
    type Service = Content;
    const TOOL: ToolDef = deleting(
        "omniforge_delete_resource_template",
        "Remove a resource template.",
    );

    async fn apply(self, content: &Content, actor: Actor<'_>) -> Result<Outcome, AuthoringError> {
        delete(content, Kind::Template, &self.uri_template, actor).await
    }
}

impl Operation for DeletePrompt {
    type Service = Content;
    const TOOL: ToolDef = deleting("omniforge_delete_prompt", "Remove a prompt.");

    async fn apply(self, content: &Content, actor: Actor<'_>) -> Result<Outcome, AuthoringError> {
        delete(content, Kind::Prompt, &self.name, actor).await
    }
}

/// `omniforge_get_definition`: exactly one of the three keys.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct GetDefinition {
    uri: Option<String>,
    #[serde(rename = "uriTemplate")]
    uri_template: Option<String>,
    prompt: Option<String>,
}

impl Operation for GetDefinition {
    type Service = Content;
    const TOOL: ToolDef = ToolDef {
        name: "omniforge_get_definition",
        title: None,
        description: "Show a stored resource (uri), resource template (uriTemplate) or prompt (prompt: name) as the arguments that would create it.",
        scope: Scope::Write,
        hints: Hints::READ,
    };

    async fn apply(self, content: &Content, _: Actor<'_>) -> Result<Outcome, AuthoringError> {
        let (kind, key) = match (self.uri, self.uri_template, self.prompt) {
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
        match content.definition(kind, &key).await? {
            Some(map) => Ok(Outcome::done(
                serde_json::to_string_pretty(&Value::Object(map)).unwrap_or_default(),
            )),
            None => Err(AuthoringError::invalid(
                kind.key_field(),
                format!("no {} {key:?}", kind.label()),
            )),
        }
    }
}

/// The content built-ins, in catalog order.
pub(crate) fn entries(content: &Arc<Content>) -> Vec<Entry> {
    vec![
        entry::<Create<ResourceArgs>>(content),
        entry::<Patch<ResourceArgs>>(content),
        entry::<DeleteResource>(content),
        entry::<Create<TemplateArgs>>(content),
        entry::<Patch<TemplateArgs>>(content),
        entry::<DeleteTemplate>(content),
        entry::<Create<PromptArgs>>(content),
        entry::<Patch<PromptArgs>>(content),
        entry::<DeletePrompt>(content),
        entry::<GetDefinition>(content),
    ]
}
