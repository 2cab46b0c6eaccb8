//! `resources/read` of a stored resource, or of a URI that matches a resource template (its
//! text with the variables filled in, or what its script prints).

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use omniforge_store::{ResourceBody, TemplateBody};
use rmcp::model::ResourceContents;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::content::snapshot::Content;
use crate::content::uri_template::{match_uri, substitute};
use crate::error::ContentError;

impl Content {
    /// The contents of `uri`; `None` when nothing matches.
    ///
    /// # Errors
    /// A template script failed, or the store failed.
    pub(crate) async fn read(
        &self,
        uri: &str,
        ct: CancellationToken,
    ) -> Result<Option<ResourceContents>, ContentError> {
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
                    self.host
                        .run_script(script, input, ct.clone())
                        .await
                        .map_err(|error| ContentError::TemplateFailed {
                            template: spec.uri_template.clone(),
                            uri: uri.to_owned(),
                            error,
                        })?
                }
            };
            let contents = ResourceContents::text(text, uri);
            return Ok(Some(with_mime(contents, spec.mime_type.clone())));
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
