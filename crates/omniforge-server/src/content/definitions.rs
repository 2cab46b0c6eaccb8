//! Writing stored content from its authoring shapes ([`Definition`]), changing it field by
//! field, and reading it back as them: what the content built-ins, the command line and packs
//! share. A write reloads the snapshot at once,
//! so the change is listed (and announced) before the write answers.

use omniforge_store::{StoreError, WriteMode};
use rmcp::model::JsonObject;
use serde_json::Value;

use crate::content::args::{PromptArgs, ResourceArgs, TemplateArgs, to_map};
use crate::content::snapshot::Content;
use crate::context::request::RequestCx;
use crate::error::{AuthoringError, parse_arguments};

/// One definition, in its authoring shape.
#[derive(Debug, Clone)]
pub(crate) enum Definition {
    /// A stored resource.
    Resource(ResourceArgs),
    /// A resource template.
    Template(TemplateArgs),
    /// A prompt.
    Prompt(PromptArgs),
}

impl Definition {
    /// `arguments` read as a definition of `kind`.
    ///
    /// # Errors
    /// `arguments: ...` with serde's message.
    pub(crate) fn parse(kind: Kind, arguments: JsonObject) -> Result<Definition, AuthoringError> {
        Ok(match kind {
            Kind::Resource => Definition::Resource(parse_arguments(arguments)?),
            Kind::Template => Definition::Template(parse_arguments(arguments)?),
            Kind::Prompt => Definition::Prompt(parse_arguments(arguments)?),
        })
    }

    /// Its kind.
    pub(crate) fn kind(&self) -> Kind {
        match self {
            Definition::Resource(_) => Kind::Resource,
            Definition::Template(_) => Kind::Template,
            Definition::Prompt(_) => Kind::Prompt,
        }
    }

    /// Its key: the URI, URI template or name.
    pub(crate) fn key(&self) -> &str {
        match self {
            Definition::Resource(r) => &r.uri,
            Definition::Template(t) => &t.uri_template,
            Definition::Prompt(p) => &p.name,
        }
    }
}

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
    /// The argument that names a definition of this kind.
    pub(crate) fn key_field(self) -> &'static str {
        match self {
            Kind::Resource => "uri",
            Kind::Template => "uriTemplate",
            Kind::Prompt => "name",
        }
    }

    /// The kind in words.
    pub(crate) fn label(self) -> &'static str {
        match self {
            Kind::Resource => "resource",
            Kind::Template => "resource template",
            Kind::Prompt => "prompt",
        }
    }
}

impl Content {
    /// The stored definition of `kind` under `key`, as its authoring arguments.
    ///
    /// # Errors
    /// The store failed.
    pub(crate) async fn definition(
        &self,
        kind: Kind,
        key: &str,
    ) -> Result<Option<JsonObject>, StoreError> {
        Ok(match kind {
            Kind::Resource => self
                .store
                .get_resource(key)
                .await?
                .map(|r| to_map(&ResourceArgs::from_stored(&r.spec))),
            Kind::Template => self
                .store
                .list_templates()
                .await?
                .into_iter()
                .find(|t| t.spec.uri_template == key)
                .map(|t| to_map(&TemplateArgs::from_stored(&t.spec))),
            Kind::Prompt => self
                .store
                .list_prompts()
                .await?
                .into_iter()
                .find(|p| p.spec.name == key)
                .map(|p| to_map(&PromptArgs::from_stored(&p.spec))),
        })
    }

    /// Stores `definition` (`mode`: create, update or either). Returns a sentence saying what
    /// was done.
    ///
    /// # Errors
    /// A text naming the field that is wrong.
    pub(crate) async fn put(
        &self,
        definition: Definition,
        mode: WriteMode,
        cx: &RequestCx<'_>,
    ) -> Result<String, AuthoringError> {
        let kind = definition.kind();
        let key_field = kind.key_field();
        let key = definition.key().to_owned();
        let existed = match mode {
            WriteMode::Create => false,
            WriteMode::Update => true,
            WriteMode::Upsert => self.definition(kind, &key).await?.is_some(),
        };
        let result = match definition {
            Definition::Resource(args) => {
                let resource = args.validate()?;
                self.store.put_resource(&cx.actor(), resource, mode).await
            }
            Definition::Template(args) => {
                let template = args.validate(&self.host, cx).await?;
                self.store.put_template(&cx.actor(), template, mode).await
            }
            Definition::Prompt(args) => {
                let prompt = args.validate(&self.host, cx).await?;
                self.store.put_prompt(&cx.actor(), prompt, mode).await
            }
        };
        let changed = result.map_err(|e| match e {
            StoreError::Duplicate { .. } => AuthoringError::invalid(
                key_field,
                format!(
                    "a {} {key:?} already exists; use the update tool to change it",
                    kind.label()
                ),
            ),
            other => AuthoringError::Store(other),
        })?;
        self.reload().await?;
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

    /// Changes the stored definition of `kind` named in `fields` (its key field) by the other
    /// fields given; every field left out is kept (giving `text` drops a stored `blob` or
    /// `code`, giving a prompt's `messages` drops its `code`, and the other way round). Returns
    /// a sentence saying what was done.
    ///
    /// # Errors
    /// No such definition; a text naming the field that is wrong.
    pub(crate) async fn patch(
        &self,
        kind: Kind,
        mut fields: JsonObject,
        cx: &RequestCx<'_>,
    ) -> Result<String, AuthoringError> {
        let key_field = kind.key_field();
        let Some(key) = fields
            .get(key_field)
            .and_then(Value::as_str)
            .map(str::to_owned)
        else {
            return Err(AuthoringError::invalid(key_field, "required (a string)"));
        };
        let Some(mut merged) = self.definition(kind, &key).await? else {
            return Err(AuthoringError::invalid(
                key_field,
                format!("no {} {key:?}; create it first", kind.label()),
            ));
        };
        for exclusive in [["text", "blob"], ["text", "code"], ["messages", "code"]] {
            if exclusive.iter().any(|k| fields.contains_key(*k)) {
                for k in exclusive {
                    merged.remove(k);
                }
            }
        }
        merged.extend(std::mem::take(&mut fields));
        let definition = Definition::parse(kind, merged)?;
        self.put(definition, WriteMode::Update, cx).await
    }

    /// Removes a definition.
    ///
    /// # Errors
    /// It does not exist, or the store failed.
    pub(crate) async fn remove(
        &self,
        kind: Kind,
        key: &str,
        cx: &RequestCx<'_>,
    ) -> Result<String, AuthoringError> {
        let actor = cx.actor();
        let result = match kind {
            Kind::Resource => self.store.delete_resource(&actor, key).await,
            Kind::Template => self.store.delete_template(&actor, key).await,
            Kind::Prompt => self.store.delete_prompt(&actor, key).await,
        };
        result.map_err(|e| AuthoringError::invalid(kind.key_field(), e.to_string()))?;
        self.reload().await?;
        Ok(format!("Deleted {} {key}.", kind.label()))
    }
}
