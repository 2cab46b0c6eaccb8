//! `omniforge secret ...`: secrets that tool versions receive as environment variables.

use anyhow::{Context, Result, bail};
use omniforge_store::SecretStore as _;

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
                &store,
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
                &store,
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
            let requests = omniforge_server::secret_requests(&store, tool.as_deref())
                .await
                .context("listing secret requests")?;
            for r in requests {
                let state = match (&r["granted"], r["secretSet"] == true) {
                    (serde_json::Value::Object(g), _) => {
                        format!("granted by {}", g["by"].as_str().unwrap_or("?"))
                    }
                    (_, true) => "pending".to_owned(),
                    (_, false) => "pending (secret not set)".to_owned(),
                };
                out!(
                    "{} v{} {} {state}",
                    r["tool"].as_str().unwrap_or(""),
                    r["version"],
                    r["secret"].as_str().unwrap_or("")
                );
            }
        }
    }
    Ok(())
}
