//! Input-required results (SEP-2322, protocol revision 2026-07-28): a script's questions
//! become `inputRequests` of an `input_required` result with a sealed `requestState`, and the
//! client's retry (`inputResponses` + the state) answers them.
//!
//! **Replay.** The retry may reach any replica, so nothing is parked: each round runs the
//! script again from the start and answers its questions, by key, from the answers the state
//! carries (earlier rounds) and this round's `inputResponses`. The first question with no
//! answer ends the run (its process is killed, never told) and the call answers
//! `input_required` with that round's unanswered questions and a new state holding every answer
//! so far. A script that asks re-runs from the start each round: what it does before a
//! question happens again (the README and `omniforge_instructions` say to ask first).
//!
//! **State.** [`StateCodec`] is rmcp's [`RequestStateCodec`] over a keyring
//! (`--request-state-key-file`: seal with the first key, open with any, so replicas roll keys
//! without a stop). HMAC-SHA256, signed, not encrypted: the state holds the client's own
//! answers, never secret values. The associated data binds a state to the principal, the
//! tool (or prompt, resource) name and version and a hash of the arguments; its TTL is never
//! shorter than the call's timeout. A state that does not open (tampered, expired, another
//! principal's or request's, a key no longer in the ring) is refused with -32602 "requestState
//! failed verification" before the script runs.
//!
//! **Answers.** An `inputResponses` value the script uses must be a JSON object (the client's
//! result), else the call ends with -32602; a key the script asks and nobody answered is asked
//! again; other keys are ignored. A question whose capability the client did not declare in
//! the request is never asked: the script gets the same -32601 error as before 2026-07-28.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use omniforge_script::RpcError;
use rmcp::model::{ClientCapabilities, InputRequest, RequestStateCodec, SealOptions};
use serde_json::{Map, Value, json};

use crate::context::client::InputRound;
use crate::error::{CallError, InputRequired};
use crate::runs::questions::{self, Ask, code, error};

/// The shortest life of a sealed state: a person answering an elicitation needs time.
const MIN_STATE_TTL: Duration = Duration::from_secs(3600);

/// The message of every state that does not open (no detail: which check failed is not the
/// client's business).
pub(crate) const STATE_REFUSED: &str = "requestState failed verification";

/// Seals and opens `requestState` values with the server's request-state keyring.
pub(crate) struct StateCodec {
    codec: RequestStateCodec,
}

/// A request-state keyring could not be used.
#[derive(Debug, thiserror::Error)]
#[error("request-state keyring: {0}")]
pub(crate) struct KeyringError(String);

impl StateCodec {
    /// A codec over `keys` (id, key of at least 32 bytes), the first sealing; without keys, one
    /// random key of this process (states then open only here, until it stops).
    ///
    /// # Errors
    /// A key shorter than 32 bytes, a bad or repeated id, or no random source.
    pub(crate) fn new(keys: &[(String, Vec<u8>)]) -> Result<StateCodec, KeyringError> {
        let codec = match keys.first() {
            Some((active, _)) => RequestStateCodec::new_with_keyring(
                active.clone(),
                keys.iter().map(|(id, key)| (id.clone(), key.clone())),
            ),
            None => {
                let mut key = vec![0u8; 32];
                getrandom::fill(&mut key).map_err(|e| KeyringError(e.to_string()))?;
                RequestStateCodec::new_with_keyring("process", [("process", key)])
            }
        }
        .map_err(|e| KeyringError(e.to_string()))?;
        Ok(StateCodec { codec })
    }
}

/// What a state is bound to: who asked what. Its associated data.
pub(crate) struct Binding<'a> {
    /// The caller's principal id.
    pub(crate) principal: &'a str,
    /// `tool`, `prompt` or `resource`.
    pub(crate) kind: &'a str,
    /// The tool's (prompt's, resource's) name.
    pub(crate) name: &'a str,
    /// Its version (tools), or the definition's digest.
    pub(crate) version: String,
    /// The request's arguments.
    pub(crate) arguments: &'a Value,
    /// The call's timeout: the state lives at least as long.
    pub(crate) timeout: Duration,
}

impl Binding<'_> {
    fn associated_data(&self) -> Vec<u8> {
        let arguments = omniforge_store::digest::json_sha256(self.arguments);
        format!(
            "omniforge request-state v1\0{}\0{}\0{}\0{}\0{arguments}",
            self.principal, self.kind, self.name, self.version
        )
        .into_bytes()
    }
}

/// One run's answering of its script's questions from a round's input.
pub(crate) struct Replay<'a> {
    codec: &'a StateCodec,
    binding: Binding<'a>,
    capabilities: Option<ClientCapabilities>,
    inner: Mutex<Answers>,
}

struct Answers {
    /// Answers earlier rounds established (from the state), then those used this round.
    known: BTreeMap<String, Value>,
    /// This round's `inputResponses`.
    responses: BTreeMap<String, Value>,
    /// Keys of an old helper's unkeyed questions: `q1`, `q2`, … in asking order.
    unkeyed: usize,
}

/// What the run does with one question request.
pub(crate) enum Answer {
    /// Answer the script with this.
    Reply(Result<Value, RpcError>),
    /// End the call with this (input required, or -32602 for an unusable answer); the script
    /// is stopped without an answer.
    Stop(CallError),
}

impl<'a> Replay<'a> {
    /// Opens `round`'s state (when given) for `binding`.
    ///
    /// # Errors
    /// -32602 [`STATE_REFUSED`] when the state does not open or is not ours.
    pub(crate) fn open(
        codec: &'a StateCodec,
        binding: Binding<'a>,
        capabilities: Option<ClientCapabilities>,
        round: &InputRound,
    ) -> Result<Replay<'a>, CallError> {
        let known = match &round.state {
            None => BTreeMap::new(),
            Some(state) => codec
                .codec
                .open_json_with::<BTreeMap<String, Value>>(state, &binding.associated_data())
                .map_err(|e| {
                    tracing::debug!(error = %e, "a requestState was refused");
                    refused()
                })?,
        };
        Ok(Replay {
            codec,
            binding,
            capabilities,
            inner: Mutex::new(Answers {
                known,
                responses: round.responses.clone(),
                unkeyed: 0,
            }),
        })
    }

    /// Answers one question request of the script: from the known answers and this round's,
    /// or by ending the call with the questions still open.
    pub(crate) fn answer(&self, ask: &Ask) -> Answer {
        let caps = self.capabilities.clone().unwrap_or_default();
        if let Err(e) = questions::check_declared(ask, &caps) {
            return Answer::Reply(Err(e));
        }
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let mut answered = Map::new();
        let mut missing = Map::new();
        for question in &ask.questions {
            let key = match &question.key {
                Some(key) => key.clone(),
                None => {
                    inner.unkeyed += 1;
                    format!("q{}", inner.unkeyed)
                }
            };
            let found = match inner.known.get(&key) {
                Some(known) => Some(known.clone()),
                None => inner.responses.get(&key).cloned(),
            };
            match found {
                Some(Value::Object(answer)) => {
                    inner
                        .known
                        .insert(key.clone(), Value::Object(answer.clone()));
                    answered.insert(key, Value::Object(answer));
                }
                Some(_) => {
                    return Answer::Stop(CallError::Protocol {
                        code: code::INVALID_PARAMS as i32,
                        message: format!(
                            "inputResponses[{key:?}] must be the client's result (a JSON object)"
                        ),
                        data: None,
                    });
                }
                None => {
                    let request = json!({
                        "method": question.kind.method(),
                        "params": question.params.clone().unwrap_or_default(),
                    });
                    // What the client gets must be a valid MCP request: a script's bad
                    // question is its own error, not the client's.
                    if let Err(e) = serde_json::from_value::<InputRequest>(request.clone()) {
                        return Answer::Reply(Err(error(
                            code::INVALID_PARAMS,
                            format!(
                                "{key:?} is not a valid {} request: {e}",
                                question.kind.method()
                            ),
                        )));
                    }
                    missing.insert(key, request);
                }
            }
        }
        if !missing.is_empty() {
            let ad = self.binding.associated_data();
            let options = SealOptions::new()
                .associated_data(&ad)
                .ttl(self.binding.timeout.max(MIN_STATE_TTL));
            return match self.codec.codec.seal_json_with(&inner.known, &options) {
                Ok(state) => Answer::Stop(CallError::InputRequired(Box::new(InputRequired {
                    requests: missing,
                    state,
                }))),
                Err(e) => Answer::Stop(CallError::Protocol {
                    code: code::INTERNAL_ERROR as i32,
                    message: format!("the request state could not be sealed: {e}"),
                    data: None,
                }),
            };
        }
        if ask.legacy {
            return Answer::Reply(Ok(answered
                .into_iter()
                .next()
                .map_or(Value::Null, |(_, v)| v)));
        }
        Answer::Reply(Ok(json!({"responses": answered})))
    }
}

fn refused() -> CallError {
    CallError::Protocol {
        code: code::INVALID_PARAMS as i32,
        message: STATE_REFUSED.to_owned(),
        data: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn binding<'a>(principal: &'a str, arguments: &'a Value) -> Binding<'a> {
        Binding {
            principal,
            kind: "tool",
            name: "t",
            version: "1".to_owned(),
            arguments,
            timeout: Duration::from_secs(30),
        }
    }

    fn ask(keys: &[&str]) -> Ask {
        let requests: Map<String, Value> = keys
            .iter()
            .map(|k| {
                (
                    (*k).to_owned(),
                    json!({"method": "elicitation/create", "params": {"message": k,
                        "requestedSchema": {"type": "object", "properties": {}}}}),
                )
            })
            .collect();
        questions::parse("ask", &json!({"requests": requests})).unwrap()
    }

    fn caps() -> Option<ClientCapabilities> {
        Some(serde_json::from_value(json!({"elicitation": {}})).unwrap())
    }

    fn stop_state(answer: Answer) -> (Map<String, Value>, String) {
        match answer {
            Answer::Stop(CallError::InputRequired(r)) => (r.requests, r.state),
            _ => panic!("not input required"),
        }
    }

    #[test]
    fn rounds_carry_every_answer_and_bind_the_caller() {
        let codec = StateCodec::new(&[("k1".to_owned(), vec![7; 32])]).unwrap();
        let args = json!({"x": 1});
        let round = InputRound::default();
        let replay = Replay::open(&codec, binding("token:a", &args), caps(), &round).unwrap();
        let (asked, state1) = stop_state(replay.answer(&ask(&["one"])));
        assert_eq!(asked.keys().collect::<Vec<_>>(), ["one"]);
        // Round 2: "one" answered; "two" is asked with a new state holding "one".
        let round = InputRound {
            responses: BTreeMap::from([("one".to_owned(), json!({"action": "decline"}))]),
            state: Some(state1.clone()),
        };
        let replay = Replay::open(&codec, binding("token:a", &args), caps(), &round).unwrap();
        assert!(matches!(
            replay.answer(&ask(&["one"])),
            Answer::Reply(Ok(_))
        ));
        let (_, state2) = stop_state(replay.answer(&ask(&["two"])));
        assert_ne!(state1, state2);
        // Round 3 with only "two" answered: "one" comes from the state.
        let round = InputRound {
            responses: BTreeMap::from([("two".to_owned(), json!({"action": "cancel"}))]),
            state: Some(state2.clone()),
        };
        let replay = Replay::open(&codec, binding("token:a", &args), caps(), &round).unwrap();
        let Answer::Reply(Ok(r)) = replay.answer(&ask(&["one", "two"])) else {
            panic!()
        };
        assert_eq!(r["responses"]["one"]["action"], "decline");
        // Another principal, other arguments, a tampered state, a rotated-out key: refused.
        let other_args = json!({"x": 2});
        let rotated = StateCodec::new(&[("k2".to_owned(), vec![8; 32])]).unwrap();
        let tampered = InputRound {
            state: Some(format!("{state2}-TAMPERED")),
            ..round.clone()
        };
        for (codec, b, r) in [
            (&codec, binding("token:b", &args), &round),
            (&codec, binding("token:a", &other_args), &round),
            (&codec, binding("token:a", &args), &tampered),
            (&rotated, binding("token:a", &args), &round),
        ] {
            match Replay::open(codec, b, caps(), r) {
                Err(CallError::Protocol { code, message, .. }) => {
                    assert_eq!((code, message.as_str()), (-32602, STATE_REFUSED));
                }
                _ => panic!("opened"),
            }
        }
        // A ring that still holds k1 (second) opens it.
        let ring = StateCodec::new(&[
            ("k2".to_owned(), vec![8; 32]),
            ("k1".to_owned(), vec![7; 32]),
        ])
        .unwrap();
        assert!(Replay::open(&ring, binding("token:a", &args), caps(), &round).is_ok());
    }

    #[test]
    fn unusable_answers_and_undeclared_capabilities() {
        let codec = StateCodec::new(&[]).unwrap();
        let args = json!({});
        let round = InputRound {
            responses: BTreeMap::from([
                ("one".to_owned(), json!(12345)),
                ("extra".to_owned(), json!("ignored")),
            ]),
            state: None,
        };
        let replay = Replay::open(&codec, binding("stdio", &args), caps(), &round).unwrap();
        assert!(matches!(
            replay.answer(&ask(&["one"])),
            Answer::Stop(CallError::Protocol { code: -32602, .. })
        ));
        let none = Replay::open(&codec, binding("stdio", &args), None, &round).unwrap();
        let Answer::Reply(Err(e)) = none.answer(&ask(&["one"])) else {
            panic!()
        };
        assert_eq!(e.code, code::METHOD_NOT_FOUND);
    }
}
