//! Bearer tokens and scopes for Streamable HTTP.
//!
//! A token file has one `NAME TOKEN SCOPES` line per token; scopes are separated by commas.
//! Blank lines and lines starting with `#` are ignored. Scopes: `tools:call`, `tools:write`
//! (implies `tools:call`) and `admin` (implies everything). Tokens are compared in constant
//! time and never logged; only the token's principal id
//! (`token:NAME`) appears in logs and as a tool's author.
//!
//! stdio has no tokens: it trusts its parent process, which gets [`Principal::local`].
//!
//! Every principal has one [`PrincipalId`], the namespace sessions, kept outputs, the call
//! log, tool authors and audit records share.

pub(crate) mod oauth;

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
    /// OmniForge's name of the scope.
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Call => "tools:call",
            Scope::Write => "tools:write",
            Scope::Admin => "admin",
        }
    }

    /// The scope named `s` (`tools:call`, `tools:write`, `admin`).
    pub fn parse(s: &str) -> Option<Scope> {
        match s {
            "tools:call" => Some(Scope::Call),
            "tools:write" => Some(Scope::Write),
            "admin" => Some(Scope::Admin),
            _ => None,
        }
    }
}

/// What kind of principal an id names (the prefix of its canonical form).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum PrincipalKind {
    /// A static token from the token file: `token:NAME`.
    Token,
    /// The parent process of a stdio server: `stdio`.
    Stdio,
    /// The OS user running a one-shot command: `cli:USER`.
    Cli,
    /// An HTTP caller when no tokens are configured: `anonymous`.
    Anonymous,
    /// The subject of an OAuth access token: `oauth:ISSUER|SUB`.
    OAuth,
}

impl PrincipalKind {
    /// The kind's name, as in logs and span attributes (`token`, `stdio`, `cli`, `anonymous`).
    pub fn as_str(self) -> &'static str {
        match self {
            PrincipalKind::Token => "token",
            PrincipalKind::Stdio => "stdio",
            PrincipalKind::Cli => "cli",
            PrincipalKind::Anonymous => "anonymous",
            PrincipalKind::OAuth => "oauth",
        }
    }
}

/// Who acts, in the one namespace sessions, kept outputs, the call log, tool authors and audit
/// records share: `token:NAME`, `stdio`, `cli:USER`, `anonymous`. Held in its canonical text
/// (cheap to clone and compare; the store keeps that text); equality and ownership use the id
/// only, never the scope. A new kind (e.g. `oauth:ISSUER|SUB`) is one more constructor, one
/// more [`PrincipalKind`] and one more arm in [`PrincipalId::parse`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PrincipalId {
    canonical: Arc<str>,
    kind: PrincipalKind,
}

/// A text that is not a principal id.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "not a principal (expected token:NAME, oauth:ISSUER|SUB, cli:USER, stdio or anonymous): {0:?}"
)]
pub struct PrincipalIdError(String);

impl PrincipalId {
    fn with(kind: PrincipalKind, canonical: String) -> PrincipalId {
        PrincipalId {
            canonical: canonical.into(),
            kind,
        }
    }

    /// The static token named `name` in the token file.
    pub fn token(name: &str) -> PrincipalId {
        PrincipalId::with(PrincipalKind::Token, format!("token:{name}"))
    }

    /// The subject `subject` of an OAuth access token from `issuer` (`sub`, or the configured
    /// claim): `oauth:ISSUER|SUBJECT`.
    pub fn oauth(issuer: &str, subject: &str) -> PrincipalId {
        PrincipalId::with(PrincipalKind::OAuth, format!("oauth:{issuer}|{subject}"))
    }

    /// The OS user `user` running a one-shot command.
    pub fn cli(user: &str) -> PrincipalId {
        PrincipalId::with(PrincipalKind::Cli, format!("cli:{user}"))
    }

    /// The parent process of a stdio server.
    pub fn stdio() -> PrincipalId {
        PrincipalId::with(PrincipalKind::Stdio, "stdio".into())
    }

    /// An HTTP caller when no tokens are configured.
    pub fn anonymous() -> PrincipalId {
        PrincipalId::with(PrincipalKind::Anonymous, "anonymous".into())
    }

    /// Reads a canonical form back (`omniforge audit --principal`, stored owners).
    ///
    /// # Errors
    /// The text has no known prefix, or an empty name after it.
    pub fn parse(text: &str) -> Result<PrincipalId, PrincipalIdError> {
        let bad = || PrincipalIdError(text.to_owned());
        match text.split_once(':') {
            Some(("token", name)) if !name.is_empty() => Ok(PrincipalId::token(name)),
            Some(("cli", user)) if !user.is_empty() => Ok(PrincipalId::cli(user)),
            // An issuer is a URL (no raw '|'); a subject may hold one (Auth0: `auth0|123`).
            Some(("oauth", rest)) => match rest.split_once('|') {
                Some((issuer, subject)) if !issuer.is_empty() && !subject.is_empty() => {
                    Ok(PrincipalId::oauth(issuer, subject))
                }
                _ => Err(bad()),
            },
            Some(_) => Err(bad()),
            None if text == "stdio" => Ok(PrincipalId::stdio()),
            None if text == "anonymous" => Ok(PrincipalId::anonymous()),
            None => Err(bad()),
        }
    }

    /// The canonical text, as stored.
    pub fn as_str(&self) -> &str {
        &self.canonical
    }

    /// What kind of principal this is.
    pub fn kind(&self) -> PrincipalKind {
        self.kind
    }
}

impl fmt::Display for PrincipalId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.canonical)
    }
}

/// Who is calling: their id and, for this request, their strongest scope.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    /// Who: the same id across requests (sessions and kept outputs belong to it).
    pub id: PrincipalId,
    /// The strongest scope held; weaker scopes are implied.
    pub scope: Scope,
}

impl Principal {
    /// The principal `id` holding `scope`.
    pub fn new(id: PrincipalId, scope: Scope) -> Principal {
        Principal { id, scope }
    }

    /// The parent process of a stdio server: trusted with everything.
    pub fn local() -> Principal {
        Principal::new(PrincipalId::stdio(), Scope::Admin)
    }

    /// An HTTP caller when no tokens are configured (the server then binds loopback only).
    pub fn anonymous() -> Principal {
        Principal::new(PrincipalId::anonymous(), Scope::Admin)
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
            .entries(self.entries.iter().map(|(_, p)| p.id.as_str()))
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
    /// The scopes have a space after a comma (`tools:call, tools:write`): the line splits into
    /// more than three fields.
    #[error(
        "line {line}: the scopes are one field, separated by commas without spaces (write `{scopes}`)"
    )]
    ScopeSpace {
        /// 1-based line number.
        line: usize,
        /// The scopes as they should be written.
        scopes: String,
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
                // `NAME TOKEN tools:call, tools:write`: a space beside a comma.
                if fields.len() > 3
                    && fields[2..]
                        .iter()
                        .any(|f| f.ends_with(',') || f.starts_with(','))
                {
                    return Err(TokenFileError::ScopeSpace {
                        line,
                        scopes: fields[2..].concat(),
                    });
                }
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
            let id = PrincipalId::token(name);
            if entries
                .iter()
                .any(|(t, p)| p.id == id || t == token.as_bytes())
            {
                return Err(TokenFileError::Duplicate { line });
            }
            entries.push((token.as_bytes().to_vec(), Principal::new(id, scope)));
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
        assert_eq!(bob.id.as_str(), "token:bob");
        assert!(bob.allows(Scope::Call) && bob.allows(Scope::Write) && !bob.allows(Scope::Admin));
        let alice = set.authenticate("s3cret").unwrap();
        assert!(alice.allows(Scope::Call) && !alice.allows(Scope::Write));
        assert!(set.authenticate("nope").is_none());
        assert!(set.authenticate("").is_none());
    }

    #[test]
    fn a_space_after_a_scope_comma_is_named() {
        let err = TokenSet::parse("# c\nbob t0ken tools:call, tools:write\n").unwrap_err();
        assert!(matches!(err, TokenFileError::ScopeSpace { line: 2, .. }));
        assert_eq!(
            err.to_string(),
            "line 2: the scopes are one field, separated by commas without spaces (write `tools:call,tools:write`)"
        );
        let err = TokenSet::parse("bob t0ken tools:call ,admin").unwrap_err();
        assert!(
            err.to_string().contains("write `tools:call,admin`"),
            "{err}"
        );
        // Four fields with no comma are still the shape error.
        assert!(matches!(
            TokenSet::parse("a b tools:call admin"),
            Err(TokenFileError::Shape { line: 1 })
        ));
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
    fn principal_ids_round_trip_through_their_canonical_text() {
        for id in [
            PrincipalId::token("alice"),
            PrincipalId::cli("root"),
            PrincipalId::stdio(),
            PrincipalId::anonymous(),
            PrincipalId::token("a:b"),
            PrincipalId::oauth("https://id.example", "alice"),
            PrincipalId::oauth("https://id.example/tenant", "auth0|123"),
        ] {
            assert_eq!(PrincipalId::parse(id.as_str()).unwrap(), id);
        }
        assert_eq!(PrincipalId::token("alice").to_string(), "token:alice");
        assert_eq!(PrincipalId::cli("bob").kind(), PrincipalKind::Cli);
        assert_eq!(
            PrincipalId::oauth("https://id.example", "auth0|1").kind(),
            PrincipalKind::OAuth
        );
        for bad in [
            "",
            "alice",
            "token:",
            "cli:",
            "oauth:x",
            "oauth:|sub",
            "oauth:iss|",
            "stdio:x",
        ] {
            assert!(PrincipalId::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn debug_never_shows_secrets() {
        let set = TokenSet::parse("alice s3cret tools:call").unwrap();
        assert!(!format!("{set:?}").contains("s3cret"));
    }
}
