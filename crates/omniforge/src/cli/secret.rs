//! `omniforge secret ...`: secrets that tool versions receive as environment variables.

use anyhow::{Context, Result, bail};
use omniforge_store::{Actor, Keyring, KeyringError, StoreUrl};

use super::parts;
use crate::flags::{Common, SecretCommand};

/// Runs one `secret` subcommand.
pub(super) async fn run(command: SecretCommand, common: &Common) -> Result<()> {
    match command {
        SecretCommand::RotateKey { no_new_key } => return rotate_key(common, no_new_key).await,
        SecretCommand::NewKey => return new_key(common),
        _ => {}
    }
    let store = parts::open_store(common).await?;
    match command {
        // Handled above: they open the store with the new keyring, or no store.
        SecretCommand::RotateKey { .. } | SecretCommand::NewKey => {}
        SecretCommand::Set { name } => {
            let mut value = String::new();
            std::io::Read::read_to_string(&mut std::io::stdin(), &mut value)
                .context("reading the secret from stdin")?;
            let value = value.strip_suffix('\n').unwrap_or(&value);
            let value = value.strip_suffix('\r').unwrap_or(value);
            if value.is_empty() {
                bail!("the secret's value is read from stdin, and stdin was empty");
            }
            store
                .set_secret(&super::actor(), &name, value)
                .await
                .context("storing the secret")?;
            out!("stored secret {name}");
        }
        SecretCommand::Rm { name } => {
            store
                .delete_secret(&super::actor(), &name)
                .await
                .context("removing the secret")?;
            out!("removed secret {name}");
        }
        SecretCommand::List => {
            for name in store.secret_names().await.context("listing secrets")? {
                out!("{name}");
            }
        }
        SecretCommand::Grant {
            name,
            tool,
            version,
        } => {
            let said = omniforge_server::change_grant(
                &*store,
                &super::actor(),
                &name,
                &tool,
                version,
                true,
            )
            .await?;
            out!("{said}");
        }
        SecretCommand::Revoke {
            name,
            tool,
            version,
        } => {
            let said = omniforge_server::change_grant(
                &*store,
                &super::actor(),
                &name,
                &tool,
                version,
                false,
            )
            .await?;
            out!("{said}");
        }
        SecretCommand::Requests { tool } => {
            let requests = omniforge_server::secret_requests(&*store, tool.as_deref())
                .await
                .context("listing secret requests")?;
            for r in requests {
                let state = match (&r.request.grant, r.request.exists) {
                    (Some(g), _) => format!("granted by {}", g.granted_by),
                    (None, true) => "pending".to_owned(),
                    (None, false) => "pending (secret not set)".to_owned(),
                };
                out!("{} v{} {} {state}", r.tool, r.version, r.request.secret);
            }
        }
    }
    Ok(())
}

/// `secret new-key`: a new first key in the keyring file given (made when missing), and no
/// store opened.
fn new_key(common: &Common) -> Result<()> {
    let Some(file) = &common.secret_key_file else {
        bail!(
            "give the keyring file to make or grow with --secret-key-file (or OMNIFORGE_SECRET_KEY_FILE)"
        );
    };
    let id = add_first_key(file)?;
    out!("new key {id} first in {}", file.display());
    Ok(())
}

/// `secret rotate-key`: a new first key in the keyring file (the file is made when it does not
/// exist yet; `--no-new-key`: none added, the file must exist), then every secret sealed again
/// under the first key. Running replicas re-read their key file when it changes (see
/// `omniforge_store::keyring`), so those whose file is this one follow without a restart;
/// replicas with their own copy get the key before (`secret new-key`, copy the file, then
/// `rotate-key --no-new-key`).
async fn rotate_key(common: &Common, no_new_key: bool) -> Result<()> {
    let file = match &common.secret_key_file {
        Some(file) => file.clone(),
        None => match StoreUrl::parse(&common.database).context("reading the database URL")? {
            StoreUrl::Sqlite(_) => common.data_dir.join("secret.key"),
            _ => bail!("give the keyring with --secret-key-file (or OMNIFORGE_SECRET_KEY_FILE)"),
        },
    };
    if !no_new_key {
        let id = add_first_key(&file)?;
        out!("new key {id} first in {}", file.display());
    }
    let keyring = Keyring::load(&file)
        .with_context(|| format!("loading the secret keyring {}", file.display()))?;
    let id = keyring.current_key_id();
    let store = parts::open_url(common, &common.database, Some(keyring)).await?;
    let resealed = store
        .rotate_key(&Actor::new("cli"))
        .await
        .context("sealing the secrets under the new key")?;
    out!("sealed {resealed} secret(s) under key {id}");
    Ok(())
}

/// Puts a new key first in the keyring `file`, made (mode 0600) when it does not exist; the
/// new key's id.
fn add_first_key(file: &std::path::Path) -> Result<String> {
    let id = match Keyring::generate_file(file) {
        Ok(keyring) => keyring.current_key_id().to_owned(),
        Err(KeyringError::Io { source, .. })
            if source.kind() == std::io::ErrorKind::AlreadyExists =>
        {
            Keyring::add_key_to_file(file)
                .with_context(|| format!("adding a key to {}", file.display()))?
        }
        Err(e) => {
            return Err(e).with_context(|| format!("making the keyring {}", file.display()));
        }
    };
    Ok(id)
}
