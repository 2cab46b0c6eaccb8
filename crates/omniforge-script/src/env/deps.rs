//! Dependency specifiers: what a tool may declare, and PEP 723 `# /// script` blocks.

use serde::Deserialize;

use super::error::EnvError;

/// Longest accepted dependency specifier, in bytes.
const MAX_DEPENDENCY_BYTES: usize = 200;

/// Refuses anything but a registry requirement: it must start with a letter or digit (no
/// options, no `.`/paths), and contain no URL or path characters (`@ / \ :`), no newline or
/// other control character, no `#`.
pub(crate) fn validate_dependency(dep: &str) -> Result<(), EnvError> {
    let fail = |reason| {
        Err(EnvError::InvalidDependency {
            dependency: dep.to_owned(),
            reason,
        })
    };
    if dep.len() > MAX_DEPENDENCY_BYTES {
        return fail("longer than 200 bytes");
    }
    if !dep.starts_with(|c: char| c.is_ascii_alphanumeric()) {
        return fail("must start with a package name");
    }
    if dep
        .chars()
        .any(|c| c.is_control() || matches!(c, '@' | '/' | '\\' | ':' | '#'))
    {
        return fail("only registry requirements are allowed (no URLs, paths or comments)");
    }
    Ok(())
}

/// The `dependencies` of a PEP 723 `# /// script` block in `code`; empty when there is none.
///
/// # Errors
/// [`EnvError::Pep723`] when there are two `script` blocks, a block is not closed, a line
/// inside it is not a comment, or its TOML is invalid.
pub fn pep723_dependencies(code: &str) -> Result<Vec<String>, EnvError> {
    #[derive(Deserialize)]
    struct Metadata {
        #[serde(default)]
        dependencies: Vec<String>,
    }
    match pep723_block(code)? {
        None => Ok(Vec::new()),
        Some(text) => {
            let meta: Metadata =
                toml::from_str(&text).map_err(|e| EnvError::Pep723(e.to_string()))?;
            Ok(meta.dependencies)
        }
    }
}

/// The `[tool.<tool>]` table of the PEP 723 `# /// script` block in `code` (PEP 723: "Tools
/// MAY read their own configuration from the `[tool]` table"), as JSON; `None` when there is
/// no block or no such table.
///
/// # Errors
/// As [`pep723_dependencies`].
pub fn pep723_tool_table(code: &str, tool: &str) -> Result<Option<serde_json::Value>, EnvError> {
    let Some(text) = pep723_block(code)? else {
        return Ok(None);
    };
    let table: toml::Table = toml::from_str(&text).map_err(|e| EnvError::Pep723(e.to_string()))?;
    let Some(section) = table.get("tool").and_then(|t| t.get(tool)) else {
        return Ok(None);
    };
    serde_json::to_value(section)
        .map(Some)
        .map_err(|e| EnvError::Pep723(e.to_string()))
}

/// The TOML text of the one `# /// script` block in `code`.
fn pep723_block(code: &str) -> Result<Option<String>, EnvError> {
    let mut blocks = Vec::new();
    let mut lines = code.lines();
    while let Some(line) = lines.next() {
        let Some(kind) = line.trim_end().strip_prefix("# /// ") else {
            continue;
        };
        if kind != "script" {
            continue;
        }
        let mut toml_text = String::new();
        let mut closed = false;
        for inner in lines.by_ref() {
            let inner = inner.trim_end_matches('\r');
            if inner.trim_end() == "# ///" {
                closed = true;
                break;
            }
            let content = if inner == "#" {
                ""
            } else if let Some(rest) = inner.strip_prefix("# ") {
                rest
            } else {
                return Err(EnvError::Pep723(format!(
                    "line {inner:?} inside the block is not a `# ` comment"
                )));
            };
            toml_text.push_str(content);
            toml_text.push('\n');
        }
        if !closed {
            return Err(EnvError::Pep723(
                "the `# /// script` block is not closed by `# ///`".into(),
            ));
        }
        blocks.push(toml_text);
    }
    match blocks.len() {
        0 => Ok(None),
        1 => Ok(blocks.pop()),
        _ => Err(EnvError::Pep723(
            "more than one `# /// script` block".into(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pep723_blocks() {
        let code = "# /// script\n# requires-python = \">=3.11\"\n# dependencies = [\n#   \"humanize>=4\",\n#   \"rich\",\n# ]\n# ///\nprint(1)\n";
        assert_eq!(pep723_dependencies(code).unwrap(), ["humanize>=4", "rich"]);
        assert!(pep723_dependencies("print(1)\n").unwrap().is_empty());
        assert!(pep723_dependencies("# /// script\n# dependencies = []\n").is_err());
        assert!(pep723_dependencies("# /// script\nx = 1\n# ///\n").is_err());
        let two = "# /// script\n# ///\n# /// script\n# ///\n";
        assert!(pep723_dependencies(two).is_err());
        // Other block types are ignored.
        assert!(
            pep723_dependencies("# /// other\n# x = 1\n# ///\n")
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn pep723_tool_tables() {
        let code = "# /// script\n# dependencies = []\n# [tool.omniforge]\n# builtins = [\"omniforge_update_tool\"]\n# ///\n";
        assert_eq!(
            pep723_tool_table(code, "omniforge").unwrap(),
            Some(serde_json::json!({"builtins": ["omniforge_update_tool"]}))
        );
        assert_eq!(pep723_tool_table(code, "other").unwrap(), None);
        assert_eq!(pep723_tool_table("print(1)", "omniforge").unwrap(), None);
    }

    #[test]
    fn dependency_validation() {
        for ok in [
            "humanize",
            "python-dateutil>=2.8",
            "requests[socks]==2.32.3",
            "numpy; python_version >= \"3.10\"",
        ] {
            assert!(validate_dependency(ok).is_ok(), "{ok}");
        }
        for bad in [
            "-e .",
            ".",
            "--index-url=x",
            "pkg @ https://x/y.whl",
            "file:///etc/passwd",
            "a\nb",
            "../x",
            "x # y",
        ] {
            assert!(validate_dependency(bad).is_err(), "{bad}");
        }
    }

    use proptest::prelude::*;

    proptest! {
        /// Tool code is untrusted: any text, including broken `# /// script` blocks, gets an
        /// answer and never a panic; every dependency found is then checked like any other.
        #[test]
        fn any_code_is_read_without_panicking(
            lines in prop::collection::vec(
                prop_oneof![
                    Just("# /// script".to_owned()),
                    Just("# ///".to_owned()),
                    Just("# dependencies = [".to_owned()),
                    Just("#   \"humanize>=4\",".to_owned()),
                    Just("# ]".to_owned()),
                    Just("#".to_owned()),
                    "# .{0,20}",
                    ".{0,30}",
                ],
                0..12,
            )
        ) {
            let code = lines.join("\n");
            if let Ok(deps) = pep723_dependencies(&code) {
                for d in deps {
                    let _ = validate_dependency(&d);
                }
            }
        }
    }
}
