//! `omniforge pack ...`: tools, resources and prompts in one TOML or JSON file.

use std::path::Path;

use anyhow::{Context, Result, bail};
use omniforge_server::Caller;

use super::parts;
use super::progress::Progress;
use crate::flags::{Common, PackCommand};

/// Runs one `pack` subcommand.
pub(super) async fn run(command: PackCommand, common: &Common) -> Result<()> {
    match command {
        PackCommand::Import { file, .. } => import(common, &file).await,
        PackCommand::Export { output } => export(common, output.as_deref()).await,
    }
}

/// Whether `path` names a TOML file (else JSON).
fn is_toml(path: &Path) -> bool {
    path.extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("toml"))
}

async fn import(common: &Common, file: &Path) -> Result<()> {
    let text =
        std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
    let value: serde_json::Value = if is_toml(file) {
        toml::from_str(&text).with_context(|| format!("parsing {} as TOML", file.display()))?
    } else {
        serde_json::from_str(&text)
            .with_context(|| format!("parsing {} as JSON", file.display()))?
    };
    let server = parts::one_shot(common).await?;
    let progress = Progress::on_stderr();
    let caller = Caller::local_with_progress(super::principal(), progress.sink());
    let imported = server.import_pack(value, &caller).await;
    progress.finish();
    match imported {
        Ok(report) => {
            for line in &report.changed {
                out!("{line}");
            }
            out!(
                "imported {}: {} changed, {} unchanged",
                file.display(),
                report.changed.len(),
                report.unchanged
            );
            Ok(())
        }
        Err(error) => {
            let errors = error.problems;
            let mut text = format!(
                "{}: nothing imported; {} error(s):",
                file.display(),
                errors.len()
            );
            for e in &errors {
                text.push_str("\n  ");
                text.push_str(e);
            }
            bail!(text)
        }
    }
}

async fn export(common: &Common, output: Option<&Path>) -> Result<()> {
    let store = parts::open_store(common).await?;
    let pack = omniforge_server::export_pack(store.as_ref())
        .await
        .context("reading the store")?;
    match output {
        None => out!(
            "{}",
            serde_json::to_string_pretty(&pack).unwrap_or_default()
        ),
        Some(path) => {
            let text = if is_toml(path) {
                toml::to_string_pretty(&pack).context(
                    "this pack cannot be written as TOML (e.g. a schema holds null); use a .json file",
                )?
            } else {
                serde_json::to_string_pretty(&pack).unwrap_or_default() + "\n"
            };
            std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))?;
            out!("exported to {}", path.display());
        }
    }
    Ok(())
}
