//! `omniforge prompt ...`: stored prompts.

use anyhow::{Context, Result, bail};
use omniforge_server::{Caller, DefinitionKind};

use super::progress::Progress;
use super::{parts, read_json_object, render};
use crate::flags::{Common, PromptCommand};

/// Runs one `prompt` subcommand.
pub(super) async fn run(command: PromptCommand, common: &Common) -> Result<()> {
    let server = parts::one_shot(common).await?;
    let store = parts::open_store(common).await?;
    match command {
        PromptCommand::List => {
            for p in store.list_prompts().await.context("listing prompts")? {
                let args: Vec<String> = p
                    .spec
                    .arguments
                    .iter()
                    .map(|a| {
                        if a.required {
                            a.name.clone()
                        } else {
                            format!("[{}]", a.name)
                        }
                    })
                    .collect();
                let how = if p.spec.script.is_some() {
                    "(script) "
                } else {
                    ""
                };
                out!(
                    "{:<40} {:<30} {how}{}",
                    p.spec.name,
                    args.join(" "),
                    render::first_line(p.spec.description.as_deref().unwrap_or(""))
                );
            }
        }
        PromptCommand::Show { name } => {
            let Some(map) = server.definition(DefinitionKind::Prompt, &name).await? else {
                bail!("no prompt {name:?}")
            };
            out!("{}", serde_json::to_string_pretty(&map).unwrap_or_default());
        }
        PromptCommand::Add { file, .. } => {
            let args = read_json_object(&file)?;
            let progress = Progress::on_stderr();
            let caller = Caller::local_with_progress(super::principal(), progress.sink());
            let written = server
                .write_definition(
                    DefinitionKind::Prompt,
                    args,
                    omniforge_store::WriteMode::Upsert,
                    &caller,
                )
                .await;
            progress.finish();
            let text = written.map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))?;
            out!("{text}");
        }
        PromptCommand::Rm { name } => {
            let text = server
                .remove_definition(DefinitionKind::Prompt, &name, &super::caller())
                .await?;
            out!("{text}");
        }
    }
    Ok(())
}
