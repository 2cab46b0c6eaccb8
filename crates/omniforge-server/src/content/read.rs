//! `resources/read` of a stored resource, or of a URI that matches a resource template: its
//! text with the variables filled in, or what its script prints (run through the call loop,
//! so the script's questions reach the client as tool calls' do).

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use omniforge_store::{ResourceBody, ScriptSpec, TemplateBody};
use rmcp::model::ResourceContents;
use serde_json::{Value, json};

use crate::content::run::NoContent;
use crate::content::snapshot::Content;
use crate::content::uri_template::{match_uri, substitute};
use crate::context::request::RequestCx;
use crate::error::ContentError;
use crate::runs::content_run::ContentScript;

/// What a URI reads as.
enum Read {
    /// The contents, ready.
    Contents(ResourceContents),
    /// A script template's run, still to be made.
    Script(TemplateRun),
}

/// The run of a script template for one URI: the script gets the URI's variables as JSON
/// stdin and prints the text.
struct TemplateRun {
    /// The URI template.
    template: String,
    /// The template definition's digest (what a `requestState` is bound to).
    digest: String,
    /// The URI read.
    uri: String,
    /// The script.
    script: ScriptSpec,
    /// The variables, as a JSON object.
    input: Value,
    /// The template's `mimeType`.
    mime_type: Option<String>,
}

impl TemplateRun {
    /// The contents of the script's printed `text`.
    fn contents(&self, text: String) -> ResourceContents {
        with_mime(
            ResourceContents::text(text, self.uri.clone()),
            self.mime_type.clone(),
        )
    }
}

impl Content {
    /// `resources/read` of `uri` for the request of `cx`: its contents, `None` when nothing
    /// matches. A script template runs here; its questions are asked as a tool's are.
    ///
    /// # Errors
    /// The store failed, the template's script failed (-32603), or the request ends another
    /// way ([`NoContent::Answer`]: input required, a `requestState` that does not open).
    pub(crate) async fn read(
        &self,
        uri: &str,
        cx: &RequestCx<'_>,
    ) -> Result<Option<ResourceContents>, NoContent> {
        let run = match self.lookup(uri).await? {
            None => return Ok(None),
            Some(Read::Contents(contents)) => return Ok(Some(contents)),
            Some(Read::Script(run)) => run,
        };
        let script = ContentScript {
            kind: "resource",
            name: &run.template,
            digest: run.digest.clone(),
            script: &run.script,
            input: run.input.clone(),
            bound: json!({"uri": run.uri, "variables": run.input}),
        };
        let failed = |error| ContentError::TemplateFailed {
            template: run.template.clone(),
            uri: uri.to_owned(),
            error,
        };
        let text = self.run_script(script, cx, failed).await?;
        Ok(Some(run.contents(text)))
    }

    /// What `uri` reads as; `None` when nothing matches.
    ///
    /// # Errors
    /// The store failed.
    async fn lookup(&self, uri: &str) -> Result<Option<Read>, ContentError> {
        let snapshot = self.snapshot();
        if snapshot.resources.iter().any(|r| r.uri == uri) {
            let stored = self.store.get_resource(uri).await.map_err(|e| {
                tracing::warn!(error = %e, "store read failed");
                ContentError::Store(e)
            })?;
            if let Some(stored) = stored.filter(|s| s.state.enabled) {
                let spec = stored.spec;
                let contents = match spec.body {
                    ResourceBody::Text(text) => ResourceContents::text(text, uri),
                    ResourceBody::Blob(bytes) => ResourceContents::blob(BASE64.encode(bytes), uri),
                };
                return Ok(Some(Read::Contents(with_mime(contents, spec.mime_type))));
            }
        }
        for (template, parsed) in &snapshot.templates {
            let Some(vars) = match_uri(parsed, uri) else {
                continue;
            };
            let spec = &template.spec;
            return Ok(Some(match &spec.body {
                TemplateBody::Text(pattern) => Read::Contents(with_mime(
                    ResourceContents::text(substitute(pattern, &vars), uri),
                    spec.mime_type.clone(),
                )),
                TemplateBody::Script(script) => Read::Script(TemplateRun {
                    template: spec.uri_template.clone(),
                    digest: omniforge_store::digest::template_sha256(spec),
                    uri: uri.to_owned(),
                    script: script.clone(),
                    input: Value::Object(
                        vars.into_iter()
                            .map(|(k, v)| (k, Value::String(v)))
                            .collect(),
                    ),
                    mime_type: spec.mime_type.clone(),
                }),
            }));
        }
        Ok(None)
    }
}

fn with_mime(contents: ResourceContents, mime_type: Option<String>) -> ResourceContents {
    match mime_type {
        Some(mime) => contents.with_mime_type(mime),
        None => contents,
    }
}
