//! Inlining of local `$ref`s for strict clients that cannot resolve references
//! (`--inline-schema-refs`). Only references into the same document (`#/$defs/..`,
//! `#/definitions/..`) are followed; recursion is bounded and a cycle is an error.

use serde_json::{Map, Value};

/// The deepest chain of nested references followed before giving up.
pub const MAX_REF_DEPTH: usize = 32;

/// Why a schema cannot be inlined.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InlineError {
    /// A reference leads back to itself.
    #[error("$ref cycle: {0}")]
    Cycle(String),
    /// A reference that is not local, or names nothing.
    #[error("unresolvable $ref {0:?}")]
    Unresolvable(String),
    /// Deeper than [`MAX_REF_DEPTH`].
    #[error("$ref chain deeper than {MAX_REF_DEPTH}: {0}")]
    TooDeep(String),
}

/// Returns `schema` with every local `$ref` replaced by its target, and `$defs` /
/// `definitions` removed from the root.
///
/// # Errors
/// A cycle, a reference that cannot be resolved, or a chain deeper than [`MAX_REF_DEPTH`].
pub fn inline_refs(schema: &Map<String, Value>) -> Result<Map<String, Value>, InlineError> {
    let root = Value::Object(schema.clone());
    let mut stack = Vec::new();
    let mut out = match inline(&root, &root, &mut stack)? {
        Value::Object(map) => map,
        _ => Map::new(),
    };
    out.remove("$defs");
    out.remove("definitions");
    Ok(out)
}

fn inline(node: &Value, root: &Value, stack: &mut Vec<String>) -> Result<Value, InlineError> {
    match node {
        Value::Object(map) => {
            if let Some(Value::String(reference)) = map.get("$ref") {
                if stack.contains(reference) {
                    stack.push(reference.clone());
                    return Err(InlineError::Cycle(stack.join(" -> ")));
                }
                if stack.len() >= MAX_REF_DEPTH {
                    return Err(InlineError::TooDeep(stack.join(" -> ")));
                }
                let target = reference
                    .strip_prefix('#')
                    .and_then(|pointer| root.pointer(pointer))
                    .ok_or_else(|| InlineError::Unresolvable(reference.clone()))?;
                stack.push(reference.clone());
                let resolved = inline(target, root, stack)?;
                stack.pop();
                // Keywords next to `$ref` (allowed since 2019-09) are kept.
                let mut merged = match resolved {
                    Value::Object(m) => m,
                    other => return Ok(other),
                };
                for (k, v) in map {
                    if k != "$ref" {
                        merged.insert(k.clone(), inline(v, root, stack)?);
                    }
                }
                return Ok(Value::Object(merged));
            }
            let mut out = Map::new();
            for (k, v) in map {
                let inlined = if k == "$defs" || k == "definitions" {
                    v.clone()
                } else {
                    inline(v, root, stack)?
                };
                out.insert(k.clone(), inlined);
            }
            Ok(Value::Object(out))
        }
        Value::Array(items) => Ok(Value::Array(
            items
                .iter()
                .map(|v| inline(v, root, stack))
                .collect::<Result<_, _>>()?,
        )),
        other => Ok(other.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap()
    }

    #[test]
    fn inlines_nested_refs() {
        let schema = obj(
            json!({"type":"object","properties":{"a":{"$ref":"#/$defs/A"}},
            "$defs":{"A":{"type":"object","properties":{"b":{"$ref":"#/$defs/B","description":"kept"}}},"B":{"type":"string"}}}),
        );
        let out = inline_refs(&schema).unwrap();
        assert_eq!(
            Value::Object(out),
            json!({"type":"object","properties":{"a":{"type":"object","properties":{"b":{"type":"string","description":"kept"}}}}})
        );
    }

    #[test]
    fn cycles_and_dangling_refs_are_errors() {
        let cyclic = obj(
            json!({"type":"object","properties":{"n":{"$ref":"#/$defs/Node"}},
            "$defs":{"Node":{"type":"object","properties":{"next":{"$ref":"#/$defs/Node"}}}}}),
        );
        let err = inline_refs(&cyclic).unwrap_err();
        assert!(
            matches!(err, InlineError::Cycle(ref s) if s.contains("#/$defs/Node -> #/$defs/Node")),
            "{err}"
        );
        let dangling = obj(json!({"type":"object","properties":{"x":{"$ref":"#/$defs/Missing"}}}));
        assert_eq!(
            inline_refs(&dangling).unwrap_err(),
            InlineError::Unresolvable("#/$defs/Missing".into())
        );
        let remote =
            obj(json!({"type":"object","properties":{"x":{"$ref":"https://example.com/s.json"}}}));
        assert!(matches!(
            inline_refs(&remote).unwrap_err(),
            InlineError::Unresolvable(_)
        ));
    }
}
