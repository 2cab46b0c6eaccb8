//! `omniforge migrate --from URL --to URL`: a whole store copied into an empty one (every
//! table, with the store's own `copy_store`), secrets opened with the source's keyring and
//! sealed with the target's.

use std::path::PathBuf;

use anyhow::{Context, Result};
use omniforge_store::{StoreError, StoreUrl};

use super::parts;
use crate::flags::{Common, Migrate};

/// Runs `migrate`.
///
/// # Errors
/// Either store cannot be opened, the target is not empty, or a secret cannot be opened with
/// the source's keyring.
pub(super) async fn run(common: &Common, migrate: &Migrate) -> Result<()> {
    let (given, from_file) = source_key_file(common, &migrate.from)?;
    let from_key = parts::keyring(common, &migrate.from, given.as_deref())?;
    let to_key = match &migrate.to_secret_key_file {
        Some(file) => parts::keyring(common, &migrate.to, Some(file))?,
        None => from_key.clone(),
    };
    let from = parts::open_url(common, &migrate.from, from_key).await?;
    let to = parts::open_url(common, &migrate.to, to_key).await?;
    let shown = |url: &str| {
        StoreUrl::parse(url)
            .map(|u| u.redacted())
            .unwrap_or_default()
    };
    let report = omniforge_store::copy_store(from.as_ref(), to.as_ref())
        .await
        .map_err(|e| {
            let keyring_failed = matches!(
                e,
                StoreError::SecretKeyMissing { .. }
                    | StoreError::SecretUnreadable { .. }
                    | StoreError::NoSecretKey
            );
            let e = anyhow::Error::new(e);
            if !keyring_failed {
                return e;
            }
            let used = match &from_file {
                Some(file) => format!("the keyring {}", file.display()),
                None => "no keyring".to_owned(),
            };
            e.context(format!(
                "the source's secrets were opened with {used}: give the source's keyring with \
                 --secret-key-file (default for --from sqlite:PATH: the secret.key beside PATH), \
                 and the target's with --to-secret-key-file"
            ))
        })
        .with_context(|| {
            format!(
                "copying {} into {}",
                shown(&migrate.from),
                shown(&migrate.to)
            )
        })?;
    out!(
        "copied {} tool(s) ({} version(s)), {} secret(s), {} grant(s), {} resource(s)/template(s)/prompt(s), {} call(s), {} audit record(s), {} kept output(s), {} task(s) from {} to {}",
        report.tools,
        report.versions,
        report.secrets,
        report.grants,
        report.content,
        report.calls,
        report.audit,
        report.outputs,
        report.tasks,
        shown(&migrate.from),
        shown(&migrate.to)
    );
    Ok(())
}

/// The keyring file of the source store: `--secret-key-file`; else, for `sqlite:PATH`, the
/// `secret.key` beside PATH when it exists, else `<data-dir>/secret.key` (the embedded
/// default, made when missing); for PostgreSQL none. The file given to
/// [`parts::keyring`] (`None` for its default), and the file used, for messages.
fn source_key_file(common: &Common, from: &str) -> Result<(Option<PathBuf>, Option<PathBuf>)> {
    if let Some(file) = &common.secret_key_file {
        return Ok((Some(file.clone()), Some(file.clone())));
    }
    Ok(
        match StoreUrl::parse(from).context("reading the --from database URL")? {
            StoreUrl::Sqlite(path) => {
                let beside = path
                    .parent()
                    .map(|dir| dir.join("secret.key"))
                    .filter(|file| file.exists());
                match beside {
                    Some(file) => (Some(file.clone()), Some(file)),
                    None => (None, Some(common.data_dir.join("secret.key"))),
                }
            }
            _ => (None, None),
        },
    )
}
