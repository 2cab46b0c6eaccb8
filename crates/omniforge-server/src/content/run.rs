//! A script template's or a script prompt's run for one request, through the call loop
//! ([`run_content`](crate::runs::content_run::run_content)): progress and logs are forwarded
//! and the script's questions are asked as a tool's are (input-required rounds bound to the
//! definition and what was asked for).

use crate::content::snapshot::Content;
use crate::context::request::RequestCx;
use crate::error::{CallError, ContentError, ScriptError};
use crate::runs::content_run::{ContentScript, Ended, run_content};

/// How a read or a prompt ends without its content.
pub(crate) enum NoContent {
    /// Content's own error: unknown, refused, or its script failed.
    Content(ContentError),
    /// The request's answer is not the content: input required, a refused `requestState`, or
    /// the script's `protocol_error`.
    Answer(CallError),
}

impl From<ContentError> for NoContent {
    fn from(error: ContentError) -> Self {
        NoContent::Content(error)
    }
}

impl Content {
    /// Runs `script` for the request of `cx`: its stdout when it exited 0. `failed` names the
    /// failure for the content's error.
    ///
    /// # Errors
    /// The script failed (`failed`), or the request ends another way ([`NoContent::Answer`]).
    pub(super) async fn run_script(
        &self,
        script: ContentScript<'_>,
        cx: &RequestCx<'_>,
        failed: impl FnOnce(ScriptError) -> ContentError,
    ) -> Result<String, NoContent> {
        run_content(&self.host, &self.states, script, cx)
            .await
            .map_err(|ended| match ended {
                Ended::Failed(error) => NoContent::Content(failed(error)),
                Ended::Answer(error) => NoContent::Answer(error),
            })
    }
}
