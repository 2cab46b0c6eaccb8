//! `omniforge prompt ...`: stored prompts.

use anyhow::{Context, Result, bail};
use omniforge_server::{content, forge};
use omniforge_store::ContentStore as _;

use super::progress::Progress;
use super::{parts, read_json_object, render};
use crate::flags::{Common, PromptCommand};

/// Runs one `prompt` subcommand.
pub(super) async fn run(command: PromptCommand, common: &Common) -> Result<()> {
    let (content, store) = parts::one_shot_content(common).await?;
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
                out!(
                    "{:<40} {:<30} {}",
                    p.spec.name,
                    args.join(" "),
                    render::first_line(p.spec.description.as_deref().unwrap_or(""))
                );
            }
        }
        PromptCommand::Show { name } => {
            let Some(map) = content
                .definition(content::Kind::Prompt, &name)
                .await
                .map_err(anyhow::Error::msg)?
            else {
                bail!("no prompt {name:?}")
            };
            out!("{}", serde_json::to_string_pretty(&map).unwrap_or_default());
        }
        PromptCommand::Add { file, .. } => {
            let args = read_json_object(&file)?;
            let progress = Progress::on_stderr();
            let caller = forge::Caller::local_with_progress("cli", progress.sink());
            let written = content
                .write(
                    content::Kind::Prompt,
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
            let text = content
                .remove(content::Kind::Prompt, &name)
                .await
                .map_err(anyhow::Error::msg)?;
            out!("{text}");
        }
    }
    Ok(())
}
