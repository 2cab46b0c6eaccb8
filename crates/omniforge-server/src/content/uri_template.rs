//! RFC 6570 URI templates for resource templates: parsing (level 1 and 2 only, the
//! expressions a URI can be matched against), matching a URI (`uri-template-ex`), and filling
//! `{variable}` placeholders into text.

use std::collections::BTreeMap;

use uri_template_ex::UriTemplate;

use crate::error::AuthoringError;

/// Parses an RFC 6570 URI template; only level 1 and 2 expressions (`{var}`, `{+var}`,
/// `{#var}`, one variable each) are supported, since those are the ones a URI can be matched
/// against. Returns the template and its variable names.
///
/// # Errors
/// A text naming `field` and the bad expression.
pub(crate) fn parse_uri_template(
    field: &'static str,
    text: &str,
) -> Result<(UriTemplate, Vec<String>), AuthoringError> {
    let invalid = |reason: String| AuthoringError::invalid(field, reason);
    let mut vars = Vec::new();
    let mut rest = text;
    while let Some(open) = rest.find('{') {
        let Some(close) = rest[open..].find('}') else {
            return Err(invalid(format!("unclosed {{ in {text:?}")));
        };
        let expr = &rest[open + 1..open + close];
        let var = expr.strip_prefix(['+', '#']).unwrap_or(expr);
        let var_ok = !var.is_empty()
            && var
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '%'));
        if !var_ok {
            return Err(invalid(format!(
                "unsupported expression {{{expr}}} in {text:?}: only {{var}}, {{+var}} and {{#var}} with one variable name of letters, digits, _ and . can be matched"
            )));
        }
        if vars.iter().any(|v| v == var) {
            return Err(invalid(format!(
                "variable {var:?} appears twice in {text:?}"
            )));
        }
        vars.push(var.to_owned());
        rest = &rest[open + close + 1..];
    }
    if rest.contains('}') {
        return Err(invalid(format!("unmatched }} in {text:?}")));
    }
    if vars.is_empty() {
        return Err(invalid(format!(
            "{text:?} has no {{variable}}; a fixed URI is a resource (omniforge_create_resource)"
        )));
    }
    let template =
        UriTemplate::new(text).map_err(|e| invalid(format!("not an RFC 6570 template: {e}")))?;
    Ok((template, vars))
}

/// The variables of `uri` when it matches `template`, decoded.
pub(crate) fn match_uri(template: &UriTemplate, uri: &str) -> Option<BTreeMap<String, String>> {
    let captures = template.captures(uri)?;
    let mut vars = BTreeMap::new();
    for (name, m) in captures.iter() {
        let value = match m {
            Some(m) => m.value().ok()?.into_owned(),
            None => String::new(),
        };
        vars.insert(name.to_owned(), value);
    }
    Some(vars)
}

/// Replaces each `{name}` of `values` in `text`; other braces are left alone.
pub(crate) fn substitute(text: &str, values: &BTreeMap<String, String>) -> String {
    let mut out = text.to_owned();
    for (name, value) in values {
        out = out.replace(&format!("{{{name}}}"), value);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_match_and_fill_in() {
        let (t, vars) = parse_uri_template("uriTemplate", "test://template/{id}/data").unwrap();
        assert_eq!(vars, ["id"]);
        let got = match_uri(&t, "test://template/123/data").unwrap();
        assert_eq!(got.get("id").map(String::as_str), Some("123"));
        assert!(match_uri(&t, "test://template/123/other").is_none());
        assert!(
            match_uri(&t, "test://template/1/2/data").is_none(),
            "{{id}} stops at /"
        );
        let text = substitute(
            r#"{"id":"{id}","templateTest":true,"data":"Data for ID: {id}"}"#,
            &got,
        );
        assert_eq!(
            text,
            r#"{"id":"123","templateTest":true,"data":"Data for ID: 123"}"#
        );
        let decoded = match_uri(&t, "test://template/a%20b/data").unwrap();
        assert_eq!(decoded["id"], "a b");
        let (t, _) = parse_uri_template("u", "file:///{+path}").unwrap();
        assert_eq!(match_uri(&t, "file:///a/b.txt").unwrap()["path"], "a/b.txt");
    }

    #[test]
    fn template_errors_name_the_expression() {
        for (text, want) in [
            ("test://{?q}", "unsupported expression {?q}"),
            ("test://{a,b}", "unsupported expression {a,b}"),
            ("test://{id}/{id}", "appears twice"),
            ("test://{id", "unclosed {"),
            ("test://fixed", "has no {variable}"),
        ] {
            let err = parse_uri_template("uriTemplate", text)
                .unwrap_err()
                .to_string();
            assert!(err.starts_with("uriTemplate: "), "{err}");
            assert!(err.contains(want), "{text}: {err}");
        }
    }
}
