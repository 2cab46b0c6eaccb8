//! JSON Schema checks shared by tool arguments and tool results.

use serde_json::{Map, Value};

/// Checks `instance` against `schema` (JSON Schema, draft from `$schema`, 2020-12 by default).
/// The error lists each violation with its location, one per line.
///
/// # Errors
/// The violations, or a note that the schema itself does not compile.
pub fn validate(schema: &Map<String, Value>, instance: &Value) -> Result<(), String> {
    let schema = Value::Object(schema.clone());
    let validator = jsonschema::validator_for(&schema)
        .map_err(|e| format!("the schema does not compile: {e}"))?;
    check(&validator, instance)
}

/// Checks `instance` with a compiled `validator`; the error lists each violation with its
/// location, one per line.
///
/// # Errors
/// The violations.
pub fn check(validator: &jsonschema::Validator, instance: &Value) -> Result<(), String> {
    let problems: Vec<String> = validator
        .iter_errors(instance)
        .map(|e| {
            let at = e.instance_path().to_string();
            format!(
                "- {}: {e}",
                if at.is_empty() { "(root)" } else { at.as_str() }
            )
        })
        .collect();
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("\n"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn names_the_place() {
        let schema = json!({
            "type": "object",
            "properties": {"net": {"type": "number"}},
            "required": ["net"],
            "additionalProperties": false
        });
        let schema = schema.as_object().cloned().unwrap();
        assert!(validate(&schema, &json!({"net": 1})).is_ok());
        let err = validate(&schema, &json!({"net": "x"})).unwrap_err();
        assert!(err.contains("/net"), "{err}");
        let err = validate(&schema, &json!({})).unwrap_err();
        assert!(err.contains("(root)"), "{err}");
    }
}
