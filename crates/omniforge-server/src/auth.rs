//! Bearer tokens and scopes for Streamable HTTP.
//!
//! A token file has one `NAME TOKEN SCOPES` line per token; scopes are separated by commas.
//! Blank lines and lines starting with `#` are ignored. Scopes: `tools:call`, `tools:write`
//! (implies `tools:call`) and `admin` (implies everything). Tokens are compared in constant
//! time and never logged; only the token's NAME appears in logs and as a tool's author.
//!
//! stdio has no tokens: it trusts its parent process, which gets [`Principal::local`].

use std::fmt;
use std::sync::Arc;

use subtle::ConstantTimeEq;

/// A permission a token can hold. Ordered: each scope implies the ones below it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Scope {
    /// Call tools (`tools:call`).
    Call,
    /// Create, update and delete tools (`tools:write`); implies [`Scope::Call`].
    Write,
    /// Everything (`admin`).
    Admin,
}

impl Scope {
    fn parse(s: &str) -> Option<Scope> {
        match s {
            "tools:call" => Some(Scope::Call),
            "tools:write" => Some(Scope::Write),
            "admin" => Some(Scope::Admin),
            _ => None,
        }
    }
}

/// Who is calling: a token's name and its strongest scope.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    /// The token's NAME from the token file, `stdio`, `cli`, or `anonymous` (HTTP without
    /// tokens). Shared: a principal is cloned per request.
    pub name: Arc<str>,
    /// The strongest scope held; weaker scopes are implied.
    pub scope: Scope,
}

impl Principal {
    /// The principal `name` holding `scope`.
    pub fn new(name: &str, scope: Scope) -> Principal {
        Principal {
            name: name.into(),
            scope,
        }
    }

    /// The parent process of a stdio server: trusted with everything.
    pub fn local() -> Principal {
        Principal {
            name: "stdio".into(),
            scope: Scope::Admin,
        }
    }

    /// An HTTP caller when no tokens are configured (the server then binds loopback only).
    pub fn anonymous() -> Principal {
        Principal {
            name: "anonymous".into(),
            scope: Scope::Admin,
        }
    }

    /// Whether this principal holds `scope`, directly or by implication.
    pub fn allows(&self, scope: Scope) -> bool {
        self.scope >= scope
    }
}

/// The configured tokens.
#[derive(Clone, Default)]
pub struct TokenSet {
    entries: Vec<(Vec<u8>, Principal)>,
}

impl fmt::Debug for TokenSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never print the secrets themselves.
        f.debug_list()
            .entries(self.entries.iter().map(|(_, p)| &p.name))
            .finish()
    }
}

/// A token file that cannot be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TokenFileError {
    /// A line is not `NAME TOKEN SCOPES`.
    #[error("line {line}: expected `NAME TOKEN SCOPES`")]
    Shape {
        /// 1-based line number.
        line: usize,
    },
    /// A scope is not one of `tools:call`, `tools:write`, `admin`.
    #[error("line {line}: unknown scope `{scope}` (expected tools:call, tools:write or admin)")]
    Scope {
        /// 1-based line number.
        line: usize,
        /// The offending scope.
        scope: String,
    },
    /// Two lines use the same NAME or the same TOKEN.
    #[error("line {line}: duplicate token name or value")]
    Duplicate {
        /// 1-based line number.
        line: usize,
    },
}

impl TokenSet {
    /// Parses the text of a token file.
    ///
    /// # Errors
    /// A malformed line, an unknown scope or a duplicate name or token.
    pub fn parse(text: &str) -> Result<TokenSet, TokenFileError> {
        let mut entries: Vec<(Vec<u8>, Principal)> = Vec::new();
        for (i, raw) in text.lines().enumerate() {
            let line = i + 1;
            let raw = raw.trim();
            if raw.is_empty() || raw.starts_with('#') {
                continue;
            }
            let fields: Vec<&str> = raw.split_whitespace().collect();
            let [name, token, scopes] = fields[..] else {
                return Err(TokenFileError::Shape { line });
            };
            let mut best = None;
            for s in scopes.split(',').filter(|s| !s.is_empty()) {
                let scope = Scope::parse(s).ok_or_else(|| TokenFileError::Scope {
                    line,
                    scope: s.to_owned(),
                })?;
                best = best.max(Some(scope));
            }
            let scope = best.ok_or(TokenFileError::Shape { line })?;
            if entries
                .iter()
                .any(|(t, p)| &*p.name == name || t == token.as_bytes())
            {
                return Err(TokenFileError::Duplicate { line });
            }
            entries.push((
                token.as_bytes().to_vec(),
                Principal {
                    name: name.into(),
                    scope,
                },
            ));
        }
        Ok(TokenSet { entries })
    }

    /// Whether no token is configured.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// How many tokens are configured.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// The principal a presented token belongs to. Every entry is compared, in constant time
    /// per entry, so the answer's timing does not depend on which entry matched.
    pub fn authenticate(&self, presented: &str) -> Option<Principal> {
        let mut found = None;
        for (token, principal) in &self.entries {
            if bool::from(token.as_slice().ct_eq(presented.as_bytes())) {
                found = Some(principal.clone());
            }
        }
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_scopes_and_implications() {
        let set = TokenSet::parse(
            "# comment\n\nalice s3cret tools:call\nbob t0ken tools:write,tools:call\nroot r00t admin\n",
        )
        .unwrap();
        assert_eq!(set.len(), 3);
        let bob = set.authenticate("t0ken").unwrap();
        assert_eq!(&*bob.name, "bob");
        assert!(bob.allows(Scope::Call) && bob.allows(Scope::Write) && !bob.allows(Scope::Admin));
        let alice = set.authenticate("s3cret").unwrap();
        assert!(alice.allows(Scope::Call) && !alice.allows(Scope::Write));
        assert!(set.authenticate("nope").is_none());
        assert!(set.authenticate("").is_none());
    }

    #[test]
    fn rejects_bad_lines() {
        assert!(matches!(
            TokenSet::parse("a b"),
            Err(TokenFileError::Shape { line: 1 })
        ));
        assert!(matches!(
            TokenSet::parse("a b tools:all"),
            Err(TokenFileError::Scope { line: 1, .. })
        ));
        assert!(matches!(
            TokenSet::parse("a b admin\na c admin"),
            Err(TokenFileError::Duplicate { line: 2 })
        ));
    }

    #[test]
    fn debug_never_shows_secrets() {
        let set = TokenSet::parse("alice s3cret tools:call").unwrap();
        assert!(!format!("{set:?}").contains("s3cret"));
    }
}
