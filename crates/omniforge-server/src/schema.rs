//! JSON Schema checks shared by tool arguments and tool results.

use std::sync::{Arc, OnceLock};

use rmcp::model::JsonObject;
use serde_json::Value;

/// Each way an instance fails its schema, with its location, one per line (`- /net: ...`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", .0.join("\n"))]
pub(crate) struct Violations(pub(crate) Vec<String>);

/// A schema check that did not pass.
#[derive(Debug, Clone, thiserror::Error)]
pub(crate) enum SchemaError {
    /// The instance does not match.
    #[error(transparent)]
    Violations(#[from] Violations),
    /// The schema itself does not compile; `what` names it (`the tool's inputSchema`).
    #[error("{what} does not compile: {reason}")]
    Uncompilable {
        /// Which schema.
        what: &'static str,
        /// The compiler's message.
        reason: Arc<str>,
    },
}

/// Checks `instance` with a compiled `validator`.
///
/// # Errors
/// Every violation.
pub(crate) fn check(validator: &jsonschema::Validator, instance: &Value) -> Result<(), Violations> {
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
        Err(Violations(problems))
    }
}

/// A schema compiled at its first check (not at load: 10,000 stored tools must not hold
/// 10,000 compiled validators for tools never called).
#[derive(Debug)]
pub(crate) struct LazySchema {
    /// Which schema, for the error text (`the tool's inputSchema`, `the outputSchema`).
    what: &'static str,
    schema: Arc<JsonObject>,
    compiled: OnceLock<Result<jsonschema::Validator, Arc<str>>>,
}

impl LazySchema {
    /// `schema`, named `what` in errors.
    pub(crate) fn new(what: &'static str, schema: Arc<JsonObject>) -> LazySchema {
        LazySchema {
            what,
            schema,
            compiled: OnceLock::new(),
        }
    }

    /// The schema.
    pub(crate) fn schema(&self) -> &Arc<JsonObject> {
        &self.schema
    }

    /// Checks `instance`.
    ///
    /// # Errors
    /// The violations, or the schema does not compile.
    pub(crate) fn check(&self, instance: &Value) -> Result<(), SchemaError> {
        let compiled = self.compiled.get_or_init(|| {
            jsonschema::validator_for(&Value::Object((*self.schema).clone()))
                .map_err(|e| e.to_string().into())
        });
        match compiled {
            Ok(validator) => Ok(check(validator, instance)?),
            Err(reason) => Err(SchemaError::Uncompilable {
                what: self.what,
                reason: reason.clone(),
            }),
        }
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
        let schema = LazySchema::new("the schema", Arc::new(schema.as_object().cloned().unwrap()));
        assert!(schema.check(&json!({"net": 1})).is_ok());
        let err = schema.check(&json!({"net": "x"})).unwrap_err().to_string();
        assert!(err.contains("/net"), "{err}");
        let err = schema.check(&json!({})).unwrap_err().to_string();
        assert!(err.contains("(root)"), "{err}");
    }

    #[test]
    fn an_uncompilable_schema_says_which() {
        let schema = json!({"type": "object", "properties": {"a": {"$ref": "#/$defs/Missing"}}});
        let schema = LazySchema::new(
            "the outputSchema",
            Arc::new(schema.as_object().cloned().unwrap()),
        );
        let err = schema.check(&json!({"a": 1})).unwrap_err().to_string();
        assert!(
            err.starts_with("the outputSchema does not compile: "),
            "{err}"
        );
    }
}
