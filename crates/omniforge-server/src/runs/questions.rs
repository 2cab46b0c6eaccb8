//! The questions a running script asks its client: the script↔server question protocol.
//!
//! The helper's `ask({key: question, …})` sends one `ask` request over the side channel:
//! `{"requests": {KEY: {"method": "elicitation/create" | "sampling/createMessage" |
//! "roots/list", "params": {…}}}, "timeout_s"?: N}`, answered `{"responses": {KEY: result}}`
//! once every question of the round has its answer. `elicit`, `sample` and `roots` are one-key
//! asks (`key=`, default `q1`, `q2`, … counted by the helper). Helpers of environments built
//! before keys existed send `sample`, `elicit` and `roots` with `{"request": params}`; they are
//! one question each, keyed here in asking order (`q1`, `q2`, …), answered with the bare result.
//!
//! Whoever runs the call answers a parsed [`Ask`]: the live client (revisions before
//! 2026-07-28, [`crate::runs::client_requests`]) or the replay of input-required
//! rounds (2026-07-28, [`crate::runs::input_required`]). Keys name the questions to the
//! client (the `inputRequests` keys), so a task runner can deliver answers by key too.

use std::time::Duration;

use omniforge_script::RpcError;
use rmcp::model::{ClientCapabilities, JsonObject};
use serde_json::Value;

/// JSON-RPC error codes sent back to the script: `METHOD_NOT_FOUND` for an unknown script
/// request or a capability the client lacks (it would answer the same), `INVALID_PARAMS` for
/// unusable params, `INVALID_REQUEST` when the request cannot be sent at all (2026-07-28, a
/// JSON-only call, too many at once).
pub(crate) mod code {
    use rmcp::model::ErrorCode;

    /// The request cannot be sent at all.
    pub(crate) const INVALID_REQUEST: i64 = ErrorCode::INVALID_REQUEST.0 as i64;
    /// An unknown script request, or a capability the client lacks.
    pub(crate) const METHOD_NOT_FOUND: i64 = ErrorCode::METHOD_NOT_FOUND.0 as i64;
    /// Unusable params.
    pub(crate) const INVALID_PARAMS: i64 = ErrorCode::INVALID_PARAMS.0 as i64;
    /// No client, a closed connection, or the tool call ended first.
    pub(crate) const INTERNAL_ERROR: i64 = ErrorCode::INTERNAL_ERROR.0 as i64;
    /// The client did not answer in time (the code the TypeScript SDK uses for timeouts).
    pub(crate) const TIMEOUT: i64 = -32001;
}

/// The longest `timeout_s` a script may ask for; the run's own time limit usually ends it first.
const MAX_TIMEOUT: Duration = Duration::from_secs(3600);

/// Most questions one `ask` may hold.
pub(crate) const MAX_QUESTIONS: usize = 16;

/// One kind of client request a script may make.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Kind {
    /// `sampling/createMessage`.
    Sampling,
    /// `elicitation/create` (form mode).
    Elicitation,
    /// `roots/list`.
    Roots,
}

impl Kind {
    /// The MCP method.
    pub(crate) fn method(self) -> &'static str {
        match self {
            Kind::Sampling => "sampling/createMessage",
            Kind::Elicitation => "elicitation/create",
            Kind::Roots => "roots/list",
        }
    }

    fn of_method(method: &str) -> Option<Kind> {
        match method {
            "sampling/createMessage" => Some(Kind::Sampling),
            "elicitation/create" => Some(Kind::Elicitation),
            "roots/list" => Some(Kind::Roots),
            _ => None,
        }
    }

    /// The capability's name in error messages.
    pub(crate) fn capability(self) -> &'static str {
        match self {
            Kind::Sampling => "sampling",
            Kind::Elicitation => "elicitation (form mode)",
            Kind::Roots => "roots",
        }
    }

    /// Whether the client declared what this kind needs.
    pub(crate) fn declared(self, caps: &ClientCapabilities) -> bool {
        match self {
            Kind::Sampling => caps.sampling.is_some(),
            Kind::Roots => caps.roots.is_some(),
            // `elicitation: {}` (as 2025-06-18 clients declare it) means form mode; a client
            // that lists modes must list `form`.
            Kind::Elicitation => caps
                .elicitation
                .as_ref()
                .is_some_and(|e| e.form.is_some() || e.url.is_none()),
        }
    }
}

/// One question: its key, its kind and the MCP params sent unchanged.
#[derive(Clone, Debug)]
pub(crate) struct Question {
    /// The key naming it to the client; `None` for an old helper's request (keyed by whoever
    /// answers, in asking order).
    pub(crate) key: Option<String>,
    /// What is asked.
    pub(crate) kind: Kind,
    /// The request's params (`None`: none, for `roots/list`).
    pub(crate) params: Option<JsonObject>,
}

/// One round of questions from the script.
#[derive(Clone, Debug)]
pub(crate) struct Ask {
    /// The questions, in the order the script gave them.
    pub(crate) questions: Vec<Question>,
    /// How long the client may take (the script's `timeout_s`).
    pub(crate) timeout: Option<Duration>,
    /// An old helper's single request: answered with the bare result, not `{"responses"}`.
    pub(crate) legacy: bool,
}

/// Whether `method` is a question request of the side channel.
pub(crate) fn is_question(method: &str) -> bool {
    matches!(method, "ask" | "sample" | "elicit" | "roots")
}

pub(crate) fn error(code: i64, message: impl Into<String>) -> RpcError {
    RpcError {
        code,
        message: message.into(),
        data: None,
    }
}

/// Parses a question request (`ask`, or an old helper's `sample`, `elicit`, `roots`).
///
/// # Errors
/// -32602 (`INVALID_PARAMS`) for unusable params: no questions, an unknown method, params that
/// are not an object, a mode other than form for elicitation, a bad timeout.
pub(crate) fn parse(method: &str, params: &Value) -> Result<Ask, RpcError> {
    let timeout = timeout(params)?;
    let (questions, legacy) = match method {
        "ask" => {
            let Some(requests) = params.get("requests").and_then(Value::as_object) else {
                return Err(error(
                    code::INVALID_PARAMS,
                    "ask: \"requests\" must be an object of key -> {method, params}",
                ));
            };
            if requests.is_empty() || requests.len() > MAX_QUESTIONS {
                return Err(error(
                    code::INVALID_PARAMS,
                    format!("ask: give 1 to {MAX_QUESTIONS} questions"),
                ));
            }
            let mut questions = Vec::with_capacity(requests.len());
            for (key, request) in requests {
                if key.is_empty() {
                    return Err(error(code::INVALID_PARAMS, "ask: a key is empty"));
                }
                let method = request.get("method").and_then(Value::as_str).unwrap_or("");
                let Some(kind) = Kind::of_method(method) else {
                    return Err(error(
                        code::INVALID_PARAMS,
                        format!(
                            "ask: {key:?} asks {method:?}; a question is elicitation/create, \
                             sampling/createMessage or roots/list"
                        ),
                    ));
                };
                let params = body(kind, request.get("params"))?;
                questions.push(Question {
                    key: Some(key.clone()),
                    kind,
                    params,
                });
            }
            (questions, false)
        }
        legacy => {
            let kind = match legacy {
                "sample" => Kind::Sampling,
                "elicit" => Kind::Elicitation,
                _ => Kind::Roots,
            };
            let params = body(kind, params.get("request"))?;
            (
                vec![Question {
                    key: None,
                    kind,
                    params,
                }],
                true,
            )
        }
    };
    Ok(Ask {
        questions,
        timeout,
        legacy,
    })
}

/// The first question whose capability `caps` lacks, as the script's error; `Ok` when every
/// one is declared. No question of a round is asked when one is not.
///
/// # Errors
/// -32601 naming the method and the capability (the client would answer the same).
pub(crate) fn check_declared(ask: &Ask, caps: &ClientCapabilities) -> Result<(), RpcError> {
    match ask.questions.iter().find(|q| !q.kind.declared(caps)) {
        None => Ok(()),
        Some(q) => Err(error(
            code::METHOD_NOT_FOUND,
            format!(
                "{} cannot be sent: the client did not declare the {} capability",
                q.kind.method(),
                q.kind.capability()
            ),
        )),
    }
}

fn timeout(params: &Value) -> Result<Option<Duration>, RpcError> {
    match params.get("timeout_s") {
        None | Some(Value::Null) => Ok(None),
        Some(v) => match v.as_f64() {
            Some(s) if s > 0.0 && s.is_finite() => {
                Ok(Some(Duration::from_secs_f64(s).min(MAX_TIMEOUT)))
            }
            _ => Err(error(
                code::INVALID_PARAMS,
                "timeout_s must be a positive number of seconds",
            )),
        },
    }
}

fn body(kind: Kind, params: Option<&Value>) -> Result<Option<JsonObject>, RpcError> {
    let method = kind.method();
    let body = match (kind, params) {
        (Kind::Roots, None | Some(Value::Null)) => None,
        (Kind::Roots, Some(Value::Object(body))) if body.is_empty() => None,
        (_, Some(Value::Object(body))) => Some(body.clone()),
        _ => {
            return Err(error(
                code::INVALID_PARAMS,
                format!("the {method} params must be a JSON object"),
            ));
        }
    };
    if let (Kind::Elicitation, Some(body)) = (kind, &body)
        && body.get("mode").is_some_and(|m| m != "form")
    {
        return Err(error(
            code::INVALID_PARAMS,
            "only form-mode elicitation is available to scripts",
        ));
    }
    Ok(body)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn caps(value: Value) -> ClientCapabilities {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn declared_capabilities() {
        let all = caps(json!({"sampling": {}, "roots": {"listChanged": true}, "elicitation": {}}));
        assert!(Kind::Sampling.declared(&all) && Kind::Roots.declared(&all));
        // An empty elicitation object means form mode; url-only does not.
        assert!(Kind::Elicitation.declared(&all));
        assert!(Kind::Elicitation.declared(&caps(json!({"elicitation": {"form": {}}}))));
        assert!(!Kind::Elicitation.declared(&caps(json!({"elicitation": {"url": {}}}))));
        let none = caps(json!({}));
        assert!(!Kind::Sampling.declared(&none) && !Kind::Roots.declared(&none));
        assert!(!Kind::Elicitation.declared(&none));
    }

    #[test]
    fn an_ask_keeps_its_keys_and_params() {
        let ask = parse(
            "ask",
            &json!({"requests": {
                "name": {"method": "elicitation/create", "params": {"message": "Name?", "requestedSchema": {}}},
                "where": {"method": "roots/list", "params": {}}
            }, "timeout_s": 2}),
        )
        .unwrap();
        assert!(!ask.legacy);
        assert_eq!(ask.timeout, Some(Duration::from_secs(2)));
        let keys: Vec<_> = ask.questions.iter().map(|q| q.key.clone()).collect();
        assert_eq!(keys, [Some("name".to_owned()), Some("where".to_owned())]);
        assert_eq!(ask.questions[0].kind, Kind::Elicitation);
        assert_eq!(
            ask.questions[0].params.as_ref().unwrap()["message"],
            "Name?"
        );
        assert!(ask.questions[1].params.is_none());
        // Only the sampling-capable client: the elicitation is refused, naming it.
        let e = check_declared(&ask, &caps(json!({"roots": {}}))).unwrap_err();
        assert_eq!(e.code, code::METHOD_NOT_FOUND);
        assert!(e.message.starts_with("elicitation/create cannot be sent"));
        let legacy = parse("sample", &json!({"request": {"messages": []}})).unwrap();
        assert!(legacy.legacy && legacy.questions[0].key.is_none());
    }

    #[test]
    fn unusable_asks_are_invalid_params() {
        for (method, params) in [
            ("ask", json!({})),
            ("ask", json!({"requests": {}})),
            (
                "ask",
                json!({"requests": {"k": {"method": "tools/call", "params": {}}}}),
            ),
            (
                "ask",
                json!({"requests": {"k": {"method": "elicitation/create", "params": 3}}}),
            ),
            (
                "ask",
                json!({"requests": {"k": {"method": "elicitation/create",
                "params": {"mode": "url"}}}}),
            ),
            ("elicit", json!({"request": {}, "timeout_s": -1})),
            ("sample", json!({})),
        ] {
            let e = parse(method, &params).unwrap_err();
            assert_eq!(e.code, code::INVALID_PARAMS, "{params}");
        }
    }
}
