//! The name rules of tools and secrets (prompts follow the tool rule).

use crate::error::{NameKind, StoreError};

/// The longest tool or secret name, in characters (all allowed characters are ASCII).
pub const MAX_NAME_LEN: usize = 64;

/// Checks a tool name: 1 to [`MAX_NAME_LEN`] characters from `[a-zA-Z0-9_-]`.
///
/// Names are case-sensitive: `Fetch` and `fetch` are two tools.
///
/// # Errors
/// [`StoreError::InvalidName`] with [`NameKind::Tool`].
pub fn validate_tool_name(name: &str) -> Result<(), StoreError> {
    let ok = (1..=MAX_NAME_LEN).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if ok {
        Ok(())
    } else {
        Err(StoreError::InvalidName {
            kind: NameKind::Tool,
            name: name.to_owned(),
        })
    }
}

/// Checks a secret name: 1 to [`MAX_NAME_LEN`] characters from `[a-zA-Z0-9_]`, not starting with
/// a digit, so that every secret name is also a portable environment variable name.
///
/// # Errors
/// [`StoreError::InvalidName`] with [`NameKind::Secret`].
pub fn validate_secret_name(name: &str) -> Result<(), StoreError> {
    let ok = (1..=MAX_NAME_LEN).contains(&name.len())
        && !name.as_bytes()[0].is_ascii_digit()
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
    if ok {
        Ok(())
    } else {
        Err(StoreError::InvalidName {
            kind: NameKind::Secret,
            name: name.to_owned(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each case: the name and whether it is valid as a tool name and as a secret name.
    const NAMES: &[(&str, bool, bool)] = &[
        ("fetch_weather", true, true),
        ("fetch-weather", true, false),
        ("A1", true, true),
        ("9lives", true, false),
        ("_private", true, true),
        ("", false, false),
        ("a b", false, false),
        ("a.b", false, false),
        ("a/b", false, false),
        ("héllo", false, false),
        ("tab\t", false, false),
        ("semi;colon", false, false),
    ];

    #[test]
    fn name_rules() {
        let long_ok = "x".repeat(MAX_NAME_LEN);
        let too_long = "x".repeat(MAX_NAME_LEN + 1);
        let cases = NAMES
            .iter()
            .map(|&(n, t, s)| (n.to_owned(), t, s))
            .chain([(long_ok, true, true), (too_long, false, false)]);
        for (name, tool_ok, secret_ok) in cases {
            assert_eq!(
                validate_tool_name(&name).is_ok(),
                tool_ok,
                "tool name {name:?}"
            );
            assert_eq!(
                validate_secret_name(&name).is_ok(),
                secret_ok,
                "secret name {name:?}"
            );
        }
    }
}
