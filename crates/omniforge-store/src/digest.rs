//! Digests, backend-neutral: the SHA-256 of a definition for the audit log
//! ([`AuditRecord::definition_sha256`](crate::AuditRecord::definition_sha256)), and of a call's
//! arguments for the call log ([`arguments_digest`]).
//!
//! Both hash **canonical JSON**: no whitespace, object keys sorted by their UTF-8 bytes (the
//! same order as by code point), strings escaped as `serde_json` writes them, numbers as
//! `serde_json` prints them. The same value always gives the same bytes, whatever the order its
//! keys were written in.
//!
//! A definition is the JSON object of every field that defines the thing, spelled in snake case
//! as in the model types: for a tool version everything in [`NewVersion`] but `author` (so the
//! same code from two authors has one hash); for a resource, template or prompt every field of
//! [`NewResource`], [`NewTemplate`], [`NewPrompt`] (a blob as base64). Secret values are never
//! hashed.

use std::fmt::Write as _;

use base64::Engine as _;
use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};

use crate::model::{
    ArgumentsDigest, Execution, NewPrompt, NewResource, NewTemplate, NewVersion, ResourceBody,
    TemplateBody,
};

/// `value` as canonical JSON text (see the [module docs](self)).
pub fn canonical_json(value: &Value) -> String {
    let mut out = String::new();
    write_canonical(&mut out, value);
    out
}

fn write_canonical(out: &mut String, value: &Value) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort_unstable();
            out.push('{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::from(key.as_str()).to_string());
                out.push(':');
                if let Some(v) = map.get(key) {
                    write_canonical(out, v);
                }
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(out, item);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

/// SHA-256 of `bytes`, lowercase hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    let mut hex = String::with_capacity(64);
    for b in digest {
        let _ = write!(hex, "{b:02x}");
    }
    hex
}

/// SHA-256 of `value`'s canonical JSON, lowercase hex.
pub fn json_sha256(value: &Value) -> String {
    sha256_hex(canonical_json(value).as_bytes())
}

/// The digest of a call's arguments, as received (before any redaction).
pub fn arguments_digest(arguments: &Value) -> ArgumentsDigest {
    let text = canonical_json(arguments);
    ArgumentsDigest {
        sha256: sha256_hex(text.as_bytes()),
        bytes: text.len() as u64,
    }
}

/// Whether `s` looks like a digest this module makes: 64 lowercase hex digits.
pub fn is_sha256_hex(s: &str) -> bool {
    s.len() == 64
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// A tool version's definition (everything but its author) as JSON. `execution` (issue 13)
/// appears only when it is not the default, so the digests of versions written before it
/// existed do not change.
pub fn version_definition(spec: &NewVersion) -> Value {
    let mut definition = json!({
        "title": spec.title,
        "description": spec.description,
        "input_schema": spec.input_schema,
        "output_schema": spec.output_schema,
        "annotations": {
            "read_only_hint": spec.annotations.read_only_hint,
            "destructive_hint": spec.annotations.destructive_hint,
            "idempotent_hint": spec.annotations.idempotent_hint,
            "open_world_hint": spec.annotations.open_world_hint,
        },
        "runtime": spec.runtime.as_str(),
        "code": spec.code,
        "dependencies": spec.dependencies,
        "limits": {
            "timeout_ms": spec.limits.timeout_ms,
            "memory_bytes": spec.limits.memory_bytes,
            "network": spec.limits.network,
        },
        "lock": spec.lock,
        "env_id": spec.env_id,
        "secrets": spec.secrets,
        "examples": spec.examples,
    });
    if spec.execution != Execution::default()
        && let Value::Object(map) = &mut definition
    {
        map.insert(
            "execution".to_owned(),
            json!({
                "task_support": spec.execution.task_support.as_str(),
                "task_start": spec.execution.task_start.as_str(),
            }),
        );
    }
    definition
}

/// SHA-256 of a tool version's definition.
pub fn version_sha256(spec: &NewVersion) -> String {
    json_sha256(&version_definition(spec))
}

/// SHA-256 of a resource's definition.
pub fn resource_sha256(r: &NewResource) -> String {
    let body = match &r.body {
        ResourceBody::Text(t) => json!({"text": t}),
        ResourceBody::Blob(b) => {
            json!({"blob": base64::engine::general_purpose::STANDARD.encode(b)})
        }
    };
    json_sha256(&json!({
        "uri": r.uri,
        "name": r.name,
        "title": r.title,
        "description": r.description,
        "mime_type": r.mime_type,
        "body": body,
    }))
}

/// SHA-256 of a resource template's definition.
pub fn template_sha256(t: &NewTemplate) -> String {
    let body = match &t.body {
        TemplateBody::Text(text) => json!({"text": text}),
        TemplateBody::Script(s) => json!({"script": s}),
    };
    json_sha256(&json!({
        "uri_template": t.uri_template,
        "name": t.name,
        "title": t.title,
        "description": t.description,
        "mime_type": t.mime_type,
        "body": body,
        "completions": t.completions,
        "completion_script": t.completion_script,
    }))
}

/// SHA-256 of a prompt's definition. A message prompt's digest has no `script` key, so it
/// is the same as before script prompts existed.
pub fn prompt_sha256(p: &NewPrompt) -> String {
    let mut definition = json!({
        "name": p.name,
        "title": p.title,
        "description": p.description,
        "arguments": p.arguments,
        "messages": p.messages,
        "completion_script": p.completion_script,
    });
    if let (Some(script), Some(map)) = (&p.script, definition.as_object_mut()) {
        map.insert("script".into(), json!(script));
    }
    json_sha256(&definition)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_json_sorts_keys_at_every_depth() {
        let a: Value =
            serde_json::from_str(r#"{"b": 1, "a": {"z": [1, {"y": 2, "x": "é\n"}], "c": null}}"#)
                .unwrap();
        let b: Value =
            serde_json::from_str(r#"{"a": {"c": null, "z": [1, {"x": "é\n", "y": 2}]}, "b": 1}"#)
                .unwrap();
        assert_eq!(
            canonical_json(&a),
            r#"{"a":{"c":null,"z":[1,{"x":"é\n","y":2}]},"b":1}"#
        );
        assert_eq!(json_sha256(&a), json_sha256(&b));
        assert_ne!(json_sha256(&a), json_sha256(&json!({"b": 2})));
    }

    #[test]
    fn sha256_of_known_input() {
        // FIPS 180-2 test vector.
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert!(is_sha256_hex(&sha256_hex(b"")));
        assert!(!is_sha256_hex("ABC"));
        let d = arguments_digest(&json!({"q": "x"}));
        assert_eq!(d.bytes, r#"{"q":"x"}"#.len() as u64);
        assert_eq!(d.sha256, sha256_hex(br#"{"q":"x"}"#));
    }
}
