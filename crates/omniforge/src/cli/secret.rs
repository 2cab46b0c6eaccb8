//! `omniforge secret ...`: secrets that tool versions receive as environment variables.

use anyhow::{Context, Result, bail};
use omniforge_store::{Actor, SecretStore as _};

use super::parts;
use crate::flags::{Common, SecretCommand};

/// Runs one `secret` subcommand.
pub(super) async fn run(command: SecretCommand, common: &Common) -> Result<()> {
    let store = parts::open_store(common).await?;
    match command {
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
                .set_secret(&Actor::new("cli"), &name, value)
                .await
                .context("storing the secret")?;
            out!("stored secret {name}");
        }
        SecretCommand::Rm { name } => {
            store
                .delete_secret(&Actor::new("cli"), &name)
                .await
                .context("removing the secret")?;
            out!("removed secret {name}");
        }
        SecretCommand::List => {
            for name in store.secret_names().await.context("listing secrets")? {
                out!("{name}");
            }
        }
    }
    Ok(())
}
