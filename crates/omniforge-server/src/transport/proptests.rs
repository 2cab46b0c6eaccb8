//! Property tests over what the transports accept from anyone (issue 11): arbitrary input
//! never panics, and every answer the checks produce is a valid JSON-RPC 2.0 error response.
//! Covers the envelope checks both transports share ([`jsonrpc::check_message`]), the stdio
//! parse-error path ([`unparsable`]) and the token file parser.

use proptest::prelude::*;
use serde_json::{Map, Value};

use crate::auth::TokenSet;
use crate::transport::jsonrpc::{self, Checked};
use crate::transport::unparsable;

/// Arbitrary JSON, up to a few levels deep, biased toward JSON-RPC's member names.
fn json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        "[a-z/_]{0,12}".prop_map(Value::String),
        prop_oneof![
            Just("2.0"),
            Just("initialize"),
            Just("tools/call"),
            Just("ping"),
            Just("notifications/cancelled")
        ]
        .prop_map(|s| Value::String(s.to_owned())),
    ];
    leaf.prop_recursive(4, 32, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec(
                (
                    prop_oneof![
                        Just("jsonrpc".to_owned()),
                        Just("id".to_owned()),
                        Just("method".to_owned()),
                        Just("params".to_owned()),
                        Just("result".to_owned()),
                        Just("error".to_owned()),
                        Just("arguments".to_owned()),
                        Just("name".to_owned()),
                        "[a-z_]{1,6}",
                    ],
                    inner
                ),
                0..6
            )
            .prop_map(|members| Value::Object(members.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

/// A valid JSON-RPC 2.0 error response: `jsonrpc`, an `id` that is a string, a number or
/// null, and an `error` with an integer `code` and a string `message`.
fn assert_error_response(v: &Value) {
    assert_eq!(v["jsonrpc"], "2.0", "{v}");
    assert!(
        matches!(
            v.get("id"),
            Some(Value::String(_) | Value::Number(_) | Value::Null) | None
        ),
        "{v}"
    );
    assert!(v["error"]["code"].is_i64(), "{v}");
    assert!(v["error"]["message"].is_string(), "{v}");
    assert!(v.get("result").is_none(), "{v}");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn envelope_checks_answer_every_refusal_with_json_rpc(value in json()) {
        // Without a version header (stdio), and with a legacy and a 2026-07-28 one.
        for header in [None, Some("2025-06-18"), Some("2026-07-28")] {
            match jsonrpc::check_message(value.clone(), header) {
                Checked::Reject { response, .. } => assert_error_response(&response),
                Checked::Request { id, .. } => {
                    prop_assert!(matches!(id, Value::String(_) | Value::Number(_)), "{id}");
                }
                Checked::Notification { .. } | Checked::Drop { .. } => {}
            }
        }
    }

    #[test]
    fn forwarded_requests_are_parsed_or_answered(value in json()) {
        if let Checked::Request { id, message, .. } = jsonrpc::check_message(value, None) {
            // Whatever rmcp would drop, the stdio filter answers with this id.
            if let Some(reason) = unparsable::rmcp_drops(&message) {
                let answer = jsonrpc::error_response(
                    Some(&id), jsonrpc::code::PARSE_ERROR, reason);
                assert_error_response(&answer);
            }
        }
    }

    #[test]
    fn recovering_an_id_never_panics_and_finds_only_scalars(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        if let Some(id) = unparsable::recover_id(&bytes) {
            prop_assert!(matches!(id, Value::String(_) | Value::Number(_) | Value::Null));
        }
    }

    #[test]
    fn the_id_of_a_valid_message_is_recovered(value in json(), id in prop_oneof![
        any::<i64>().prop_map(Value::from), "[a-z0-9]{0,8}".prop_map(Value::String)]) {
        let mut object = match value { Value::Object(m) => m, _ => Map::new() };
        object.insert("id".to_owned(), id.clone());
        let text = Value::Object(object).to_string();
        prop_assert_eq!(unparsable::recover_id(text.as_bytes()), Some(id));
    }

    #[test]
    fn the_token_file_parser_never_panics(text in "[ -~\t\n#]{0,300}") {
        let _ = TokenSet::parse(&text);
    }
}
