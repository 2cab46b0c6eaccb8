//! `omniforge resource ...`: stored resources and resource templates.

use anyhow::{Context, Result, bail};
use omniforge_server::{Caller, DefinitionKind};

use super::progress::Progress;
use super::{parts, read_json_object};
use crate::flags::{Common, ResourceCommand};

/// Runs one `resource` subcommand.
pub(super) async fn run(command: ResourceCommand, common: &Common) -> Result<()> {
    let server = parts::one_shot(common).await?;
    let store = parts::open_store(common).await?;
    match command {
        ResourceCommand::List => {
            for r in store.list_resources().await.context("listing resources")? {
                out!(
                    "{:<48} {:<24} {:>8} B{}",
                    r.uri,
                    r.mime_type.as_deref().unwrap_or("-"),
                    r.size,
                    if r.state.enabled { "" } else { "  (disabled)" }
                );
            }
            for t in store
                .list_templates()
                .await
                .context("listing resource templates")?
            {
                let how = match t.spec.body {
                    omniforge_store::TemplateBody::Text(_) => "template (text)",
                    omniforge_store::TemplateBody::Script(_) => "template (script)",
                };
                out!(
                    "{:<48} {:<24} {how}",
                    t.spec.uri_template,
                    t.spec.mime_type.as_deref().unwrap_or("-")
                );
            }
        }
        ResourceCommand::Show { key } => {
            let found = match server.definition(DefinitionKind::Resource, &key).await? {
                Some(map) => Some(map),
                None => server.definition(DefinitionKind::Template, &key).await?,
            };
            let Some(map) = found else {
                bail!("no resource or resource template {key:?}")
            };
            out!("{}", serde_json::to_string_pretty(&map).unwrap_or_default());
        }
        ResourceCommand::Add { file, .. } => {
            let args = read_json_object(&file)?;
            let kind = if args.contains_key("uriTemplate") {
                DefinitionKind::Template
            } else {
                DefinitionKind::Resource
            };
            let progress = Progress::on_stderr();
            let caller = Caller::local_with_progress(super::principal(), progress.sink());
            let written = server
                .write_definition(kind, args, omniforge_store::WriteMode::Upsert, &caller)
                .await;
            progress.finish();
            let text = written.map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))?;
            out!("{text}");
        }
        ResourceCommand::Rm { key } => {
            let kind = if store
                .get_resource(&key)
                .await
                .context("reading the resource")?
                .is_some()
            {
                DefinitionKind::Resource
            } else if store
                .list_templates()
                .await
                .context("reading the resource templates")?
                .iter()
                .any(|t| t.spec.uri_template == key)
            {
                DefinitionKind::Template
            } else {
                bail!("no resource or resource template {key:?}")
            };
            let text = server
                .remove_definition(kind, &key, &super::caller())
                .await?;
            out!("{text}");
        }
    }
    Ok(())
}
