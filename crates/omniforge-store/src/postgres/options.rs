//! `postgres://` URLs and the `PG*` environment variables the caller read, as `sqlx` connection
//! options.
//!
//! The URL is libpq's (`postgres://user:password@host:port/dbname?sslmode=require&...`); what it
//! leaves out comes from [`PgEnv`], the standard `PG*` variables, as libpq does. Only the binary
//! reads the environment: it passes them in. (sqlx's own defaults also look at the process
//! environment for what neither gives; the values passed here take precedence over those.)

use std::collections::BTreeMap;
use std::str::FromStr;

use sqlx::postgres::{PgConnectOptions, PgSslMode};

use crate::config::StoreConfig;
use crate::error::StoreError;
use crate::validate::invalid;

/// The `application_name` of the store's connections when neither the URL nor `PGAPPNAME`
/// names one.
const APPLICATION_NAME: &str = "omniforge";

/// The `PG*` environment variables that complete a `postgres://` URL: `PGHOST`, `PGHOSTADDR`,
/// `PGPORT`, `PGUSER`, `PGPASSWORD`, `PGDATABASE`, `PGSSLMODE`, `PGSSLROOTCERT`, `PGSSLCERT`,
/// `PGSSLKEY`, `PGAPPNAME`. Others are ignored. The binary fills it from its environment
/// ([`PgEnv::from_vars`]); tests build it by hand.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PgEnv {
    vars: BTreeMap<String, String>,
}

impl PgEnv {
    /// No variables: the URL says everything.
    pub fn empty() -> PgEnv {
        PgEnv::default()
    }

    /// The `PG*` variables among `vars` (for example `std::env::vars()`), others dropped.
    pub fn from_vars(vars: impl IntoIterator<Item = (String, String)>) -> PgEnv {
        PgEnv {
            vars: vars
                .into_iter()
                .filter(|(k, _)| k.starts_with("PG"))
                .collect(),
        }
    }

    /// Sets one variable (builder style), for example `("PGPASSWORD", "...")`.
    pub fn with(mut self, name: &str, value: &str) -> PgEnv {
        self.vars.insert(name.to_owned(), value.to_owned());
        self
    }

    fn get(&self, name: &str) -> Option<&str> {
        self.vars
            .get(name)
            .map(String::as_str)
            .filter(|v| !v.is_empty())
    }
}

/// Whether `url` names a PostgreSQL database (`postgres://` or `postgresql://`).
pub(crate) fn is_postgres_url(url: &str) -> bool {
    url.starts_with("postgres://") || url.starts_with("postgresql://")
}

/// The connection options for `url`, completed from `env`, with the store's settings: the
/// write lock wait (`lock_timeout`) from [`StoreConfig::busy_timeout`].
pub(crate) fn connect_options(
    url: &str,
    env: &PgEnv,
    config: &StoreConfig,
) -> Result<PgConnectOptions, StoreError> {
    // Never echo the URL in errors: it may hold a password.
    let bad = |reason: String| invalid("database URL", reason);
    if !is_postgres_url(url) {
        return Err(bad("expected postgres://...".into()));
    }
    let parsed = url::Url::parse(url).map_err(|e| bad(e.to_string()))?;
    let query: BTreeMap<String, String> = parsed.query_pairs().into_owned().collect();
    let in_query = |keys: &[&str]| keys.iter().any(|k| query.contains_key(*k));
    let mut options = PgConnectOptions::from_str(url).map_err(|e| bad(e.to_string()))?;

    if parsed.host_str().is_none_or(str::is_empty)
        && !in_query(&["host", "hostaddr"])
        && let Some(host) = env.get("PGHOSTADDR").or(env.get("PGHOST"))
    {
        options = if host.starts_with('/') {
            options.socket(host)
        } else {
            options.host(host)
        };
    }
    if parsed.port().is_none()
        && !in_query(&["port"])
        && let Some(port) = env.get("PGPORT")
    {
        let port = port
            .parse()
            .map_err(|_| invalid("PGPORT", "not a port number"))?;
        options = options.port(port);
    }
    if parsed.username().is_empty()
        && !in_query(&["user"])
        && let Some(user) = env.get("PGUSER")
    {
        options = options.username(user);
    }
    if parsed.password().is_none()
        && !in_query(&["password"])
        && let Some(password) = env.get("PGPASSWORD")
    {
        options = options.password(password);
    }
    if parsed.path().trim_start_matches('/').is_empty()
        && !in_query(&["dbname"])
        && let Some(database) = env.get("PGDATABASE")
    {
        options = options.database(database);
    }
    if !in_query(&["sslmode", "ssl-mode"])
        && let Some(mode) = env.get("PGSSLMODE")
    {
        let mode = PgSslMode::from_str(mode).map_err(|e| invalid("PGSSLMODE", e.to_string()))?;
        options = options.ssl_mode(mode);
    }
    if !in_query(&["sslrootcert", "ssl-root-cert", "ssl-ca"])
        && let Some(path) = env.get("PGSSLROOTCERT")
    {
        options = options.ssl_root_cert(path);
    }
    if !in_query(&["sslcert", "ssl-cert"])
        && let Some(path) = env.get("PGSSLCERT")
    {
        options = options.ssl_client_cert(path);
    }
    if !in_query(&["sslkey", "ssl-key"])
        && let Some(path) = env.get("PGSSLKEY")
    {
        options = options.ssl_client_key(path);
    }
    let app = query
        .get("application_name")
        .map(String::as_str)
        .or(env.get("PGAPPNAME"))
        .unwrap_or(APPLICATION_NAME);
    let lock_timeout_ms = config.busy_timeout.as_millis().max(1);
    Ok(options
        .application_name(app)
        .options([("lock_timeout", format!("{lock_timeout_ms}ms"))]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(url: &str, env: &PgEnv) -> PgConnectOptions {
        connect_options(url, env, &StoreConfig::defaults()).unwrap()
    }

    #[test]
    fn the_url_wins_and_the_environment_fills_in() {
        let env = PgEnv::empty()
            .with("PGHOST", "db.internal")
            .with("PGPORT", "6543")
            .with("PGUSER", "envuser")
            .with("PGDATABASE", "envdb")
            .with("PGSSLMODE", "require")
            .with("PGAPPNAME", "replica-1");
        let o = opts("postgres://", &env);
        assert_eq!(o.get_host(), "db.internal");
        assert_eq!(o.get_port(), 6543);
        assert_eq!(o.get_username(), "envuser");
        assert_eq!(o.get_database(), Some("envdb"));
        assert!(matches!(o.get_ssl_mode(), PgSslMode::Require));
        assert_eq!(o.get_application_name(), Some("replica-1"));

        let o = opts(
            "postgresql://alice@127.0.0.1:5433/forge?sslmode=disable",
            &env,
        );
        assert_eq!(o.get_host(), "127.0.0.1");
        assert_eq!(o.get_port(), 5433);
        assert_eq!(o.get_username(), "alice");
        assert_eq!(o.get_database(), Some("forge"));
        assert!(matches!(o.get_ssl_mode(), PgSslMode::Disable));
        assert!(
            o.get_options()
                .is_some_and(|s| s.contains("lock_timeout=5000ms"))
        );
    }

    #[test]
    fn bad_urls_are_invalid_without_echoing_a_password() {
        for url in [
            "sqlite:x.db",
            "postgres://u:hunter2@host:notaport/db",
            "mysql://x",
        ] {
            let e = connect_options(url, &PgEnv::empty(), &StoreConfig::defaults()).unwrap_err();
            assert!(matches!(e, StoreError::Invalid { .. }), "{url}: {e:?}");
            assert!(!e.to_string().contains("hunter2"), "{e}");
        }
        let e = connect_options(
            "postgres://h/db",
            &PgEnv::empty().with("PGPORT", "x"),
            &StoreConfig::defaults(),
        )
        .unwrap_err();
        assert!(e.to_string().contains("PGPORT"), "{e}");
    }
}
