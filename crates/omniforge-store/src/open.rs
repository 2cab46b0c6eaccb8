//! Store URLs and [`open`]: `sqlite:PATH` or `postgres://...` to an [`Engine`].

use std::path::PathBuf;
use std::sync::Arc;

use crate::config::StoreConfig;
use crate::engine::Engine;
use crate::error::StoreError;
use crate::postgres::{PgEnv, PgStore, is_postgres_url};
use crate::sqlite::SqliteStore;
use crate::validate::invalid;

/// Where a store lives, parsed from its URL.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum StoreUrl {
    /// `sqlite:PATH` (also `sqlite://PATH`): a SQLite file, created if missing. A relative
    /// `PATH` is relative to the working directory.
    Sqlite(PathBuf),
    /// `postgres://...` or `postgresql://...`: a PostgreSQL database, completed from the `PG*`
    /// variables ([`PgEnv`]) where the URL leaves something out. Kept whole (it may hold a
    /// password, so it is never shown: see [`StoreUrl::redacted`]).
    Postgres(String),
}

impl StoreUrl {
    /// Parses a store URL.
    ///
    /// # Errors
    /// [`StoreError::Invalid`] (field `database URL`) for another scheme or an empty path.
    pub fn parse(url: &str) -> Result<StoreUrl, StoreError> {
        if is_postgres_url(url) {
            return Ok(StoreUrl::Postgres(url.to_owned()));
        }
        if let Some(path) = url.strip_prefix("sqlite:") {
            let path = path.strip_prefix("//").unwrap_or(path);
            if path.is_empty() {
                return Err(invalid("database URL", "sqlite: needs a file path"));
            }
            return Ok(StoreUrl::Sqlite(PathBuf::from(path)));
        }
        Err(invalid(
            "database URL",
            "expected sqlite:PATH or postgres://...",
        ))
    }

    /// The URL to show in logs and errors: a PostgreSQL URL without its password.
    pub fn redacted(&self) -> String {
        match self {
            StoreUrl::Sqlite(path) => format!("sqlite:{}", path.display()),
            StoreUrl::Postgres(url) => match url::Url::parse(url) {
                Ok(mut parsed) => {
                    if parsed.password().is_some() {
                        let _ = parsed.set_password(Some("****"));
                    }
                    parsed.to_string()
                }
                Err(_) => "postgres://(unparsable)".to_owned(),
            },
        }
    }
}

/// Opens the store `url` names and applies its pending migrations: an [`Engine`] on SQLite
/// ([`SqliteStore`]) for `sqlite:PATH`, on PostgreSQL ([`PgStore`]) for `postgres://...`
/// (completed from `env`, the `PG*` variables the caller read; ignored for SQLite). It
/// coerces to `Arc<dyn` [`Backend`](crate::Backend)`>`, `Arc<dyn ContentStore>`, `Arc<dyn ToolStore>`, ...
///
/// # Errors
/// As [`StoreUrl::parse`], [`SqliteStore::open_with`] and [`PgStore::open`].
pub async fn open(url: &str, env: &PgEnv, config: &StoreConfig) -> Result<Arc<Engine>, StoreError> {
    Ok(match StoreUrl::parse(url)? {
        StoreUrl::Sqlite(path) => Arc::new(SqliteStore::open_with(path, config).await?),
        StoreUrl::Postgres(url) => Arc::new(PgStore::open(&url, env, config).await?),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        assert_eq!(
            StoreUrl::parse("sqlite:/var/lib/omniforge/omniforge.db").unwrap(),
            StoreUrl::Sqlite("/var/lib/omniforge/omniforge.db".into())
        );
        assert_eq!(
            StoreUrl::parse("sqlite://data/x.db").unwrap(),
            StoreUrl::Sqlite("data/x.db".into())
        );
        let pg = StoreUrl::parse("postgresql://u:hunter2@db:5432/forge").unwrap();
        assert!(matches!(pg, StoreUrl::Postgres(_)));
        assert_eq!(pg.redacted(), "postgresql://u:****@db:5432/forge");
        for bad in ["", "sqlite:", "mysql://x", "/plain/path.db"] {
            assert!(
                matches!(StoreUrl::parse(bad), Err(StoreError::Invalid { .. })),
                "{bad:?}"
            );
        }
    }
}
