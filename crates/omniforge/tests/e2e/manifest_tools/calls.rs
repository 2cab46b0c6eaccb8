//! 2. A successful call: arguments and zero values.

use super::*;

/// fixture_echo answers with structuredContent equal to the text item's JSON; an empty text
/// (which proto3 JSON sends as `{}`) comes back with the zero values filled in.
#[tokio::test]
async fn echo_succeeds_and_zero_values_are_filled() {
    crate::support::needs_deps!();
    let started = Instant::now();
    let (_fixture, omni, mut repl) = fixture_scene(&[]).await;

    let args = json!({"text": "hello world", "shout": true});
    let result = repl.result("fixture_echo", args.clone()).await;
    assert_eq!(result["isError"], false, "fixture_echo {args}: {result}");
    let text = text_of(&result);
    let parsed: Value = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("fixture_echo's text item is not JSON ({e}): {result}"));
    assert_eq!(
        result["structuredContent"], parsed,
        "structuredContent must equal the JSON in the text item: {result}"
    );
    assert_eq!(
        parsed,
        json!({"text": "HELLO WORLD", "length": 11, "shouted": true, "words": ["HELLO", "WORLD"]}),
        "fixture_echo {args}: {result}"
    );

    let args = json!({"text": ""});
    let result = repl.result("fixture_echo", args.clone()).await;
    assert_eq!(result["isError"], false, "fixture_echo {args}: {result}");
    let zero = json!({"text": "", "length": 0, "shouted": false, "words": []});
    assert_eq!(
        result["structuredContent"], zero,
        "fixture_echo {args}: the upstream answers {{}}; every required output field must be \
         filled with its zero value: {result}"
    );
    let parsed: Value = serde_json::from_str(&text_of(&result)).unwrap_or(Value::Null);
    assert_eq!(
        parsed, zero,
        "the text item must carry the same JSON: {result}"
    );

    repl.quit().await;
    finish("echo_succeeds_and_zero_values_are_filled", started, &omni);
}
