//! `omniforge migrate --from URL --to URL`: a whole store copied into an empty one (every
//! table, with the store's own `copy_store`), secrets opened with the source's keyring and
//! sealed with the target's.

use anyhow::{Context, Result};
use omniforge_store::StoreUrl;

use super::parts;
use crate::flags::{Common, Migrate};

/// Runs `migrate`.
///
/// # Errors
/// Either store cannot be opened, the target is not empty, or a secret cannot be opened with
/// the source's keyring.
pub(super) async fn run(common: &Common, migrate: &Migrate) -> Result<()> {
    let from_key = parts::keyring(common, &migrate.from, common.secret_key_file.as_deref())?;
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
        .with_context(|| {
            format!(
                "copying {} into {}",
                shown(&migrate.from),
                shown(&migrate.to)
            )
        })?;
    out!(
        "copied {} tool(s) ({} version(s)), {} secret(s), {} grant(s), {} resource(s)/template(s)/prompt(s), {} call(s), {} audit record(s), {} kept output(s) from {} to {}",
        report.tools,
        report.versions,
        report.secrets,
        report.grants,
        report.content,
        report.calls,
        report.audit,
        report.outputs,
        shown(&migrate.from),
        shown(&migrate.to)
    );
    Ok(())
}
