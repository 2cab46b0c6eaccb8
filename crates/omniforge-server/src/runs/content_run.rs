//! A content script's run (a script template's `resources/read`, a script prompt's
//! `prompts/get`) through the same call loop as a stored tool's: progress and logs are
//! forwarded, and its questions are asked the way a tool's are (before 2026-07-28 as requests
//! to the client; under 2026-07-28 as an `input_required` result whose `requestState` is bound
//! to the principal, the definition and what was asked for: the URI read, or the prompt's
//! arguments).

use std::sync::Arc;
use std::time::Duration;

use omniforge_script::RunError;
use omniforge_store::ScriptSpec;
use rmcp::model::ProtocolVersion;
use serde_json::Value;

use crate::context::request::RequestCx;
use crate::error::{CallError, ScriptError};
use crate::runs::input_required::{Binding, Replay, StateCodec};
use crate::runs::run::{Reporting, run};
use crate::script_host::host::{ScriptHost, script_text};

/// One content script to run for a request.
pub(crate) struct ContentScript<'a> {
    /// `resource` (a template's read) or `prompt`.
    pub(crate) kind: &'a str,
    /// What the state names: the URI template, or the prompt's name.
    pub(crate) name: &'a str,
    /// The definition's digest: a state does not outlive a change of the definition.
    pub(crate) digest: String,
    /// The script.
    pub(crate) script: &'a ScriptSpec,
    /// Its JSON stdin (a template's variables, a prompt's arguments).
    pub(crate) input: Value,
    /// What else the state is bound to (the URI read with the variables, or the arguments).
    pub(crate) bound: Value,
}

/// How a content script's run ended without its text.
pub(crate) enum Ended {
    /// The script failed, or could not run.
    Failed(ScriptError),
    /// The request's answer is not the content: input required, a refused state, or the
    /// script's `protocol_error`.
    Answer(CallError),
}

/// Runs `script` for the request of `cx`; its stdout when it exited 0.
///
/// # Errors
/// [`Ended`]: the script failed, or the request ends another way (input required, -32602 for
/// a state that does not open).
pub(crate) async fn run_content(
    host: &Arc<ScriptHost>,
    states: &StateCodec,
    script: ContentScript<'_>,
    cx: &RequestCx<'_>,
) -> Result<String, Ended> {
    let client = cx.client();
    let replay = if client
        .protocol_version
        .as_ref()
        .is_some_and(|v| *v >= ProtocolVersion::V_2026_07_28)
    {
        let binding = Binding {
            principal: cx.author(),
            kind: script.kind,
            name: script.name,
            version: script.digest.clone(),
            arguments: &script.bound,
            timeout: Duration::from_millis(script.script.timeout_ms),
        };
        let round = cx.input().cloned().unwrap_or_default();
        Some(
            Replay::open(states, binding, client.capabilities.clone(), &round)
                .map_err(Ended::Answer)?,
        )
    } else {
        None
    };
    let spec = host
        .script_spec(script.script, script.input.clone())
        .await
        .map_err(Ended::Failed)?;
    let progress = cx.progress();
    let ended_with = std::sync::Mutex::new(None);
    let reporting = Reporting {
        progress: &progress,
        client: &client,
        log_level: cx.log_filter(),
        secrets: &[],
        ct: cx.ct(),
        ended_with: &ended_with,
        builtins: None,
        replay: replay.as_ref(),
    };
    let output = match run(host, spec, None, reporting).await {
        Ok(output) => output,
        Err(RunError::Busy) => return Err(Ended::Failed(ScriptError::Busy)),
        Err(e) => return Err(Ended::Failed(ScriptError::NotStarted(e))),
    };
    if let Some(error) = ended_with.into_inner().unwrap_or_else(|e| e.into_inner()) {
        return Err(Ended::Answer(error));
    }
    script_text(&output).map_err(Ended::Failed)
}
