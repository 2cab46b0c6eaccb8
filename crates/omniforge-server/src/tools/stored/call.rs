//! A call of a stored tool's current version: its secrets, the run, the result shaped and
//! redacted, and the call log row.

use std::sync::Arc;
use std::time::Duration;

use omniforge_script::{Exit, RunError, RunSpec};
use omniforge_store::{CallOutcome, CallRecord, CallSource, Store, ToolVersion, VersionStatus};
use rmcp::model::{JsonObject, ProtocolVersion};
use serde_json::Value;

use futures::future::BoxFuture;

use crate::catalog::call::{Call, CallFuture, CallResult, ToolCall, failure_reason, running};
use crate::catalog::entry::check;
use crate::context::request::{LogFilter, RequestCx};
use crate::error::CallError;
use crate::runs::call_builtin::BuiltinAccess;
use crate::runs::input_required::{Binding, Replay, StateCodec};
use crate::runs::redact::{redact, redact_error};
use crate::runs::run::{Reporting, run};
use crate::schema::LazySchema;
use crate::script_host::host::{ScriptHost, WarmCall};
use crate::script_host::warm::version_key;
use crate::telemetry::call_log::CallLogWriter;
use crate::tools::builtin::from_scripts;
use crate::tools::stored::shape::RunLimits;
use crate::tools::stored::shape::Shaper;
use crate::tools::stored::versions::{Loaded, VersionRef, Versions};

/// What every stored call shares: the store (versions, secrets, call log), the script host,
/// the result shaping and the versions lately called.
pub(crate) struct StoredTools {
    pub(crate) store: Arc<dyn Store>,
    /// Where each call's row goes (queued, written in batches).
    pub(crate) call_log: Arc<CallLogWriter>,
    pub(crate) host: Arc<ScriptHost>,
    pub(crate) shaper: Shaper,
    /// Seals and opens the `requestState` of input-required results.
    pub(crate) states: Arc<StateCodec>,
    /// The versions calls run, read from the store at call time (the catalog holds none).
    pub(crate) versions: Versions,
}

/// The call of one stored version: which version it is. Its code and schemas are read when
/// it is called ([`Versions`]): the catalog entry of each of 100,000 stored tools stays small.
pub(crate) struct StoredCall {
    pub(crate) version: VersionRef,
    pub(crate) tools: Arc<StoredTools>,
}

impl StoredCall {
    async fn load(&self) -> Result<Arc<Loaded>, CallError> {
        self.tools
            .versions
            .load(&*self.tools.store, &self.version)
            .await
    }
}

impl ToolCall for StoredCall {
    fn call<'a>(&'a self, call: Call<'a>) -> CallFuture<'a> {
        running(async move {
            let loaded = self.load().await?;
            let level = call.cx.log_filter();
            let builtins = BuiltinAccess {
                router: call.catalog,
                cx: call.cx,
                tool: &loaded.version.tool,
                version: loaded.version.number,
                declared: from_scripts::declared(&loaded.version.spec.code),
                callable: &from_scripts::CALLABLE,
            };
            self.tools
                .call(&loaded, call.arguments, level, call.cx, Some(&builtins))
                .await
        })
    }

    fn check_arguments<'a>(
        &'a self,
        arguments: JsonObject,
    ) -> BoxFuture<'a, Result<JsonObject, CallError>> {
        Box::pin(async move { check(&self.load().await?.input, arguments) })
    }
}

impl StoredTools {
    /// Runs `version` with `arguments`. `log_level`: script log messages at or above it are
    /// sent as `notifications/message` (default: info and above).
    ///
    /// # Errors
    /// The secrets cannot be read, the script cannot start, or its result breaks the tool's
    /// contract.
    pub(crate) async fn call(
        &self,
        stored: &Loaded,
        arguments: JsonObject,
        log_level: LogFilter,
        cx: &RequestCx<'_>,
        builtins: Option<&BuiltinAccess<'_>>,
    ) -> CallResult {
        let version = &stored.version;
        let spec_v = &version.spec;
        // Under 2026-07-28 questions become input-required rounds; a state that does not open
        // is refused before anything runs. Inside a task they are asked live through the task
        // (`task_input.rs`), never replayed.
        let client = cx.client();
        let arguments = Value::Object(arguments);
        let replay = if client.task.is_none()
            && client
                .protocol_version
                .as_ref()
                .is_some_and(|v| *v >= ProtocolVersion::V_2026_07_28)
        {
            let binding = Binding {
                principal: cx.author(),
                kind: "tool",
                name: &version.tool,
                version: version.number.to_string(),
                arguments: &arguments,
                timeout: Duration::from_millis(spec_v.limits.timeout_ms),
            };
            let round = cx.input().cloned().unwrap_or_default();
            Some(Replay::open(
                &self.states,
                binding,
                client.capabilities,
                &round,
            )?)
        } else {
            None
        };
        // Made through another replica: wait for this server's install of its environment
        // (started when the version arrived), with progress. The catalog keeps no lock; the
        // store has it.
        let store = &self.store;
        self.host
            .ready(
                &spec_v.env_id,
                async || {
                    store
                        .version(&version.tool, version.number)
                        .await
                        .map(|v| v.spec.lock)
                },
                &cx.progress(),
            )
            .await
            .map_err(CallError::Environment)?;
        let mut spec = self.spec(version);
        spec.arguments = arguments.clone();
        let mut secrets = Vec::new();
        // A pending version (issue 17) runs without secrets, whatever was granted to it: the
        // store answers none for it too, this keeps the rule where the run is made.
        if !spec_v.secrets.is_empty() && version.state.status == VersionStatus::Live {
            // Only what an admin granted to this exact version (issue 11, finding 1).
            let values = self
                .store
                .granted_secrets(&version.tool, version.number)
                .await
                .map_err(CallError::Secrets)?;
            spec.env = values
                .into_iter()
                .map(|(k, v)| (k, v.into_inner()))
                .collect();
            secrets = spec.env.iter().map(|(_, v)| v.clone()).collect();
        }
        let started_at_ms = now_ms();
        let warm = WarmCall {
            tool: &version.tool,
            version: version_key(&version.tool, version.number),
            principal: cx.author(),
        };
        let (result, outcome) = self
            .run(
                spec,
                Some(&warm),
                stored.output.as_ref(),
                log_level,
                &secrets,
                cx,
                builtins,
                replay.as_ref(),
            )
            .await;
        let result = match result {
            Ok(mut result) => {
                redact(&mut result, &secrets);
                Ok(result)
            }
            // A broken contract's text may quote what the script printed.
            Err(CallError::Result(error)) => Err(CallError::Result(redact_error(error, &secrets))),
            Err(other) => Err(other),
        };
        let bytes_out: usize = result
            .as_ref()
            .map(|r| {
                r.content
                    .iter()
                    .filter_map(|c| c.as_text().map(|t| t.text.len()))
                    .sum()
            })
            .unwrap_or_else(|e| e.to_string().len());
        let record = CallRecord {
            tool: version.tool.clone(),
            source: CallSource::Stored,
            version: Some(version.number),
            started_at_ms,
            duration_ms: u64::try_from(now_ms() - started_at_ms).unwrap_or(0),
            outcome,
            bytes_out: bytes_out as u64,
            principal: Some(cx.author().to_owned()),
            // Already redacted (see above): a short reason for a failed call, an error result
            // (a traceback, an exit status) included.
            error: failure_reason(&result),
            arguments: None,
            arguments_text: None,
            result_text: None,
        };
        self.call_log.record(record);
        // Inside a task, a run that could not finish (its time limit, a signal such as the
        // memory limit's kill) fails the task instead of completing it with an isError
        // result: `failed` is for a task that could not finish (issue 13).
        if cx.in_task()
            && let Some(message) = unfinished(outcome, spec_v.limits.timeout_ms)
        {
            return Err(CallError::Protocol {
                code: INTERNAL_ERROR,
                message,
                data: None,
            });
        }
        result
    }

    /// What every run of `version` shares: its environment, code and limits (no arguments,
    /// no secrets).
    pub(crate) fn spec(&self, version: &ToolVersion) -> RunSpec {
        let spec_v = &version.spec;
        let mut spec = RunSpec::new(&self.host.env(&spec_v.env_id), spec_v.code.clone());
        spec.timeout = Duration::from_millis(spec_v.limits.timeout_ms);
        spec.memory_bytes = spec_v.limits.memory_bytes;
        spec.network = spec_v.limits.network;
        spec
    }

    /// Starts the warm template of `version` for `principal` and waits until it is ready (or
    /// the pool decided its calls run cold): once a version became current, before the write
    /// is answered.
    pub(crate) async fn prepare_warm(&self, version: &ToolVersion, principal: &str) {
        let spec = self.spec(version);
        let key = version_key(&version.tool, version.number);
        self.host
            .warm()
            .prepare(&version.tool, &key, principal, &spec)
            .await;
    }

    /// Runs one script and shapes its result (`omniforge_test_tool` too: no schema, no
    /// secrets). `warm`: a stored version's call, run on its warm template when one is ready.
    // One argument per thing a run reads (the warm template and the declared built-ins came
    // with issues 15 and 12); a bundle struct would only rename them.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn run(
        &self,
        spec: RunSpec,
        warm: Option<&WarmCall<'_>>,
        output_schema: Option<&LazySchema>,
        log_level: LogFilter,
        secrets: &[String],
        cx: &RequestCx<'_>,
        builtins: Option<&BuiltinAccess<'_>>,
        replay: Option<&Replay<'_>>,
    ) -> (CallResult, CallOutcome) {
        // A kept output names its tool; a test run has none.
        let tool = warm.map_or("omniforge_test_tool", |w| w.tool);
        let progress = cx.progress();
        let client = cx.client();
        let ended_with = std::sync::Mutex::new(None);
        let limits = RunLimits {
            timeout: spec.timeout,
            network: spec.network,
        };
        let reporting = Reporting {
            progress: &progress,
            client: &client,
            log_level,
            secrets,
            ct: cx.ct(),
            ended_with: &ended_with,
            builtins,
            replay,
        };
        let output = match run(&self.host, spec, warm, reporting).await {
            Ok(output) => output,
            Err(RunError::Busy) => return (Err(CallError::Busy), CallOutcome::Error),
            Err(e) => return (Err(CallError::NotStarted(e)), CallOutcome::Error),
        };
        // The script ended its call with a JSON-RPC error (`omniforge.protocol_error`).
        if let Some(error) = ended_with.into_inner().unwrap_or_else(|e| e.into_inner()) {
            return (Err(error), CallOutcome::Error);
        }
        let outcome = match output.exit {
            Exit::Code(0) => CallOutcome::Ok,
            Exit::Code(n) => CallOutcome::Exit(n),
            Exit::Signal(s) => CallOutcome::Exit(-s),
            Exit::Timeout => CallOutcome::Timeout,
            Exit::Cancelled => CallOutcome::Cancelled,
        };
        let result = self
            .shaper
            .shape(&output, output_schema, secrets, limits, tool, cx)
            .await
            .map_err(CallError::from);
        (result, outcome)
    }
}

/// The JSON-RPC code of a task whose run could not finish.
const INTERNAL_ERROR: i32 = -32603;

/// Why a run could not finish, if it could not: its time limit, or a signal.
fn unfinished(outcome: CallOutcome, timeout_ms: u64) -> Option<String> {
    match outcome {
        CallOutcome::Timeout => Some(format!(
            "the script did not finish within its time limit of {} s",
            timeout_ms as f64 / 1000.0
        )),
        CallOutcome::Exit(status) if status < 0 => {
            Some(format!("the script was killed by signal {}", -status))
        }
        _ => None,
    }
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}
